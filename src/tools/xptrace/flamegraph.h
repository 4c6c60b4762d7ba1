/* Interactive flame graphs: one self-contained SVG (frames, their
 * counts, and a small script of ours to zoom and search), as
 * flamegraph.pl's output is used, written without it. */
#ifndef FLAMEGRAPH_H
#define FLAMEGRAPH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct flamegraph;

/* unit: what a value counts ("samples", "ns"). */
struct flamegraph *fg_new(const char *title, const char *unit);
void fg_free(struct flamegraph *g);
/* A stack, outermost frame first, worth `value`. */
void fg_add(struct flamegraph *g, const char *const *frames, size_t n, uint64_t value);
/* The lines of a folded file ("a;b;c 12"): false when unreadable. */
bool fg_add_folded(struct flamegraph *g, FILE *folded);
/* Writes the SVG; false on a write error or when out of memory. */
bool fg_write(struct flamegraph *g, FILE *out);
uint64_t fg_total(const struct flamegraph *g);

/* dir/svg_name from dir/folded_name (the sampler's files), its weights
 * in `unit` ("samples", "us"): 0, or an errno value. */
int fg_folded_to_svg(const char *dir, const char *folded_name, const char *svg_name,
                     const char *title, const char *unit);

#endif /* FLAMEGRAPH_H */

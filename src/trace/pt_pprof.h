/* A writer of pprof profiles (google/pprof's profile.proto, gzipped),
 * as `go tool pprof`, Pyroscope, Parca and speedscope read them.
 *
 * Strings, mappings, functions, locations and samples are interned as
 * they are added: a sample of the same locations adds its values to the
 * earlier one.  Ids start at 1 (0: none).  Not thread-safe. */
#ifndef PT_PPROF_H
#define PT_PPROF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PP_VALUES_MAX 4

struct pp_profile;

struct pp_profile *pp_new(void);
void pp_free(struct pp_profile *p);

/* The value columns of every sample, in order (at most PP_VALUES_MAX),
 * e.g. ("samples", "count") then ("cpu", "nanoseconds"). */
void pp_sample_type(struct pp_profile *p, const char *type, const char *unit);
void pp_default_sample_type(struct pp_profile *p, const char *type);
void pp_period(struct pp_profile *p, const char *type, const char *unit, int64_t period);
void pp_times(struct pp_profile *p, int64_t time_nanos, int64_t duration_nanos);
void pp_comment(struct pp_profile *p, const char *text);

/* A file mapped (build_id: hex or "", as pprof shows it). */
uint64_t pp_mapping(struct pp_profile *p, const char *file, const char *build_id);
/* A function: name as shown, its source file ("" unknown). */
uint64_t pp_function(struct pp_profile *p, const char *name, const char *file);
/* A code location: file offset `rel_pc` of mapping (0: none), in
 * function at line (0 unknown). */
uint64_t pp_location(struct pp_profile *p, uint64_t mapping, uint64_t rel_pc, uint64_t function,
                     int64_t line);
/* A stack of locations, innermost first, and its values (one per sample
 * type).  A label (key, value) tells samples apart: NULL for none. */
bool pp_sample(struct pp_profile *p, const uint64_t *locs, size_t n, const int64_t *values,
               const char *label_key, const char *label_value);

/* False when out of memory so far. */
bool pp_ok(const struct pp_profile *p);
/* Encode and write gzipped to fd.  0, or an errno value. */
int pp_write_gz(struct pp_profile *p, int fd);
/* Encode without compression (tests); the buffer is the caller's to free. */
uint8_t *pp_encode(struct pp_profile *p, size_t *len);

#endif /* PT_PPROF_H */

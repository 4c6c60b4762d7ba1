/* xptrace report --format svg: a flame graph (flamegraph.h) of the
 * selected samples, or, with no sample, of the slices on threads (each
 * call path worth its self time, so a frame is as wide as its total). */
#include <errno.h>
#include <stdlib.h>

#include "flamegraph.h"
#include "report_export.h"

#define DEPTH_MAX 512

int rp_svg_write(const struct rp_model *m, const struct rp_select *sel, const char *title,
                 FILE *out) {
  bool samples = false;
  for (size_t k = 0; k < m->nsamples && !samples; k++)
    samples = rp_sample_selected(m, &m->samples[k], sel);
  struct flamegraph *g = fg_new(title, samples ? "samples" : "ns");
  if (!g)
    return ENOMEM;
  const char *frames[DEPTH_MAX];
  if (samples) {
    for (size_t k = 0; k < m->nsamples; k++) {
      const struct rp_sample *s = &m->samples[k];
      if (!rp_sample_selected(m, s, sel))
        continue;
      size_t n = s->nframes < DEPTH_MAX ? s->nframes : DEPTH_MAX;
      for (size_t i = 0; i < n; i++) /* root first; the deepest ones cut */
        frames[i] = rp_str_get(&m->s, m->framepool[s->frames + i]);
      fg_add(g, frames, n, 1);
    }
  } else {
    for (uint32_t i = 1; i < m->ncnodes; i++) {
      const struct rp_cnode *c = &m->cnodes[i];
      if (!c->count || !c->self || !rp_cnode_selected(m, i, sel))
        continue;
      size_t n = 0;
      for (uint32_t k = i; k; k = m->cnodes[k].parent)
        n++;
      if (n > DEPTH_MAX)
        continue;
      size_t d = n;
      for (uint32_t k = i; k; k = m->cnodes[k].parent)
        frames[--d] = rp_str_get(&m->s, m->cnodes[k].name);
      fg_add(g, frames, n, c->self);
    }
  }
  int err = fg_total(g) == 0 ? ENODATA : fg_write(g, out) ? 0 : (errno ? errno : EIO);
  fg_free(g);
  return err;
}

/* Slices whose end another thread sent (a task handed on, a request a
 * runtime thread completes).  Each thread's pairing (pt_finish.c) finds
 * only its own halves; those left over from every thread are paired here
 * by trace point and instance: each end with the earliest begin of the
 * same key that started before it and is not taken yet (handed-on work
 * is mostly first in, first out).  A pair becomes one slice on a track
 * of its own, drawn from the begin's time to the end's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pt_common.h"

struct half {
  uint64_t uid, instance, ts, pos;
  uint8_t kind;
};

static struct half *halves;
static size_t halves_n, halves_cap;
static struct pt_half_place *places;
static size_t places_n;

void pt_handoff_reset(void) {
  free(halves);
  free(places);
  halves = NULL;
  places = NULL;
  halves_n = halves_cap = places_n = 0;
}

bool pt_handoff_add(uint64_t uid, uint64_t instance, uint64_t raw_ts, uint64_t pos,
                    enum pt_half_kind kind) {
  if (halves_n == halves_cap) {
    size_t cap = halves_cap ? halves_cap * 2 : 256;
    struct half *h = realloc(halves, cap * sizeof *h);
    if (!h)
      return false;
    halves = h;
    halves_cap = cap;
  }
  halves[halves_n++] = (struct half){uid, instance, raw_ts, pos, (uint8_t)kind};
  return true;
}

/* By key, then time; at one time a begin before an end. */
static int half_cmp(const void *x, const void *y) {
  const struct half *a = x, *b = y;
  if (a->uid != b->uid)
    return a->uid < b->uid ? -1 : 1;
  if (a->instance != b->instance)
    return a->instance < b->instance ? -1 : 1;
  if (a->ts != b->ts)
    return a->ts < b->ts ? -1 : 1;
  return (a->kind == PT_HALF_END) - (b->kind == PT_HALF_END);
}

static int place_cmp(const void *x, const void *y) {
  const struct pt_half_place *a = x, *b = y;
  return a->pos < b->pos ? -1 : a->pos > b->pos;
}

bool pt_handoff_match(bool lost) {
  places = calloc(halves_n ? halves_n : 1, sizeof *places);
  if (!places) { /* each thread's own rule, without pairing */
    return false;
  }
  if (halves_n > 1)
    qsort(halves, halves_n, sizeof *halves, half_cmp);
  /* Within a key, in time order: begins wait in a queue (the unmatched
   * ones between `head` and here), an end takes the oldest. */
  size_t *queue = malloc((halves_n ? halves_n : 1) * sizeof *queue);
  if (!queue) {
    free(places);
    places = NULL;
    return false;
  }
  for (size_t i = 0; i < halves_n;) {
    size_t j = i, head = 0, tail = 0;
    for (; j < halves_n && halves[j].uid == halves[i].uid &&
           halves[j].instance == halves[i].instance;
         j++) {
      const struct half *h = &halves[j];
      if (h->kind != PT_HALF_END) {
        queue[tail++] = j;
        continue;
      }
      if (head == tail) {
        places[places_n++] = (struct pt_half_place){h->pos, 0, PT_FATE_DROP};
        continue;
      }
      const struct half *b = &halves[queue[head++]];
      places[places_n++] = (struct pt_half_place){b->pos, h->ts, PT_FATE_HANDED};
      places[places_n++] = (struct pt_half_place){h->pos, 0, PT_FATE_SKIP};
    }
    for (; head < tail; head++) {
      const struct half *b = &halves[queue[head]];
      if (b->kind == PT_HALF_CLOSED || lost)
        places[places_n++] = (struct pt_half_place){b->pos, 0, PT_FATE_DROP};
    }
    i = j;
  }
  free(queue);
  if (places_n > 1)
    qsort(places, places_n, sizeof *places, place_cmp);
  return true;
}

const struct pt_half_place *pt_handoff_places(size_t *n) {
  *n = places_n;
  return places;
}

size_t pt_handoff_from(uint64_t pos) {
  size_t lo = 0, hi = places_n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (places[mid].pos < pos)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

/* A begin whose end another thread sent: one slice on its stream's
 * handed-on track, from the begin's time to the end's. */
void pt_handoff_draw(const struct pt_rec *r, const uint8_t *inline_bytes, uint64_t end_ns) {
  _Alignas(16) uint8_t buf[sizeof(struct pt_rec) + sizeof(struct pt_timed_inline) + 2 * 320];
  const char *stream = pt_stream_name(r->stream);
  char track[PT_NAME_MAX + 1];
  int tl = snprintf(track, sizeof track, "%s (ended on another thread)", stream ? stream : "");
  if (tl < 0 || (size_t)tl >= sizeof track)
    tl = (int)sizeof track - 1;
  uint32_t nl = r->pad == PT_INLINE_NAME && r->name_len <= PT_NAME_MAX ? r->name_len : 0;
  struct pt_rec *out = (struct pt_rec *)buf;
  *out = *r;
  out->pad = PT_INLINE_TIMED;
  struct pt_timed_inline t = {r->ts, end_ns < r->ts ? r->ts : end_ns,
                              PT_HANDOFF_TRACK | r->stream, (uint16_t)tl, (uint16_t)nl, 0};
  memcpy(out + 1, &t, sizeof t);
  memcpy((uint8_t *)(out + 1) + sizeof t, track, (size_t)tl);
  if (nl)
    memcpy((uint8_t *)(out + 1) + sizeof t + (size_t)tl, inline_bytes, nl);
  pt_dev_add(out);
}

/* The Perfetto trace reader's protobuf primitives and its u64-keyed
 * map of pointers (pt_read_internal.h). */
#include <stdlib.h>
#include <string.h>

#include "pt_read_internal.h"

/* ---- wire primitives ---------------------------------------------------- */
PT_READ_HIDDEN int rd_varint(const uint8_t **pos, const uint8_t *end, uint64_t *v) {
  uint64_t x = 0;
  for (unsigned shift = 0; shift < 64; shift += 7) {
    if (*pos >= end)
      return -1;
    uint8_t b = *(*pos)++;
    x |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) {
      *v = x;
      return 0;
    }
  }
  return -1;
}

int pt_pb_next(const uint8_t **pos, const uint8_t *end, struct pt_pb_field *f) {
  if (*pos >= end)
    return 0;
  const uint8_t *p = *pos;
  uint64_t key;
  if (rd_varint(&p, end, &key) || (key >> 3) == 0 || (key >> 3) > 0x1fffffff)
    return -1;
  f->start = *pos;
  f->num = (uint32_t)(key >> 3);
  f->wire = (uint8_t)(key & 7);
  f->p = NULL;
  f->len = 0;
  f->v = 0;
  switch (f->wire) {
  case 0:
    if (rd_varint(&p, end, &f->v))
      return -1;
    break;
  case 1:
    if (end - p < 8)
      return -1;
    memcpy(&f->v, p, 8);
    p += 8;
    break;
  case 5: {
    uint32_t v32;
    if (end - p < 4)
      return -1;
    memcpy(&v32, p, 4);
    f->v = v32;
    p += 4;
    break;
  }
  case 2: {
    uint64_t n;
    if (rd_varint(&p, end, &n) || n > (uint64_t)(end - p))
      return -1;
    f->p = p;
    f->len = (size_t)n;
    p += n;
    break;
  }
  default:
    return -1; /* groups (3, 4) and reserved types are not ours */
  }
  f->end = p;
  *pos = p;
  return 1;
}

/* ---- a u64-keyed hash map of pointers ----------------------------------- */
static size_t map_hash(uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdULL;
  k ^= k >> 33;
  return (size_t)k;
}
PT_READ_HIDDEN void **rd_map_slot(struct pt_map *m, uint64_t key, bool add) {
  if (add && (m->n + 1) * 4 >= m->cap * 3) {
    size_t cap = m->cap ? m->cap * 2 : 64;
    uint64_t *keys = calloc(cap, sizeof *keys);
    void **vals = calloc(cap, sizeof *vals);
    if (!keys || !vals) {
      free(keys);
      free(vals);
      return NULL;
    }
    for (size_t i = 0; i < m->cap; i++) {
      if (!m->vals[i])
        continue;
      size_t j = map_hash(m->keys[i]) & (cap - 1);
      while (vals[j])
        j = (j + 1) & (cap - 1);
      keys[j] = m->keys[i];
      vals[j] = m->vals[i];
    }
    free(m->keys);
    free(m->vals);
    m->keys = keys;
    m->vals = vals;
    m->cap = cap;
  }
  if (!m->cap)
    return NULL;
  size_t j = map_hash(key) & (m->cap - 1);
  while (m->vals[j]) {
    if (m->keys[j] == key)
      return &m->vals[j];
    j = (j + 1) & (m->cap - 1);
  }
  if (!add)
    return NULL;
  m->keys[j] = key;
  m->n++;
  return &m->vals[j];
}
PT_READ_HIDDEN void *rd_map_get(const struct pt_map *m, uint64_t key) {
  void **s = rd_map_slot((struct pt_map *)m, key, false);
  return s ? *s : NULL;
}
PT_READ_HIDDEN void rd_map_free(struct pt_map *m, void (*fn)(void *)) {
  for (size_t i = 0; fn && i < m->cap; i++)
    if (m->vals[i])
      fn(m->vals[i]);
  free(m->keys);
  free(m->vals);
  memset(m, 0, sizeof *m);
}

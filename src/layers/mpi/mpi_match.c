/* Channels, flow ids and the request table of the MPI layer (no MPI). */
#include "mpi_match.h"

#include <stdlib.h>
#include <string.h>

static uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

uint64_t xpt_mpi_flow_id(uint64_t comm_id, int32_t src, int32_t dst, int32_t tag, uint64_t n) {
  uint64_t h = mix64(comm_id + 0x9e3779b97f4a7c15ull);
  h = mix64(h ^ ((uint64_t)(uint32_t)src << 32 | (uint32_t)dst));
  h = mix64(h ^ (uint32_t)tag);
  h = mix64(h ^ n);
  return h | 1ull << 63; /* unique across runs: merge keeps it (xptrace_protocol.h) */
}

static size_t chan_hash(uint64_t comm_id, int32_t peer, int32_t tag, int dir) {
  return (size_t)mix64(comm_id ^ mix64((uint64_t)(uint32_t)peer << 32 | (uint32_t)tag) ^
                       (uint64_t)dir);
}

static bool chans_grow(xpt_mpi_chans_t *c) {
  size_t cap = c->cap ? c->cap * 2 : 64;
  xpt_mpi_chan_t *s = malloc(cap * sizeof *s);
  if (!s)
    return false;
  for (size_t i = 0; i < cap; i++)
    s[i].dir = 2;
  for (size_t i = 0; i < c->cap; i++) {
    xpt_mpi_chan_t *e = &c->slot[i];
    if (e->dir == 2)
      continue;
    size_t j = chan_hash(e->comm_id, e->peer, e->tag, (int)e->dir) & (cap - 1);
    while (s[j].dir != 2)
      j = (j + 1) & (cap - 1);
    s[j] = *e;
  }
  free(c->slot);
  c->slot = s;
  c->cap = cap;
  return true;
}

uint64_t xpt_mpi_chan_next(xpt_mpi_chans_t *c, uint64_t comm_id, int32_t me, int32_t peer,
                           int32_t tag, int dir) {
  uint64_t n = 0;
  pthread_mutex_lock(&c->lock);
  if ((c->n + 1) * 2 > c->cap && !chans_grow(c)) {
    pthread_mutex_unlock(&c->lock);
    return 0;
  }
  size_t j = chan_hash(comm_id, peer, tag, dir) & (c->cap - 1);
  for (;; j = (j + 1) & (c->cap - 1)) {
    xpt_mpi_chan_t *e = &c->slot[j];
    if (e->dir == 2) {
      *e = (xpt_mpi_chan_t){comm_id, peer, tag, (uint32_t)dir, 0};
      c->n++;
    }
    if (e->comm_id == comm_id && e->peer == peer && e->tag == tag && e->dir == (uint32_t)dir) {
      n = ++e->count;
      break;
    }
  }
  pthread_mutex_unlock(&c->lock);
  return dir == 0 ? xpt_mpi_flow_id(comm_id, me, peer, tag, n)
                  : xpt_mpi_flow_id(comm_id, peer, me, tag, n);
}

void xpt_mpi_chans_free(xpt_mpi_chans_t *c) {
  pthread_mutex_lock(&c->lock);
  free(c->slot);
  c->slot = NULL;
  c->cap = c->n = 0;
  pthread_mutex_unlock(&c->lock);
}

static size_t req_hash(uint64_t key) { return (size_t)mix64(key); }

static bool reqs_grow(xpt_mpi_reqs_t *t) {
  size_t cap = t->cap ? t->cap * 2 : 64;
  xpt_mpi_req_t *s = calloc(cap, sizeof *s);
  if (!s)
    return false;
  for (size_t i = 0; i < t->cap; i++) {
    if (!t->slot[i].key)
      continue;
    size_t j = req_hash(t->slot[i].key) & (cap - 1);
    while (s[j].key)
      j = (j + 1) & (cap - 1);
    s[j] = t->slot[i];
  }
  free(t->slot);
  t->slot = s;
  t->cap = cap;
  return true;
}

bool xpt_mpi_req_put(xpt_mpi_reqs_t *t, const xpt_mpi_req_t *r) {
  if (!r->key)
    return false;
  pthread_mutex_lock(&t->lock);
  bool ok = (t->n + 1) * 2 <= t->cap || reqs_grow(t);
  if (ok) {
    size_t j = req_hash(r->key) & (t->cap - 1);
    while (t->slot[j].key && t->slot[j].key != r->key)
      j = (j + 1) & (t->cap - 1);
    t->n += !t->slot[j].key;
    t->slot[j] = *r;
  }
  pthread_mutex_unlock(&t->lock);
  return ok;
}

bool xpt_mpi_req_take(xpt_mpi_reqs_t *t, uint64_t key, bool keep, xpt_mpi_req_t *out) {
  bool found = false;
  pthread_mutex_lock(&t->lock);
  if (key && t->cap) {
    size_t mask = t->cap - 1, j = req_hash(key) & mask;
    while (t->slot[j].key && t->slot[j].key != key)
      j = (j + 1) & mask;
    if (t->slot[j].key == key) {
      found = true;
      *out = t->slot[j];
      if (!keep) {
        /* Backward-shift deletion keeps every probe chain whole. */
        size_t hole = j;
        for (size_t k = (j + 1) & mask; t->slot[k].key; k = (k + 1) & mask) {
          size_t home = req_hash(t->slot[k].key) & mask;
          if (((k - home) & mask) >= ((k - hole) & mask)) {
            t->slot[hole] = t->slot[k];
            hole = k;
          }
        }
        memset(&t->slot[hole], 0, sizeof t->slot[hole]);
        t->n--;
      }
    }
  }
  pthread_mutex_unlock(&t->lock);
  return found;
}

size_t xpt_mpi_req_count(xpt_mpi_reqs_t *t) {
  pthread_mutex_lock(&t->lock);
  size_t n = t->n;
  pthread_mutex_unlock(&t->lock);
  return n;
}

void xpt_mpi_reqs_free(xpt_mpi_reqs_t *t) {
  pthread_mutex_lock(&t->lock);
  free(t->slot);
  t->slot = NULL;
  t->cap = t->n = 0;
  pthread_mutex_unlock(&t->lock);
}

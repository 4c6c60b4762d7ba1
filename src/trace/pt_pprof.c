/* pprof profile writer (pt_pprof.h).  Field numbers are profile.proto's
 * (github.com/google/pprof, proto/profile.proto). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "pt_internal.h"
#include "pt_pprof.h"

enum { /* Profile */
  PF_SAMPLE_TYPE = 1, PF_SAMPLE = 2, PF_MAPPING = 3, PF_LOCATION = 4, PF_FUNCTION = 5,
  PF_STRING_TABLE = 6, PF_TIME_NANOS = 9, PF_DURATION_NANOS = 10, PF_PERIOD_TYPE = 11,
  PF_PERIOD = 12, PF_COMMENT = 13, PF_DEFAULT_SAMPLE_TYPE = 14
};
enum { VT_TYPE = 1, VT_UNIT = 2 };
enum { SA_LOCATION_ID = 1, SA_VALUE = 2, SA_LABEL = 3 };
enum { LA_KEY = 1, LA_STR = 2 };
enum { MA_ID = 1, MA_START = 2, MA_LIMIT = 3, MA_OFFSET = 4, MA_FILENAME = 5, MA_BUILD_ID = 6,
       MA_HAS_FUNCTIONS = 7, MA_HAS_FILENAMES = 8, MA_HAS_LINES = 9 };
enum { LO_ID = 1, LO_MAPPING_ID = 2, LO_ADDRESS = 3, LO_LINE = 4 };
enum { LI_FUNCTION_ID = 1, LI_LINE = 2 };
enum { FN_ID = 1, FN_NAME = 2, FN_SYSTEM_NAME = 3, FN_FILENAME = 4 };

/* Mappings get address ranges of their own, 2^40 apart, so that pprof
 * finds each location's mapping by its address. */
#define MAP_SHIFT 40

/* Byte-string keys to ids 1..n. */
struct interner {
  uint8_t **key; /* by id - 1: length (size_t) then bytes */
  size_t n, cap;
  uint32_t *slot;
  size_t slot_cap;
};

static uint64_t hash(const void *p, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++)
    h = (h ^ ((const uint8_t *)p)[i]) * 1099511628211ull;
  return h ^ (h >> 29);
}

static size_t key_len(const uint8_t *k) {
  size_t n;
  memcpy(&n, k, sizeof n);
  return n;
}

static bool rehash(struct interner *t) {
  size_t cap = t->slot_cap ? t->slot_cap * 2 : 1024;
  uint32_t *slot = calloc(cap, sizeof *slot);
  if (!slot)
    return false;
  for (size_t id = 1; id <= t->n; id++) {
    const uint8_t *k = t->key[id - 1];
    size_t i = hash(k + sizeof(size_t), key_len(k)) & (cap - 1);
    while (slot[i])
      i = (i + 1) & (cap - 1);
    slot[i] = (uint32_t)id;
  }
  free(t->slot);
  t->slot = slot;
  t->slot_cap = cap;
  return true;
}

/* The id of key [p, p+n); *added when new.  0: out of memory. */
static uint32_t intern(struct interner *t, const void *p, size_t n, bool *added) {
  *added = false;
  if ((t->n + 1) * 2 > t->slot_cap && !rehash(t))
    return 0;
  size_t i = hash(p, n) & (t->slot_cap - 1);
  for (; t->slot[i]; i = (i + 1) & (t->slot_cap - 1)) {
    const uint8_t *k = t->key[t->slot[i] - 1];
    if (key_len(k) == n && memcmp(k + sizeof(size_t), p, n) == 0)
      return t->slot[i];
  }
  if (t->n == t->cap) {
    size_t nc = t->cap ? t->cap * 2 : 256;
    uint8_t **nk = realloc(t->key, nc * sizeof *nk);
    if (!nk)
      return 0;
    t->key = nk;
    t->cap = nc;
  }
  uint8_t *k = malloc(sizeof(size_t) + n + 1);
  if (!k)
    return 0;
  memcpy(k, &n, sizeof n);
  memcpy(k + sizeof(size_t), p, n);
  k[sizeof(size_t) + n] = 0; /* strings stay strings */
  t->key[t->n++] = k;
  t->slot[i] = (uint32_t)t->n;
  *added = true;
  return (uint32_t)t->n;
}

static const void *key_of(const struct interner *t, uint32_t id, size_t *n) {
  const uint8_t *k = t->key[id - 1];
  *n = key_len(k);
  return k + sizeof(size_t);
}

static void interner_free(struct interner *t) {
  for (size_t i = 0; i < t->n; i++)
    free(t->key[i]);
  free(t->key);
  free(t->slot);
}

struct pp_map_key { uint64_t file, build_id; };
struct pp_fn_key { uint64_t name, file; };
struct pp_loc_key { uint64_t mapping, rel_pc, function; int64_t line; };

struct pp_profile {
  struct interner str, maps, fns, locs, samples;
  uint64_t *map_limit; /* per mapping: highest rel_pc + 1 */
  size_t map_limit_cap;
  int64_t *values; /* per sample: nvalues */
  uint64_t *label; /* per sample: key, value string ids */
  size_t values_cap;
  uint64_t types[PP_VALUES_MAX][2];
  size_t ntypes;
  uint64_t period_type[2], default_type, comment;
  int64_t period, time_nanos, duration_nanos;
  bool failed;
};

static uint64_t str_id(struct pp_profile *p, const char *s) {
  bool added;
  uint32_t id = intern(&p->str, s ? s : "", s ? strlen(s) : 0, &added);
  if (!id)
    p->failed = true;
  return id ? id - 1 : 0; /* the string table's index: "" is 0 */
}

struct pp_profile *pp_new(void) {
  struct pp_profile *p = calloc(1, sizeof *p);
  if (p)
    str_id(p, "");
  return p;
}

void pp_free(struct pp_profile *p) {
  if (!p)
    return;
  interner_free(&p->str);
  interner_free(&p->maps);
  interner_free(&p->fns);
  interner_free(&p->locs);
  interner_free(&p->samples);
  free(p->map_limit);
  free(p->values);
  free(p->label);
  free(p);
}

void pp_sample_type(struct pp_profile *p, const char *type, const char *unit) {
  if (p->ntypes < PP_VALUES_MAX) {
    p->types[p->ntypes][0] = str_id(p, type);
    p->types[p->ntypes++][1] = str_id(p, unit);
  }
}

void pp_default_sample_type(struct pp_profile *p, const char *type) {
  p->default_type = str_id(p, type);
}

void pp_period(struct pp_profile *p, const char *type, const char *unit, int64_t period) {
  p->period_type[0] = str_id(p, type);
  p->period_type[1] = str_id(p, unit);
  p->period = period;
}

void pp_times(struct pp_profile *p, int64_t time_nanos, int64_t duration_nanos) {
  p->time_nanos = time_nanos;
  p->duration_nanos = duration_nanos;
}

void pp_comment(struct pp_profile *p, const char *text) { p->comment = str_id(p, text); }

uint64_t pp_mapping(struct pp_profile *p, const char *file, const char *build_id) {
  struct pp_map_key k = {str_id(p, file), str_id(p, build_id)};
  bool added;
  uint32_t id = intern(&p->maps, &k, sizeof k, &added);
  if (!id) {
    p->failed = true;
    return 0;
  }
  if (id > p->map_limit_cap) {
    size_t nc = p->map_limit_cap ? p->map_limit_cap * 2 : 64;
    uint64_t *nl = realloc(p->map_limit, nc * sizeof *nl);
    if (!nl) {
      p->failed = true;
      return 0;
    }
    memset(nl + p->map_limit_cap, 0, (nc - p->map_limit_cap) * sizeof *nl);
    p->map_limit = nl;
    p->map_limit_cap = nc;
  }
  return id;
}

uint64_t pp_function(struct pp_profile *p, const char *name, const char *file) {
  struct pp_fn_key k = {str_id(p, name), str_id(p, file)};
  bool added;
  uint32_t id = intern(&p->fns, &k, sizeof k, &added);
  if (!id)
    p->failed = true;
  return id;
}

uint64_t pp_location(struct pp_profile *p, uint64_t mapping, uint64_t rel_pc, uint64_t function,
                     int64_t line) {
  if (rel_pc >> MAP_SHIFT)
    rel_pc &= (1ull << MAP_SHIFT) - 1; /* beyond any ELF file: kept distinct enough */
  struct pp_loc_key k = {mapping, rel_pc, function, line};
  bool added;
  uint32_t id = intern(&p->locs, &k, sizeof k, &added);
  if (!id) {
    p->failed = true;
    return 0;
  }
  if (mapping && mapping <= p->maps.n && rel_pc + 1 > p->map_limit[mapping - 1])
    p->map_limit[mapping - 1] = rel_pc + 1;
  return id;
}

bool pp_sample(struct pp_profile *p, const uint64_t *locs, size_t n, const int64_t *values,
               const char *label_key, const char *label_value) {
  uint64_t key[2 + 512];
  if (n > 512)
    n = 512; /* the innermost frames */
  key[0] = label_key ? str_id(p, label_key) : 0;
  key[1] = label_key ? str_id(p, label_value) : 0;
  memcpy(key + 2, locs, n * sizeof *locs);
  bool added;
  uint32_t id = intern(&p->samples, key, (n + 2) * sizeof *key, &added);
  if (!id) {
    p->failed = true;
    return false;
  }
  if (added && id > p->values_cap) {
    size_t nc = p->values_cap ? p->values_cap * 2 : 1024;
    int64_t *nv = realloc(p->values, nc * PP_VALUES_MAX * sizeof *nv);
    if (nv)
      p->values = nv;
    uint64_t *nlab = nv ? realloc(p->label, nc * 2 * sizeof *nlab) : NULL;
    if (!nlab) {
      p->failed = true;
      return false;
    }
    p->label = nlab;
    p->values_cap = nc;
  }
  int64_t *v = p->values + (size_t)(id - 1) * PP_VALUES_MAX;
  if (added) {
    memset(v, 0, PP_VALUES_MAX * sizeof *v);
    p->label[2 * (id - 1)] = key[0];
    p->label[2 * (id - 1) + 1] = key[1];
  }
  for (size_t i = 0; i < p->ntypes; i++)
    v[i] += values[i];
  return true;
}

bool pp_ok(const struct pp_profile *p) { return !p->failed; }

static void value_type(struct pt_buf *b, uint32_t field, const uint64_t t[2]) {
  size_t m = pb_open(b, field);
  pb_uint(b, VT_TYPE, t[0]);
  pb_uint(b, VT_UNIT, t[1]);
  pb_close(b, m);
}

uint8_t *pp_encode(struct pp_profile *p, size_t *len) {
  struct pt_buf b;
  memset(&b, 0, sizeof b);
  for (size_t i = 0; i < p->ntypes; i++)
    value_type(&b, PF_SAMPLE_TYPE, p->types[i]);
  for (uint32_t id = 1; id <= p->samples.n; id++) {
    size_t n;
    const uint64_t *k = key_of(&p->samples, id, &n);
    n = n / sizeof *k - 2;
    size_t m = pb_open(&b, PF_SAMPLE);
    size_t packed = pb_open(&b, SA_LOCATION_ID);
    for (size_t i = 0; i < n; i++)
      pb_varint(&b, k[2 + i]);
    pb_close(&b, packed);
    packed = pb_open(&b, SA_VALUE);
    for (size_t i = 0; i < p->ntypes; i++)
      pb_varint(&b, (uint64_t)p->values[(size_t)(id - 1) * PP_VALUES_MAX + i]);
    pb_close(&b, packed);
    if (p->label[2 * (id - 1)]) {
      size_t l = pb_open(&b, SA_LABEL);
      pb_uint(&b, LA_KEY, p->label[2 * (id - 1)]);
      pb_uint(&b, LA_STR, p->label[2 * (id - 1) + 1]);
      pb_close(&b, l);
    }
    pb_close(&b, m);
  }
  for (uint32_t id = 1; id <= p->maps.n; id++) {
    size_t n;
    const struct pp_map_key *k = key_of(&p->maps, id, &n);
    size_t m = pb_open(&b, PF_MAPPING);
    pb_uint(&b, MA_ID, id);
    pb_uint(&b, MA_START, (uint64_t)id << MAP_SHIFT);
    pb_uint(&b, MA_LIMIT, ((uint64_t)id << MAP_SHIFT) + p->map_limit[id - 1] + 1);
    pb_uint(&b, MA_OFFSET, 0);
    pb_uint(&b, MA_FILENAME, k->file);
    if (k->build_id)
      pb_uint(&b, MA_BUILD_ID, k->build_id);
    /* Symbolized already: pprof must not look the binaries up again. */
    pb_uint(&b, MA_HAS_FUNCTIONS, 1);
    pb_uint(&b, MA_HAS_FILENAMES, 1);
    pb_uint(&b, MA_HAS_LINES, 1);
    pb_close(&b, m);
  }
  for (uint32_t id = 1; id <= p->locs.n; id++) {
    size_t n;
    const struct pp_loc_key *k = key_of(&p->locs, id, &n);
    size_t m = pb_open(&b, PF_LOCATION);
    pb_uint(&b, LO_ID, id);
    if (k->mapping) {
      pb_uint(&b, LO_MAPPING_ID, k->mapping);
      pb_uint(&b, LO_ADDRESS, (k->mapping << MAP_SHIFT) + k->rel_pc);
    }
    size_t l = pb_open(&b, LO_LINE);
    pb_uint(&b, LI_FUNCTION_ID, k->function);
    if (k->line)
      pb_sint(&b, LI_LINE, k->line);
    pb_close(&b, l);
    pb_close(&b, m);
  }
  for (uint32_t id = 1; id <= p->fns.n; id++) {
    size_t n;
    const struct pp_fn_key *k = key_of(&p->fns, id, &n);
    size_t m = pb_open(&b, PF_FUNCTION);
    pb_uint(&b, FN_ID, id);
    pb_uint(&b, FN_NAME, k->name);
    pb_uint(&b, FN_SYSTEM_NAME, k->name);
    if (k->file)
      pb_uint(&b, FN_FILENAME, k->file);
    pb_close(&b, m);
  }
  for (uint32_t id = 1; id <= p->str.n; id++) {
    size_t n;
    const char *s = key_of(&p->str, id, &n);
    pb_bytes(&b, PF_STRING_TABLE, s, n);
  }
  if (p->time_nanos)
    pb_sint(&b, PF_TIME_NANOS, p->time_nanos);
  if (p->duration_nanos)
    pb_sint(&b, PF_DURATION_NANOS, p->duration_nanos);
  if (p->period_type[0])
    value_type(&b, PF_PERIOD_TYPE, p->period_type);
  if (p->period)
    pb_sint(&b, PF_PERIOD, p->period);
  if (p->comment)
    pb_uint(&b, PF_COMMENT, p->comment);
  if (p->default_type)
    pb_uint(&b, PF_DEFAULT_SAMPLE_TYPE, p->default_type);
  if (b.failed || p->failed) {
    free(b.data);
    return NULL;
  }
  *len = b.len;
  return b.data;
}

static int write_all(int fd, const uint8_t *p, size_t n) {
  while (n) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      return w < 0 ? errno : EIO;
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

int pp_write_gz(struct pp_profile *p, int fd) {
  size_t len = 0;
  uint8_t *raw = pp_encode(p, &len);
  if (!raw)
    return ENOMEM;
  z_stream z;
  memset(&z, 0, sizeof z);
  /* 15 + 16: a gzip header and trailer around the deflate stream. */
  if (deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    free(raw);
    return ENOMEM;
  }
  uint8_t out[65536];
  int err = 0, zrc;
  z.next_in = raw;
  z.avail_in = (uInt)len; /* profiles stay far below 4 GiB */
  do {
    z.next_out = out;
    z.avail_out = sizeof out;
    zrc = deflate(&z, Z_FINISH);
    if (zrc == Z_STREAM_ERROR) {
      err = EIO;
      break;
    }
    err = write_all(fd, out, sizeof out - z.avail_out);
  } while (!err && zrc != Z_STREAM_END);
  deflateEnd(&z);
  free(raw);
  return err;
}

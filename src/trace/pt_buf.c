/* Output buffer and the few protobuf primitives the trace needs. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pt_internal.h"

bool pt_buf_reserve(struct pt_buf *b, size_t extra) {
  if (b->failed)
    return false;
  if (b->len + extra <= b->cap)
    return true;
  size_t cap = b->cap ? b->cap : 4096;
  while (cap < b->len + extra)
    cap *= 2;
  uint8_t *p = realloc(b->data, cap);
  if (!p) {
    b->failed = true;
    return false;
  }
  b->data = p;
  b->cap = cap;
  return true;
}

void pt_buf_bytes(struct pt_buf *b, const void *p, size_t n) {
  if (!pt_buf_reserve(b, n))
    return;
  memcpy(b->data + b->len, p, n);
  b->len += n;
}

void pt_buf_str(struct pt_buf *b, const char *s) { pt_buf_bytes(b, s, strlen(s)); }

void pt_buf_printf(struct pt_buf *b, const char *fmt, ...) {
  char tmp[256];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  if (n < 0)
    return;
  pt_buf_bytes(b, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

void pt_buf_json_str(struct pt_buf *b, const char *s) {
  static const char hex[] = "0123456789abcdef";
  pt_buf_bytes(b, "\"", 1);
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if (*p == '"' || *p == '\\') {
      char esc[2] = {'\\', (char)*p};
      pt_buf_bytes(b, esc, 2);
    } else if (*p < 0x20) {
      char esc[6] = {'\\', 'u', '0', '0', hex[*p >> 4], hex[*p & 15]};
      pt_buf_bytes(b, esc, 6);
    } else {
      pt_buf_bytes(b, p, 1);
    }
  }
  pt_buf_bytes(b, "\"", 1);
}

/* ---- protobuf ---------------------------------------------------------- */

enum { PB_VARINT = 0, PB_I64 = 1, PB_LEN = 2 };

static size_t pb_varint_size(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    n++;
  }
  return n;
}

static void pb_varint_at(uint8_t *p, uint64_t v) {
  while (v >= 0x80) {
    *p++ = (uint8_t)(v | 0x80);
    v >>= 7;
  }
  *p = (uint8_t)v;
}

void pb_varint(struct pt_buf *b, uint64_t v) {
  if (!pt_buf_reserve(b, 10))
    return;
  pb_varint_at(b->data + b->len, v);
  b->len += pb_varint_size(v);
}

static void pb_tag(struct pt_buf *b, uint32_t field, unsigned wire) {
  pb_varint(b, ((uint64_t)field << 3) | wire);
}

void pb_uint(struct pt_buf *b, uint32_t field, uint64_t v) {
  pb_tag(b, field, PB_VARINT);
  pb_varint(b, v);
}

void pb_sint(struct pt_buf *b, uint32_t field, int64_t v) {
  pb_tag(b, field, PB_VARINT);
  pb_varint(b, (uint64_t)v);
}

void pb_fixed64(struct pt_buf *b, uint32_t field, uint64_t v) {
  pb_tag(b, field, PB_I64);
  uint8_t le[8];
  for (int i = 0; i < 8; i++)
    le[i] = (uint8_t)(v >> (8 * i));
  pt_buf_bytes(b, le, 8);
}

void pb_double(struct pt_buf *b, uint32_t field, double v) {
  uint64_t bits;
  memcpy(&bits, &v, sizeof bits);
  pb_fixed64(b, field, bits);
}

void pb_bytes(struct pt_buf *b, uint32_t field, const void *p, size_t n) {
  pb_tag(b, field, PB_LEN);
  pb_varint(b, n);
  pt_buf_bytes(b, p, n);
}

void pb_string(struct pt_buf *b, uint32_t field, const char *s) { pb_bytes(b, field, s, strlen(s)); }

/* Nested messages are written in place after a one-byte length; when the
 * body turns out longer than 127 bytes it is moved up to make room. */
size_t pb_open(struct pt_buf *b, uint32_t field) {
  pb_tag(b, field, PB_LEN);
  size_t mark = b->len;
  if (pt_buf_reserve(b, 1))
    b->len++;
  return mark;
}

void pb_close(struct pt_buf *b, size_t mark) {
  if (b->failed)
    return;
  size_t body = b->len - mark - 1;
  size_t n = pb_varint_size(body);
  if (n > 1) {
    if (!pt_buf_reserve(b, n - 1))
      return;
    memmove(b->data + mark + n, b->data + mark + 1, body);
    b->len += n - 1;
  }
  pb_varint_at(b->data + mark, body);
}

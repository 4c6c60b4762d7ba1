/* A four-function fake API on the generic tracer core, for core tests. */
#ifndef TRACER_FAKE_API_H
#define TRACER_FAKE_API_H
#include "xpt_tracer.h"
#include <stdio.h>
#include <stdlib.h>

enum { FAKE_FN_ADD, FAKE_FN_NEG, FAKE_FN_NEST, FAKE_FN_IDLE, FAKE_FN_COUNT };
typedef struct fake_params { int *x; } fake_params_t;

XPT_TRACER_DOMAIN_DEFINE(static, fake_domain, FAKE_FN_COUNT);

/* What FAKE_FN_NEST does besides returning x (e.g. another API call). */
static int (*fake_nest_body)(int x);

static int fake_impl(int fn, int x) {
  switch (fn) {
  case FAKE_FN_ADD: return x + 1;
  case FAKE_FN_NEG: return -x;
  case FAKE_FN_NEST: return fake_nest_body ? fake_nest_body(x) : x;
  default: return x;
  }
}

__attribute__((noinline)) static int fake_call(int fn, int x) {
  if (!xpt_tracer_hooked(&fake_domain, (uint32_t)fn))
    return fake_impl(fn, x);
  fake_params_t params = {&x};
  int result;
  XPT_TRACER_CALL(&fake_domain, (uint32_t)fn, &params, &result, result = fake_impl(fn, x));
  return result;
}

#define CHECK(cond)                                                                  \
  do {                                                                               \
    if (!(cond)) {                                                                   \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);      \
      exit(1);                                                                       \
    }                                                                                \
  } while (0)
#endif

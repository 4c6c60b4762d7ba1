/* A four-function fake API on the generic tracer core, for core tests. */
#ifndef TRACER_FAKE_API_H
#define TRACER_FAKE_API_H
#include "xpt_tracer.h"
#include <stdio.h>
#include <stdlib.h>

enum { FAKE_FN_ADD, FAKE_FN_NEG, FAKE_FN_NEST, FAKE_FN_IDLE, FAKE_FN_COUNT };
typedef struct fake_params { int *x; } fake_params_t;

static xpt_tracer_domain_t fake_domain = XPT_TRACER_DOMAIN_INIT(FAKE_FN_COUNT);

static int fake_impl(int fn, int x) {
  switch (fn) {
  case FAKE_FN_ADD: return x + 1;
  case FAKE_FN_NEG: return -x;
  default: return x;
  }
}

__attribute__((noinline)) static int fake_call(int fn, int x) {
  if (!xpt_tracer_any(&fake_domain))
    return fake_impl(fn, x);
  xpt_tracer_call_t call;
  fake_params_t params = {&x};
  bool epilogues = xpt_tracer_begin(&fake_domain, &call, (uint32_t)fn, &params);
  int result = fake_impl(fn, x);
  if (epilogues)
    xpt_tracer_end(&call, &params, &result);
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

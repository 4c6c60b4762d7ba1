/* Minimal assertions for CTest programs: report every failure, exit 1. */
#ifndef XPTRACE_TEST_CHECK_H
#define XPTRACE_TEST_CHECK_H
#include <stdio.h>
#include <stdlib.h>

static int check_failures;
#define CHECK(cond)                                                                   \
  do {                                                                                \
    if (!(cond)) {                                                                    \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);        \
      check_failures++;                                                               \
    }                                                                                 \
  } while (0)
#define CHECK_EQ(a, b)                                                                \
  do {                                                                                \
    long long check_a_ = (long long)(a), check_b_ = (long long)(b);                   \
    if (check_a_ != check_b_) {                                                       \
      fprintf(stderr, "%s:%d: check failed: %s == %s (%lld vs %lld)\n", __FILE__,     \
              __LINE__, #a, #b, check_a_, check_b_);                                  \
      check_failures++;                                                               \
    }                                                                                 \
  } while (0)
#define CHECK_DONE() (check_failures ? (fprintf(stderr, "%d failures\n", check_failures), 1) : 0)
#endif

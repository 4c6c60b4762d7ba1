/* Loops for instruction counting under callgrind.  run_callgrind.sh runs
 * each mode with two loop counts, collecting only inside cg_measured, so
 * that (Ir(n2) - Ir(n1)) / (n2 - n1) is the exact cost of one iteration
 * with any first-call setup cancelled out.
 *
 *   cg_bench MODE N [time]   (built twice: against the proxy and the dispatcher)
 *
 * With "time" (natively, not under valgrind) it prints the median ns per
 * iteration of 5 runs of the loop instead. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_empty.h"
#include "bench_floors.h"
#include "xpti/xpti_trace_framework.h"
#include "xptrace/xptrace_protocol.h"

typedef enum cg_mode {
  CG_LOOP,          /* the loop alone: the baseline */
  CG_DIRECT_CALL,   /* an empty non-inlined function */
  CG_DSO_CALL,      /* an empty function in another .so, through a pointer */
  CG_NOTIFY,        /* xptiNotifySubscribers, one empty callback */
  CG_NOTIFY_STAMP,  /* the same once a collector asked for the per-thread stamp */
  CG_NOTIFY_STREAM, /* one stream-wide callback and the stamp: xptrace's collectors */
  CG_TRACE_ENABLED, /* xptiTraceEnabled */
  CG_MAKE_SAME,     /* xptiMakeEvent, the same (registered) payload object */
  CG_MAKE_COPY,     /* xptiMakeEvent, a fresh copy of an existing payload */
  CG_FIND,          /* xptiFindEvent */
  CG_LOOKUP_STRING, /* xptiLookupString */
  CG_MODE_COUNT
} cg_mode_t;

static const char *const cg_mode_names[CG_MODE_COUNT] = {
    "loop", "direct-call", "dso-call", "notify", "notify-stamped", "notify-stream", "trace-enabled",
    "make-same", "make-copy", "find", "lookup-string",
};

static uint8_t cg_stream;
static xpti_trace_event_data_t *cg_event;
static xpti_payload_t cg_payload_pristine, cg_payload_same;
static uint32_t cg_string_id;
volatile uintptr_t cg_sink;

static __attribute__((noinline)) void cg_empty_local(void) { __asm__ volatile(""); }

/* Everything callgrind counts happens in here. */
__attribute__((noinline)) void cg_measured(cg_mode_t mode, unsigned long n);
__attribute__((noinline)) void cg_measured(cg_mode_t mode, unsigned long n) {
  uintptr_t sum = 0;
  void (*dso_function)(void) = xpti_bench_empty;
  switch (mode) {
  case CG_LOOP:
    for (unsigned long i = 0; i < n; i++)
      __asm__ volatile("" ::: "memory");
    break;
  case CG_DIRECT_CALL:
    for (unsigned long i = 0; i < n; i++)
      cg_empty_local();
    break;
  case CG_DSO_CALL:
    for (unsigned long i = 0; i < n; i++) {
      __asm__ volatile("" : "+r"(dso_function));
      dso_function();
    }
    break;
  case CG_NOTIFY:
  case CG_NOTIFY_STAMP:
  case CG_NOTIFY_STREAM:
    for (unsigned long i = 0; i < n; i++)
      sum += (unsigned)xptiNotifySubscribers(cg_stream, XPTI_TRACE_TASK_BEGIN, NULL, cg_event, i,
                                             NULL);
    break;
  case CG_TRACE_ENABLED:
    for (unsigned long i = 0; i < n; i++)
      sum += xptiTraceEnabled();
    break;
  case CG_MAKE_SAME:
    for (unsigned long i = 0; i < n; i++)
      sum += (uintptr_t)xptiMakeEvent(cg_payload_same.name, &cg_payload_same, XPTI_EVENT_ALGORITHM,
                                      XPTI_ACTIVITY_ACTIVE, NULL);
    break;
  case CG_MAKE_COPY:
    for (unsigned long i = 0; i < n; i++) {
      xpti_payload_t payload = cg_payload_pristine; /* as built at a call site */
      sum += (uintptr_t)xptiMakeEvent(payload.name, &payload, XPTI_EVENT_ALGORITHM,
                                      XPTI_ACTIVITY_ACTIVE, NULL);
    }
    break;
  case CG_FIND:
    for (unsigned long i = 0; i < n; i++)
      sum += (uintptr_t)xptiFindEvent(cg_event->unique_id);
    break;
  case CG_LOOKUP_STRING:
    for (unsigned long i = 0; i < n; i++)
      sum += (uintptr_t)xptiLookupString(cg_string_id);
    break;
  case CG_MODE_COUNT:
    break;
  }
  cg_sink = sum;
}

static void cg_empty_stream_callback(uint8_t stream, uint16_t trace_type,
                                     xpti_trace_event_data_t *parent,
                                     xpti_trace_event_data_t *event, uint64_t instance,
                                     const void *user_data) {
  (void)stream, (void)trace_type, (void)parent, (void)event, (void)instance, (void)user_data;
}

static void cg_empty_callback(uint16_t trace_type, xpti_trace_event_data_t *parent,
                              xpti_trace_event_data_t *event, uint64_t instance,
                              const void *user_data) {
  (void)trace_type, (void)parent, (void)event, (void)instance, (void)user_data;
}

int main(int argc, char **argv) {
  if (argc != 3 && !(argc == 4 && !strcmp(argv[3], "time"))) {
    fprintf(stderr, "usage: %s MODE N [time]\n", argv[0]);
    return 2;
  }
  int mode = 0;
  while (mode < CG_MODE_COUNT && strcmp(argv[1], cg_mode_names[mode]))
    mode++;
  char *end;
  unsigned long n = strtoul(argv[2], &end, 10);
  if (mode == CG_MODE_COUNT || *end) {
    fprintf(stderr, "xptrace: cg_bench: unknown mode '%s' or bad count '%s'\n", argv[1], argv[2]);
    return 2;
  }
#ifndef CG_PROXY
  if (mode == CG_NOTIFY_STAMP || mode == CG_NOTIFY_STREAM)
    (void)xptraceThreadStamp(); /* what a collector sharing the stamp does */
  /* Against the dispatcher: tracing on, one stream, one empty callback,
   * one existing trace point. */
  xptiForceSetTraceEnabled(true);
  cg_stream = xptiRegisterStream("cg_bench");
  if (mode == CG_NOTIFY_STREAM)
    xptiRegisterStreamCallback(cg_stream, cg_empty_stream_callback);
  else
    xptiRegisterCallback(cg_stream, XPTI_TRACE_TASK_BEGIN, cg_empty_callback);
  cg_payload_pristine = xpti_payload_make("cg_function", "src/cg_bench.c", 42, 7, NULL);
  cg_payload_same = cg_payload_pristine;
  xpti_payload_t first = cg_payload_pristine;
  cg_event = xptiMakeEvent(first.name, &first, XPTI_EVENT_ALGORITHM, XPTI_ACTIVITY_ACTIVE, NULL);
  xptiMakeEvent(cg_payload_same.name, &cg_payload_same, XPTI_EVENT_ALGORITHM, XPTI_ACTIVITY_ACTIVE,
                NULL);
  char *cg_copy;
  cg_string_id = xptiRegisterString("cg_bench string", &cg_copy);
  if (!cg_event || !xptiCheckTraceEnabled(cg_stream, XPTI_TRACE_TASK_BEGIN)) {
    fprintf(stderr, "xptrace: cg_bench: the dispatcher did not set up the event/callback\n");
    return 1;
  }
#else
  /* Against the proxy with no dispatcher: tracing is off; any event
   * pointer will do since the stubs return before using it. */
  static xpti_trace_event_data_t dummy;
  cg_event = &dummy;
  cg_stream = 0;
#endif
  cg_measured((cg_mode_t)mode, n);
  if (argc == 4) {
    double samples[5];
    for (int r = 0; r < 5; r++) {
      uint64_t start = bench_now_ns();
      cg_measured((cg_mode_t)mode, n);
      samples[r] = (double)(bench_now_ns() - start) / (double)(n ? n : 1);
    }
    printf("%s %.3f\n", cg_mode_names[mode], bench_median(samples, 5));
  }
  cg_empty_callback(0, NULL, NULL, 0, NULL);
  cg_empty_stream_callback(0, 0, NULL, NULL, 0, NULL);
  return 0;
}

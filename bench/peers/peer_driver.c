/* Peers benchmark driver: the same begin/end shape through LTTng-UST
 * (PEER_LTTNG) or through xptrace (the proxy, libxpti.a).  Prints
 * "ns_per_event <median>" over the repetitions, and with "floors" the
 * floors of PERF.md as "floor <tag> <ns>".
 *
 *   peer_driver ITERATIONS REPETITIONS [floors] */
#include <stdio.h>
#include <stdlib.h>

#include "bench_floors.h"

#ifdef PEER_LTTNG
#include "peer_lttng_tp.h"
#else
#include "xpti/xpti_trace_framework.h"
#endif

#define PEER_MAX_REPETITIONS 31

#ifdef PEER_LTTNG
static __attribute__((noinline)) void peer_loop(unsigned long iterations) {
  for (unsigned long i = 0; i < iterations; i++) {
    lttng_ust_tracepoint(xptrace_bench, begin, 42, i);
    __asm__ volatile("" ::: "memory"); /* the traced work */
    lttng_ust_tracepoint(xptrace_bench, end, 42, i);
  }
}
static void peer_setup(void) {}
static void peer_finish(void) {}
#else
static uint8_t peer_stream;
static xpti_trace_event_data_t *peer_event;

static void peer_setup(void) {
  /* As an instrumented runtime does it: announce the stream, make the
   * trace point's event once and keep it at the call site. */
  xptiFrameworkInitialize();
  xptiInitialize("xptrace.bench", 1, 0, "1.0");
  peer_stream = xptiRegisterStream("xptrace.bench");
  xpti_payload_t payload = xpti_payload_make("peer_loop", "bench/peers/peer_driver.c", 42, 1, NULL);
  peer_event = xptiMakeEvent("peer_loop", &payload, XPTI_EVENT_ALGORITHM, XPTI_ACTIVITY_ACTIVE,
                             NULL);
}

static void peer_finish(void) { xptiFinalize("xptrace.bench"); }

static __attribute__((noinline)) void peer_loop(unsigned long iterations) {
  for (unsigned long i = 0; i < iterations; i++) {
    xptiNotifySubscribers(peer_stream, XPTI_TRACE_TASK_BEGIN, NULL, peer_event, i, NULL);
    __asm__ volatile("" ::: "memory"); /* the traced work */
    xptiNotifySubscribers(peer_stream, XPTI_TRACE_TASK_END, NULL, peer_event, i, NULL);
  }
}
#endif

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s ITERATIONS REPETITIONS [floors]\n", argv[0]);
    return 2;
  }
  unsigned long iterations = strtoul(argv[1], NULL, 10);
  int repetitions = atoi(argv[2]);
  if (iterations == 0 || repetitions < 1 || repetitions > PEER_MAX_REPETITIONS) {
    fprintf(stderr, "xptrace: peer_driver: bad iterations or repetitions\n");
    return 2;
  }
  peer_setup();
  peer_loop(iterations / 10 + 1); /* warm up */
  double samples[PEER_MAX_REPETITIONS];
  for (int r = 0; r < repetitions; r++) {
    uint64_t start = bench_now_ns();
    peer_loop(iterations);
    samples[r] = (double)(bench_now_ns() - start) / (2.0 * (double)iterations);
  }
  peer_finish();
  printf("ns_per_event %.3f\n", bench_median(samples, (size_t)repetitions));
  if (argc > 3) {
    bench_floors_t floors;
    bench_floors_measure(&floors, PEER_MAX_REPETITIONS);
    for (int f = 0; f < BENCH_FLOOR_COUNT; f++)
      printf("floor %s %.3f\n", bench_floor_tag((bench_floor_id_t)f), floors.ns[f]);
  }
  return 0;
}

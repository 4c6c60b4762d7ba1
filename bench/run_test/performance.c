/* run_test --type performance: test 1 (data structures) and test 2
 * (framework cost and events/s projection), per thread count, with the
 * floors of PERF.md measured in the same run.  All inputs are generated
 * before the timed regions; every result reaches bench_sink. */
#include <math.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_empty.h"
#include "bench_floors.h"
#include "run_test.h"
#include "xpti/xpti_trace_framework.h"

/* Repeatable operations run at least this often per thread, so that tiny
 * --trace-points values still time well above the clock's resolution. */
#define PERF_MIN_REPEATED_OPS (1u << 17)
#define PERF_FLOOR_REPETITIONS 31

typedef enum perf_metric {
  /* test 1 */
  PERF_STRING_INSERT,
  PERF_STRING_LOOKUP,
  PERF_STRING_INSERT_2_LOOKUPS,
  PERF_TP_CREATE_NEW,
  PERF_TP_CREATE_EXISTING,
  PERF_TP_FIND_BY_UID,
  PERF_TP_LOCAL_CACHE,
  PERF_NOTIFY,
  PERF_NOTIFY_PAIR,
  /* test 2 */
  PERF_FW_CREATE,
  PERF_FW_LOOKUP_NOTIFY,
  PERF_METRIC_COUNT
} perf_metric_t;

static const struct {
  const char *label;
  const char *key; /* for --report */
  bench_floor_id_t floor;
} perf_metrics[PERF_METRIC_COUNT] = {
    [PERF_STRING_INSERT] = {"string insert (new)", "string-insert", BENCH_FLOOR_DSO_CALL},
    [PERF_STRING_LOOKUP] = {"string lookup (by id)", "string-lookup", BENCH_FLOOR_DSO_CALL},
    [PERF_STRING_INSERT_2_LOOKUPS] = {"insert + 2 lookups (per op)", "string-insert-2-lookups",
                                      BENCH_FLOOR_DSO_CALL},
    [PERF_TP_CREATE_NEW] = {"TP create, new payload", "tp-create-new", BENCH_FLOOR_DSO_CALL},
    [PERF_TP_CREATE_EXISTING] = {"TP create, existing payload", "tp-create-existing",
                                 BENCH_FLOOR_DSO_CALL},
    [PERF_TP_FIND_BY_UID] = {"TP lookup by universal ID", "tp-find-uid", BENCH_FLOOR_DSO_CALL},
    [PERF_TP_LOCAL_CACHE] = {"TP local cache", "tp-local-cache", BENCH_FLOOR_LOOP},
    [PERF_NOTIFY] = {"notify, 1 empty callback", "notify", BENCH_FLOOR_DSO_CALL},
    [PERF_NOTIFY_PAIR] = {"notify begin+end pair", "notify-pair", BENCH_FLOOR_DSO_CALL},
    [PERF_FW_CREATE] = {"TP create", "tp-create", BENCH_FLOOR_DSO_CALL},
    [PERF_FW_LOOKUP_NOTIFY] = {"TP lookup + notify", "tp-lookup-notify", BENCH_FLOOR_DSO_CALL},
};

static const double perf_callback_costs_ns[] = {10, 100, 500, 1000, 2000};
#define PERF_CALLBACK_COSTS (sizeof perf_callback_costs_ns / sizeof perf_callback_costs_ns[0])

/* One worker's inputs (made before timing) and results. */
typedef struct perf_worker_data {
  char **strings_new;  /* string insert phase */
  char **strings_more; /* insert + 2 lookups phase */
  uint32_t *string_ids;
  char **names;
  char **files;
  xpti_payload_t *payloads; /* pristine: copied before every use */
  xpti_trace_event_data_t **events;
  uint64_t *uids;
  uint32_t *order; /* a shuffled visiting order of the trace points */
  uint64_t elapsed_ns[PERF_METRIC_COUNT];
  uint64_t operations[PERF_METRIC_COUNT];
  uint64_t checksum;
} perf_worker_data_t;

typedef struct perf_context {
  const run_test_options_t *options;
  run_test_team_t team;
  unsigned count;  /* trace points (and strings) per worker */
  unsigned passes; /* passes over all trace points in repeated phases */
  unsigned visits; /* visits per trace point: 100 / tp-frequency */
  uint8_t stream;
  perf_worker_data_t *workers;
  atomic_bool failed; /* an operation returned NULL */
} perf_context_t;

static void *perf_alloc(size_t count, size_t size) {
  void *memory = calloc(count ? count : 1, size);
  if (!memory) {
    fprintf(stderr, "xptrace: run_test: out of memory\n");
    exit(1);
  }
  return memory;
}

static char *perf_format(const char *format, ...) __attribute__((format(printf, 1, 2)));
static char *perf_format(const char *format, ...) {
  va_list args;
  va_start(args, format);
  char *text = NULL;
  if (vasprintf(&text, format, args) < 0) {
    fprintf(stderr, "xptrace: run_test: out of memory\n");
    exit(1);
  }
  va_end(args);
  return text;
}

static void perf_worker_prepare(perf_worker_data_t *data, unsigned count, unsigned generation,
                                unsigned worker) {
  data->strings_new = perf_alloc(count, sizeof *data->strings_new);
  data->strings_more = perf_alloc(count, sizeof *data->strings_more);
  data->string_ids = perf_alloc(count, sizeof *data->string_ids);
  data->names = perf_alloc(count, sizeof *data->names);
  data->files = perf_alloc(count, sizeof *data->files);
  data->payloads = perf_alloc(count, sizeof *data->payloads);
  data->events = perf_alloc(count, sizeof *data->events);
  data->uids = perf_alloc(count, sizeof *data->uids);
  data->order = perf_alloc(count, sizeof *data->order);
  for (unsigned i = 0; i < count; i++) {
    data->strings_new[i] = perf_format("perf.%u.%u.string.%u", generation, worker, i);
    data->strings_more[i] = perf_format("perf.%u.%u.more.%u", generation, worker, i);
    data->names[i] = perf_format("perf_%u_%u_function_%u", generation, worker, i);
    /* 16 functions per file, as in real code. */
    data->files[i] = perf_format("src/perf_%u_%u/file_%u.c", generation, worker, i / 16);
    data->payloads[i] = xpti_payload_make(data->names[i], data->files[i], 10 + i, 1 + i % 80, NULL);
    data->order[i] = i;
  }
  run_test_shuffle(data->order, count, generation * 977u + worker);
}

static void perf_worker_release(perf_worker_data_t *data, unsigned count) {
  for (unsigned i = 0; i < count; i++) {
    free(data->strings_new[i]);
    free(data->strings_more[i]);
    free(data->names[i]);
    free(data->files[i]);
  }
  free(data->strings_new);
  free(data->strings_more);
  free(data->string_ids);
  free(data->names);
  free(data->files);
  free(data->payloads);
  free(data->events);
  free(data->uids);
  free(data->order);
}

/* Phases start together on every worker and end with everyone done, so
 * that multi-threaded rows measure operations running at once. */
#define PERF_PHASE(context, data, metric, ops, body)                                             \
  do {                                                                                         \
    run_test_team_sync(&(context)->team);                                                      \
    uint64_t phase_start = bench_now_ns();                                                     \
    body;                                                                                      \
    (data)->elapsed_ns[metric] = bench_now_ns() - phase_start;                                 \
    (data)->operations[metric] = (ops);                                                        \
  } while (0)

static void perf_make_events(perf_context_t *context, perf_worker_data_t *data) {
  unsigned count = context->count;
  uint64_t sum = 0;
  PERF_PHASE(context, data, PERF_TP_CREATE_NEW, count, {
    for (unsigned i = 0; i < count; i++) {
      xpti_payload_t payload = data->payloads[i];
      uint64_t instance;
      data->events[i] = xptiMakeEvent(data->names[i], &payload, XPTI_EVENT_ALGORITHM,
                                      XPTI_ACTIVITY_ACTIVE, &instance);
      sum += instance;
    }
  });
  for (unsigned i = 0; i < count; i++) {
    if (!data->events[i]) {
      atomic_store(&context->failed, true);
      return;
    }
    data->uids[i] = data->events[i]->unique_id;
  }
  data->checksum += sum;
}

static void perf_test1_worker(void *opaque, unsigned worker) {
  perf_context_t *context = opaque;
  perf_worker_data_t *data = &context->workers[worker];
  unsigned count = context->count, passes = context->passes;
  uint64_t repeated = (uint64_t)count * passes, sum = 0;
  const uint32_t *order = data->order;

  PERF_PHASE(context, data, PERF_STRING_INSERT, count, {
    for (unsigned i = 0; i < count; i++) {
      char *copy;
      data->string_ids[i] = xptiRegisterString(data->strings_new[i], &copy);
      sum += (uintptr_t)copy;
    }
  });
  PERF_PHASE(context, data, PERF_STRING_LOOKUP, repeated, {
    for (unsigned p = 0; p < passes; p++)
      for (unsigned i = 0; i < count; i++)
        sum += (uintptr_t)xptiLookupString(data->string_ids[order[i]]);
  });
  PERF_PHASE(context, data, PERF_STRING_INSERT_2_LOOKUPS, 3ull * count, {
    for (unsigned i = 0; i < count; i++) {
      char *copy;
      uint32_t id = xptiRegisterString(data->strings_more[i], &copy);
      sum += (uintptr_t)xptiLookupString(id);
      sum += (uintptr_t)xptiLookupString(id);
    }
  });
  perf_make_events(context, data);
  if (atomic_load(&context->failed)) /* still meet the barriers of the phases below */
    passes = 0, repeated = 0;
  PERF_PHASE(context, data, PERF_TP_CREATE_EXISTING, repeated, {
    for (unsigned p = 0; p < passes; p++)
      for (unsigned i = 0; i < count; i++) {
        unsigned k = order[i];
        xpti_payload_t payload = data->payloads[k]; /* as built at the call site */
        uint64_t instance;
        sum += (uintptr_t)xptiMakeEvent(data->names[k], &payload, XPTI_EVENT_ALGORITHM,
                                        XPTI_ACTIVITY_ACTIVE, &instance);
      }
  });
  PERF_PHASE(context, data, PERF_TP_FIND_BY_UID, repeated, {
    for (unsigned p = 0; p < passes; p++)
      for (unsigned i = 0; i < count; i++)
        sum += (uintptr_t)xptiFindEvent(data->uids[order[i]]);
  });
  PERF_PHASE(context, data, PERF_TP_LOCAL_CACHE, repeated, {
    for (unsigned p = 0; p < passes; p++)
      for (unsigned i = 0; i < count; i++) {
        xpti_trace_event_data_t *event = data->events[order[i]];
        __asm__ volatile("" : "+r"(event)); /* the cached event is really used */
        sum += (uintptr_t)event;
      }
  });
  PERF_PHASE(context, data, PERF_NOTIFY, repeated, {
    for (unsigned p = 0; p < passes; p++)
      for (unsigned i = 0; i < count; i++)
        sum += (unsigned)xptiNotifySubscribers(context->stream, XPTI_TRACE_TASK_BEGIN, NULL,
                                               data->events[order[i]], p, NULL);
  });
  PERF_PHASE(context, data, PERF_NOTIFY_PAIR, repeated, {
    for (unsigned p = 0; p < passes; p++)
      for (unsigned i = 0; i < count; i++) {
        xpti_trace_event_data_t *event = data->events[order[i]];
        sum += (unsigned)xptiNotifySubscribers(context->stream, XPTI_TRACE_TASK_BEGIN, NULL,
                                               event, p, NULL);
        sum += (unsigned)xptiNotifySubscribers(context->stream, XPTI_TRACE_TASK_END, NULL,
                                               event, p, NULL);
      }
  });
  data->checksum += sum;
}

/* The document's instrumentation scenario: N new trace points, then
 * N x 100/f visits, each a lookup by universal ID and a notification. */
static void perf_test2_worker(void *opaque, unsigned worker) {
  perf_context_t *context = opaque;
  perf_worker_data_t *data = &context->workers[worker];
  unsigned count = context->count, passes = context->passes;
  uint64_t sum = 0;
  const uint32_t *order = data->order;

  perf_make_events(context, data);
  data->elapsed_ns[PERF_FW_CREATE] = data->elapsed_ns[PERF_TP_CREATE_NEW];
  data->operations[PERF_FW_CREATE] = data->operations[PERF_TP_CREATE_NEW];
  if (atomic_load(&context->failed))
    passes = 0;
  PERF_PHASE(context, data, PERF_FW_LOOKUP_NOTIFY, (uint64_t)count * passes, {
    for (unsigned p = 0; p < passes; p++)
      for (unsigned i = 0; i < count; i++) {
        xpti_trace_event_data_t *event =
            (xpti_trace_event_data_t *)xptiFindEvent(data->uids[order[i]]);
        sum += (unsigned)xptiNotifySubscribers(context->stream, XPTI_TRACE_TASK_BEGIN, NULL,
                                               event, p, NULL);
      }
  });
  data->checksum += sum;
}

/* Mean over the workers of each worker's ns per operation: the cost one
 * caller sees while the others run the same operation. */
static double perf_ns_per_op(const perf_context_t *context, perf_metric_t metric) {
  double total = 0;
  for (unsigned w = 0; w < context->team.workers; w++) {
    const perf_worker_data_t *data = &context->workers[w];
    if (!data->operations[metric])
      return NAN;
    total += (double)data->elapsed_ns[metric] / (double)data->operations[metric];
  }
  return total / context->team.workers;
}

/* --verbose: every worker's own cost, to see imbalance between threads. */
static void perf_print_workers(const perf_context_t *context, const perf_metric_t *metrics,
                               size_t count) {
  printf("  %s: %u trace points, %u passes over them in repeated phases\n",
         run_test_threads_label(context->team.requested), context->count, context->passes);
  for (size_t m = 0; m < count; m++) {
    printf("    %-30s", perf_metrics[metrics[m]].label);
    for (unsigned w = 0; w < context->team.workers; w++) {
      const perf_worker_data_t *data = &context->workers[w];
      if (data->operations[metrics[m]])
        printf(" %9.2f", (double)data->elapsed_ns[metrics[m]] /
                             (double)data->operations[metrics[m]]);
      else
        printf(" %9s", "n/a");
    }
    printf("\n");
  }
}

/* Fresh framework state and one empty callback in another .so. */
static bool perf_setup_framework(perf_context_t *context) {
  xptiReset();
  xptiForceSetTraceEnabled(true);
  char *name = perf_format("run_test.performance.%u", run_test_next_generation());
  context->stream = xptiRegisterStream(name);
  free(name);
  if (context->stream == XPTI_INVALID_STREAM_ID ||
      xptiRegisterCallback(context->stream, XPTI_TRACE_TASK_BEGIN, xpti_bench_empty_callback) !=
          XPTI_RESULT_SUCCESS ||
      xptiRegisterCallback(context->stream, XPTI_TRACE_TASK_END, xpti_bench_empty_callback) !=
          XPTI_RESULT_SUCCESS) {
    fprintf(stderr, "xptrace: run_test: cannot register a stream and callback\n");
    return false;
  }
  return true;
}

/* Run one test on one thread count; results stay in context->workers. */
static bool perf_run(perf_context_t *context, unsigned threads, run_test_worker_fn worker) {
  const run_test_options_t *options = context->options;
  unsigned workers = threads ? threads : 1, generation = run_test_next_generation();
  context->count = options->trace_points;
  context->visits = (unsigned)lround(100.0 / options->tp_frequency);
  if (context->visits < 1)
    context->visits = 1;
  unsigned minimum = (PERF_MIN_REPEATED_OPS + context->count - 1) / context->count;
  context->passes = context->visits > minimum ? context->visits : minimum;
  atomic_store(&context->failed, false);
  context->workers = perf_alloc(workers, sizeof *context->workers);
  for (unsigned w = 0; w < workers; w++)
    perf_worker_prepare(&context->workers[w], context->count, generation, w);
  if (!perf_setup_framework(context))
    return false;
  run_test_team_run(&context->team, threads, worker, context);
  for (unsigned w = 0; w < workers; w++)
    bench_sink += context->workers[w].checksum;
  if (atomic_load(&context->failed))
    fprintf(stderr, "xptrace: run_test: xptiMakeEvent returned NULL (%s)\n",
            run_test_threads_label(threads));
  return !atomic_load(&context->failed);
}

static void perf_run_free(perf_context_t *context) {
  for (unsigned w = 0; w < context->team.workers; w++)
    perf_worker_release(&context->workers[w], context->count);
  free(context->workers);
  context->workers = NULL;
}

static void perf_print_cell(double ns, double floor_ns) {
  if (isnan(ns))
    printf(" %18s", "n/a");
  else
    printf(" %9.2f %7.1fx", ns, floor_ns > 0 ? ns / floor_ns : 0.0);
}

static void perf_print_header(const run_test_options_t *options, const char *first) {
  printf("%-30s %-8s", first, "floor");
  for (unsigned n = 0; n < options->thread_count; n++)
    printf(" %18s", run_test_threads_label(options->threads[n]));
  printf("\n%-30s %-8s", "", "");
  for (unsigned n = 0; n < options->thread_count; n++)
    printf(" %9s %8s", "ns", "x floor");
  printf("\n");
}

static void perf_report(const char *test, unsigned threads, const char *key, double value,
                        const char *floor_tag, double ratio) {
  printf("report,%s,%u,%s,%.3f,%s,%.3f\n", test, threads, key, value, floor_tag, ratio);
}

static bool perf_test1(const run_test_options_t *options) {
  static const perf_metric_t rows[] = {PERF_STRING_INSERT,      PERF_STRING_LOOKUP,
                                       PERF_STRING_INSERT_2_LOOKUPS, PERF_TP_CREATE_NEW,
                                       PERF_TP_CREATE_EXISTING, PERF_TP_FIND_BY_UID,
                                       PERF_TP_LOCAL_CACHE,     PERF_NOTIFY,
                                       PERF_NOTIFY_PAIR};
  enum { ROWS = sizeof rows / sizeof rows[0], CREATE_ROW = 3 /* PERF_TP_CREATE_NEW */ };
  double results[RUN_TEST_MAX_LIST][ROWS];
  bench_floors_t floors;
  bool ok = true;
  perf_context_t context = {.options = options};

  bench_floors_measure(&floors, PERF_FLOOR_REPETITIONS);
  for (unsigned n = 0; n < options->thread_count; n++) {
    if (!perf_run(&context, options->threads[n], perf_test1_worker))
      ok = false;
    for (unsigned r = 0; r < ROWS; r++)
      results[n][r] = perf_ns_per_op(&context, rows[r]);
    if (options->verbose)
      perf_print_workers(&context, rows, ROWS);
    perf_run_free(&context);
  }

  printf("\nPerformance test 1: data structures (%u trace points and strings per thread; "
         "repeated operations: %u passes)\n",
         options->trace_points, context.passes);
  bench_floors_print(stdout, &floors);
  perf_print_header(options, "operation (ns per operation)");
  for (unsigned r = 0; r < ROWS; r++) {
    bench_floor_id_t floor = perf_metrics[rows[r]].floor;
    printf("%-30s %-8s", perf_metrics[rows[r]].label, bench_floor_tag(floor));
    for (unsigned n = 0; n < options->thread_count; n++)
      perf_print_cell(results[n][r], floors.ns[floor]);
    printf("\n");
  }
  printf("(notify begin+end pair: ns per pair; TP local cache: the event kept at the call site)\n");
  /* creation with N threads at once against creation alone, same run */
  printf("%-30s %-8s", "TP create new, x 1st column", "");
  for (unsigned n = 0; n < options->thread_count; n++)
    printf(" %9s %7.2fx", "", results[n][CREATE_ROW] / results[0][CREATE_ROW]);
  printf("\n");
  if (options->report) {
    for (int f = 0; f < BENCH_FLOOR_COUNT; f++)
      perf_report("performance-1", 0, bench_floor_tag((bench_floor_id_t)f), floors.ns[f], "", 1.0);
    for (unsigned n = 0; n < options->thread_count; n++)
      for (unsigned r = 0; r < ROWS; r++) {
        bench_floor_id_t floor = perf_metrics[rows[r]].floor;
        perf_report("performance-1", options->threads[n], perf_metrics[rows[r]].key,
                    results[n][r], bench_floor_tag(floor), results[n][r] / floors.ns[floor]);
      }
    for (unsigned n = 0; n < options->thread_count; n++)
      perf_report("performance-1", options->threads[n], "tp-create-new-vs-first",
                  results[n][CREATE_ROW], "tp-create-new-first",
                  results[n][CREATE_ROW] / results[0][CREATE_ROW]);
  }
  return ok;
}

/* events/s = 1e9 / ((FW + Ct) x 100 / overhead): the document's model. */
static double perf_events_per_second(double framework_ns, double callback_ns, double overhead) {
  return 1e9 / ((framework_ns + callback_ns) * 100.0 / overhead);
}

static bool perf_test2(const run_test_options_t *options) {
  double create[RUN_TEST_MAX_LIST], lookup_notify[RUN_TEST_MAX_LIST], framework[RUN_TEST_MAX_LIST];
  bench_floors_t floors;
  bool ok = true;
  perf_context_t context = {.options = options};

  bench_floors_measure(&floors, PERF_FLOOR_REPETITIONS);
  for (unsigned n = 0; n < options->thread_count; n++) {
    if (!perf_run(&context, options->threads[n], perf_test2_worker))
      ok = false;
    create[n] = perf_ns_per_op(&context, PERF_FW_CREATE);
    lookup_notify[n] = perf_ns_per_op(&context, PERF_FW_LOOKUP_NOTIFY);
    /* FW = (N x create + N x 100/f x (lookup + notify)) / (N x 100/f) */
    framework[n] = create[n] * options->tp_frequency / 100.0 + lookup_notify[n];
    if (options->verbose) {
      static const perf_metric_t metrics[] = {PERF_FW_CREATE, PERF_FW_LOOKUP_NOTIFY};
      perf_print_workers(&context, metrics, 2);
    }
    perf_run_free(&context);
  }

  double dso = floors.ns[BENCH_FLOOR_DSO_CALL];
  printf("\nPerformance test 2: framework cost (%u trace points per thread, %u visits each "
         "(tp-frequency %g%%), overhead %g%%)\n",
         options->trace_points, context.visits, options->tp_frequency, options->overhead);
  bench_floors_print(stdout, &floors);
  perf_print_header(options, "cost (ns)");
  printf("%-30s %-8s", perf_metrics[PERF_FW_LOOKUP_NOTIFY].label, "dso-call");
  for (unsigned n = 0; n < options->thread_count; n++)
    perf_print_cell(lookup_notify[n], dso);
  printf("\n%-30s %-8s", perf_metrics[PERF_FW_CREATE].label, "dso-call");
  for (unsigned n = 0; n < options->thread_count; n++)
    perf_print_cell(create[n], dso);
  printf("\n%-30s %-8s", "FW cost per visit", "dso-call");
  for (unsigned n = 0; n < options->thread_count; n++)
    perf_print_cell(framework[n], dso);
  printf("\n%-30s %-8s", "FW cost per visit, 2 visits", "dso-call");
  for (unsigned n = 0; n < options->thread_count; n++)
    perf_print_cell(create[n] / 2 + lookup_notify[n], dso);
  printf("\n(FW = TP create x %g / 100 + TP lookup + notify; at 2 visits per trace point "
         "TP create / 2 + TP lookup + notify)\n",
         options->tp_frequency);
  printf("%-30s %-8s", "events/s at callback cost", "");
  for (unsigned n = 0; n < options->thread_count; n++)
    printf(" %18s", run_test_threads_label(options->threads[n]));
  printf("\n");
  for (size_t c = 0; c < PERF_CALLBACK_COSTS; c++) {
    char label[64];
    snprintf(label, sizeof label, "  Ct = %g ns", perf_callback_costs_ns[c]);
    printf("%-30s %-8s", label, "");
    for (unsigned n = 0; n < options->thread_count; n++)
      printf(" %18.0f",
             perf_events_per_second(framework[n], perf_callback_costs_ns[c], options->overhead));
    printf("\n");
  }
  if (options->report) {
    for (int f = 0; f < BENCH_FLOOR_COUNT; f++)
      perf_report("performance-2", 0, bench_floor_tag((bench_floor_id_t)f), floors.ns[f], "", 1.0);
    for (unsigned n = 0; n < options->thread_count; n++) {
      unsigned threads = options->threads[n];
      perf_report("performance-2", threads, "tp-lookup-notify", lookup_notify[n], "dso-call",
                  lookup_notify[n] / dso);
      perf_report("performance-2", threads, "tp-create", create[n], "dso-call", create[n] / dso);
      perf_report("performance-2", threads, "fw-cost", framework[n], "dso-call",
                  framework[n] / dso);
      perf_report("performance-2", threads, "fw-cost-2-visits", create[n] / 2 + lookup_notify[n],
                  "dso-call", (create[n] / 2 + lookup_notify[n]) / dso);
      for (size_t c = 0; c < PERF_CALLBACK_COSTS; c++) {
        char key[48];
        snprintf(key, sizeof key, "events-per-second-ct%g", perf_callback_costs_ns[c]);
        perf_report("performance-2", threads, key,
                    perf_events_per_second(framework[n], perf_callback_costs_ns[c],
                                           options->overhead),
                    "", 0.0);
      }
    }
  }
  return ok;
}

int run_test_performance(const run_test_options_t *options) {
  bool ok = true;
  printf("Performance tests: %u trace points, tp-frequency %g%%, overhead %g%%\n",
         options->trace_points, options->tp_frequency, options->overhead);
  for (unsigned t = 0; t < options->test_id_count; t++)
    ok &= options->test_ids[t] == 1 ? perf_test1(options) : perf_test2(options);
  xptiForceSetTraceEnabled(false);
  fflush(stdout);
  return ok ? 0 : 1;
}

/* run_test --type semantic: correctness of the string table (1), trace
 * points (2) and notifications (3), on every requested thread count.
 * Threads run the same work at once so that they race on purpose. */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "run_test.h"
#include "xpti/xpti_trace_framework.h"

#define SEMANTIC_STRINGS 1000
#define SEMANTIC_MAX_FAILURES_SHOWN 10

typedef struct semantic_score {
  atomic_ullong checks;
  atomic_ullong passed;
  atomic_uint failures_shown;
  bool verbose;
} semantic_score_t;

static __attribute__((format(printf, 3, 4))) bool semantic_check(semantic_score_t *score,
                                                                 bool ok, const char *format,
                                                                 ...) {
  atomic_fetch_add_explicit(&score->checks, 1, memory_order_relaxed);
  if (ok) {
    atomic_fetch_add_explicit(&score->passed, 1, memory_order_relaxed);
    return true;
  }
  if (score->verbose && atomic_fetch_add(&score->failures_shown, 1) < SEMANTIC_MAX_FAILURES_SHOWN) {
    va_list args;
    va_start(args, format);
    fputs("  failed: ", stdout);
    vprintf(format, args);
    fputc('\n', stdout);
    va_end(args);
  }
  return false;
}

static void semantic_score_init(semantic_score_t *score, bool verbose) {
  atomic_init(&score->checks, 0);
  atomic_init(&score->passed, 0);
  atomic_init(&score->failures_shown, 0);
  score->verbose = verbose;
}

static int compare_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return (x > y) - (x < y);
}

/* True when no value repeats (sorts a copy). */
static bool all_distinct(const uint64_t *values, size_t count) {
  uint64_t *copy = malloc(count * sizeof *copy);
  if (!copy)
    abort();
  memcpy(copy, values, count * sizeof *copy);
  qsort(copy, count, sizeof *copy, compare_u64);
  bool distinct = true;
  for (size_t i = 1; i < count && distinct; i++)
    distinct = copy[i] != copy[i - 1];
  free(copy);
  return distinct;
}

static char *xstrdup_printf(const char *format, ...) __attribute__((format(printf, 1, 2)));
static char *xstrdup_printf(const char *format, ...) {
  va_list args;
  va_start(args, format);
  char *text = NULL;
  if (vasprintf(&text, format, args) < 0)
    abort();
  va_end(args);
  return text;
}

static void *xcalloc(size_t count, size_t size) {
  void *memory = calloc(count ? count : 1, size);
  if (!memory)
    abort();
  return memory;
}

/* ---- test 1: string table --------------------------------------------- */

typedef struct strings_test {
  run_test_team_t team;
  semantic_score_t score;
  char **strings;
  uint32_t **ids;          /* [worker][string] */
  const char ***copies;    /* [worker][string]: the table's copy */
} strings_test_t;

static void strings_worker(void *context, unsigned worker) {
  strings_test_t *test = context;
  semantic_score_t *score = &test->score;
  uint32_t *ids = test->ids[worker];
  const char **copies = test->copies[worker];
  /* Each worker starts at a different place, so that several insert the
   * same new string at the same moment. */
  unsigned offset = worker * (SEMANTIC_STRINGS / test->team.workers);
  run_test_team_sync(&test->team);
  for (unsigned k = 0; k < SEMANTIC_STRINGS; k++) {
    unsigned i = (k + offset) % SEMANTIC_STRINGS;
    char *copy = NULL;
    ids[i] = xptiRegisterString(test->strings[i], &copy);
    copies[i] = copy;
    semantic_check(score, ids[i] != XPTI_INVALID_STRING_ID, "insert '%s': invalid id",
                   test->strings[i]);
    semantic_check(score, copy && copy != test->strings[i] && !strcmp(copy, test->strings[i]),
                   "insert '%s': table copy missing or wrong", test->strings[i]);
  }
  run_test_team_sync(&test->team);
  for (unsigned i = 0; i < SEMANTIC_STRINGS; i++) {
    const char *found = xptiLookupString(ids[i]);
    semantic_check(score, found && found == copies[i] && !strcmp(found, test->strings[i]),
                   "lookup id %u: expected '%s'", ids[i], test->strings[i]);
  }
  for (unsigned i = 0; i < SEMANTIC_STRINGS; i++) {
    char *copy = NULL;
    uint32_t again = xptiRegisterString(test->strings[i], &copy);
    semantic_check(score, again == ids[i] && copy == copies[i],
                   "duplicate '%s': id %u, expected %u", test->strings[i], again, ids[i]);
  }
}

static bool semantic_strings(const run_test_options_t *options, unsigned threads,
                             semantic_score_t *out) {
  strings_test_t test;
  unsigned workers = threads ? threads : 1, generation = run_test_next_generation();
  semantic_score_init(&test.score, options->verbose);
  xptiReset();
  test.strings = xcalloc(SEMANTIC_STRINGS, sizeof *test.strings);
  for (unsigned i = 0; i < SEMANTIC_STRINGS; i++)
    test.strings[i] = xstrdup_printf("run_test.semantic.%u.string.%u", generation, i);
  test.ids = xcalloc(workers, sizeof *test.ids);
  test.copies = xcalloc(workers, sizeof *test.copies);
  for (unsigned w = 0; w < workers; w++) {
    test.ids[w] = xcalloc(SEMANTIC_STRINGS, sizeof **test.ids);
    test.copies[w] = xcalloc(SEMANTIC_STRINGS, sizeof **test.copies);
  }
  run_test_team_run(&test.team, threads, strings_worker, &test);

  semantic_score_t *score = &test.score;
  for (unsigned w = 1; w < workers; w++)
    for (unsigned i = 0; i < SEMANTIC_STRINGS; i++)
      semantic_check(score, test.ids[w][i] == test.ids[0][i] && test.copies[w][i] == test.copies[0][i],
                     "string %u: threads 0 and %u got different ids", i, w);
  uint64_t *ids = xcalloc(SEMANTIC_STRINGS, sizeof *ids);
  for (unsigned i = 0; i < SEMANTIC_STRINGS; i++)
    ids[i] = test.ids[0][i];
  semantic_check(score, all_distinct(ids, SEMANTIC_STRINGS), "distinct strings share an id");
  char *copy = NULL;
  semantic_check(score, xptiRegisterString(NULL, &copy) == XPTI_INVALID_STRING_ID,
                 "NULL string got an id");
  semantic_check(score, xptiRegisterString("semantic.no.copy", NULL) == XPTI_INVALID_STRING_ID,
                 "a string registered without a place for its copy got an id");
  semantic_check(score, xptiLookupString(XPTI_INVALID_STRING_ID) == NULL,
                 "invalid id has a string");
  free(ids);
  for (unsigned w = 0; w < workers; w++) {
    free(test.ids[w]);
    free(test.copies[w]);
  }
  free(test.ids);
  free(test.copies);
  for (unsigned i = 0; i < SEMANTIC_STRINGS; i++)
    free(test.strings[i]);
  free(test.strings);
  *out = test.score;
  return atomic_load(&out->passed) == atomic_load(&out->checks);
}

/* ---- shared by tests 2 and 3: generated trace points ------------------ */

typedef struct semantic_points {
  unsigned count;
  char **names;
  char **files;
  xpti_payload_t *payloads; /* pristine: copied before every use */
} semantic_points_t;

static void semantic_points_make(semantic_points_t *points, unsigned count, const char *kind) {
  unsigned generation = run_test_next_generation();
  points->count = count;
  points->names = xcalloc(count, sizeof *points->names);
  points->files = xcalloc(count, sizeof *points->files);
  points->payloads = xcalloc(count, sizeof *points->payloads);
  for (unsigned i = 0; i < count; i++) {
    points->names[i] = xstrdup_printf("%s_%u_function_%u", kind, generation, i);
    /* Several trace points per file, as in real code. */
    points->files[i] = xstrdup_printf("src/%s_%u/file_%u.c", kind, generation, i % 7);
    points->payloads[i] =
        xpti_payload_make(points->names[i], points->files[i], 100 + i, i % 13, NULL);
  }
}

static void semantic_points_free(semantic_points_t *points) {
  for (unsigned i = 0; i < points->count; i++) {
    free(points->names[i]);
    free(points->files[i]);
  }
  free(points->names);
  free(points->files);
  free(points->payloads);
}

/* ---- test 2: trace points ----------------------------------------------- */

typedef struct points_test {
  run_test_team_t team;
  semantic_score_t score;
  semantic_points_t points;
  xpti_trace_event_data_t ***events; /* [worker][point] */
  uint64_t **instances;              /* [worker][2 * point + visit] */
} points_test_t;

static void points_worker(void *context, unsigned worker) {
  points_test_t *test = context;
  semantic_score_t *score = &test->score;
  semantic_points_t *points = &test->points;
  xpti_trace_event_data_t **events = test->events[worker];
  uint64_t *instances = test->instances[worker];
  run_test_team_sync(&test->team);
  for (unsigned i = 0; i < points->count; i++) { /* create */
    xpti_payload_t payload = points->payloads[i];
    uint64_t instance = 0;
    events[i] = xptiMakeEvent(points->names[i], &payload, XPTI_EVENT_ALGORITHM,
                              XPTI_ACTIVITY_ACTIVE, &instance);
    instances[2 * i] = instance;
    semantic_check(score, events[i] && events[i]->unique_id != XPTI_INVALID_UID,
                   "create %s: no event", points->names[i]);
  }
  run_test_team_sync(&test->team);
  for (unsigned i = 0; i < points->count; i++) { /* duplicate: the same event */
    xpti_payload_t payload = points->payloads[i];
    uint64_t instance = 0;
    xpti_trace_event_data_t *again = xptiMakeEvent(points->names[i], &payload,
                                                   XPTI_EVENT_ALGORITHM, XPTI_ACTIVITY_ACTIVE,
                                                   &instance);
    instances[2 * i + 1] = instance;
    semantic_check(score, again && again == events[i], "re-create %s: another event",
                   points->names[i]);
  }
  for (unsigned i = 0; i < points->count; i++) { /* lookup by universal id */
    if (!events[i])
      continue;
    semantic_check(score, xptiFindEvent(events[i]->unique_id) == events[i],
                   "find %s by id %llu", points->names[i],
                   (unsigned long long)events[i]->unique_id);
  }
  for (unsigned i = 0; i < points->count; i++) { /* the payload kept */
    if (!events[i])
      continue;
    const xpti_payload_t *kept = xptiQueryPayload(events[i]);
    const xpti_payload_t *pristine = &points->payloads[i];
    semantic_check(score,
                   kept && kept->name && !strcmp(kept->name, pristine->name) &&
                       kept->source_file && !strcmp(kept->source_file, pristine->source_file) &&
                       kept->line_no == pristine->line_no &&
                       kept->column_no == pristine->column_no,
                   "payload of %s differs", points->names[i]);
    semantic_check(score, xptiQueryPayloadByUID(events[i]->unique_id) == kept,
                   "payload by id of %s differs", points->names[i]);
    xpti_payload_t payload = points->payloads[i];
    semantic_check(score, xptiRegisterPayload(&payload) == events[i]->unique_id,
                   "registered payload of %s has another id", points->names[i]);
  }
}

static bool semantic_trace_points(const run_test_options_t *options, unsigned threads,
                                  semantic_score_t *out) {
  points_test_t test;
  unsigned workers = threads ? threads : 1;
  unsigned count = options->trace_points;
  semantic_score_init(&test.score, options->verbose);
  xptiReset();
  semantic_points_make(&test.points, count, "tp");
  test.events = xcalloc(workers, sizeof *test.events);
  test.instances = xcalloc(workers, sizeof *test.instances);
  for (unsigned w = 0; w < workers; w++) {
    test.events[w] = xcalloc(count, sizeof **test.events);
    test.instances[w] = xcalloc(2 * (size_t)count, sizeof **test.instances);
  }
  run_test_team_run(&test.team, threads, points_worker, &test);

  semantic_score_t *score = &test.score;
  uint64_t *ids = xcalloc(count, sizeof *ids);
  unsigned visits = 2 * workers;
  uint8_t *seen = xcalloc(visits + 1, 1);
  for (unsigned i = 0; i < count; i++) {
    ids[i] = test.events[0][i] ? test.events[0][i]->unique_id : 0;
    for (unsigned w = 1; w < workers; w++)
      semantic_check(score, test.events[w][i] == test.events[0][i],
                     "trace point %u: threads 0 and %u got different events", i, w);
    /* Every visit got its own instance number: exactly 1..visits. */
    memset(seen, 0, visits + 1);
    bool exact = true;
    for (unsigned w = 0; w < workers; w++)
      for (unsigned v = 0; v < 2; v++) {
        uint64_t instance = test.instances[w][2 * i + v];
        if (instance < 1 || instance > visits || seen[instance])
          exact = false;
        else
          seen[instance] = 1;
      }
    semantic_check(score, exact, "trace point %u: instance numbers are not 1..%u", i, visits);
    if (!threads)
      semantic_check(score,
                     test.instances[0][2 * i] == 1 && test.instances[0][2 * i + 1] == 2,
                     "trace point %u: serial instances %llu, %llu (expected 1, 2)", i,
                     (unsigned long long)test.instances[0][2 * i],
                     (unsigned long long)test.instances[0][2 * i + 1]);
  }
  semantic_check(score, all_distinct(ids, count), "distinct trace points share a universal id");
  semantic_check(score,
                 xptiMakeEvent("none", NULL, XPTI_EVENT_ALGORITHM, XPTI_ACTIVITY_ACTIVE, NULL) ==
                     NULL,
                 "an event made from a NULL payload");
  semantic_check(score, xptiFindEvent(XPTI_INVALID_UID) == NULL, "an event for the invalid id");
  free(seen);
  free(ids);
  for (unsigned w = 0; w < workers; w++) {
    free(test.events[w]);
    free(test.instances[w]);
  }
  free(test.events);
  free(test.instances);
  semantic_points_free(&test.points);
  *out = test.score;
  return atomic_load(&out->passed) == atomic_load(&out->checks);
}

/* ---- test 3: notifications ---------------------------------------------- */

typedef struct notify_expectation {
  xpti_trace_event_data_t *event;
  uint64_t instance;
  unsigned index;
} notify_expectation_t;

/* Callbacks can only reach the test through globals: one test at a time. */
static struct {
  atomic_ullong calls_a, calls_b, calls_wrong;
  atomic_uint *per_point; /* calls per trace point */
  unsigned count;
} notify_state;

static __thread const xpti_trace_event_data_t *notify_last_a; /* order check */

static void notify_check(xpti_trace_event_data_t *event, uint64_t instance, const void *data) {
  const notify_expectation_t *expect = data;
  if (!expect || expect->event != event || expect->instance != instance ||
      expect->index >= notify_state.count) {
    atomic_fetch_add(&notify_state.calls_wrong, 1);
    return;
  }
  atomic_fetch_add_explicit(&notify_state.per_point[expect->index], 1, memory_order_relaxed);
}

static void notify_callback_a(uint16_t trace_type, xpti_trace_event_data_t *parent,
                              xpti_trace_event_data_t *event, uint64_t instance,
                              const void *data) {
  (void)trace_type;
  (void)parent;
  atomic_fetch_add_explicit(&notify_state.calls_a, 1, memory_order_relaxed);
  notify_last_a = event;
  notify_check(event, instance, data);
}

/* Registered after a on task_begin: must run after it. */
static void notify_callback_b(uint16_t trace_type, xpti_trace_event_data_t *parent,
                              xpti_trace_event_data_t *event, uint64_t instance,
                              const void *data) {
  (void)trace_type;
  (void)parent;
  atomic_fetch_add_explicit(&notify_state.calls_b, 1, memory_order_relaxed);
  if (notify_last_a != event)
    atomic_fetch_add(&notify_state.calls_wrong, 1);
  notify_check(event, instance, data);
}

typedef struct notify_test {
  run_test_team_t team;
  semantic_score_t score;
  semantic_points_t points;
  uint8_t stream;
  notify_expectation_t **expectations; /* [worker][point] */
} notify_test_t;

static void notify_worker(void *context, unsigned worker) {
  notify_test_t *test = context;
  semantic_score_t *score = &test->score;
  notify_expectation_t *expect = test->expectations[worker];
  run_test_team_sync(&test->team);
  for (unsigned i = 0; i < test->points.count; i++) {
    xpti_payload_t payload = test->points.payloads[i];
    expect[i].index = i;
    expect[i].event = xptiMakeEvent(test->points.names[i], &payload, XPTI_EVENT_ALGORITHM,
                                    XPTI_ACTIVITY_ACTIVE, &expect[i].instance);
    if (!semantic_check(score, expect[i].event != NULL, "no event for %s", test->points.names[i]))
      continue;
    xpti_result_t begin = xptiNotifySubscribers(test->stream, XPTI_TRACE_TASK_BEGIN, NULL,
                                                expect[i].event, expect[i].instance, &expect[i]);
    xpti_result_t end = xptiNotifySubscribers(test->stream, XPTI_TRACE_TASK_END, NULL,
                                              expect[i].event, expect[i].instance, &expect[i]);
    /* No callback for barrier_begin: nobody may be called. */
    xptiNotifySubscribers(test->stream, XPTI_TRACE_BARRIER_BEGIN, NULL, expect[i].event,
                          expect[i].instance, &expect[i]);
    semantic_check(score, begin == XPTI_RESULT_SUCCESS && end == XPTI_RESULT_SUCCESS,
                   "notify %s: result %#x/%#x", test->points.names[i], (unsigned)begin,
                   (unsigned)end);
  }
}

static bool notify_counts_are(semantic_score_t *score, unsigned count, unsigned per_point,
                              unsigned long long a, unsigned long long b, const char *when) {
  unsigned bad = 0;
  for (unsigned i = 0; i < count; i++)
    bad += atomic_load(&notify_state.per_point[i]) != per_point;
  bool ok = true;
  ok &= semantic_check(score, bad == 0, "%s: %u trace points not called exactly %u times", when,
                       bad, per_point);
  ok &= semantic_check(score, atomic_load(&notify_state.calls_a) == a,
                       "%s: callback a called %llu times, expected %llu", when,
                       (unsigned long long)atomic_load(&notify_state.calls_a), a);
  ok &= semantic_check(score, atomic_load(&notify_state.calls_b) == b,
                       "%s: callback b called %llu times, expected %llu", when,
                       (unsigned long long)atomic_load(&notify_state.calls_b), b);
  ok &= semantic_check(score, atomic_load(&notify_state.calls_wrong) == 0,
                       "%s: %llu calls with wrong arguments or order", when,
                       (unsigned long long)atomic_load(&notify_state.calls_wrong));
  return ok;
}

/* Notify every trace point once more, serially, with task_begin. */
static void notify_again(notify_test_t *test) {
  notify_expectation_t *expect = test->expectations[0];
  for (unsigned i = 0; i < test->points.count; i++)
    if (expect[i].event)
      xptiNotifySubscribers(test->stream, XPTI_TRACE_TASK_BEGIN, NULL, expect[i].event,
                            expect[i].instance, &expect[i]);
}

static bool semantic_notifications(const run_test_options_t *options, unsigned threads,
                                   semantic_score_t *out) {
  notify_test_t test;
  unsigned workers = threads ? threads : 1, count = options->trace_points;
  semantic_score_t *score = &test.score;
  semantic_score_init(score, options->verbose);
  xptiReset();
  xptiForceSetTraceEnabled(true);
  semantic_points_make(&test.points, count, "notify");
  char *stream_name = xstrdup_printf("run_test.semantic.%u", run_test_next_generation());
  test.stream = xptiRegisterStream(stream_name);
  free(stream_name);
  atomic_init(&notify_state.calls_a, 0);
  atomic_init(&notify_state.calls_b, 0);
  atomic_init(&notify_state.calls_wrong, 0);
  notify_state.count = count;
  notify_state.per_point = xcalloc(count, sizeof *notify_state.per_point);
  test.expectations = xcalloc(workers, sizeof *test.expectations);
  for (unsigned w = 0; w < workers; w++)
    test.expectations[w] = xcalloc(count, sizeof **test.expectations);

  if (semantic_check(score, test.stream != XPTI_INVALID_STREAM_ID, "stream not registered")) {
    uint8_t s = test.stream;
    semantic_check(score,
                   xptiRegisterCallback(s, XPTI_TRACE_TASK_BEGIN, notify_callback_a) ==
                       XPTI_RESULT_SUCCESS,
                   "register a on task_begin");
    semantic_check(score,
                   xptiRegisterCallback(s, XPTI_TRACE_TASK_BEGIN, notify_callback_b) ==
                       XPTI_RESULT_SUCCESS,
                   "register b on task_begin");
    semantic_check(score,
                   xptiRegisterCallback(s, XPTI_TRACE_TASK_END, notify_callback_a) ==
                       XPTI_RESULT_SUCCESS,
                   "register a on task_end");
    semantic_check(score,
                   xptiRegisterCallback(s, XPTI_TRACE_TASK_BEGIN, notify_callback_a) ==
                       XPTI_RESULT_DUPLICATE,
                   "registering a twice is not DUPLICATE");
    semantic_check(score, xptiCheckTraceEnabled(s, XPTI_TRACE_TASK_BEGIN),
                   "task_begin reported off");
    semantic_check(score, !xptiCheckTraceEnabled(s, XPTI_TRACE_BARRIER_BEGIN),
                   "barrier_begin reported on without a callback");

    run_test_team_run(&test.team, threads, notify_worker, &test);
    /* Per visit: a (begin), b (begin), a (end). */
    unsigned long long visits = (unsigned long long)count * workers;
    notify_counts_are(score, count, 3 * workers, 2 * visits, visits, "after the threads");

    semantic_check(score,
                   xptiUnregisterCallback(s, XPTI_TRACE_TASK_BEGIN, notify_callback_b) ==
                       XPTI_RESULT_SUCCESS,
                   "unregister b");
    notify_again(&test);
    notify_counts_are(score, count, 3 * workers + 1, 2 * visits + count, visits,
                      "after unregistering b");
    semantic_check(score,
                   xptiRegisterCallback(s, XPTI_TRACE_TASK_BEGIN, notify_callback_b) ==
                       XPTI_RESULT_UNDELETE,
                   "re-registering b is not UNDELETE");
    notify_again(&test);
    notify_counts_are(score, count, 3 * workers + 3, 2 * visits + 2 * count, visits + count,
                      "after re-registering b");
    xptiForceSetTraceEnabled(false);
    notify_again(&test);
    xptiForceSetTraceEnabled(true);
    notify_counts_are(score, count, 3 * workers + 3, 2 * visits + 2 * count, visits + count,
                      "with tracing off");
  }
  for (unsigned w = 0; w < workers; w++)
    free(test.expectations[w]);
  free(test.expectations);
  free(notify_state.per_point);
  notify_state.per_point = NULL;
  semantic_points_free(&test.points);
  *out = test.score;
  return atomic_load(&out->passed) == atomic_load(&out->checks);
}

/* ---- driver --------------------------------------------------------------- */

int run_test_semantic(const run_test_options_t *options) {
  static const char *const titles[] = {NULL, "string table", "trace points", "notifications"};
  bool (*const tests[])(const run_test_options_t *, unsigned, semantic_score_t *) = {
      NULL, semantic_strings, semantic_trace_points, semantic_notifications};
  unsigned failed = 0;
  printf("Semantic tests: %u trace points, %u strings\n", options->trace_points,
         SEMANTIC_STRINGS);
  for (unsigned t = 0; t < options->test_id_count; t++) {
    unsigned id = options->test_ids[t];
    for (unsigned n = 0; n < options->thread_count; n++) {
      unsigned threads = options->threads[n];
      semantic_score_t score;
      bool ok = tests[id](options, threads, &score);
      unsigned long long checks = atomic_load(&score.checks),
                         passed = atomic_load(&score.passed);
      double rate = checks ? 100.0 * (double)passed / (double)checks : 0.0;
      char title[64];
      snprintf(title, sizeof title, "Semantic test %u (%s),", id, titles[id]);
      printf("%-33s %-11s %llu/%llu checks passed (%.2f%%) %s\n", title,
             run_test_threads_label(threads), passed, checks, rate, ok && checks ? "PASS" : "FAIL");
      if (options->report)
        printf("report,semantic-%u,%u,pass-rate,%.4f,,\n", id, threads, rate);
      if (!ok || !checks)
        failed++;
    }
  }
  xptiForceSetTraceEnabled(false);
  printf("Semantic tests: %s\n", failed ? "FAILED" : "all passed");
  return failed ? 1 : 0;
}

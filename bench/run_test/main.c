/* run_test: command line, validation, thread team.  The options follow
 * the XPTI document's harness; a malformed or missing option prints one
 * line naming it and why, then the usage, and exits with status 2. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "run_test.h"

#define RUN_TEST_EXIT_USAGE 2

static const char run_test_usage_text[] =
    "usage: run_test --type semantic|performance --trace-points N --test-id LIST\n"
    "                --num-threads LIST [--overhead PERCENT] [--tp-frequency PERCENT]\n"
    "                [--report] [--verbose] [--help]\n"
    "  -y, --type T            semantic: correctness tests 1 strings, 2 trace points,\n"
    "                          3 notifications; performance: 1 data structures,\n"
    "                          2 framework cost and events/s projection (required)\n"
    "  -t, --trace-points N    trace points (semantic test 1 always uses 1000 strings),\n"
    "                          10-100000 (required)\n"
    "  -i, --test-id LIST      tests to run: 1,2,3 or ranges 1:3:1 (required)\n"
    "  -n, --num-threads LIST  thread counts, 0 = serial on the main thread:\n"
    "                          0,1,2,4 or 0:2:1,4:16:4 (required)\n"
    "  -o, --overhead PERCENT  overhead allowed for the events/s projection,\n"
    "                          0.1-15 (default 1)\n"
    "  -f, --tp-frequency P    percent of visits that create a trace point: each\n"
    "                          trace point is visited 100/P times, 0.1-100 (default 10)\n"
    "  -r, --report            also print every result as a CSV line:\n"
    "                          report,<test>,<threads>,<metric>,<value>,<floor>,<ratio>\n"
    "  -v, --verbose           print details: failed checks, each thread's own costs\n"
    "  -h, --help              print this help and exit\n";

static _Noreturn void run_test_usage_error(const char *format, ...) {
  va_list args;
  va_start(args, format);
  fputs("xptrace: run_test: ", stderr);
  vfprintf(stderr, format, args);
  fputc('\n', stderr);
  va_end(args);
  fputs(run_test_usage_text, stderr);
  exit(RUN_TEST_EXIT_USAGE);
}

static bool run_test_parse_uint(const char *text, long min, long max, unsigned *value) {
  char *end = NULL;
  if (!*text || *text == '-' || *text == '+' || *text == ' ')
    return false;
  errno = 0;
  long parsed = strtol(text, &end, 10);
  if (errno || *end || parsed < min || parsed > max)
    return false;
  *value = (unsigned)parsed;
  return true;
}

static bool run_test_parse_double(const char *text, double min, double max, double *value) {
  char *end = NULL;
  if (!*text || *text == ' ')
    return false;
  errno = 0;
  double parsed = strtod(text, &end);
  if (errno || *end || !isfinite(parsed) || parsed < min || parsed > max)
    return false;
  *value = parsed;
  return true;
}

/* "a,b,c" where each item is a number or a range start:end:step. */
static void run_test_parse_list(const char *option, const char *text, unsigned min, unsigned max,
                                unsigned *values, unsigned *count) {
  char buffer[512];
  if (strlen(text) >= sizeof buffer)
    run_test_usage_error("%s: list too long", option);
  strcpy(buffer, text);
  *count = 0;
  if (!*buffer)
    run_test_usage_error("%s: empty list", option);
  char *save = NULL;
  size_t items = 0;
  for (char *item = strtok_r(buffer, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
    items++;
    unsigned start, end, step = 1;
    char *first_colon = strchr(item, ':');
    if (!first_colon) {
      if (!run_test_parse_uint(item, min, max, &start))
        run_test_usage_error("%s: '%s' is not a number in %u-%u", option, item, min, max);
      end = start;
    } else {
      char *second_colon = strchr(first_colon + 1, ':');
      if (!second_colon)
        run_test_usage_error("%s: range '%s' must be start:end:step", option, item);
      *first_colon = *second_colon = '\0';
      if (!run_test_parse_uint(item, min, max, &start))
        run_test_usage_error("%s: range start '%s' is not a number in %u-%u", option, item, min,
                             max);
      if (!run_test_parse_uint(first_colon + 1, min, max, &end))
        run_test_usage_error("%s: range end '%s' is not a number in %u-%u", option,
                             first_colon + 1, min, max);
      if (!run_test_parse_uint(second_colon + 1, 1, UINT_MAX / 2, &step))
        run_test_usage_error("%s: range step '%s' must be a positive number", option,
                             second_colon + 1);
      if (start > end)
        run_test_usage_error("%s: range %u:%u is empty (start > end)", option, start, end);
    }
    for (unsigned v = start; v <= end; v += step) {
      if (*count == RUN_TEST_MAX_LIST)
        run_test_usage_error("%s: more than %d values", option, RUN_TEST_MAX_LIST);
      values[(*count)++] = v;
      if (end - v < step)
        break;
    }
  }
  /* strtok_r skips empty items: ",," or a trailing comma is malformed. */
  if (text[0] == ',' || text[strlen(text) - 1] == ',' || strstr(text, ",,") || items == 0)
    run_test_usage_error("%s: empty item in list '%s'", option, text);
}

int main(int argc, char **argv) {
  static const struct option long_options[] = {
      {"type", required_argument, NULL, 'y'},
      {"trace-points", required_argument, NULL, 't'},
      {"test-id", required_argument, NULL, 'i'},
      {"num-threads", required_argument, NULL, 'n'},
      {"overhead", required_argument, NULL, 'o'},
      {"tp-frequency", required_argument, NULL, 'f'},
      {"f", required_argument, NULL, 'f'}, /* the document spells it --f */
      {"report", no_argument, NULL, 'r'},
      {"verbose", no_argument, NULL, 'v'},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0},
  };
  run_test_options_t options = {.overhead = 1.0, .tp_frequency = 10.0};
  bool have_type = false, have_points = false;
  const char *test_id_text = NULL, *threads_text = NULL;

  opterr = 0; /* our own messages */
  int option;
  while ((option = getopt_long(argc, argv, ":y:t:i:n:o:f:rvh", long_options, NULL)) != -1) {
    switch (option) {
    case 'y':
      if (!strcmp(optarg, "semantic"))
        options.type = RUN_TEST_SEMANTIC;
      else if (!strcmp(optarg, "performance"))
        options.type = RUN_TEST_PERFORMANCE;
      else
        run_test_usage_error("--type: '%s' is neither 'semantic' nor 'performance'", optarg);
      have_type = true;
      break;
    case 't':
      if (!run_test_parse_uint(optarg, 10, 100000, &options.trace_points))
        run_test_usage_error("--trace-points: '%s' is not a number in 10-100000", optarg);
      have_points = true;
      break;
    case 'i':
      test_id_text = optarg;
      break;
    case 'n':
      threads_text = optarg;
      break;
    case 'o':
      if (!run_test_parse_double(optarg, 0.1, 15.0, &options.overhead))
        run_test_usage_error("--overhead: '%s' is not a percentage in 0.1-15", optarg);
      break;
    case 'f':
      if (!run_test_parse_double(optarg, 0.1, 100.0, &options.tp_frequency))
        run_test_usage_error("--tp-frequency: '%s' is not a percentage in 0.1-100", optarg);
      break;
    case 'r':
      options.report = true;
      break;
    case 'v':
      options.verbose = true;
      break;
    case 'h':
      fputs(run_test_usage_text, stdout);
      return 0;
    case ':':
      run_test_usage_error("option '%s' needs a value", argv[optind - 1]);
    default:
      if (optopt)
        run_test_usage_error("unknown option '-%c'", optopt);
      run_test_usage_error("unknown option '%s'", argv[optind - 1]);
    }
  }
  if (optind < argc)
    run_test_usage_error("unexpected argument '%s'", argv[optind]);
  if (!have_type)
    run_test_usage_error("--type is required (semantic or performance)");
  if (!have_points)
    run_test_usage_error("--trace-points is required");
  if (!test_id_text)
    run_test_usage_error("--test-id is required");
  if (!threads_text)
    run_test_usage_error("--num-threads is required");
  unsigned max_test = options.type == RUN_TEST_SEMANTIC ? 3 : 2;
  run_test_parse_list("--test-id", test_id_text, 1, max_test, options.test_ids,
                      &options.test_id_count);
  run_test_parse_list("--num-threads", threads_text, 0, RUN_TEST_MAX_THREADS, options.threads,
                      &options.thread_count);

  return options.type == RUN_TEST_SEMANTIC ? run_test_semantic(&options)
                                           : run_test_performance(&options);
}

/* ---- shared helpers ------------------------------------------------------- */

typedef struct run_test_thread_start {
  run_test_worker_fn worker;
  void *context;
  unsigned index;
} run_test_thread_start_t;

static void *run_test_thread_main(void *argument) {
  run_test_thread_start_t *start = argument;
  start->worker(start->context, start->index);
  return NULL;
}

bool run_test_team_run(run_test_team_t *team, unsigned requested, run_test_worker_fn worker,
                       void *context) {
  team->requested = requested;
  team->workers = requested ? requested : 1;
  if (!requested) {
    worker(context, 0);
    return true;
  }
  pthread_t threads[RUN_TEST_MAX_THREADS];
  run_test_thread_start_t starts[RUN_TEST_MAX_THREADS];
  pthread_barrier_init(&team->barrier, NULL, requested);
  unsigned created = 0;
  for (; created < requested; created++) {
    starts[created] = (run_test_thread_start_t){worker, context, created};
    int error = pthread_create(&threads[created], NULL, run_test_thread_main, &starts[created]);
    if (error) {
      /* The barrier can never open: give up loudly rather than hang. */
      fprintf(stderr, "xptrace: run_test: cannot create thread %u: %s\n", created,
              strerror(error));
      exit(1);
    }
  }
  for (unsigned i = 0; i < created; i++)
    pthread_join(threads[i], NULL);
  pthread_barrier_destroy(&team->barrier);
  return true;
}

void run_test_team_sync(run_test_team_t *team) {
  if (team->requested)
    pthread_barrier_wait(&team->barrier);
}

const char *run_test_threads_label(unsigned requested) {
  static __thread char label[32];
  if (!requested)
    return "serial";
  snprintf(label, sizeof label, "%u thread%s", requested, requested == 1 ? "" : "s");
  return label;
}

unsigned run_test_next_generation(void) {
  static unsigned generation;
  return ++generation;
}

uint64_t run_test_random(uint64_t *state) {
  uint64_t x = *state ? *state : 0x9e3779b97f4a7c15ull;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  *state = x;
  return x * 0x2545f4914f6cdd1dull;
}

void run_test_shuffle(uint32_t *values, uint32_t count, uint64_t seed) {
  uint64_t state = seed * 0x9e3779b97f4a7c15ull + 1;
  for (uint32_t i = count; i > 1; i--) {
    uint32_t j = (uint32_t)(run_test_random(&state) % i);
    uint32_t tmp = values[i - 1];
    values[i - 1] = values[j];
    values[j] = tmp;
  }
}

/* run_test: the XPTI performance and semantic harness (shared parts). */
#ifndef RUN_TEST_H
#define RUN_TEST_H
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#define RUN_TEST_MAX_LIST 64
#define RUN_TEST_MAX_THREADS 256

typedef enum run_test_type { RUN_TEST_SEMANTIC, RUN_TEST_PERFORMANCE } run_test_type_t;

typedef struct run_test_options {
  run_test_type_t type;
  unsigned trace_points;
  unsigned test_ids[RUN_TEST_MAX_LIST];
  unsigned test_id_count;
  unsigned threads[RUN_TEST_MAX_LIST];
  unsigned thread_count;
  double overhead;     /* percent */
  double tp_frequency; /* percent: visits per trace point = 100 / f */
  bool report;
  bool verbose;
} run_test_options_t;

/* Threads of one configuration: 0 means "serial, on the main thread". */
typedef struct run_test_team {
  unsigned requested; /* as given with --num-threads */
  unsigned workers;   /* max(requested, 1) */
  pthread_barrier_t barrier;
} run_test_team_t;

typedef void (*run_test_worker_fn)(void *context, unsigned worker);

/* Run worker(context, i) for every worker; with requested == 0 on the
 * calling thread, otherwise on that many new threads at once.  Returns
 * false (after a message) when threads cannot be created. */
bool run_test_team_run(run_test_team_t *team, unsigned requested, run_test_worker_fn worker,
                       void *context);
/* Every worker of the team waits here: phases start together. */
void run_test_team_sync(run_test_team_t *team);
const char *run_test_threads_label(unsigned requested); /* "serial", "2 threads" */

/* A unique number per configuration, so that every run makes new strings
 * and trace points. */
unsigned run_test_next_generation(void);

uint64_t run_test_random(uint64_t *state); /* xorshift64* */
void run_test_shuffle(uint32_t *values, uint32_t count, uint64_t seed);

int run_test_semantic(const run_test_options_t *options);
int run_test_performance(const run_test_options_t *options);
#endif

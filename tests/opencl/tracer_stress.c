/* Tracer core under concurrency: prologue/epilogue pairing while other
 * threads toggle enablement, destroy waits for callbacks in flight,
 * re-enable always works, create/destroy churn while calls run. */
#include "tracer_fake_api.h"
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

enum { CALLERS = 4, TOGGLERS = 2, TRACERS = 4 };
static int calls_per_thread = 20000;

typedef struct tracer_stats {
  _Atomic long prologues, epilogues;
  _Atomic long unpaired;
} tracer_stats_t;
static tracer_stats_t stats[TRACERS];
static xpt_tracer_t *tracers[TRACERS];
static _Atomic bool stop;

static void pair_pro(void *p, void *r, void *u, void **inst, uint64_t corr) {
  (void)p, (void)r;
  tracer_stats_t *s = u;
  atomic_fetch_add(&s->prologues, 1);
  *inst = (void *)(uintptr_t)corr; /* the epilogue must see this call's mark */
}

static void pair_epi(void *p, void *r, void *u, void **inst, uint64_t corr) {
  (void)p, (void)r;
  tracer_stats_t *s = u;
  if (*inst != (void *)(uintptr_t)corr)
    atomic_fetch_add(&s->unpaired, 1);
  atomic_fetch_add(&s->epilogues, 1);
}

static void *caller(void *arg) {
  (void)arg;
  for (int i = 0; i < calls_per_thread; i++)
    CHECK(fake_call(FAKE_FN_ADD, i) == i + 1);
  return NULL;
}

static void *toggler(void *arg) {
  unsigned seed = (unsigned)(uintptr_t)arg;
  while (!atomic_load(&stop)) {
    int k = 1 + (int)(rand_r(&seed) % (TRACERS - 1)); /* tracer 0 stays on */
    CHECK(xpt_tracer_set_enabled(tracers[k], rand_r(&seed) & 1) == XPT_TRACER_OK);
  }
  return NULL;
}

static void test_pairing(void) {
  for (int k = 0; k < TRACERS; k++) {
    CHECK(xpt_tracer_create(&fake_domain, &stats[k], &tracers[k]) == XPT_TRACER_OK);
    CHECK(xpt_tracer_set_callback(tracers[k], false, FAKE_FN_ADD, pair_pro) == 0);
    CHECK(xpt_tracer_set_callback(tracers[k], true, FAKE_FN_ADD, pair_epi) == 0);
    CHECK(xpt_tracer_set_enabled(tracers[k], true) == 0);
  }
  pthread_t c[CALLERS], t[TOGGLERS];
  for (int i = 0; i < TOGGLERS; i++)
    pthread_create(&t[i], NULL, toggler, (void *)(uintptr_t)(i + 1));
  for (int i = 0; i < CALLERS; i++)
    pthread_create(&c[i], NULL, caller, NULL);
  for (int i = 0; i < CALLERS; i++)
    pthread_join(c[i], NULL);
  atomic_store(&stop, true);
  for (int i = 0; i < TOGGLERS; i++)
    pthread_join(t[i], NULL);
  long total = 0;
  for (int k = 0; k < TRACERS; k++) {
    CHECK(atomic_load(&stats[k].prologues) == atomic_load(&stats[k].epilogues));
    CHECK(atomic_load(&stats[k].unpaired) == 0);
    total += atomic_load(&stats[k].prologues);
  }
  CHECK(atomic_load(&stats[0].prologues) == (long)CALLERS * calls_per_thread);
  /* every list replaced by the toggling was freed once no call pinned it */
  CHECK(xpt_tracer_retired_blocks(&fake_domain) == 0);
  /* re-enable after all that churn always works */
  for (int k = 0; k < TRACERS; k++) {
    CHECK(xpt_tracer_set_enabled(tracers[k], false) == XPT_TRACER_OK);
    CHECK(xpt_tracer_set_enabled(tracers[k], true) == XPT_TRACER_OK);
  }
  long before = atomic_load(&stats[0].epilogues);
  fake_call(FAKE_FN_ADD, 0);
  CHECK(atomic_load(&stats[0].epilogues) == before + 1);
  for (int k = 0; k < TRACERS; k++)
    CHECK(xpt_tracer_destroy(tracers[k]) == XPT_TRACER_OK);
  printf("pairing: %ld traced callbacks paired\n", total);
}

/* destroy-wait: a call is parked inside the prologue; destroy must not
 * return before the epilogue has finished. */
static _Atomic int slow_state; /* 0 idle, 1 in prologue, 2 epilogue done */
static _Atomic bool release_prologue;
static void slow_pro(void *p, void *r, void *u, void **i, uint64_t c) {
  (void)p, (void)r, (void)u, (void)i, (void)c;
  atomic_store(&slow_state, 1);
  while (!atomic_load(&release_prologue))
    usleep(100);
}
static void slow_epi(void *p, void *r, void *u, void **i, uint64_t c) {
  (void)p, (void)r, (void)u, (void)i, (void)c;
  usleep(20000);
  atomic_store(&slow_state, 2);
}
static void *slow_caller(void *arg) {
  (void)arg;
  fake_call(FAKE_FN_IDLE, 0);
  return NULL;
}
static void *releaser(void *arg) {
  (void)arg;
  usleep(20000);
  atomic_store(&release_prologue, true);
  return NULL;
}

static void test_destroy_wait(void) {
  xpt_tracer_t *t;
  CHECK(xpt_tracer_create(&fake_domain, NULL, &t) == XPT_TRACER_OK);
  CHECK(xpt_tracer_set_callback(t, false, FAKE_FN_IDLE, slow_pro) == 0);
  CHECK(xpt_tracer_set_callback(t, true, FAKE_FN_IDLE, slow_epi) == 0);
  CHECK(xpt_tracer_set_enabled(t, true) == 0);
  pthread_t c, r;
  pthread_create(&c, NULL, slow_caller, NULL);
  while (atomic_load(&slow_state) != 1)
    usleep(100);
  pthread_create(&r, NULL, releaser, NULL);
  CHECK(xpt_tracer_destroy(t) == XPT_TRACER_OK);
  CHECK(atomic_load(&slow_state) == 2); /* the epilogue finished first */
  pthread_join(c, NULL);
  pthread_join(r, NULL);
  puts("destroy-wait: ok");
}

/* Churn: tracers created, enabled and destroyed while calls run; ASan and
 * TSan see any use after free or unordered access. */
static _Atomic long churn_calls;
static void count_pro(void *p, void *r, void *u, void **i, uint64_t c) {
  (void)p, (void)r, (void)i, (void)c;
  atomic_fetch_add((_Atomic long *)u, 1);
}
static void *churner(void *arg) {
  (void)arg;
  for (int i = 0; i < 300; i++) {
    xpt_tracer_t *t;
    CHECK(xpt_tracer_create(&fake_domain, (void *)&churn_calls, &t) == 0);
    CHECK(xpt_tracer_set_callback(t, false, FAKE_FN_ADD, count_pro) == 0);
    CHECK(xpt_tracer_set_callback(t, true, FAKE_FN_ADD, count_pro) == 0);
    CHECK(xpt_tracer_set_enabled(t, true) == 0);
    usleep(50);
    CHECK(xpt_tracer_destroy(t) == 0);
  }
  return NULL;
}

static void test_churn(void) {
  atomic_store(&stop, false);
  pthread_t c[CALLERS], ch[2];
  for (int i = 0; i < 2; i++)
    pthread_create(&ch[i], NULL, churner, NULL);
  for (int i = 0; i < CALLERS; i++)
    pthread_create(&c[i], NULL, caller, NULL);
  for (int i = 0; i < CALLERS; i++)
    pthread_join(c[i], NULL);
  for (int i = 0; i < 2; i++)
    pthread_join(ch[i], NULL);
  CHECK(atomic_load(&churn_calls) % 2 == 0); /* prologue and epilogue both counted */
  CHECK(!xpt_tracer_any(&fake_domain));
  CHECK(xpt_tracer_retired_blocks(&fake_domain) == 0);
  printf("churn: %ld callbacks\n", atomic_load(&churn_calls));
}

int main(int argc, char **argv) {
  if (argc > 1)
    calls_per_thread = atoi(argv[1]);
  test_pairing();
  test_destroy_wait();
  test_churn();
  puts("tracer_stress: ok");
  return 0;
}

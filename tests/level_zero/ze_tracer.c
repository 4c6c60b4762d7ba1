/* Document 003's guarantees through the Level Zero entry points (loader,
 * tracing layer, test driver), many threads:
 *   rewrite   a prologue changes an argument, the call sees it; epilogues
 *             get the call's result
 *   nested    a call made inside a callback runs no callback
 *   pairing   8 threads call while another toggles the tracer: every
 *             epilogue has its prologue's instance data, none without
 *   reenable  disable then enable: callbacks run again
 *   refuse    registering on an enabled tracer is refused
 *   reset     zelTracerResetAllCallbacks (looked up in the layer)
 *   self      zelTracerDestroy from the tracer's own callback is refused
 *   inflight  destroy waits for a callback running on another thread
 *   churn     tracers created, enabled, disabled and destroyed while 8
 *             threads call: pairs kept, no callback of a destroyed tracer
 * Usage: ze_tracer [case...] (all by default).  Prints "case: ok" or
 * "case: FAIL (...)"; exit status 1 when any failed. */
#include <dlfcn.h>
#include <level_zero/layers/zel_tracing_api.h>
#include <level_zero/layers/zel_tracing_register_cb.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <time.h>

#include "ze_common.h"

#define THREADS 8

static ze_env_t env;
static int failed;
static const char *current;
static char why[160];

#define EXPECT(cond)                                                                     \
  do {                                                                                   \
    if (!(cond) && !why[0])                                                              \
      snprintf(why, sizeof why, "line %d: %s", __LINE__, #cond);                         \
  } while (0)

static void sleep_us(long us) {
  struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
  nanosleep(&ts, NULL);
}

static zel_tracer_handle_t tracer_new(void *user) {
  zel_tracer_desc_t d = {ZEL_STRUCTURE_TYPE_TRACER_DESC, NULL, user};
  zel_tracer_handle_t t = NULL;
  ZE_CHECK(zelTracerCreate(&d, &t));
  return t;
}

/* ---- per-call pairing on zeKernelSetArgumentValue ---------------------- */
typedef struct tracer_data {
  _Atomic long pro, epi, unpaired, after_death;
  _Atomic bool dead;
  _Atomic ze_result_t last;
  _Atomic long pro_not_success; /* prologues given another result than SUCCESS */
} tracer_data_t;

static _Thread_local uintptr_t call_mark;

static void arg_pro(ze_kernel_set_argument_value_params_t *p, ze_result_t r, void *user,
                    void **inst) {
  tracer_data_t *d = user;
  if (r != ZE_RESULT_SUCCESS)
    atomic_fetch_add(&d->pro_not_success, 1);
  if (atomic_load(&d->dead))
    atomic_fetch_add(&d->after_death, 1);
  atomic_fetch_add(&d->pro, 1);
  *inst = (void *)++call_mark;
  if (*p->pargIndex == 99)
    *p->pargIndex = 0;
}

static void arg_epi(ze_kernel_set_argument_value_params_t *p, ze_result_t r, void *user,
                    void **inst) {
  (void)p;
  tracer_data_t *d = user;
  if (atomic_load(&d->dead))
    atomic_fetch_add(&d->after_death, 1);
  if (*inst != (void *)call_mark)
    atomic_fetch_add(&d->unpaired, 1);
  atomic_fetch_add(&d->epi, 1);
  atomic_store(&d->last, r);
}

static zel_tracer_handle_t arg_tracer(tracer_data_t *d) {
  zel_tracer_handle_t t = tracer_new(d);
  ZE_CHECK(zelTracerKernelSetArgumentValueRegisterCallback(t, ZEL_REGISTER_PROLOGUE, arg_pro));
  ZE_CHECK(zelTracerKernelSetArgumentValueRegisterCallback(t, ZEL_REGISTER_EPILOGUE, arg_epi));
  return t;
}

static _Atomic bool stop;
static _Atomic long calls;
static void *caller(void *arg) {
  (void)arg;
  ze_kernel_handle_t k = ze_env_kernel(&env, "scale"); /* a kernel per thread */
  float s = 2;
  while (!atomic_load(&stop)) {
    for (int i = 0; i < 100; i++)
      ZE_CHECK(zeKernelSetArgumentValue(k, 1, sizeof s, &s));
    atomic_fetch_add(&calls, 100);
    sched_yield(); /* the thread that toggles gets its turn on a busy machine */
  }
  ZE_CHECK(zeKernelDestroy(k));
  return NULL;
}

static pthread_t callers[THREADS];
static void callers_start(void) {
  atomic_store(&stop, false);
  for (int i = 0; i < THREADS; i++)
    pthread_create(&callers[i], NULL, caller, NULL);
}
static void callers_stop(void) {
  atomic_store(&stop, true);
  for (int i = 0; i < THREADS; i++)
    pthread_join(callers[i], NULL);
}

static void case_rewrite(void) {
  tracer_data_t d = {0};
  zel_tracer_handle_t t = arg_tracer(&d);
  ZE_CHECK(zelTracerSetEnabled(t, 1));
  ze_kernel_handle_t k = ze_env_kernel(&env, "scale");
  float s = 2;
  EXPECT(zeKernelSetArgumentValue(k, 99, sizeof s, &s) == ZE_RESULT_SUCCESS);
  EXPECT(d.last == ZE_RESULT_SUCCESS);
  EXPECT(zeKernelSetArgumentValue(k, 7, sizeof s, &s) ==
         ZE_RESULT_ERROR_INVALID_KERNEL_ARGUMENT_INDEX);
  EXPECT(d.last == ZE_RESULT_ERROR_INVALID_KERNEL_ARGUMENT_INDEX);
  EXPECT(d.pro == 2 && d.epi == 2 && d.unpaired == 0);
  EXPECT(d.pro_not_success == 0);
  ZE_CHECK(zeKernelDestroy(k));
  ZE_CHECK(zelTracerSetEnabled(t, 0));
  ZE_CHECK(zelTracerDestroy(t));
}

static _Atomic int nested_depth, nested_max;
static void props_pro(ze_device_get_properties_params_t *p, ze_result_t r, void *u, void **i) {
  (void)p, (void)r, (void)u, (void)i;
  int depth = atomic_fetch_add(&nested_depth, 1) + 1;
  if (depth > atomic_load(&nested_max))
    atomic_store(&nested_max, depth);
  if (depth < 3) { /* a call from inside: must not come back here */
    ze_device_properties_t props;
    memset(&props, 0, sizeof props);
    props.stype = ZE_STRUCTURE_TYPE_DEVICE_PROPERTIES;
    ZE_CHECK(zeDeviceGetProperties(env.device, &props));
  }
  atomic_fetch_sub(&nested_depth, 1);
}

static void case_nested(void) {
  zel_tracer_handle_t t = tracer_new(NULL);
  ZE_CHECK(zelTracerDeviceGetPropertiesRegisterCallback(t, ZEL_REGISTER_PROLOGUE, props_pro));
  ZE_CHECK(zelTracerSetEnabled(t, 1));
  ze_device_properties_t props;
    memset(&props, 0, sizeof props);
    props.stype = ZE_STRUCTURE_TYPE_DEVICE_PROPERTIES;
  ZE_CHECK(zeDeviceGetProperties(env.device, &props));
  EXPECT(nested_max == 1);
  ZE_CHECK(zelTracerSetEnabled(t, 0));
  ZE_CHECK(zelTracerDestroy(t));
}

static void case_pairing(void) {
  tracer_data_t d = {0};
  zel_tracer_handle_t t = arg_tracer(&d);
  callers_start();
  long refused = 0;
  ze_result_t refusal = ZE_RESULT_SUCCESS;
  /* At least 4000 toggles and 20000 calls (10 s at most): on a busy
   * machine the callers may not have started when 4000 toggles are done. */
  long i = 0;
  time_t end = time(NULL) + 10;
  for (; (i < 4000 || atomic_load(&calls) < 20000) && time(NULL) < end; i++) {
    ze_result_t rc = zelTracerSetEnabled(t, i & 1);
    if (rc != ZE_RESULT_SUCCESS)
      refused++, refusal = rc;
  }
  /* The toggles' enabled windows are short: under load every call may
   * miss them. End with one window long enough for calls to pass through
   * it, so that "some calls were traced" is a fact, not luck. */
  if (zelTracerSetEnabled(t, 1) != ZE_RESULT_SUCCESS)
    refused++;
  long seen = atomic_load(&calls);
  for (time_t stop_at = time(NULL) + 30; atomic_load(&calls) < seen + 2 * 100 * THREADS && time(NULL) < stop_at;)
    sleep_us(1000);
  callers_stop();
  if (refused)
    printf("  %ld of %ld toggles refused (0x%x)\n", refused, i, (unsigned)refusal);
  if (d.pro == 0)
    printf("  no prologue seen: %ld toggles, %ld calls\n", i, (long)atomic_load(&calls));
  EXPECT(refused == 0);
  EXPECT(d.pro > 0);
  EXPECT(d.pro == d.epi);
  EXPECT(d.unpaired == 0);
  (void)zelTracerSetEnabled(t, 0); /* Debian's layer: may be refused, see above */
  (void)zelTracerDestroy(t);
  printf("  %ld paired calls\n", (long)d.epi);
}

static void case_reenable(void) {
  tracer_data_t d = {0};
  zel_tracer_handle_t t = arg_tracer(&d);
  ze_kernel_handle_t k = ze_env_kernel(&env, "scale");
  float s = 2;
  ZE_CHECK(zelTracerSetEnabled(t, 1));
  ZE_CHECK(zeKernelSetArgumentValue(k, 1, sizeof s, &s));
  ZE_CHECK(zelTracerSetEnabled(t, 0));
  ZE_CHECK(zeKernelSetArgumentValue(k, 1, sizeof s, &s));
  EXPECT(d.epi == 1);
  ZE_CHECK(zelTracerSetEnabled(t, 1));
  ZE_CHECK(zeKernelSetArgumentValue(k, 1, sizeof s, &s));
  EXPECT(d.pro == 2 && d.epi == 2);
  ZE_CHECK(zelTracerSetEnabled(t, 0));
  ZE_CHECK(zelTracerDestroy(t));
  ZE_CHECK(zeKernelDestroy(k));
}

static void case_refuse(void) {
  tracer_data_t d = {0};
  zel_tracer_handle_t t = arg_tracer(&d);
  ZE_CHECK(zelTracerSetEnabled(t, 1));
  EXPECT(zelTracerKernelSetArgumentValueRegisterCallback(t, ZEL_REGISTER_PROLOGUE, NULL) !=
         ZE_RESULT_SUCCESS);
  zel_core_callbacks_t none;
  memset(&none, 0, sizeof none);
  EXPECT(zelTracerSetPrologues(t, &none) != ZE_RESULT_SUCCESS);
  ze_kernel_handle_t k = ze_env_kernel(&env, "scale");
  float s = 2;
  ZE_CHECK(zeKernelSetArgumentValue(k, 1, sizeof s, &s));
  EXPECT(d.pro == 1 && d.epi == 1); /* still registered */
  ZE_CHECK(zelTracerSetEnabled(t, 0));
  ZE_CHECK(zelTracerDestroy(t));
  ZE_CHECK(zeKernelDestroy(k));
}

static void case_reset(void) {
  void *layer = dlopen("libze_tracing_layer.so.1", RTLD_NOW | RTLD_NOLOAD);
  ze_result_t (*reset)(zel_tracer_handle_t) =
      layer ? (ze_result_t(*)(zel_tracer_handle_t))dlsym(layer, "zelTracerResetAllCallbacks") : NULL;
  if (!reset) {
    snprintf(why, sizeof why, "the layer exports no zelTracerResetAllCallbacks");
    if (layer)
      dlclose(layer);
    return;
  }
  tracer_data_t d = {0};
  zel_tracer_handle_t t = arg_tracer(&d);
  ZE_CHECK(zelTracerSetEnabled(t, 1));
  EXPECT(reset(t) != ZE_RESULT_SUCCESS); /* enabled: refused */
  ZE_CHECK(zelTracerSetEnabled(t, 0));
  EXPECT(reset(t) == ZE_RESULT_SUCCESS);
  ZE_CHECK(zelTracerSetEnabled(t, 1));
  ze_kernel_handle_t k = ze_env_kernel(&env, "scale");
  float s = 2;
  ZE_CHECK(zeKernelSetArgumentValue(k, 1, sizeof s, &s));
  EXPECT(d.pro == 0 && d.epi == 0);
  ZE_CHECK(zelTracerSetEnabled(t, 0));
  ZE_CHECK(zelTracerDestroy(t));
  ZE_CHECK(zeKernelDestroy(k));
  dlclose(layer);
}

static zel_tracer_handle_t self_tracer;
static ze_result_t self_rc = ZE_RESULT_SUCCESS;
static void sync_pro(ze_command_queue_synchronize_params_t *p, ze_result_t r, void *u, void **i) {
  (void)p, (void)r, (void)u, (void)i;
  self_rc = zelTracerDestroy(self_tracer);
}

static void case_self(void) {
  self_tracer = tracer_new(NULL);
  ZE_CHECK(zelTracerCommandQueueSynchronizeRegisterCallback(self_tracer, ZEL_REGISTER_PROLOGUE,
                                                            sync_pro));
  ZE_CHECK(zelTracerSetEnabled(self_tracer, 1));
  ze_command_queue_handle_t q = ze_env_queue(&env);
  ZE_CHECK(zeCommandQueueSynchronize(q, UINT64_MAX));
  EXPECT(self_rc != ZE_RESULT_SUCCESS);
  printf("  refused with 0x%x\n", (unsigned)self_rc);
  if (self_rc != ZE_RESULT_SUCCESS) {
    ZE_CHECK(zelTracerSetEnabled(self_tracer, 0));
    ZE_CHECK(zelTracerDestroy(self_tracer));
  }
  ZE_CHECK(zeCommandQueueDestroy(q));
}

static _Atomic int slow_state;
static void slow_pro(ze_event_query_status_params_t *p, ze_result_t r, void *u, void **i) {
  (void)p, (void)r, (void)u, (void)i;
  atomic_store(&slow_state, 1);
  sleep_us(30000);
}
static void slow_epi(ze_event_query_status_params_t *p, ze_result_t r, void *u, void **i) {
  (void)p, (void)r, (void)u, (void)i;
  sleep_us(10000);
  atomic_store(&slow_state, 2);
}
static ze_event_handle_t slow_event;
static void *slow_caller(void *arg) {
  (void)arg;
  (void)zeEventQueryStatus(slow_event);
  return NULL;
}

static void case_inflight(void) {
  ze_event_pool_desc_t pd = {ZE_STRUCTURE_TYPE_EVENT_POOL_DESC, NULL, 0, 1};
  ze_event_pool_handle_t pool;
  ZE_CHECK(zeEventPoolCreate(env.context, &pd, 1, &env.device, &pool));
  ze_event_desc_t ed = {ZE_STRUCTURE_TYPE_EVENT_DESC, NULL, 0, 0, 0};
  ZE_CHECK(zeEventCreate(pool, &ed, &slow_event));
  zel_tracer_handle_t t = tracer_new(NULL);
  ZE_CHECK(zelTracerEventQueryStatusRegisterCallback(t, ZEL_REGISTER_PROLOGUE, slow_pro));
  ZE_CHECK(zelTracerEventQueryStatusRegisterCallback(t, ZEL_REGISTER_EPILOGUE, slow_epi));
  ZE_CHECK(zelTracerSetEnabled(t, 1));
  pthread_t s;
  pthread_create(&s, NULL, slow_caller, NULL);
  while (atomic_load(&slow_state) == 0)
    sleep_us(100);
  ZE_CHECK(zelTracerSetEnabled(t, 0));
  ZE_CHECK(zelTracerDestroy(t));
  EXPECT(atomic_load(&slow_state) == 2);
  pthread_join(s, NULL);
  ZE_CHECK(zeEventDestroy(slow_event));
  ZE_CHECK(zeEventPoolDestroy(pool));
}

static void case_churn(void) {
  enum { ROUNDS = 200 };
  static tracer_data_t d[ROUNDS]; /* kept: a late callback would read it */
  memset(d, 0, sizeof d);
  callers_start();
  long pro = 0, epi = 0, unpaired = 0;
  for (int i = 0; i < ROUNDS; i++) {
    zel_tracer_handle_t t = arg_tracer(&d[i]);
    ZE_CHECK(zelTracerSetEnabled(t, 1));
    sleep_us(100);
    ZE_CHECK(zelTracerSetEnabled(t, 0));
    ZE_CHECK(zelTracerDestroy(t));
    atomic_store(&d[i].dead, true);
  }
  callers_stop();
  long late = 0;
  for (int i = 0; i < ROUNDS; i++) {
    pro += d[i].pro, epi += d[i].epi, unpaired += d[i].unpaired;
    late += d[i].after_death;
  }
  EXPECT(pro == epi);
  EXPECT(unpaired == 0);
  EXPECT(late == 0);
  printf("  %ld paired calls over %d tracers\n", epi, ROUNDS);
}

static const struct {
  const char *name;
  void (*run)(void);
} cases[] = {{"rewrite", case_rewrite}, {"nested", case_nested},     {"pairing", case_pairing},
             {"reenable", case_reenable}, {"refuse", case_refuse},   {"reset", case_reset},
             {"self", case_self},         {"inflight", case_inflight}, {"churn", case_churn}};

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  ze_env_open(&env);
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    bool chosen = argc < 2;
    for (int a = 1; a < argc; a++)
      chosen |= !strcmp(argv[a], cases[c].name);
    if (!chosen)
      continue;
    current = cases[c].name;
    why[0] = 0;
    cases[c].run();
    printf("%s: %s%s%s\n", current, why[0] ? "FAIL (" : "ok", why, why[0] ? ")" : "");
    failed |= why[0] != 0;
  }
  ze_env_close(&env);
  return failed;
}

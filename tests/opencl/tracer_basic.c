/* Tracer core semantics: order, instance data, correlation ids, limits,
 * nesting, self-destroy, re-enable, reset, modification while enabled. */
#include "tracer_fake_api.h"
#include <string.h>

static char order_log[256];
static size_t order_len;
static uint64_t last_pro_corr, last_epi_corr;

static void log_char(char c) {
  if (order_len + 1 < sizeof(order_log))
    order_log[order_len++] = c;
}

static void pro(void *params, void *result, void *user, void **inst, uint64_t corr) {
  CHECK(result == NULL);
  CHECK(*inst == NULL);
  *inst = user;
  last_pro_corr = corr;
  log_char(*(char *)user);
  *((fake_params_t *)params)->x += 10; /* a prologue may change arguments */
}

static void epi(void *params, void *result, void *user, void **inst, uint64_t corr) {
  (void)params;
  CHECK(*inst == user);
  CHECK(result != NULL);
  last_epi_corr = corr;
  log_char((char)(*(char *)user - 'a' + 'A'));
}

static xpt_tracer_t *self_tracer;
static int self_destroy_rc = 1;
static void self_destroy_pro(void *p, void *r, void *u, void **i, uint64_t c) {
  (void)p, (void)r, (void)u, (void)i, (void)c;
  self_destroy_rc = xpt_tracer_destroy(self_tracer);
}

static int nested_result;
static int nest_calls;
static void nest_pro(void *p, void *r, void *u, void **i, uint64_t c) {
  (void)p, (void)r, (void)u, (void)i, (void)c;
  nest_calls++;
  nested_result = fake_call(FAKE_FN_ADD, 1); /* must not be traced */
}

static int counted;
static void count_pro(void *p, void *r, void *u, void **i, uint64_t c) {
  (void)p, (void)r, (void)u, (void)i, (void)c;
  counted++;
}
static int nest_body(int x) { return fake_call(FAKE_FN_ADD, x); }
static xpt_tracer_t *nest_tracer;
static int in_call_destroy_rc = 1;
static int destroy_in_call(int x) {
  in_call_destroy_rc = xpt_tracer_destroy(nest_tracer);
  return x;
}

int main(void) {
  static char names[3] = {'a', 'b', 'c'};
  xpt_tracer_t *t[3];
  for (int i = 0; i < 3; i++) {
    CHECK(xpt_tracer_create(&fake_domain, &names[i], &t[i]) == XPT_TRACER_OK);
    CHECK(xpt_tracer_set_callback(t[i], false, FAKE_FN_ADD, pro) == XPT_TRACER_OK);
    CHECK(xpt_tracer_set_callback(t[i], true, FAKE_FN_ADD, epi) == XPT_TRACER_OK);
  }
  /* created disabled: nothing runs */
  CHECK(fake_call(FAKE_FN_ADD, 1) == 2);
  CHECK(order_len == 0);
  for (int i = 0; i < 3; i++)
    CHECK(xpt_tracer_set_enabled(t[i], true) == XPT_TRACER_OK);
  CHECK(fake_call(FAKE_FN_ADD, 1) == 32); /* three prologues added 10 each */
  order_log[order_len] = 0;
  CHECK(strcmp(order_log, "abcCBA") == 0);
  CHECK(last_pro_corr != 0 && last_pro_corr == last_epi_corr);
  uint64_t first = last_pro_corr;
  fake_call(FAKE_FN_ADD, 1);
  CHECK(last_pro_corr != first);
  /* untraced function: no callbacks */
  order_len = 0;
  CHECK(fake_call(FAKE_FN_NEG, 1) == -1);
  CHECK(order_len == 0);

  /* changing callbacks while enabled is refused; disabled it works */
  CHECK(xpt_tracer_set_callback(t[0], false, FAKE_FN_NEG, pro) == XPT_TRACER_ENABLED);
  CHECK(xpt_tracer_reset(t[0]) == XPT_TRACER_ENABLED);
  CHECK(xpt_tracer_set_callback(t[0], false, FAKE_FN_COUNT, pro) == XPT_TRACER_INVALID_ARGUMENT);
  CHECK(xpt_tracer_set_enabled(t[1], false) == XPT_TRACER_OK);
  CHECK(xpt_tracer_reset(t[1]) == XPT_TRACER_OK);
  CHECK(xpt_tracer_set_enabled(t[1], true) == XPT_TRACER_OK); /* re-enable works */
  order_len = 0;
  CHECK(fake_call(FAKE_FN_ADD, 1) == 22);
  order_log[order_len] = 0;
  CHECK(strcmp(order_log, "acCA") == 0);

  /* set_all from a table */
  xpt_tracer_fn_t table[FAKE_FN_COUNT] = {NULL, pro, NULL, NULL};
  CHECK(xpt_tracer_set_enabled(t[1], false) == XPT_TRACER_OK);
  CHECK(xpt_tracer_set_all(t[1], false, table) == XPT_TRACER_OK);
  table[FAKE_FN_NEG] = epi;
  CHECK(xpt_tracer_set_all(t[1], true, table) == XPT_TRACER_OK);
  CHECK(xpt_tracer_set_enabled(t[1], true) == XPT_TRACER_OK);
  order_len = 0;
  CHECK(fake_call(FAKE_FN_NEG, 1) == -11);
  order_log[order_len] = 0;
  CHECK(strcmp(order_log, "bB") == 0);

  for (int i = 0; i < 3; i++) {
    CHECK(xpt_tracer_set_enabled(t[i], false) == XPT_TRACER_OK);
    CHECK(xpt_tracer_destroy(t[i]) == XPT_TRACER_OK);
  }
  CHECK(!xpt_tracer_any(&fake_domain));

  /* at least 16 tracers; the limit is reported, not crashed into */
  xpt_tracer_t *many[XPT_TRACER_MAX + 1];
  int made = 0;
  while (made <= XPT_TRACER_MAX && xpt_tracer_create(&fake_domain, NULL, &many[made]) == XPT_TRACER_OK)
    made++;
  CHECK(made == XPT_TRACER_MAX && made >= 16);
  xpt_tracer_t *extra;
  CHECK(xpt_tracer_create(&fake_domain, NULL, &extra) == XPT_TRACER_OUT_OF_RESOURCES);
  for (int i = 0; i < made; i++)
    CHECK(xpt_tracer_destroy(many[i]) == XPT_TRACER_OK);

  /* API calls made from inside a callback are not traced */
  xpt_tracer_t *nest;
  CHECK(xpt_tracer_create(&fake_domain, NULL, &nest) == XPT_TRACER_OK);
  CHECK(xpt_tracer_set_callback(nest, false, FAKE_FN_NEST, nest_pro) == XPT_TRACER_OK);
  CHECK(xpt_tracer_set_callback(nest, false, FAKE_FN_ADD, nest_pro) == XPT_TRACER_OK);
  CHECK(xpt_tracer_set_enabled(nest, true) == XPT_TRACER_OK);
  fake_call(FAKE_FN_NEST, 0);
  CHECK(nest_calls == 1 && nested_result == 2);
  CHECK(!xpt_tracer_in_callback());
  CHECK(xpt_tracer_destroy(nest) == XPT_TRACER_OK);

  /* a call made inside a traced call, outside any callback (the API
   * calling itself, an XPTI subscriber calling it), runs no tracer either:
   * one pin per thread */
  CHECK(xpt_tracer_create(&fake_domain, NULL, &nest) == XPT_TRACER_OK);
  CHECK(xpt_tracer_set_callback(nest, false, FAKE_FN_NEST, count_pro) == XPT_TRACER_OK);
  CHECK(xpt_tracer_set_callback(nest, true, FAKE_FN_NEST, count_pro) == XPT_TRACER_OK);
  CHECK(xpt_tracer_set_callback(nest, false, FAKE_FN_ADD, count_pro) == XPT_TRACER_OK);
  CHECK(xpt_tracer_set_enabled(nest, true) == XPT_TRACER_OK);
  fake_nest_body = nest_body;
  CHECK(fake_call(FAKE_FN_NEST, 5) == 6);
  CHECK(counted == 2); /* NEST's prologue and epilogue, not ADD's */
  CHECK(fake_call(FAKE_FN_ADD, 5) == 6);
  CHECK(counted == 3); /* ADD outside is traced */
  /* destroying a tracer of the call in flight from there would wait for
   * itself: refused too */
  nest_tracer = nest;
  fake_nest_body = destroy_in_call;
  CHECK(fake_call(FAKE_FN_NEST, 5) == 5);
  CHECK(in_call_destroy_rc == XPT_TRACER_IN_CALLBACK);
  fake_nest_body = NULL;
  CHECK(xpt_tracer_destroy(nest) == XPT_TRACER_OK);

  /* destroy from inside its own callback is an error, not a deadlock */
  CHECK(xpt_tracer_create(&fake_domain, NULL, &self_tracer) == XPT_TRACER_OK);
  CHECK(xpt_tracer_set_callback(self_tracer, false, FAKE_FN_IDLE, self_destroy_pro) == XPT_TRACER_OK);
  CHECK(xpt_tracer_set_enabled(self_tracer, true) == XPT_TRACER_OK);
  fake_call(FAKE_FN_IDLE, 0);
  CHECK(self_destroy_rc == XPT_TRACER_IN_CALLBACK);
  CHECK(xpt_tracer_destroy(self_tracer) == XPT_TRACER_OK);

  CHECK(xpt_tracer_create(NULL, NULL, &extra) == XPT_TRACER_INVALID_ARGUMENT);
  CHECK(xpt_tracer_destroy(NULL) == XPT_TRACER_INVALID_ARGUMENT);
  puts("tracer_basic: ok");
  return 0;
}

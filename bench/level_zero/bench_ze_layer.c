/* Per-call cost of zeCommandListAppendMemoryCopy through Debian's Level
 * Zero loader on the CPU test driver: the loader alone, then with the
 * tracing layer loaded (ZE_ENABLE_TRACING_LAYER=1) and 0, 1 and 4 tracers
 * enabled (empty prologue and epilogue on that function), for Debian's
 * libze_tracing_layer.so.1 and for ours (selected by LD_LIBRARY_PATH), in
 * one run.  Each configuration is a child process; the configurations
 * take turns (rounds), each child reports the median of its batches, the
 * table the median over rounds.
 *
 *   bench_ze_layer DRIVER.so OUR_LAYER_DIR [repetitions [rounds]] */
#include "bench_floors.h"
#include <level_zero/layers/zel_tracing_api.h>
#include <level_zero/layers/zel_tracing_register_cb.h>
#include <level_zero/ze_api.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BATCH 1000
#define BATCHES 100

static ze_command_list_handle_t list;
static ze_context_handle_t context;
static char src[64], dst[64];

static double measure(int reps) {
  double v[64];
  if (reps > 64)
    reps = 64;
  for (int r = 0; r < reps; r++) {
    uint64_t total = 0;
    for (int b = 0; b < BATCHES; b++) {
      uint64_t t0 = bench_now_ns();
      for (int i = 0; i < BATCH; i++)
        bench_sink += (uint64_t)zeCommandListAppendMemoryCopy(list, dst, src, sizeof src, NULL,
                                                              0, NULL);
      total += bench_now_ns() - t0;
      zeCommandListReset(list); /* untimed: keeps the list small */
    }
    v[r] = (double)total / (BATCH * BATCHES);
  }
  return bench_median(v, (size_t)reps);
}

static void empty_cb(ze_command_list_append_memory_copy_params_t *p, ze_result_t r, void *u,
                     void **i) {
  (void)p, (void)r, (void)u, (void)i;
}

static int setup(void) {
  ze_driver_handle_t driver;
  ze_device_handle_t device;
  uint32_t n = 1;
  if (zeInit(0) != ZE_RESULT_SUCCESS || zeDriverGet(&n, &driver) != ZE_RESULT_SUCCESS)
    return -1;
  n = 1;
  ze_context_desc_t cd = {ZE_STRUCTURE_TYPE_CONTEXT_DESC, NULL, 0};
  ze_command_list_desc_t ld = {ZE_STRUCTURE_TYPE_COMMAND_LIST_DESC, NULL, 0, 0};
  if (zeDeviceGet(driver, &n, &device) != ZE_RESULT_SUCCESS ||
      zeContextCreate(driver, &cd, &context) != ZE_RESULT_SUCCESS ||
      zeCommandListCreate(context, device, &ld, &list) != ZE_RESULT_SUCCESS)
    return -1;
  return 0;
}

/* Child: the loader alone (one number) or the layer with 0, 1, 4 tracers. */
static int child(bool layer, int reps) {
  if (setup() != 0) {
    fprintf(stderr, "xptrace: no Level Zero driver (ZE_ENABLE_ALT_DRIVERS)\n");
    return 77;
  }
  printf("%.3f\n", measure(reps));
  zel_tracer_handle_t tracers[4];
  int made = 0, rc = 0;
  zel_tracer_desc_t desc = {ZEL_STRUCTURE_TYPE_TRACER_DESC, NULL, NULL};
  for (int t = 0; layer && t < 4; t++) {
    zel_tracer_handle_t tr;
    if (zelTracerCreate(&desc, &tr) != ZE_RESULT_SUCCESS) {
      rc = 1;
      break;
    }
    tracers[made++] = tr;
    if (zelTracerCommandListAppendMemoryCopyRegisterCallback(tr, ZEL_REGISTER_PROLOGUE,
                                                             empty_cb) != ZE_RESULT_SUCCESS ||
        zelTracerCommandListAppendMemoryCopyRegisterCallback(tr, ZEL_REGISTER_EPILOGUE,
                                                             empty_cb) != ZE_RESULT_SUCCESS ||
        zelTracerSetEnabled(tr, 1) != ZE_RESULT_SUCCESS) {
      rc = 1;
      break;
    }
    if (t == 0 || t == 3)
      printf("%.3f\n", measure(reps));
  }
  for (int t = 0; t < made; t++) {
    (void)zelTracerSetEnabled(tracers[t], 0);
    (void)zelTracerDestroy(tracers[t]);
  }
  zeCommandListDestroy(list);
  zeContextDestroy(context);
  return rc;
}

enum { LOADER, DEBIAN, OURS };
static int run_child(const char *self, const char *driver, const char *ours, int which, int reps,
                     double *out) {
  char cmd[8192];
  const char *env = which == LOADER ? "env -u ZE_ENABLE_TRACING_LAYER"
                                    : "env ZE_ENABLE_TRACING_LAYER=1";
  snprintf(cmd, sizeof cmd, "%s ZE_ENABLE_ALT_DRIVERS='%s' LD_LIBRARY_PATH='%s' '%s' --child %d %d",
           env, driver, which == OURS ? ours : "", self, which != LOADER, reps);
  FILE *p = popen(cmd, "r");
  if (!p)
    return -1;
  int want = which == LOADER ? 1 : 3, got = 0;
  while (got < want && fscanf(p, "%lf", &out[got]) == 1)
    got++;
  int rc = pclose(p);
  return got == want && rc == 0 ? 0 : -1;
}

int main(int argc, char **argv) {
  if (argc > 3 && !strcmp(argv[1], "--child"))
    return child(atoi(argv[2]) != 0, atoi(argv[3]));
  if (argc < 3) {
    fprintf(stderr, "usage: %s DRIVER.so OUR_LAYER_DIR [repetitions [rounds]]\n", argv[0]);
    return 2;
  }
  int reps = argc > 3 ? atoi(argv[3]) : 7;
  int rounds = argc > 4 ? atoi(argv[4]) : 3;
  if (rounds < 1 || rounds > 16)
    rounds = 3;
  bench_floors_t floors;
  bench_floors_measure(&floors, reps);
  bench_floors_print(stdout, &floors);
  double loader[16], debian[3][16], ours[3][16];
  for (int r = 0; r < rounds; r++) {
    double d[3], o[3];
    if (run_child(argv[0], argv[1], argv[2], LOADER, reps, &loader[r]) ||
        run_child(argv[0], argv[1], argv[2], DEBIAN, reps, d) ||
        run_child(argv[0], argv[1], argv[2], OURS, reps, o)) {
      fprintf(stderr, "xptrace: Level Zero child run failed\n");
      return 77;
    }
    for (int k = 0; k < 3; k++)
      debian[k][r] = d[k], ours[k][r] = o[k];
  }
  double base = bench_median(loader, (size_t)rounds);
  printf("zeCommandListAppendMemoryCopy per call (median of %d rounds of %d x %d calls):\n",
         rounds, reps, BATCH * BATCHES);
  printf("  %-28s %8.2f ns\n", "loader + driver, no layer", base);
  const char *names[3] = {"layer, no tracer", "layer, 1 tracer", "layer, 4 tracers"};
  printf("  %-28s %12s %12s %10s\n", "", "Debian's", "ours", "ours/Deb.");
  for (int k = 0; k < 3; k++) {
    double dm = bench_median(debian[k], (size_t)rounds) - base;
    double om = bench_median(ours[k], (size_t)rounds) - base;
    printf("  %-28s %+9.2f ns %+9.2f ns %10.3f\n", names[k], dm, om, dm > 0 ? om / dm : 0.0);
  }
  printf("targets: ours <= 1/5 of Debian's at 1 and 4 tracers; <= 5 ns with no tracer\n");
  return 0;
}

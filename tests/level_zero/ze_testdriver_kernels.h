/* The test driver's kernels: C functions looked up by name (a module's
 * binary is ignored).  A kernel gets its arguments (each the bytes given
 * to zeKernelSetArgumentValue) and the number of work items (group count
 * times group size). */
#ifndef ZE_TESTDRIVER_KERNELS_H
#define ZE_TESTDRIVER_KERNELS_H

typedef void (*td_kernel_fn)(void *const *args, uint64_t items);

static void k_vadd(void *const *a, uint64_t n) { /* c = a + b */
  float *c = *(float **)a[0];
  const float *x = *(float **)a[1], *y = *(float **)a[2];
  for (uint64_t i = 0; i < n; i++)
    c[i] = x[i] + y[i];
}
static void k_scale(void *const *a, uint64_t n) { /* x *= s */
  float *x = *(float **)a[0];
  float s = *(float *)a[1];
  for (uint64_t i = 0; i < n; i++)
    x[i] *= s;
}
static void k_spin(void *const *a, uint64_t n) { /* busy for arg0 ns per item */
  uint64_t ns = *(uint64_t *)a[0] * n, end = td_now() + ns;
  while (td_now() < end) {
  }
}
static void k_nop(void *const *a, uint64_t n) { (void)a, (void)n; }

static const struct {
  const char *name;
  td_kernel_fn fn;
  uint32_t nargs;
} td_kernels[] = {
    {"vadd", k_vadd, 3}, {"scale", k_scale, 2}, {"spin", k_spin, 1}, {"nop", k_nop, 0}};
#define TD_NKERNELS (sizeof(td_kernels) / sizeof(td_kernels[0]))

#endif

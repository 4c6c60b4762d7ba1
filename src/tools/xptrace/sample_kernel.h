/* Names of kernel code addresses for the perf method's kernel frames,
 * from /proc/kallsyms (read once, from ksym_preload or the first ask). */
#ifndef XPTRACE_SAMPLE_KERNEL_H
#define XPTRACE_SAMPLE_KERNEL_H

#include <stdbool.h>
#include <stdint.h>

/* Kernel addresses of x86-64 and arm64 are in the upper half. */
static inline bool ksym_is_kernel(uint64_t addr) { return addr >= 0xffff800000000000ull; }

/* "function_[k]" (the suffix flame graph tools color as kernel), or
 * "[kernel]" when kallsyms hides addresses (kernel.kptr_restrict); the
 * string lives until the program ends: one pointer per function. */
const char *ksym_name(uint64_t addr);
/* Start reading the names in the background (sampling kernel time). */
void ksym_preload(void);

#endif /* XPTRACE_SAMPLE_KERNEL_H */

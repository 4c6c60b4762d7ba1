/* DWARF unwinding of the user stacks the kernel copied into samples
 * (sample_perf_unwind.c, libdwfl). */
#ifndef XPTRACE_SAMPLE_PERF_UNWIND_H
#define XPTRACE_SAMPLE_PERF_UNWIND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Registers a sample carries (PERF_SAMPLE_REGS_USER with UNW_REGS_MASK),
 * in perf's order: AX BX CX DX SI DI BP SP IP R8..R15. */
#define UNW_NREGS 17
#define UNW_REGS_MASK (0x1ffull | (0xffull << 16))

typedef struct unw unw_t;
typedef enum unw_result {
  UNW_COMPLETE,  /* down to the thread's first frame */
  UNW_TRUNCATED, /* more frames than asked for */
  UNW_CUT,       /* stopped early: stack copy too small, no unwind info */
} unw_result_t;

unw_t *unw_new(void);
void unw_free(unw_t *u);
/* The live mappings of each process, as the kernel reports them. */
void unw_mapping(unw_t *u, pid_t pid, uint64_t start, uint64_t end, uint64_t pgoff, const char *path);
void unw_exec(unw_t *u, pid_t pid);
void unw_fork(unw_t *u, pid_t parent, pid_t child);
void unw_exit(unw_t *u, pid_t pid);
/* The code addresses of a sample's stack, innermost first (pc[0]: the
 * interrupted instruction); returns how many (at least 1 when max > 0). */
size_t unw_stack(unw_t *u, pid_t pid, pid_t tid, const uint64_t regs[UNW_NREGS], const uint8_t *stack,
                 size_t stack_len, uint64_t *pc, size_t max, unw_result_t *res);

#endif /* XPTRACE_SAMPLE_PERF_UNWIND_H */

/* xptrace function hooks — state shared by the parts of
 * libxptrace_functions.so (all hidden). */
#ifndef XPTRACE_FN_INTERNAL_H
#define XPTRACE_FN_INTERNAL_H

#include <libelf.h>
#include <regex.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <xpti/xpti_trace_framework.h>

#include "fn_config.h"
#include "xpt_rec_writer.h"

#define FN_HIDDEN __attribute__((visibility("hidden")))
/* The trampolines' fast path: general-purpose registers only (see
 * fn_tramp.S; the test functions_direct_gpr disassembles it). */
#define FN_GPR __attribute__((target("general-regs-only")))

/* One function address: created the first time it is seen (or when its
 * entry is patched), never freed.  event NULL: not traced. */
typedef struct fn_func {
  _Atomic uintptr_t addr; /* 0: free slot; published last */
  xpti_trace_event_data_t *event;
  uint64_t word; /* its records' second word less the type (xpt_rec.h); 0: none */
  uintptr_t landing; /* patched: where its calls return to (fn_stub.h); else 0 */
} fn_func_t;

/* One open call on a thread's shadow stack.  sp identifies the frame:
 * the caller's stack pointer at the hook (compiler hooks) or the address
 * of the return-address slot (patched entries); a frame entered later
 * below it is deeper, one at or above it means this one is gone. */
typedef struct fn_frame {
  uintptr_t sp;
  fn_func_t *fn;
  uintptr_t ret;    /* patched entries: the hijacked return address (0: none) */
  uintptr_t site;   /* compiler hooks: the call site (an inlined callee's is its caller's) */
  uint64_t t0 : 61; /* --min-duration: start, CLOCK_MONOTONIC ns */
  uint64_t recorded : 1;
  uint64_t direct : 1; /* its begin went into the collector's chunk (fn_rec_begin) */
  uint64_t forked : 1; /* begun in the parent of this forked child: no end here */
} fn_frame_t;

typedef struct fn_thread {
  uint32_t depth;    /* frames on the stack */
  uint32_t overflow; /* compiler-hook calls beyond FN_MAX_DEPTH, not pushed */
  uint32_t recorded; /* recorded frames on the stack (for --depth) */
  int busy;          /* in a hook: a nested hook (signal handler) records nothing */
  bool hijacked;     /* some frame's return address is ours */
  /* The trace collector's writer slot of this thread (NULL: none), and
   * the writer its direct begins went to. */
  struct xpt_rec_writer *const *wslot;
  struct xpt_rec_writer *w;
  fn_frame_t frames[FN_MAX_DEPTH];
} fn_thread_t;

typedef struct fn_settings {
  const char *select_text; /* NULL: every function (compiler hooks, nop entries) */
  regex_t select, exclude;
  bool has_select, has_exclude;
  unsigned depth;          /* recorded nesting limit */
  uint64_t min_duration;   /* ns; 0: begin/end notifications */
} fn_settings_t;

FN_HIDDEN extern fn_settings_t fn_cfg;
FN_HIDDEN extern atomic_bool fn_live; /* tracing on (XPTI stream ready, not stopped) */

/* fn_core.c */
FN_HIDDEN fn_func_t *fn_func_get(uintptr_t addr);                  /* resolves on first sight */
FN_HIDDEN fn_func_t *fn_func_add(uintptr_t addr, const char *name); /* patching: name known */
FN_HIDDEN void fn_enter_cyg(uintptr_t fn_addr, uintptr_t sp, uintptr_t site);
FN_HIDDEN void fn_exit_cyg(uintptr_t fn_addr, uintptr_t sp);
/* Patched entries (fn_tramp.S): slot holds the caller's return address. */
FN_HIDDEN int fn_enter_patched(fn_func_t *fn, uintptr_t *slot);
FN_HIDDEN uintptr_t fn_exit_patched(uintptr_t *slot);
FN_HIDDEN FN_GPR int fn_enter_fast(fn_func_t *fn, uintptr_t *slot);
FN_HIDDEN FN_GPR uintptr_t fn_exit_fast(uintptr_t *slot);
/* -pg builds (fn_tramp.S's mcount and __fentry__). */
FN_HIDDEN FN_GPR int fn_enter_mcount_fast(uintptr_t pc, uintptr_t *slot);
FN_HIDDEN void fn_enter_mcount(uintptr_t pc, uintptr_t *slot);
/* Before an exception or forced unwind passes through hijacked frames,
 * give them their return addresses back; after a catch, take the live
 * ones again. */
FN_HIDDEN void fn_unwind_begin(void);
FN_HIDDEN void fn_unwind_caught(uintptr_t sp);
/* A longjmp (or the like) to a frame whose stack pointer is target_sp:
 * the calls below it end now. */
FN_HIDDEN void fn_unwind_jump(uintptr_t target_sp);
/* The thread's open calls end now and its hijacked frames get their
 * return addresses back (exit, a switch of context). */
FN_HIDDEN void fn_end_open_calls(void);

/* The library's wrappers of the program's calls (fn_unwind.c, exit in
 * fn_core.c): each passes on to the next definition of its name. */
#define FN_API __attribute__((visibility("default")))
#define FN_NEXT(type, name)                                                                  \
  static _Atomic(type) next_fn;                                                              \
  type next = atomic_load_explicit(&next_fn, memory_order_acquire);                          \
  if (!next) {                                                                               \
    next = (type)dlsym(RTLD_NEXT, name);                                                     \
    atomic_store_explicit(&next_fn, next, memory_order_release);                             \
  }

/* fn_names.c: the name of the function at addr ("" when unknown) and the
 * module it lies in, its offset there; bool whether one was found. */
FN_HIDDEN bool fn_name_of(uintptr_t addr, char *name, size_t len, const char **module,
                          uintptr_t *offset);
FN_HIDDEN bool fn_selected(const char *name);
/* Demangle into buf when name is a C++ one; returns name or buf. */
FN_HIDDEN const char *fn_demangle(const char *name, char *buf, size_t len);

/* fn_names.c: every function symbol of the module mapped at in_module, from the best
 * symbol table libdw finds; addr is where it is mapped now.  Returns the
 * number of functions (-1: no such module); module: its path; symtab:
 * false when only the dynamic symbols were found (a stripped file). */
typedef void (*fn_each_cb_t)(const char *name, uintptr_t addr, size_t size, Elf *elf,
                             size_t shndx, void *arg);
FN_HIDDEN int fn_each_function(uintptr_t in_module, fn_each_cb_t each, void *arg,
                               const char **module, bool *symtab);
/* fn_patch.c: patch the selected functions of the program and, with a
 * regex, of its libraries and its calls into the C library (before main);
 * unpatch at the end.  Returns the number patched.  program_entries
 * false: the program has compiler hooks (the rest is still patched). */
FN_HIDDEN unsigned fn_patch_program(bool program_entries);
FN_HIDDEN void fn_names_release(void); /* fn_names.c: libdw's state, until needed again */

/* fn_modules.c: the modules loaded now, the program first, by their
 * loaded ranges; wanted: the program and the libraries it needs. */
typedef struct fn_module {
  uintptr_t lo, hi;
  const char *name;    /* "" for the program */
  const void *dynamic; /* its dynamic section */
  uintptr_t base;
  uintptr_t relro_lo, relro_hi; /* made read-only after relocation */
  bool wanted;
} fn_module_t;
typedef struct fn_modules {
  fn_module_t m[256];
  unsigned n;
} fn_modules_t;
FN_HIDDEN void fn_modules_list(fn_modules_t *ms);
/* Whether path's file name starts with one of the prefixes. */
FN_HIDDEN bool fn_module_is(const char *path, const char *const *prefixes, size_t n);

/* fn_patch.c: a stub (fn_stub.h) for fn at stub; returns where its body
 * goes, which fn_stub_end closes with a jump to back. */
FN_HIDDEN uint8_t *fn_stub_begin(uint8_t *stub, fn_func_t *fn);
FN_HIDDEN void fn_stub_end(uint8_t *p, uintptr_t back);

/* fn_got.c: the module's PLT slots bound to selected C library functions
 * point to stubs (returns how many); put back at the end. */
FN_HIDDEN unsigned fn_got_hook(const fn_module_t *m);
FN_HIDDEN void fn_got_unhook(void);
FN_HIDDEN void fn_unpatch_program(void);
FN_HIDDEN bool fn_program_has_cyg_hooks(void);

/* fn_tramp.S */
FN_HIDDEN void fn_tramp_enter(void);
FN_HIDDEN void fn_tramp_exit(void);

#endif /* XPTRACE_FN_INTERNAL_H */

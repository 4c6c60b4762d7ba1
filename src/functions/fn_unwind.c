/* xptrace function hooks — the ways a program leaves calls without
 * returning from them, wrapped so that the shadow stack follows and no
 * hijacked return address is in the way (see docs/functions.md, "Calls
 * that do not return").
 *
 *  - longjmp, siglongjmp, _longjmp, __longjmp_chk: the calls below the
 *    target frame end at the jump; their slots are dead stack, never
 *    written again (writing them once crashed the program's exit).
 *  - C++ exceptions: the unwinder finds a frame's caller by its return
 *    address and ours has no unwind information, so the real ones go
 *    back before it runs; a catch takes the live ones over again.
 *  - pthread_exit, pthread_testcancel: the forced unwind sees real
 *    return addresses, so the cleanups of every frame run.
 *  - swapcontext, setcontext: the calls open in the context left end at
 *    the switch and return untraced (the trace has one track per thread,
 *    and a suspended call is not running); calls made after are traced
 *    afresh in the context entered.
 *
 * Each wrapper is the program's definition of the name (the library is
 * preloaded) and passes on to the next one. */
#include <dlfcn.h>
#include <stdlib.h>

#include "fn_internal.h"

/* ---- longjmp ----------------------------------------------------------------- */

/* glibc's x86-64 jmp_buf: the stack pointer at index 6, mangled with the
 * thread's pointer guard (%fs:0x30): rotated left by 17 after the xor. */
#define FN_JB_RSP 6
#define FN_PTR_GUARD_OFFSET 0x30

static uintptr_t fn_jmpbuf_sp(const void *env) {
  uint64_t guard, v;
  __asm__("mov %%fs:%c1, %0" : "=r"(guard) : "i"(FN_PTR_GUARD_OFFSET));
  __builtin_memcpy(&v, (const char *)env + FN_JB_RSP * 8, 8);
  v = (v >> 17) | (v << 47);
  return (uintptr_t)(v ^ guard);
}

/* The calls below the frame the jump lands in end now.  A target below
 * our own frame cannot be a frame that called us (a corrupt or foreign
 * buffer): nothing is ended. */
static void fn_jump(const void *env) {
  uintptr_t target = fn_jmpbuf_sp(env);
  if (target > (uintptr_t)__builtin_frame_address(0))
    fn_unwind_jump(target);
}

typedef void (*fn_longjmp_t)(void *, int);

#define FN_LONGJMP(name)                                                                     \
  FN_API __attribute__((noreturn)) void name(void *env, int val) {                           \
    FN_NEXT(fn_longjmp_t, #name);                                                            \
    fn_jump(env);                                                                            \
    if (next)                                                                                \
      next(env, val);                                                                        \
    abort(); /* no next: cannot happen with a C library loaded */                           \
  }

FN_LONGJMP(longjmp)
FN_LONGJMP(siglongjmp)
FN_LONGJMP(_longjmp)
FN_LONGJMP(__longjmp_chk)

/* ---- exceptions ---------------------------------------------------------------- */

/* Declared with opaque types: only the pointers are passed on. */
typedef int (*fn_raise_t)(void *);
typedef void (*fn_resume_t)(void *);
typedef int (*fn_forced_t)(void *, void *, void *);
typedef void *(*fn_catch_t)(void *);

FN_API int _Unwind_RaiseException(void *exc) {
  FN_NEXT(fn_raise_t, "_Unwind_RaiseException");
  fn_unwind_begin();
  return next ? next(exc) : 5 /* _URC_END_OF_STACK */;
}

FN_API int _Unwind_Resume_or_Rethrow(void *exc) {
  FN_NEXT(fn_raise_t, "_Unwind_Resume_or_Rethrow");
  fn_unwind_begin();
  return next ? next(exc) : 5;
}

/* After a cleanup (a destructor) an unwind goes on from here; a catch
 * inside the cleanup took the hijacked addresses over again. */
FN_API __attribute__((noreturn)) void _Unwind_Resume(void *exc) {
  FN_NEXT(fn_resume_t, "_Unwind_Resume");
  fn_unwind_begin();
  if (next)
    next(exc);
  abort();
}

FN_API int _Unwind_ForcedUnwind(void *exc, void *stop, void *arg) {
  FN_NEXT(fn_forced_t, "_Unwind_ForcedUnwind");
  fn_unwind_begin();
  return next ? next(exc, stop, arg) : 5;
}

FN_API void *__cxa_begin_catch(void *exc) {
  FN_NEXT(fn_catch_t, "__cxa_begin_catch");
  fn_unwind_caught((uintptr_t)__builtin_frame_address(0) + 16);
  return next ? next(exc) : NULL;
}

/* ---- thread exit and cancellation ---------------------------------------------- */

/* glibc unwinds a thread with the unwinder it loads itself (not through
 * the names above): a hijacked frame would end its walk, and the
 * cleanups of the frames above it would not run.  The calls end in the
 * thread's key destructor (fn_core.c). */
typedef void (*fn_pthread_exit_t)(void *);
typedef void (*fn_testcancel_t)(void);

FN_API __attribute__((noreturn)) void pthread_exit(void *ret) {
  FN_NEXT(fn_pthread_exit_t, "pthread_exit");
  fn_unwind_begin();
  if (next)
    next(ret);
  abort();
}

FN_API void pthread_testcancel(void) {
  FN_NEXT(fn_testcancel_t, "pthread_testcancel");
  fn_unwind_begin();
  if (next)
    next();
  /* Not cancelled: the live frames are ours again. */
  fn_unwind_caught((uintptr_t)__builtin_frame_address(0) + 16);
}

/* ---- contexts ------------------------------------------------------------------- */

typedef int (*fn_swap_t)(void *, const void *);
typedef int (*fn_set_t)(const void *);

FN_API int swapcontext(void *oucp, const void *ucp) {
  FN_NEXT(fn_swap_t, "swapcontext");
  fn_end_open_calls();
  return next ? next(oucp, ucp) : -1;
}

FN_API int setcontext(const void *ucp) {
  FN_NEXT(fn_set_t, "setcontext");
  fn_end_open_calls();
  return next ? next(ucp) : -1;
}

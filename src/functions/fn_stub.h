/* xptrace function hooks — the layout of a patched function's stub,
 * shared by fn_patch.c (which writes stubs) and fn_tramp.S (which reads
 * them).  Plain #defines: included by the assembler too.
 *
 *   +0   call *[rip -> FN_STUB_DATA]   to fn_tramp_enter: [rsp] = +6
 *   +6   call FN_STUB_BODY             reached by fn_tramp_enter's `ret $8`
 *                                      when the call is traced: it puts
 *                                      FN_STUB_LANDING in the caller's slot
 *                                      and in the return stack buffer
 *   +11  jmp *[rip -> FN_STUB_DATA+16] the traced function returns here:
 *                                      on to fn_tramp_exit
 *   +17  the moved instructions (none for a nop entry); jmp *[rip]; .quad back
 *   +136 .quad fn_tramp_enter; .quad fn (its fn_func_t); .quad fn_tramp_exit */
#ifndef XPTRACE_FN_STUB_H
#define XPTRACE_FN_STUB_H

#define FN_STUB_SIZE 160
#define FN_STUB_CALLED 6   /* fn_tramp_enter's return address */
#define FN_STUB_LANDING 11 /* the traced function's return address */
#define FN_STUB_BODY 17
#define FN_STUB_DATA 136
/* fn's address, from the return address fn_tramp_enter is called with */
#define FN_STUB_FN_FROM_CALLED (FN_STUB_DATA + 8 - FN_STUB_CALLED)
/* From fn_tramp_enter's return address to the body, when not traced */
#define FN_STUB_BODY_FROM_CALLED (FN_STUB_BODY - FN_STUB_CALLED)

#endif /* XPTRACE_FN_STUB_H */

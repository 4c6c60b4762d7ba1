/* xptrace function hooks — trampolines of patched entries (x86-64).
 *
 * fn_tramp_enter is called by a function's stub (fn_stub.h): [rsp] =
 * stub + FN_STUB_CALLED, [rsp+8] = the caller's return address (its
 * slot).  When the call is traced it leaves by `ret $8`, dropping the
 * slot (kept in the thread's frame), to the stub's call of the function's
 * body: that call puts the stub's landing in the slot and, unlike writing
 * it there, in the return stack buffer too, so the function's own `ret`
 * is predicted.  Otherwise it returns to the body itself.
 *
 * fn_tramp_exit is where the landing goes on to when the traced function
 * has returned: it asks fn_exit_patched for the real return address, puts
 * it back in the slot and returns there, with the caller's own entry of
 * the return stack buffer.
 *
 * Both keep every call-clobbered register (gcc's -fipa-ra may keep values
 * in any of them across a call to a function it knows) and realign the
 * stack before calling C (-fipa-stack-alignment may not align it).  They
 * first try the common case in C that touches general-purpose registers
 * only (fn_enter_fast, fn_exit_fast: FN_GPR), saving only those; the
 * sixteen xmm registers are saved when that declines.  Sanitizer builds
 * always save everything: their checks call runtimes that may use xmm. */
#include "fn_stub.h"

	.text
	.globl fn_tramp_enter
	.hidden fn_tramp_enter
	.type fn_tramp_enter, @function
fn_tramp_enter:
	.cfi_startproc
	push %rbp
	.cfi_def_cfa_offset 16
	.cfi_offset %rbp, -16
	mov %rsp, %rbp
	.cfi_def_cfa_register %rbp
	push %rax
	push %rcx
	push %rdx
	push %rsi
	push %rdi
	push %r8
	push %r9
	push %r10
	push %r11
#ifndef FN_TRAMP_SAVE_ALL
	and $-16, %rsp
	mov 8(%rbp), %rdi
	mov FN_STUB_FN_FROM_CALLED(%rdi), %rdi
	lea 16(%rbp), %rsi
	call fn_enter_fast
	test %eax, %eax
	jnz 1f
	lea -72(%rbp), %rsp
#endif
	sub $256, %rsp
	and $-16, %rsp
	movdqa %xmm0, 0(%rsp)
	movdqa %xmm1, 16(%rsp)
	movdqa %xmm2, 32(%rsp)
	movdqa %xmm3, 48(%rsp)
	movdqa %xmm4, 64(%rsp)
	movdqa %xmm5, 80(%rsp)
	movdqa %xmm6, 96(%rsp)
	movdqa %xmm7, 112(%rsp)
	movdqa %xmm8, 128(%rsp)
	movdqa %xmm9, 144(%rsp)
	movdqa %xmm10, 160(%rsp)
	movdqa %xmm11, 176(%rsp)
	movdqa %xmm12, 192(%rsp)
	movdqa %xmm13, 208(%rsp)
	movdqa %xmm14, 224(%rsp)
	movdqa %xmm15, 240(%rsp)
	mov 8(%rbp), %rdi
	mov FN_STUB_FN_FROM_CALLED(%rdi), %rdi
	lea 16(%rbp), %rsi
	call fn_enter_patched
	movdqa 0(%rsp), %xmm0
	movdqa 16(%rsp), %xmm1
	movdqa 32(%rsp), %xmm2
	movdqa 48(%rsp), %xmm3
	movdqa 64(%rsp), %xmm4
	movdqa 80(%rsp), %xmm5
	movdqa 96(%rsp), %xmm6
	movdqa 112(%rsp), %xmm7
	movdqa 128(%rsp), %xmm8
	movdqa 144(%rsp), %xmm9
	movdqa 160(%rsp), %xmm10
	movdqa 176(%rsp), %xmm11
	movdqa 192(%rsp), %xmm12
	movdqa 208(%rsp), %xmm13
	movdqa 224(%rsp), %xmm14
	movdqa 240(%rsp), %xmm15
	test %eax, %eax
	jnz 1f
	/* Not traced: straight to the body, the slot untouched. */
	addq $FN_STUB_BODY_FROM_CALLED, 8(%rbp)
	xor %eax, %eax
1:	/* ZF set: not traced (lea and pop keep the flags) */
	lea -72(%rbp), %rsp
	pop %r11
	pop %r10
	pop %r9
	pop %r8
	pop %rdi
	pop %rsi
	pop %rdx
	pop %rcx
	pop %rax
	pop %rbp
	.cfi_def_cfa %rsp, 8
	jz 2f
	ret $8
2:
	ret
	.cfi_endproc
	.size fn_tramp_enter, .-fn_tramp_enter

	.globl fn_tramp_exit
	.hidden fn_tramp_exit
	.type fn_tramp_exit, @function
fn_tramp_exit:
	sub $8, %rsp
	push %rbp
	mov %rsp, %rbp
	push %rax
	push %rcx
	push %rdx
	push %rsi
	push %rdi
	push %r8
	push %r9
	push %r10
	push %r11
#ifndef FN_TRAMP_SAVE_ALL
	and $-16, %rsp
	lea 8(%rbp), %rdi
	call fn_exit_fast
	test %rax, %rax
	jz 2f
	mov %rax, 8(%rbp)
	jmp 3f
2:
	lea -72(%rbp), %rsp
#endif
	sub $256, %rsp
	and $-16, %rsp
	movdqa %xmm0, 0(%rsp)
	movdqa %xmm1, 16(%rsp)
	movdqa %xmm2, 32(%rsp)
	movdqa %xmm3, 48(%rsp)
	movdqa %xmm4, 64(%rsp)
	movdqa %xmm5, 80(%rsp)
	movdqa %xmm6, 96(%rsp)
	movdqa %xmm7, 112(%rsp)
	movdqa %xmm8, 128(%rsp)
	movdqa %xmm9, 144(%rsp)
	movdqa %xmm10, 160(%rsp)
	movdqa %xmm11, 176(%rsp)
	movdqa %xmm12, 192(%rsp)
	movdqa %xmm13, 208(%rsp)
	movdqa %xmm14, 224(%rsp)
	movdqa %xmm15, 240(%rsp)
	lea 8(%rbp), %rdi
	call fn_exit_patched
	mov %rax, 8(%rbp)
	movdqa 0(%rsp), %xmm0
	movdqa 16(%rsp), %xmm1
	movdqa 32(%rsp), %xmm2
	movdqa 48(%rsp), %xmm3
	movdqa 64(%rsp), %xmm4
	movdqa 80(%rsp), %xmm5
	movdqa 96(%rsp), %xmm6
	movdqa 112(%rsp), %xmm7
	movdqa 128(%rsp), %xmm8
	movdqa 144(%rsp), %xmm9
	movdqa 160(%rsp), %xmm10
	movdqa 176(%rsp), %xmm11
	movdqa 192(%rsp), %xmm12
	movdqa 208(%rsp), %xmm13
	movdqa 224(%rsp), %xmm14
	movdqa 240(%rsp), %xmm15
3:
	lea -72(%rbp), %rsp
	pop %r11
	pop %r10
	pop %r9
	pop %r8
	pop %rdi
	pop %rsi
	pop %rdx
	pop %rcx
	pop %rax
	pop %rbp
	ret /* predicted: the function's `ret` took the landing's entry, this one the caller's */
	.size fn_tramp_exit, .-fn_tramp_exit

/* -pg builds: the program's calls of mcount (after the prologue: the
 * function's frame pointer in rbp, its return address at 8(%rbp)) and of
 * __fentry__ (-mfentry: first, the return address just above ours) come
 * here, the library being preloaded before the C library.  The argument
 * registers are live: every call-clobbered one is kept. */
.macro FN_PG_HOOK name, slot_from_function_rbp
	.globl \name
	.type \name, @function
\name:
	.cfi_startproc
	push %rbp
	.cfi_def_cfa_offset 16
	.cfi_offset %rbp, -16
	mov %rsp, %rbp
	.cfi_def_cfa_register %rbp
	push %rax
	push %rcx
	push %rdx
	push %rsi
	push %rdi
	push %r8
	push %r9
	push %r10
	push %r11
	and $-16, %rsp
#ifndef FN_TRAMP_SAVE_ALL
	mov 8(%rbp), %rdi
	.if \slot_from_function_rbp
	mov 0(%rbp), %rsi
	add $8, %rsi
	.else
	lea 16(%rbp), %rsi
	.endif
	call fn_enter_mcount_fast
	test %eax, %eax
	jnz 1f
#endif
	sub $256, %rsp
	movdqa %xmm0, 0(%rsp)
	movdqa %xmm1, 16(%rsp)
	movdqa %xmm2, 32(%rsp)
	movdqa %xmm3, 48(%rsp)
	movdqa %xmm4, 64(%rsp)
	movdqa %xmm5, 80(%rsp)
	movdqa %xmm6, 96(%rsp)
	movdqa %xmm7, 112(%rsp)
	movdqa %xmm8, 128(%rsp)
	movdqa %xmm9, 144(%rsp)
	movdqa %xmm10, 160(%rsp)
	movdqa %xmm11, 176(%rsp)
	movdqa %xmm12, 192(%rsp)
	movdqa %xmm13, 208(%rsp)
	movdqa %xmm14, 224(%rsp)
	movdqa %xmm15, 240(%rsp)
	mov 8(%rbp), %rdi
	.if \slot_from_function_rbp
	mov 0(%rbp), %rsi
	add $8, %rsi
	.else
	lea 16(%rbp), %rsi
	.endif
	call fn_enter_mcount
	movdqa 0(%rsp), %xmm0
	movdqa 16(%rsp), %xmm1
	movdqa 32(%rsp), %xmm2
	movdqa 48(%rsp), %xmm3
	movdqa 64(%rsp), %xmm4
	movdqa 80(%rsp), %xmm5
	movdqa 96(%rsp), %xmm6
	movdqa 112(%rsp), %xmm7
	movdqa 128(%rsp), %xmm8
	movdqa 144(%rsp), %xmm9
	movdqa 160(%rsp), %xmm10
	movdqa 176(%rsp), %xmm11
	movdqa 192(%rsp), %xmm12
	movdqa 208(%rsp), %xmm13
	movdqa 224(%rsp), %xmm14
	movdqa 240(%rsp), %xmm15
1:
	lea -72(%rbp), %rsp
	pop %r11
	pop %r10
	pop %r9
	pop %r8
	pop %rdi
	pop %rsi
	pop %rdx
	pop %rcx
	pop %rax
	pop %rbp
	.cfi_def_cfa %rsp, 8
	ret
	.cfi_endproc
	.size \name, .-\name
.endm

	FN_PG_HOOK mcount, 1
	FN_PG_HOOK __fentry__, 0

	.section .note.GNU-stack,"",@progbits

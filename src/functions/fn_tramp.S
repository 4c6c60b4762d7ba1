/* xptrace function hooks — trampolines of patched entries (x86-64).
 *
 * fn_tramp_enter is reached from a function's patched entry through its
 * stub (fn_patch.c): [rsp] = where the function goes on, [rsp+8] = the
 * caller's return address (its slot), r11 = the function's fn_func_t.
 * Every register that can carry an argument is kept; the stack is
 * realigned before calling C.
 *
 * fn_tramp_exit is where a traced function returns to (fn_enter_patched
 * put its address in the slot): it asks fn_exit_patched for the real
 * return address, puts it back in the slot and returns there, keeping
 * the return value registers. */
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
	push %rdi
	push %rsi
	push %rdx
	push %rcx
	push %r8
	push %r9
	push %rax
	push %r10
	/* The caller may not keep the ABI's alignment (gcc -fipa-stack-alignment
	 * skips it before calls to functions that need none): realign. */
	sub $128, %rsp
	and $-16, %rsp
	movdqu %xmm0, 0(%rsp)
	movdqu %xmm1, 16(%rsp)
	movdqu %xmm2, 32(%rsp)
	movdqu %xmm3, 48(%rsp)
	movdqu %xmm4, 64(%rsp)
	movdqu %xmm5, 80(%rsp)
	movdqu %xmm6, 96(%rsp)
	movdqu %xmm7, 112(%rsp)
	mov %r11, %rdi
	lea 16(%rbp), %rsi
	call fn_enter_patched
	movdqu 0(%rsp), %xmm0
	movdqu 16(%rsp), %xmm1
	movdqu 32(%rsp), %xmm2
	movdqu 48(%rsp), %xmm3
	movdqu 64(%rsp), %xmm4
	movdqu 80(%rsp), %xmm5
	movdqu 96(%rsp), %xmm6
	movdqu 112(%rsp), %xmm7
	lea -64(%rbp), %rsp
	pop %r10
	pop %rax
	pop %r9
	pop %r8
	pop %rcx
	pop %rdx
	pop %rsi
	pop %rdi
	pop %rbp
	.cfi_def_cfa %rsp, 8
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
	push %rdx
	sub $32, %rsp
	and $-16, %rsp
	movdqu %xmm0, 0(%rsp)
	movdqu %xmm1, 16(%rsp)
	lea 8(%rbp), %rdi
	call fn_exit_patched
	mov %rax, 8(%rbp)
	movdqu 0(%rsp), %xmm0
	movdqu 16(%rsp), %xmm1
	lea -16(%rbp), %rsp
	pop %rdx
	pop %rax
	pop %rbp
	ret
	.size fn_tramp_exit, .-fn_tramp_exit
	.section .note.GNU-stack,"",@progbits

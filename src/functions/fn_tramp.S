/* xptrace function hooks — trampolines of patched entries (x86-64). */
	.text
	.globl fn_tramp_enter
	.hidden fn_tramp_enter
	.type fn_tramp_enter, @function
fn_tramp_enter:
	ret
	.size fn_tramp_enter, .-fn_tramp_enter

	.globl fn_tramp_exit
	.hidden fn_tramp_exit
	.type fn_tramp_exit, @function
fn_tramp_exit:
	ret
	.size fn_tramp_exit, .-fn_tramp_exit
	.section .note.GNU-stack,"",@progbits

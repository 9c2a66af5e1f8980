// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// Section names that end a line of Python: a generator that copies them raw into the comment
// after each program writes the rest of the line as code (issue 35). clang takes any string
// in SEC(); Python ends a line at "\n", "\r\n" and a bare "\r". tests/test_skelgen_hostile.py
// generates a skeleton of this object and imports it: no PWNED_* file may appear.
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

SEC("tracepoint/syscalls/sys_enter_getppid\n    __import__('os').system('touch PWNED_LF')  #")
int after_lf(void *ctx)
{
	return 0;
}

SEC("tracepoint/syscalls/sys_enter_getppid\r    open('PWNED_CR', 'w').close()  #")
int after_cr(void *ctx)
{
	return 0;
}

SEC("tracepoint/syscalls/sys_enter_getppid\"\"\"\n    open('PWNED_QUOTES', 'w').close()  #")
int after_quotes(void *ctx)
{
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";

# SPDX-License-Identifier: Apache-2.0
"""The stack tests' workload: a C program with a known call chain, built in the test.

``main -> a -> b -> c -> spin`` (gcc -g -O0 -fno-omit-frame-pointer -fno-inline, each function
noinline, so every frame is there and the frame-pointer unwinder the kernel uses for user
stacks walks them), in four copies:

* ``workload``: with its .symtab;
* ``stripped``: ``objcopy --strip-all`` (only .dynsym is left, which names none of a, b, c, spin),
  its debug file (``objcopy --only-keep-debug``) placed by build id under ``debug/.build-id/``;
* ``mini``: stripped, with the debug file xz-compressed into a ``.gnu_debugdata`` section
  (MiniDebugInfo, as Fedora ships);
* ``bare``: stripped, no debug file anywhere.

``workload spin SECONDS`` spins in the chain; ``workload sleep SECONDS`` sleeps 10 ms at a time
in it (nanosleep(2) called from spin itself on x86-64; the off-CPU test); ``workload mix SECONDS`` spins
in five functions w1..w5 with 16:8:4:2:1 of the time; ``workload getppid
SECONDS`` calls getppid(2) in a loop (the kernel-stack test looks for its kernel function).
All stop by SIGALRM.
"""

from __future__ import annotations

import dataclasses
import lzma
import os
import shutil
import subprocess
from pathlib import Path

SOURCE = r"""
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

volatile unsigned long sink;
int sleeping;

__attribute__((noinline)) void spin(void)
{
	if (sleeping) {
#if defined(__x86_64__)
		/* nanosleep(2) made here, not in libc (built without frame pointers: the unwinder
		   would skip this frame), so the off-CPU stack ends in spin */
		struct { long s, ns; } ts = { 0, 10000000 };
		long ret;
		__asm__ volatile ("syscall" : "=a"(ret) : "a"(35), "D"(&ts), "S"(0) : "rcx", "r11", "memory");
#else
		usleep(10000);
#endif
		return;
	}
	for (unsigned long i = 0; i < 2000000; i++) sink += i;
}
/* "mix": five leaves with 16:8:4:2:1 of the time (the comparison with perf). Each turn runs one
 * leaf for the same short while, drawn at random with those weights: a fixed w1..w5 cycle of a
 * few ms beats against a 99 Hz sampler and biases both tools' shares (seen: w3 at 18% and 6%). */
#define LEAF(name, k) __attribute__((noinline)) void name(void) { for (unsigned long i = 0; i < 100000; i++) sink += i * (k); }
LEAF(w1, 1) LEAF(w2, 2) LEAF(w3, 3) LEAF(w4, 4) LEAF(w5, 5)
static unsigned long xorshift = 88172645463325252UL;
static void mix_turn(void)
{
	xorshift ^= xorshift << 13; xorshift ^= xorshift >> 7; xorshift ^= xorshift << 17;
	unsigned r = (unsigned)(xorshift % 31);
	if (r < 16) w1(); else if (r < 24) w2(); else if (r < 28) w3(); else if (r < 30) w4(); else w5();
}
__attribute__((noinline)) void c(void) { spin(); }
__attribute__((noinline)) void b(void) { c(); }
__attribute__((noinline)) void a(void) { b(); }

int main(int argc, char **argv)
{
	unsigned seconds = argc > 2 ? (unsigned)atoi(argv[2]) : 10;
	alarm(seconds);  /* SIGALRM ends the process */
	if (argc > 1 && !strcmp(argv[1], "getppid"))
		for (;;)
			getppid();
	sleeping = argc > 1 && !strcmp(argv[1], "sleep");
	if (argc > 1 && !strcmp(argv[1], "mix"))
		for (;;)
			mix_turn();
	for (;;)
		a();
	return 0;
}
"""

CHAIN = ["spin", "c", "b", "a", "main"]  # innermost first


@dataclasses.dataclass
class Workload:
    dir: Path
    workload: Path
    stripped: Path
    mini: Path
    bare: Path
    debug_root: Path
    build_id: str


def _build_id(path: Path) -> str:
    out = subprocess.run(["readelf", "-n", str(path)], capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        if "Build ID:" in line:
            return line.split("Build ID:", 1)[1].strip()
    raise AssertionError(f"{path} has no GNU build id (readelf -n):\n{out}")


def build(dest: Path) -> Workload:
    """Compile and lay out the copies in ``dest`` (skips the caller's test when gcc is absent)."""
    import pytest

    for tool in ("gcc", "objcopy", "readelf"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed: the stack workload is built with gcc and binutils")
    src = dest / "workload.c"
    src.write_text(SOURCE)
    exe = dest / "workload"
    subprocess.run(["gcc", "-g", "-O0", "-fno-omit-frame-pointer", "-fno-inline", "-Wl,--build-id=sha1",
                    "-o", str(exe), str(src)], check=True)
    debug = dest / "workload.debug"
    subprocess.run(["objcopy", "--only-keep-debug", str(exe), str(debug)], check=True)
    stripped = dest / "stripped"
    subprocess.run(["objcopy", "--strip-all", str(exe), str(stripped)], check=True)
    bid = _build_id(exe)
    root = dest / "debug"
    (root / ".build-id" / bid[:2]).mkdir(parents=True)
    shutil.copy(debug, root / ".build-id" / bid[:2] / f"{bid[2:]}.debug")
    bare = dest / "bare"
    shutil.copy(stripped, bare)
    xz = dest / "debugdata.xz"
    xz.write_bytes(lzma.compress(debug.read_bytes(), format=lzma.FORMAT_XZ))
    mini = dest / "mini"
    subprocess.run(["objcopy", "--add-section", f".gnu_debugdata={xz}", str(stripped), str(mini)], check=True)
    return Workload(dest, exe, stripped, mini, bare, root, bid)


def attach_stacks(obj: Path, out: Path, seconds: float) -> tuple[int, str]:
    """``bpfkit attach OBJ profile:hz:99 --stacks counts --stack-map stacks --output OUT``
    (the program samples every process), stopped by SIGINT ``seconds`` after it says it is
    attached: (exit status, all it printed). Fails the test when it does not exit within
    60 s of the SIGINT."""
    import os
    import signal
    import sys
    import time

    import pytest

    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parent.parent))
    cli = subprocess.Popen([sys.executable, "-m", "bpfkit.cli", "attach", str(obj), "profile:hz:99",
                            "--stacks", "counts", "--stack-map", "stacks", "--output", str(out)],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    try:
        assert cli.stdout is not None
        for line in cli.stdout:
            if "attached; Ctrl-C" in line:
                break
        time.sleep(seconds)
        cli.send_signal(signal.SIGINT)
        try:
            rest = cli.communicate(timeout=60)[0]
        except subprocess.TimeoutExpired:
            pytest.fail(f"bpfkit attach --stacks did not exit within 60 s of SIGINT (writing {out})")
    finally:
        if cli.poll() is None:
            cli.kill()
            cli.communicate()
    return cli.returncode, rest


def own_name(workload: Workload, dest: Path) -> Path:
    """A link to the workload under a name of this run's, which becomes its comm (the kernel
    takes it from the path exec'd): the CLI's profiles are system-wide and group stacks by comm,
    and a second copy of the suite runs a ``workload`` of its own meanwhile."""
    link = dest / f"wl{os.getpid()}"
    link.symlink_to(workload.workload)
    return link


def chain_samples(folded: str, comm: str = "workload") -> tuple[int, int]:
    """(samples of the process named ``comm``, those whose user frames end in the chain) in folded text. A
    sample taken while an interrupt ran in the process has kernel frames on top
    (asm_sysvec_apic_timer_interrupt_[k];...), more of them on a busy host: they are left out."""
    total = good = 0
    for line in folded.splitlines():
        if line.startswith(f"{comm};"):
            stack, count = line.rsplit(" ", 1)
            total += int(count)
            if [f for f in stack.split(";") if not f.endswith("_[k]")][-5:] == CHAIN[::-1]:
                good += int(count)
    return total, good

#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Run pytest inside VMs booted on chosen Debian kernels (virtme-ng + qemu) and report per kernel.

    python integration/vm.py --kernel 6.1 --kernel 5.10 [--kernel host] [--timeout SECS] \
        [--memory 2G] [--cpus N] [--results DIR] [--quiet] -- <pytest args...>

Needs scripts/vm-setup.sh first. See docs/vm-runner.md. Facts this relies on
(shared/ENVIRONMENT.md, "Other kernels, in a VM"):
  - /dev/kvm exists but cannot run a stock kernel here: always --disable-kvm (TCG emulation);
  - --force-9p: the host root fs is shared read-only over 9p (virtiofsd is not used);
  - udev must be installed on the host root, or the guest's exit status is lost (virtme-ng
    reports it through /dev/virtio-ports/virtme.ret, a link that udev makes).
The runner imports nothing from bpfkit, so it works while the package is half-written.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import importlib.util
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Callable, Iterable, TextIO

sys.path.insert(0, str(Path(__file__).resolve().parent))
from vm_kernels import BUILT_KERNELS, KERNELS, NEWEST, Kernel, KernelError, fetch_kernel  # noqa: E402

# `python -m virtme_ng.run` drops the exit status (its __main__ calls main() without
# sys.exit), so call main() ourselves with the runner's interpreter.
VNG = "import sys; from virtme_ng.run import main; sys.exit(main())"
# Boot takes 25-35 s under TCG on a quiet machine, 1-5 min on a loaded one; Python code runs
# many times slower than native (docs/vm-runner.md has measurements).
DEFAULT_TIMEOUT = 900
# 2 vCPUs: qemu's multi-threaded TCG gives each vCPU a host thread and the host has 2 cores.
# Measured 1 vs 2 vCPUs: no consistent difference (either won by 20-40 %, within the noise of
# a shared machine), so take the host's count: per-CPU behaviour (percpu maps, perf events
# opened on one CPU) then gets exercised as on the 2-CPU host.
DEFAULT_CPUS = 2
TAIL_LINES = 40
# Host variables that the guest gets as well (virtme-ng starts the guest command with a
# fresh environment); BPFKIT_* ones are forwarded too.
FORWARD_ENV = ("PATH", "PYTHONPATH", "VIRTUAL_ENV", "LANG", "LC_ALL", "TERM")
# virtme-ng mounts its 9p shares without caching, so every stat/open is a round trip to the
# host; under TCG that made `python -c pass` take 14 s and `import pytest` 42 s (sys time).
# The interpreter's prefix and the working dir are therefore passed as extra read-only shares
# and remounted in the guest with cache=loose (fine: nothing changes them during a run),
# which cut the sys time about 3x. A 9p virtio channel can be mounted only once, so the root
# share itself cannot be remounted that way.
SHARE_MOUNT = "/run/bpfkit-share"
CACHED_MOUNT_OPTS = "ro,trans=virtio,version=9p2000.L,access=any,msize=524288,cache=loose"
# virtme-ng puts overlays or tmpfs on these; do not shadow them with shares.
GUEST_SYSTEM_DIRS = ("/", "/etc", "/lib", "/home", "/opt", "/srv", "/usr", "/var", "/tmp",
                     "/run", "/proc", "/sys", "/dev", "/bin", "/sbin", "/root")


def env_with_interpreter_bin(base: dict[str, str] | None = None) -> dict[str, str]:
    """`base` (default: os.environ) with this interpreter's bin directory first on PATH.

    virtme-ng runs its helpers by name (`vng` execs `virtme-run` through /bin/sh), and they are
    installed beside the interpreter, in `.venv/bin`, which is not on PATH when this script is
    started as `.venv/bin/python integration/vm.py` (a fresh machine has no other copy: the
    VM leg failed there with `virtme-run: not found`, exit status 127)."""
    env = dict(os.environ if base is None else base)
    bin_dir = os.path.dirname(os.path.abspath(sys.executable))
    rest = [d for d in env.get("PATH", os.defpath).split(os.pathsep) if d and d != bin_dir]
    env["PATH"] = os.pathsep.join([bin_dir, *rest])
    return env


@dataclasses.dataclass
class Result:
    """Outcome of one kernel's run."""

    kernel: str
    detail: str = ""  # package/release info
    status: str = "ok"  # ok (tests may still have failed) | timeout | no-boot | error
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    errors: int = 0
    skips: list[str] = dataclasses.field(default_factory=list)
    boot_s: float | None = None  # guest uptime when the test script started
    pytest_s: float | None = None  # guest time pytest took (startup included)
    total_s: float = 0.0
    note: str = ""
    tail: list[str] = dataclasses.field(default_factory=list)
    panic: str | None = None  # the guest kernel's Oops line when it panicked

    @property
    def ok(self) -> bool:
        return self.status == "ok" and self.failed == 0 and self.errors == 0


# ---------------------------------------------------------------- command line

def parse_args(argv: list[str]) -> argparse.Namespace:
    """Options before `--`, pytest arguments after it."""
    own, pytest_args = (argv[: argv.index("--")], argv[argv.index("--") + 1:]) if "--" in argv \
        else (argv, [])
    p = argparse.ArgumentParser(prog="integration/vm.py", description=__doc__.split("\n")[0])
    p.add_argument("--kernel", action="append", required=True,
                   choices=[*KERNELS, *BUILT_KERNELS, NEWEST, "host"],
                   help=f"kernel to run on (repeatable); {NEWEST}: the highest Debian offers (sid)")
    p.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT,
                   help=f"seconds per kernel, boot included (default {DEFAULT_TIMEOUT})")
    p.add_argument("--memory", default="2G", help="guest memory (default 2G)")
    p.add_argument("--cpus", type=int, default=DEFAULT_CPUS,
                   help=f"guest vCPUs (default {DEFAULT_CPUS})")
    p.add_argument("--results", metavar="DIR",
                   help="keep junit XML and logs in DIR/<kernel>/ (default: discard)")
    p.add_argument("--quiet", action="store_true", help="do not echo pytest output live")
    p.add_argument("--panic-retries", type=int, default=1, metavar="N",
                   help="boot again up to N times after a guest kernel panic (default 1; see run_vm)")
    args = p.parse_args(own)
    args.pytest_args = pytest_args
    return args


# ---------------------------------------------------------------- processes

def _pump(stream: TextIO, sink: TextIO, tail: collections.deque, echo: Callable[[str], None] | None):
    for line in stream:
        sink.write(line)
        tail.append(line.rstrip("\n"))
        if echo:
            echo(line.rstrip("\n"))


def run_logged(cmd: list[str], env: dict[str, str], timeout: float, out_log: Path,
               err_log: Path, echo: Callable[[str], None] | None) -> tuple[int | None, list[str]]:
    """Run cmd in its own process group; stdout to out_log (+echo), stderr to err_log.

    Returns (exit status or None on timeout, last lines of stdout+stderr). Pipes, not files:
    qemu opens /proc/self/fd/1 afresh, which truncates a regular file.
    """
    tail: collections.deque = collections.deque(maxlen=TAIL_LINES)
    with open(out_log, "w") as out, open(err_log, "w") as err:
        proc = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, errors="replace",
                                start_new_session=True)
        pumps = [threading.Thread(target=_pump, args=(proc.stdout, out, tail, echo), daemon=True),
                 threading.Thread(target=_pump, args=(proc.stderr, err, tail, None), daemon=True)]
        for t in pumps:
            t.start()
        rc: int | None = None
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pass
        finally:  # also on SIGTERM/Ctrl-C: the VM is in its own session, end it too
            if proc.poll() is None:
                _kill_group(proc)
        for t in pumps:
            t.join(timeout=10)
    return rc, list(tail)


def _kill_group(proc: subprocess.Popen) -> None:
    """SIGTERM vng and its qemu (same process group), SIGKILL if they linger."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=10)
            return
        except subprocess.TimeoutExpired:
            continue


# ---------------------------------------------------------------- junit

def parse_junit(path: Path, result: Result) -> None:
    """Fill counts and skip reasons from a pytest junit XML file."""
    for case in ET.parse(path).getroot().iter("testcase"):
        tags = {child.tag: child for child in case}
        if "error" in tags:
            result.errors += 1
        elif "failure" in tags:
            result.failed += 1
        elif "skipped" in tags:
            result.skipped += 1
            name = f"{case.get('classname', '')}::{case.get('name', '')}".strip(":")
            result.skips.append(f"{name}: {tags['skipped'].get('message', '').strip()}")
        else:
            result.passed += 1


def collect(result: Result, results: Path, rc: int | None, tail: list[str]) -> None:
    """Set result.status from the files the run left in `results` and its exit status."""
    junit = results / "junit.xml"
    if rc is None:
        result.status, result.tail = "timeout", tail
    elif not junit.exists():
        result.status, result.tail = "error", tail
        result.note = f"no junit XML (exit status {rc})"
    if junit.exists():
        try:
            parse_junit(junit, result)
        except ET.ParseError as exc:
            result.status, result.note, result.tail = "error", f"bad junit XML: {exc}", tail
            return
    # Failed tests explain a non-zero status; otherwise (usage error, internal error,
    # interrupted) say so. 5 means no tests were collected.
    if result.status == "ok" and rc not in (0, 5) and not (result.failed or result.errors):
        result.status, result.tail = "error", tail
        result.note = f"pytest exit status {rc} with no failed test"


def keep_results(results: Path, dest: str | None, kernel: str) -> None:
    if dest:
        target = Path(dest) / kernel
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(results, target, ignore=shutil.ignore_patterns("*.sh"))


def pytest_cmd(junit: Path, pytest_args: list[str]) -> list[str]:
    # -p no:cacheprovider: the guest sees the repo read-only.
    return [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", f"--junitxml={junit}",
            *pytest_args]


def echo_for(kernel: str, quiet: bool) -> Callable[[str], None] | None:
    return None if quiet else (lambda line: print(f"[{kernel}] {line}", flush=True))


# ---------------------------------------------------------------- host

def run_host(args: argparse.Namespace) -> Result:
    """Run pytest directly on the host kernel (no VM, BPFKIT_VM_* unset)."""
    result = Result("host", detail=os.uname().release)
    env = {k: v for k, v in os.environ.items() if not k.startswith("BPFKIT_VM_")}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="bpfkit-vm-") as tmp:
        results = Path(tmp)
        rc, tail = run_logged(pytest_cmd(results / "junit.xml", args.pytest_args), env,
                              args.timeout, results / "pytest.log", results / "stderr.log",
                              echo_for("host", args.quiet))
        collect(result, results, rc, tail)
        keep_results(results, args.results, "host")
    result.total_s = time.monotonic() - start
    return result


# ---------------------------------------------------------------- VM

def cached_shares(cwd: str) -> list[str]:
    """Directories to share again with caching: the interpreter's prefixes and `cwd`."""
    dirs = []
    for d in dict.fromkeys(os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, cwd)):
        if d not in GUEST_SYSTEM_DIRS and os.path.isdir(d):
            dirs.append(d)
    # A dir inside another one is covered by it.
    return [d for d in dirs if not any(d.startswith(o + "/") for o in dirs)]


def guest_script(kernel: Kernel, results: Path, cwd: str, shares: list[str], pytest_args: list[str]) -> str:
    """Shell script the guest runs: mounts, environment, pytest with output into `results`."""
    env = {k: v for k, v in env_with_interpreter_bin().items()
           if k in FORWARD_ENV or k.startswith("BPFKIT_")}
    env.update(BPFKIT_VM_KERNEL=kernel.name, BPFKIT_VM_EXPECT_RELEASE=kernel.release,
               PYTHONDONTWRITEBYTECODE="1", PYTHONUNBUFFERED="1",
               # hypothesis' default database dir (.hypothesis in cwd) is read-only here;
               # the guest's /tmp is a writable overlay that vanishes with the VM.
               HYPOTHESIS_STORAGE_DIRECTORY="/tmp/bpfkit-hypothesis")
    exports = "\n".join(f"export {k}={shlex.quote(v)}" for k, v in sorted(env.items()))
    r = shlex.quote(str(results))
    cmd = shlex.join(pytest_cmd(results / "junit.xml", pytest_args))
    return f"""#!/bin/bash
# Written by integration/vm.py; runs inside the guest.
cat /proc/uptime > {r}/started
# virtme-ng's init mounts some of these on some kernels; mount whatever is missing.
mnt() {{ grep -qs " $2 " /proc/mounts || mount -t "$1" "$1" "$2" || echo "vm.py: cannot mount $1 on $2" >&2; }}
mnt tracefs /sys/kernel/tracing
mnt debugfs /sys/kernel/debug
mnt bpf /sys/fs/bpf
# Remount each extra share with cache=loose and bind it over its host path (see
# CACHED_MOUNT_OPTS in vm.py). Shared at a path of its own: the init's cwd may pin the real one.
recache() {{
    local tag
    tag=$(awk -v d="$1" '$2 == d && $3 == "9p" {{print $1}}' /proc/mounts | tail -n 1)
    [ -n "$tag" ] && umount "$1" && mount -t 9p -o {CACHED_MOUNT_OPTS} "$tag" "$1" &&
        mount --bind "$1" "$2" || echo "vm.py: $2 stays uncached" >&2
}}
{chr(10).join(f"recache {SHARE_MOUNT}{i} {shlex.quote(d)}" for i, d in enumerate(shares))}
{exports}
cd {shlex.quote(cwd)} || exit 99
# Keep the perf_sched_events static key on for the whole run (see SCHED_KEY_HOLDER).
{shlex.quote(sys.executable)} -c {shlex.quote(SCHED_KEY_HOLDER)} &
holder=$!
{cmd} 2>&1 | tee {r}/pytest.log
rc=${{PIPESTATUS[0]}}
kill "$holder" 2>/dev/null
cat /proc/uptime > {r}/finished
echo "$rc" > {r}/pytest_rc
exit "$rc"
"""


# A process holding one per-task perf event (a software dummy) until killed. The kernel turns
# the perf_sched_events static key on with the first per-task perf event and off again from
# a kworker after the last (perf_sched_delayed), live-patching the jump label in __schedule
# each time. Under TCG the Debian 6.12 guest panicked three times in a row at exactly that
# site (Oops: int3 at __schedule+0x407, twice in a kworker), most likely a stale translation
# of the patched code; the tests open and close per-task events all the time. With the key
# held on, __schedule is never patched during the run.
SCHED_KEY_HOLDER = """
import ctypes, signal
attr = (ctypes.c_uint8 * 128)()
ctypes.memmove(attr, (1).to_bytes(4, "little") + (128).to_bytes(4, "little") + (9).to_bytes(8, "little"), 16)
# perf_event_open (x86-64 syscall 298; the VMs are x86-64): PERF_TYPE_SOFTWARE, size 128,
# PERF_COUNT_SW_DUMMY, this process (pid 0), any CPU
fd = ctypes.CDLL(None, use_errno=True).syscall(298, attr, 0, -1, -1, 0)
if fd < 0:
    raise SystemExit(f"vm.py: perf_event_open for the static-key holder failed: errno {ctypes.get_errno()}")
signal.pause()
"""


def vng_cmd(args: argparse.Namespace, vmlinuz: str, results: Path, cwd: str,
            shares: list[str], script: Path) -> list[str]:
    return [sys.executable, "-c", VNG,
            "--disable-kvm",  # /dev/kvm cannot run a stock kernel here: TCG
            "--force-9p",  # share the host root fs read-only over 9p
            "--verbose",  # kernel console on stderr: kept for diagnosing a failed boot
            "--memory", args.memory, "--cpus", str(args.cpus),
            "--run", vmlinuz,  # modules: vng links <tree>/lib/modules/<release> into the guest
            "--rwdir", str(results), "--cwd", cwd,
            *(f"--rodir={SHARE_MOUNT}{i}={d}" for i, d in enumerate(shares)),
            "--exec", f"bash {shlex.quote(str(script))}"]


def run_vm(name: str, args: argparse.Namespace) -> Result:
    """Boot kernel `name`, run pytest in it, and collect the results.

    A guest kernel that panics (seen under TCG: an int3 Oops in __schedule while the kernel
    live-patches a static key, most likely emulated cross-modifying code on two vCPUs) loses the
    whole run; it is booted again up to ``--panic-retries`` times, and the summary says so.
    A panic bpfkit caused would come back on the retry and fail the run."""
    start = time.monotonic()
    try:
        kernel = fetch_kernel(name, log=lambda m: print(m, flush=True))
    except KernelError as exc:
        return Result(name, status="error", note=str(exc))
    panics: list[str] = []
    while True:
        result = _boot_and_test(name, kernel, args)
        if result.panic is None or len(panics) >= args.panic_retries:
            break
        panics.append(result.panic)
        print(f"vm.py: the {name} guest kernel panicked ({result.panic}): booting it again", flush=True)
    if panics:
        result.note = f"{len(panics)} earlier boot(s) panicked ({'; '.join(panics)}) and ran again. {result.note}"
    result.total_s = time.monotonic() - start
    return result


def _panic_of(console: Path) -> str | None:
    """The first Oops/BUG line of a guest console that ends in a kernel panic, else None."""
    try:
        text = console.read_text(errors="replace")
    except OSError:
        return None
    if "Kernel panic - not syncing" not in text:
        return None
    messages = [line.split("] ", 1)[-1].strip() for line in text.splitlines()]
    cause = next((m for m in messages if m.startswith(("Oops:", "BUG:", "Kernel panic"))), "Kernel panic")
    rip = next((m.removeprefix("RIP: 0010:") for m in messages if m.startswith("RIP: 0010:")), "")
    return f"{cause} at {rip}" if rip else cause


def _boot_and_test(name: str, kernel: Kernel, args: argparse.Namespace) -> Result:
    result = Result(name)
    result.detail = f"{kernel.package} {kernel.version}"
    cwd = os.getcwd()
    with tempfile.TemporaryDirectory(prefix="bpfkit-vm-") as tmp:
        results, vng_tmp = Path(tmp) / "results", Path(tmp) / "vng-tmp"
        results.mkdir()
        vng_tmp.mkdir()
        script = results / "guest.sh"
        shares = cached_shares(cwd)
        script.write_text(guest_script(kernel, results, cwd, shares, args.pytest_args))
        # vng leaves a temp file behind when it is killed: keep its temp files in our dir.
        env = env_with_interpreter_bin()
        env["TMPDIR"] = str(vng_tmp)
        rc, tail = run_logged(vng_cmd(args, kernel.vmlinuz, results, cwd, shares, script), env,
                              args.timeout, results / "vng-stdout.log",
                              results / "console.log", echo_for(name, args.quiet))
        result.boot_s = _uptime(results / "started")
        finished = _uptime(results / "finished")
        if result.boot_s is not None and finished is not None:
            result.pytest_s = finished - result.boot_s
        if rc is not None and result.boot_s is None:
            result.status, result.tail = "no-boot", tail
            result.note = f"guest never ran the test script (vng exit status {rc})"
        else:
            collect(result, results, rc, tail)
            _check_exit_status(result, results, rc)
        result.panic = _panic_of(results / "console.log")
        if result.panic:
            result.status = "error"
            result.note = f"guest kernel panic: {result.panic}. {result.note}"
        keep_results(results, args.results, name)
    return result


def _uptime(path: Path) -> float | None:
    """Guest uptime written by the guest script (`started` is boot plus virtme-ng's init)."""
    try:
        return float(path.read_text().split()[0])
    except (OSError, IndexError, ValueError):
        return None


def _check_exit_status(result: Result, results: Path, rc: int | None) -> None:
    """The status vng returned must be pytest's (it is lost when the guest lacks udev)."""
    try:
        guest_rc = int((results / "pytest_rc").read_text())
    except (OSError, ValueError):
        return
    if rc is not None and rc != guest_rc:
        result.note += f" guest exit status {guest_rc} came back as {rc} (is udev installed?)"
        if result.status == "ok":
            result.status = "error"


# ---------------------------------------------------------------- report

def report(results: Iterable[Result]) -> int:
    """Print the per-kernel summary; return the runner's exit status."""
    results = list(results)
    print("\n==== bpfkit VM runner summary ====")
    for r in results:
        verdict = "PASS" if r.ok else r.status.upper() if r.status != "ok" else "FAIL"
        boot = f"boot {r.boot_s:.1f} s, " if r.boot_s is not None else ""
        boot += f"pytest {r.pytest_s:.1f} s, " if r.pytest_s is not None else ""
        print(f"{r.kernel:>5} [{verdict}] {r.passed} passed, {r.failed} failed, "
              f"{r.skipped} skipped, {r.errors} errors ({boot}total {r.total_s:.1f} s)"
              f"  {r.detail}")
        if r.note.strip():
            print(f"      note: {r.note.strip()}")
        for skip in r.skips:
            print(f"      skipped {skip}")
        if r.status in ("timeout", "no-boot", "error") and r.tail:
            print(f"      last {len(r.tail)} lines of output:")
            for line in r.tail:
                print(f"      | {line}")
    broken = sum(1 for r in results if r.status in ("timeout", "no-boot", "error"))
    # A run that broke counts as one failure, so this line never reads green by mistake.
    print(f"total: {sum(r.passed for r in results)} passed, "
          f"{sum(r.failed + r.errors for r in results) + broken} failed, "
          f"{sum(r.skipped for r in results)} skipped")
    return 0 if all(r.ok for r in results) else 1


def _vm_tools_present() -> bool:
    """qemu, the virtme_ng module, and the `virtme-run` that vng execs by name."""
    path = env_with_interpreter_bin()["PATH"]
    return (bool(shutil.which("qemu-system-x86_64")) and importlib.util.find_spec("virtme_ng") is not None
            and bool(shutil.which("virtme-run", path=path)))


def _terminate(signum: int, _frame) -> None:
    """SIGTERM/SIGHUP (e.g. from `timeout`): unwind so the VM is ended and temp dirs removed."""
    raise SystemExit(128 + signum)


def _prepare_tree_on_host() -> bool:
    """Build bpf/ and bpfkit's bytecode before booting: the guest sees the tree read-only, so
    an object older than its source could not be rebuilt there and every test using it would
    fail, and every Python process in the guest would compile bpfkit again (seconds each
    under emulation)."""
    import compileall

    if (Path.cwd() / "bpfkit").is_dir():
        compileall.compile_dir(str(Path.cwd() / "bpfkit"), quiet=2, workers=0)
    makefile = Path.cwd() / "bpf" / "Makefile"
    if not makefile.exists():
        return True
    proc = subprocess.run(["make", "-s", "-C", str(makefile.parent)], capture_output=True, text=True)
    if proc.returncode != 0:
        print(f"vm.py: building bpf/ on the host failed:\n{proc.stderr[-3000:]}", file=sys.stderr)
        return False
    return True


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _terminate)
    if any(k != "host" for k in args.kernel) and not _vm_tools_present():
        print("vm.py: qemu-system-x86_64 or virtme-ng missing: run scripts/vm-setup.sh "
              f"{sys.executable}", file=sys.stderr)
        return 2
    if any(k != "host" for k in args.kernel) and not _prepare_tree_on_host():
        return 2
    results = []
    for name in dict.fromkeys(args.kernel):  # each kernel once, in the given order
        print(f"==== {name}: pytest {shlex.join(args.pytest_args)}", flush=True)
        results.append(run_host(args) if name == "host" else run_vm(name, args))
    return report(results)


if __name__ == "__main__":
    sys.exit(main())

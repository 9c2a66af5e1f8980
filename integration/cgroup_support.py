# SPDX-License-Identifier: Apache-2.0
"""A cgroup v2 directory of the test's own, and a child process that runs inside it (no tests here).

The child is a Python process started outside the cgroup and moved in (cgroup.procs) once it is
ready, so its interpreter start-up does nothing the programs count; it then runs one command a
line from stdin (socket, file and device operations) and answers with one JSON line. Counts
are exact because nothing else is in the cgroup.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

from bpfkit._kernel import cgroupfs

CHILD = r'''
import errno, json, os, socket, sys

def connect(port):
    s = socket.socket()
    try:
        s.connect(("127.0.0.1", port))
        return s.getpeername()[1]
    except OSError as e:
        return errno.errorcode[e.errno]
    finally:
        s.close()

def udp(port, n):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    for _ in range(n):
        s.sendto(b"x", ("127.0.0.1", port))
    s.close()
    return n

def read(path):
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as e:
        return "open:" + errno.errorcode[e.errno]
    try:
        return os.read(fd, 256).decode()
    except OSError as e:
        return errno.errorcode[e.errno]
    finally:
        os.close(fd)

def priority():
    s = socket.socket()
    try:
        return s.getsockopt(socket.SOL_SOCKET, socket.SO_PRIORITY)
    finally:
        s.close()

def bind(port):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.bind(("127.0.0.1", port))
        return s.getsockname()[1]
    finally:
        s.close()

print("ready", flush=True)
for line in sys.stdin:
    try:
        result = eval(line)
    except Exception as e:
        result = "error: %r" % (e,)
    print(json.dumps(result), flush=True)
'''


class Cgroup:
    """A fresh directory under the cgroup2 mount; :meth:`close` ends its child and removes it."""

    def __init__(self, tag: str) -> None:
        self.root = cgroupfs.cgroup2_root()
        self.path = os.path.join(self.root, f"bpfkit_t_{os.getpid()}_{tag}")
        os.mkdir(self.path)
        self.children: list[Child] = []

    def child(self) -> Child:
        c = Child(self)
        self.children.append(c)
        return c

    def close(self) -> None:
        for c in self.children:
            c.close()
        self.children.clear()
        os.rmdir(self.path)


class Child:
    def __init__(self, cg: Cgroup) -> None:
        self.proc = subprocess.Popen([sys.executable, "-I", "-S", "-c", CHILD], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None and self.proc.stdout.readline().strip() == "ready"
        with open(os.path.join(cg.path, "cgroup.procs"), "w") as f:
            f.write(str(self.proc.pid))

    def __call__(self, expr: str) -> Any:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(expr + "\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def close(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            self.proc.wait(timeout=10)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def bpffs_dir(tag: str) -> str:
    """A fresh directory on bpffs (mounted at /sys/fs/bpf if needed); the caller removes it."""
    from bpfkit._kernel.bpffs import is_bpffs

    root = "/sys/fs/bpf"
    if not is_bpffs(root):
        os.makedirs(root, exist_ok=True)
        subprocess.run(["mount", "-t", "bpf", "bpf", root], check=True)
    path = os.path.join(root, f"bpfkit_test_{tag}_{os.getpid()}")
    os.mkdir(path)
    return path


def count(coll: Any, slot: int) -> int:
    """Slot ``slot`` of the test objects' ``counts`` array (bpf/include/counts.h), typed through
    BTF: a __u64."""
    return int(coll.maps["counts"][slot])

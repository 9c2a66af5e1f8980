#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Record what every kernel of the test matrix answers to bpfkit's feature probes.

    .venv/bin/python scripts/record_features.py                   # 5.10 6.1 6.12 host 7.2
    .venv/bin/python scripts/record_features.py --kernel 7.2      # only that one (others kept)

Runs integration/test_features.py::test_record_answers on the host (``host``: the running
kernel) and in a VM per other kernel (integration/vm.py, one after the other), reads the
answers and the BPF-related kernel config from each run's junit XML, and merges them into
docs/features-kernels.json, which scripts/gen_features_doc.py (the per-kernel columns of
docs/features.md) and tests/test_features_matrix.py (minimum versions against the answers) read.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "docs" / "features-kernels.json"
TEST = "integration/test_features.py::test_record_answers"
DEFAULT = ["5.10", "6.1", "6.12", "host", "7.2"]


def _property(junit: Path) -> dict:
    for prop in ET.parse(junit).iter("property"):
        if prop.get("name") == "bpfkit_features":
            return json.loads(prop.get("value") or "{}")
    raise SystemExit(f"{junit}: no bpfkit_features property (did {TEST} run?)")


def record(kernel: str, work: Path) -> dict:
    if kernel == "host":
        junit = work / "host.xml"
        proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={junit}",
                               TEST], cwd=REPO)
    else:
        proc = subprocess.run([sys.executable, str(REPO / "integration" / "vm.py"), "--kernel", kernel,
                               "--results", str(work), "--", "-q", TEST], cwd=REPO)
        junit = work / kernel / "junit.xml"
    if proc.returncode != 0 or not junit.exists():
        raise SystemExit(f"recording {kernel} failed (exit {proc.returncode})")
    got = _property(junit)
    config = got["config"] or _cached_config(kernel, got["release"])
    return {"release": got["release"], "config": config, "answers": got["answers"]}


def _cached_config(kernel: str, release: str) -> dict:
    """The config of a VM kernel that did not show it to the guest (Debian's bookworm packages
    keep it in boot/), from the package integration/vm.py unpacked into its cache."""
    sys.path.insert(0, str(REPO))
    from bpfkit.features import probes
    from integration import vm_kernels

    root = vm_kernels.cache_root() / "kernels" / kernel / "root"
    for path in (root / "boot" / f"config-{release}", root / "usr" / "lib" / "modules" / release / "config"):
        if path.exists():
            return probes.recorded_config(path.read_text(errors="replace"))
    raise SystemExit(f"no kernel config for {kernel} ({release}) in the VM or under {root}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kernel", action="append", help="5.10, 6.1, 6.12, 7.2 (VMs) or host; repeatable")
    args = parser.parse_args()
    data = json.loads(DATA.read_text()) if DATA.exists() else {"kernels": {}}
    with tempfile.TemporaryDirectory(prefix="bpfkit-features-") as tmp:
        for kernel in args.kernel or DEFAULT:
            entry = record(kernel, Path(tmp))
            name = "6.18" if kernel == "host" else kernel
            if kernel == "host":
                series = ".".join(entry["release"].split(".")[:2])
                name = series  # the host's series (6.18 here)
                entry["host"] = True
            data["kernels"][name] = entry
            print(f"recorded {name}: {entry['release']}, "
                  f"{sum(a['supported'] for a in entry['answers'].values())} of {len(entry['answers'])} supported")
    order = sorted(data["kernels"], key=lambda v: tuple(int(x) for x in v.split(".")))
    data["kernels"] = {k: data["kernels"][k] for k in order}
    DATA.write_text(json.dumps(data, indent=1, sort_keys=False) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

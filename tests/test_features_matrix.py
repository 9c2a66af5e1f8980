# SPDX-License-Identifier: Apache-2.0
"""Every probed feature's declared minimum kernel against what each kernel of the test matrix
answered (docs/features-kernels.json, recorded by scripts/record_features.py: 5.10, 6.1, 6.12
and 7.2 in VMs, the host 6.18).

A kernel at or above a feature's minimum must say yes, unless the kernel itself explains the no:
its recorded config lacks an option the feature needs (NEEDS_CONFIG), or it is a refusal this
environment is known for (KNOWN_REFUSALS, see /work/shared/ENVIRONMENT.md). A kernel below the
minimum must say no: a yes there means the declared minimum is too high.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bpfkit import features
from bpfkit.features import probes

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "docs" / "features-kernels.json"

# Feature -> the kernel config options it needs; a "no" is explained when the kernel's recorded
# config has one of them unset (neither =y nor =m).
NEEDS_CONFIG: dict[str, tuple[str, ...]] = {
    "kprobe_pmu": ("CONFIG_KPROBES", "CONFIG_KPROBE_EVENTS"),
    "kprobe_events": ("CONFIG_KPROBES", "CONFIG_KPROBE_EVENTS"),
    "kprobe_multi": ("CONFIG_FPROBE",),
    "kprobe_session": ("CONFIG_FPROBE",),
    "prog_type_lirc_mode2": ("CONFIG_BPF_LIRC_MODE2",),
    "prog_type_lsm": ("CONFIG_BPF_LSM",),
    "netkit_link": ("CONFIG_NETKIT",),
    "netfilter_link": ("CONFIG_NETFILTER_BPF_LINK",),
}
# (kernel, feature) -> why that kernel refuses a feature it has and whose config it has ("*":
# every kernel recorded here).
_TRAMPOLINES = ("the host refuses BPF trampolines: EPERM with an empty verifier log before verification "
                "(ENVIRONMENT.md); they load in the VMs")
KNOWN_REFUSALS: dict[tuple[str, str], str] = {
    ("6.18", "tracing_programs"): _TRAMPOLINES,
    ("6.18", "prog_type_tracing"): _TRAMPOLINES,
    ("6.18", "prog_type_ext"): _TRAMPOLINES,
    ("6.18", "prog_type_lsm"): _TRAMPOLINES,
    ("*", "hardware_pmu"): "no hardware PMU: the host is a virtual machine and the VMs run under TCG emulation",
}


# (kernel, feature) -> why that kernel, older than the feature's first release, has it anyway.
BACKPORTED: dict[tuple[str, str], str] = {
    ("6.12", "cgroup_mprog"): ("Debian's 6.12.117 has ordered cgroup attach though upstream merged it for 6.16: its BTF "
                               "has struct cgroup_bpf.revisions, and BPF_LINK_CREATE with BPF_F_AFTER goes on to the "
                               "cgroup fd (EBADF) where 6.1 refuses the flag (EINVAL)"),
}


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split("."))


def _kernels() -> dict[str, dict]:
    if not DATA.exists():
        pytest.skip("no docs/features-kernels.json: run scripts/record_features.py")
    return json.loads(DATA.read_text())["kernels"]


def _unset(config: dict[str, str], option: str) -> bool:
    return config.get(option) not in ("y", "m")


def _explained(version: str, kernel: dict, name: str) -> str | None:
    for key in ((version, name), ("*", name)):
        if key in KNOWN_REFUSALS:
            return KNOWN_REFUSALS[key]
    for option in NEEDS_CONFIG.get(name, ()):
        if kernel["config"] and _unset(kernel["config"], option):
            return f"{option} unset"
    return None


def test_the_matrix_is_recorded_for_every_feature() -> None:
    kernels = _kernels()
    assert {"5.10", "6.1", "6.12", "7.2"} <= set(kernels), sorted(kernels)
    assert any(k.get("host") for k in kernels.values())
    for version, kernel in kernels.items():
        assert kernel["config"], f"{version}: no kernel config was recorded"
        missing = sorted(set(features.names()) - set(kernel["answers"]))
        assert not missing, f"{version} has no answer for {missing}: run scripts/record_features.py"


def test_declared_minimum_kernels_fit_the_recorded_answers() -> None:
    problems = []
    for version, kernel in _kernels().items():
        for name, answer in kernel["answers"].items():
            if name not in features.names():
                continue  # a probe since removed
            minimum = features.describe(name).min_version
            if not minimum:
                continue
            if _version(version) >= _version(minimum) and not answer["supported"]:
                if not _explained(version, kernel, name):
                    problems.append(f"{name} (since {minimum}): {version} says no: {answer['reason']}")
            elif _version(version) < _version(minimum) and answer["supported"] and (version, name) not in BACKPORTED:
                problems.append(f"{name} (since {minimum}): {version}, older, says yes: {answer['reason']}")
    assert not problems, "declared minimum kernels that the recorded answers contradict:\n" + "\n".join(problems)


def test_explanations_are_used_and_true() -> None:
    """Every NEEDS_CONFIG/KNOWN_REFUSALS entry names a probed feature, and a config option an
    explanation relies on is one the recording captures (probes.CONFIG_RECORDED). An option
    absent from a config counts as unset: Debian's kernels, for one, lack CONFIG_BPF_LIRC_MODE2
    altogether (it needs RC_CORE=y; they build RC_CORE=m)."""
    names = set(features.names())
    assert set(NEEDS_CONFIG) <= names and {n for _, n in KNOWN_REFUSALS} <= names
    assert {n for _, n in BACKPORTED} <= names
    assert {v for v, _ in KNOWN_REFUSALS} - {"*"} <= set(_kernels())
    for options in NEEDS_CONFIG.values():
        for option in options:
            assert probes.CONFIG_RECORDED.match(f"{option}=y"), f"{option} is not among the recorded options"


def test_docs_have_a_column_per_recorded_kernel() -> None:
    text = (REPO / "docs" / "features.md").read_text()
    for version, kernel in _kernels().items():
        heading = f"{version} (host)" if kernel.get("host") else version
        assert f"| {heading} |" in text, f"docs/features.md lacks the {heading} column: run scripts/gen_features_doc.py"
    newest = list(_kernels())[-1]
    assert f"### What {newest} offers beyond" in text

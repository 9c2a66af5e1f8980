# SPDX-License-Identifier: Apache-2.0
"""deploy/kubernetes/ and the production image (docs/fleet.md): the manifests parse, and their
security context, mounts and ports are what docs/fleet.md says; the metrics config of the
ConfigMap is a valid bpfkit metrics config; the Dockerfile's production target builds with
podman and `bpfkit features` runs in it (--privileged --pid=host)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from conftest import start_attached

yaml = pytest.importorskip("yaml", reason="needs PyYAML (the metrics extra)")

REPO = Path(__file__).resolve().parent.parent
DEPLOY = REPO / "deploy/kubernetes"
FLEET = (REPO / "docs/fleet.md").read_text()


def _docs() -> dict[str, Any]:
    out: dict[str, Any] = {}
    for path in sorted(DEPLOY.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            out[doc["kind"]] = doc
    return out


def _table(heading: str) -> list[list[str]]:
    """The rows of the first table under ``## heading`` in docs/fleet.md, cells stripped of backticks."""
    section = FLEET.split(f"## {heading}\n", 1)[1]
    rows = [line for line in section.split("\n## ", 1)[0].splitlines() if line.startswith("|")]
    return [[c.strip().strip("`") for c in row.strip("|").split("|")] for row in rows[2:]]


def _container() -> dict[str, Any]:
    ds = _docs()["DaemonSet"]
    (container,) = ds["spec"]["template"]["spec"]["containers"]
    return dict(container)


def test_manifests_parse() -> None:
    docs = _docs()
    assert set(docs) == {"Namespace", "ConfigMap", "DaemonSet", "Service", "Kustomization"}
    listed = set(docs["Kustomization"]["resources"])
    assert listed == {p.name for p in DEPLOY.glob("*.yaml")} - {"kustomization.yaml"}
    assert all(d["metadata"]["namespace"] == "bpfkit" for k, d in docs.items() if k in ("ConfigMap", "DaemonSet", "Service"))


def test_security_context_is_the_documented_one() -> None:
    ds = _docs()["DaemonSet"]
    pod = ds["spec"]["template"]["spec"]
    assert pod["hostPID"] is True and "hostPID: true" in FLEET
    sc = _container()["securityContext"]
    assert sc["privileged"] is False and sc["allowPrivilegeEscalation"] is False and sc["readOnlyRootFilesystem"] is True
    assert sc["capabilities"]["drop"] == ["ALL"]
    documented = [row[0].removeprefix("CAP_") for row in _table("Privileges: the least that works")]
    assert sc["capabilities"]["add"] == documented == ["BPF", "PERFMON", "SYS_RESOURCE"]
    assert "NET_ADMIN" not in sc["capabilities"]["add"] and "`CAP_NET_ADMIN`: add it" in FLEET
    assert sc["seccompProfile"]["type"] == "RuntimeDefault" and "seccompProfile: RuntimeDefault" in FLEET


def test_mounts_are_the_documented_ones() -> None:
    pod = _docs()["DaemonSet"]["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["mountPath"]: m for m in _container()["volumeMounts"]}
    host = {}
    for path, m in mounts.items():
        hp = volumes[m["name"]].get("hostPath")
        if hp is not None:
            host[hp["path"]] = (path, bool(m.get("readOnly")))
    documented = {row[0]: (row[1].split(" ")[0].strip("`"), "read-only" in row[1]) for row in _table("Mounts")}
    assert host == documented
    assert set(documented) == {"/sys/kernel/tracing", "/sys/fs/bpf", "/sys/kernel/btf"}
    assert mounts["/sys/fs/bpf"]["mountPropagation"] == "HostToContainer"
    assert {"/etc/bpfkit/config", "/etc/bpfkit/objects"} <= set(mounts) and "/etc/bpfkit/objects" in FLEET


def test_ports_and_scrape_annotations() -> None:
    docs = _docs()
    ((port, name, _),) = _table("Ports and scraping")
    (cport,) = _container()["ports"]
    assert (cport["containerPort"], cport["name"]) == (int(port), name)
    args = _container()["args"]
    assert args[:2] == ["attach", "/etc/bpfkit/objects/tool.bpf.o"] and args[args.index("--metrics") + 1] == f":{port}"
    svc = docs["Service"]
    assert svc["spec"]["ports"][0]["port"] == int(port) and svc["spec"]["ports"][0]["targetPort"] == name
    want = {"prometheus.io/scrape": "true", "prometheus.io/port": port, "prometheus.io/path": "/metrics"}
    assert svc["metadata"]["annotations"] == want
    assert docs["DaemonSet"]["spec"]["template"]["metadata"]["annotations"] == want
    assert svc["spec"]["selector"] == docs["DaemonSet"]["spec"]["selector"]["matchLabels"]


def test_configmap_holds_a_valid_metrics_config() -> None:
    from bpfkit.metrics.config import parse_config

    cm = _docs()["ConfigMap"]
    path = _container()["args"][_container()["args"].index("--metrics-config") + 1]
    assert path == "/etc/bpfkit/config/" + next(iter(cm["data"]))
    config = parse_config(cm["data"]["metrics.yaml"], "configmap.yaml")
    assert config.prefix == "node" and "calls" in config.maps


def _podman() -> str | None:
    if shutil.which("podman") is None or shutil.which("runc") is None or os.geteuid() != 0:
        return "needs podman and runc, as root (scripts/podman-env.sh; ENVIRONMENT.md)"
    if not (REPO / "bpfkit").is_dir():
        return "builds the image from the checkout's bpfkit/, absent here (the suite runs against an installed wheel)"
    return None


def _build_script() -> str:
    return r"""
set -euo pipefail
source scripts/podman-env.sh
ensure_base_image
args=()
[ -n "$HOST_CA" ] && args+=(--volume "$HOST_CA:/run/host-ca.crt:ro" --build-arg PIP_CERT=/run/host-ca.crt)
podman build -q --network host "${args[@]}" --target production -t localhost/bpfkit:prod . >/dev/null
"""


@pytest.mark.skipif(_podman() is not None, reason=_podman() or "")
def test_production_image_runs_features() -> None:
    script = _build_script() + r"""
podman run --rm --privileged --pid=host localhost/bpfkit:prod features
echo "--- contents"
podman run --rm --entrypoint sh localhost/bpfkit:prod -c 'command -v clang gcc cc bpftool; ls /opt/bpfkit/lib/python3*/site-packages | grep -c -i -E "^(tests|pytest)" || true'
"""
    proc = subprocess.run(["bash", "-c", script], cwd=REPO, capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    features, contents = proc.stdout.split("--- contents\n")
    assert re.search(r"^\s*ringbuf\s+yes\s", features, re.M), features  # the node kernel, seen from the image
    assert contents.split() == ["0"], contents  # no compiler, no bpftool, no test packages


@pytest.mark.skipif(_podman() is not None, reason=_podman() or "")
def test_production_image_with_the_daemonsets_capabilities(bpf_obj: Any) -> None:
    """The DaemonSet's privileges, in podman: every capability dropped but BPF and PERFMON
    (SYS_RESOURCE is for kernels before 5.11; this host cannot grant it), read-only root, no
    new privileges, the host's pid namespace and the three mounts; seccomp unconfined because
    podman's default profile (containers-common, Debian 12) refuses bpf() without
    CAP_SYS_ADMIN (docs/fleet.md). attach --metrics serves this process's getppid() count, and
    SIGTERM (podman stop) detaches cleanly."""
    import socket
    import time
    import urllib.request

    build = subprocess.run(["bash", "-c", _build_script()], cwd=REPO, capture_output=True, text=True, timeout=1800)
    assert build.returncode == 0, build.stderr[-3000:]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    name = f"bpfkit-leastcap-{os.getpid()}"
    cache = os.environ.get("BPFKIT_CACHE") or os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "bpfkit")
    env = dict(os.environ, CONTAINERS_CONF=os.path.join(cache, "podman/containers.conf"))  # scripts/podman-env.sh's
    cmd = ["podman", "run", "--rm", "--name", name, "--pid=host", "--network=host", "--read-only",
           "--cap-drop=ALL", "--cap-add=BPF,PERFMON", "--security-opt", "no-new-privileges",
           "--security-opt", "seccomp=unconfined",
           "-v", "/sys/kernel/tracing:/sys/kernel/tracing", "-v", "/sys/fs/bpf:/sys/fs/bpf", "-v", "/sys/kernel/btf:/sys/kernel/btf:ro",
           "-v", f"{bpf_obj('metrics_demo')}:/etc/bpfkit/objects/tool.bpf.o:ro",
           "localhost/bpfkit:prod", "attach", "/etc/bpfkit/objects/tool.bpf.o", "--metrics", f"127.0.0.1:{port}",
           "--set", f"target_tgid={os.getpid()}"]
    proc, seen = start_attached(cmd, env=env)
    try:
        assert any("serving 4 map(s) as metrics" in s for s in seen), "".join(seen)
        for _ in range(11):
            os.getppid()
        deadline = time.monotonic() + 10
        body = ""
        while time.monotonic() < deadline and 'totals_events{key="0"} 11' not in body:
            body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
            time.sleep(0.2)
        assert 'bpfkit_tool_totals_events{key="0"} 11' in body, body
        subprocess.run(["podman", "stop", "-t", "20", name], capture_output=True, env=env, timeout=60)
        out, _ = proc.communicate(timeout=60)
        assert proc.returncode == 0 and out.rstrip().endswith("detached"), "".join(seen) + out
    finally:
        if proc.poll() is None:
            subprocess.run(["podman", "kill", name], capture_output=True, env=env)
            proc.communicate()

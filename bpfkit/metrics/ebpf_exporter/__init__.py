# SPDX-License-Identifier: Apache-2.0
"""ebpf_exporter compatibility: its configs served unchanged, with its semantics (docs/metrics.md,
"For ebpf_exporter users").

* :mod:`.config`: the YAML format (``metrics:``, ``tracing:``, ``kaddrs:``, ``cgroup_id_map:``);
* :mod:`.decoders`: its decoder chains over the bytes of a map key;
* :mod:`.histogram`: its bucket rules (exp2, exp2zero, linear, fixed; the sum slot);
* :mod:`.collector`: the Prometheus families of loaded configs;
* :mod:`.tracing`: ring buffer records as OpenTelemetry spans;
* :mod:`.run`: load, set up, attach and serve configs (``bpfkit exporter``).
"""

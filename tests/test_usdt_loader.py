# SPDX-License-Identifier: Apache-2.0
"""The loader side of USDT programs (no kernel): libbpf's usdt.bpf.h declares its helpers
``__weak __hidden`` global functions, which libbpf marks static in BTF so the verifier checks
them in their caller's context (a global function is verified alone, with unknown
arguments, and bpf_usdt_arg()'s ``*res = 0`` is then refused)."""

from __future__ import annotations

import bpfkit
from bpfkit.btf.types import Func, Kind, Linkage


def test_hidden_usdt_helpers_are_static_in_btf(bpf_obj):
    spec = bpfkit.load_spec(bpf_obj("usdt_args"))
    for name in ("bpf_usdt_arg", "bpf_usdt_arg_cnt", "bpf_usdt_cookie"):
        funcs = [t for t in spec.btf.find(name, Kind.FUNC, own_only=True) if isinstance(t, Func)]
        assert funcs and all(f.linkage == Linkage.STATIC for f in funcs), name
    # the programs themselves stay global
    assert all(t.linkage == Linkage.GLOBAL for t in spec.btf.find("on_tick", Kind.FUNC, own_only=True))
    assert {"__bpf_usdt_specs", "__bpf_usdt_ip_to_spec_id"} <= set(spec.maps)
    assert spec.maps["__bpf_usdt_specs"].value_size == 208

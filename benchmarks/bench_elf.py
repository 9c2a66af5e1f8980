#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""bpfkit's ELF reader against pyelftools, on the files bpfkit reads (the figures quoted in
bpfkit/elf/reader.py's docstring):

    python3 benchmarks/bench_elf.py [--object loader_core] [--runs 7]

* the host's libc: .dynsym/.symtab with symbol versions (what a uprobe attach parses);
* a BPF object (bpf/.output/OBJECT.bpf.o): sections, symbols and relocations (what
  ``bpfkit load`` parses);
* the import of ``elftools.elf.elffile`` (cold, in a fresh interpreter).

Prints the median and min of each (the min is what a shared machine inflates least).
"""

from __future__ import annotations

import argparse
import io
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bpfkit.elf.reader import ElfFile  # noqa: E402
from bpfkit.link._binary import BinaryImage, resolve_binary  # noqa: E402


def timed(fn: Callable[[], object], runs: int) -> str:
    ts = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return f"{statistics.median(ts) * 1e3:8.1f} ms median {min(ts) * 1e3:8.1f} ms min"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--object", default="loader_core")
    ap.add_argument("--runs", type=int, default=7)
    args = ap.parse_args()
    libc = resolve_binary("libc")
    obj = (REPO / "bpf/.output" / f"{args.object}.bpf.o").read_bytes()
    cold = subprocess.run([sys.executable, "-X", "importtime", "-c", "import elftools.elf.elffile"],
                          capture_output=True, text=True).stderr.strip().splitlines()[-1]
    from elftools.elf.elffile import ELFFile

    def pe_libc() -> None:
        with open(libc, "rb") as f:
            elf = ELFFile(f)
            [s for s in elf.iter_segments() if s["p_type"] == "PT_LOAD"]
            for sec in elf.iter_sections():
                if sec["sh_type"] in ("SHT_DYNSYM", "SHT_SYMTAB"):
                    for sym in sec.iter_symbols():
                        (sym.name, sym["st_value"], sym["st_size"], sym["st_info"]["type"])
            versym = elf.get_section_by_name(".gnu.version")
            if versym is not None:
                for i in range(versym.num_symbols()):
                    versym.get_symbol(i)["ndx"]

    def pe_obj() -> None:
        elf = ELFFile(io.BytesIO(obj))
        for sec in elf.iter_sections():
            if sec["sh_type"] == "SHT_SYMTAB":
                [(s.name, s["st_value"]) for s in sec.iter_symbols()]
            elif sec["sh_type"] == "SHT_REL":
                [(r["r_offset"], r["r_info_sym"]) for r in sec.iter_relocations()]
            sec.data()

    def ours_obj() -> None:
        elf = ElfFile(obj)
        for rel, _ in elf.relocation_sections():
            elf.relocations(rel)

    print(f"libc ({libc}): symbols with versions")
    print(f"  bpfkit reader  {timed(lambda: BinaryImage(libc).functions, args.runs)}")
    print(f"  pyelftools     {timed(pe_libc, args.runs)}")
    print(f"{args.object}.bpf.o ({len(obj)} bytes): sections, symbols, relocations")
    print(f"  bpfkit reader  {timed(ours_obj, args.runs * 3)}")
    print(f"  pyelftools     {timed(pe_obj, args.runs * 3)}")
    print(f"import elftools.elf.elffile, cold (-X importtime, us): {cold}")


if __name__ == "__main__":
    main()

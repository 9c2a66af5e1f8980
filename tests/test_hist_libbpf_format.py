# SPDX-License-Identifier: Apache-2.0
"""bpfkit.hist's ``style="libbpf-tools"``: byte for byte what libbpf-tools' trace_helpers.c
print_log2_hist and print_linear_hist print (bcc commit 6d0a964c, libbpf-tools/trace_helpers.c).

Two oracles: pictures written out by hand from the C format strings, and a line-by-line
transliteration of the C functions below using Python's ``%`` formatting, which takes the same
printf format strings (``%*s``, ``%-*s``, ``%*lld`` with the ``ll`` dropped) with the same
meaning; it runs over many shapes (empty, one slot, leading zeros, wide slots past 32, counts
that make the unsigned-int bar arithmetic wrap)."""

from __future__ import annotations

import io
import random
from contextlib import redirect_stdout

import pytest

from bpfkit import hist


# ------------------------------------------------------------------- the C, transliterated
def _u32(v: int) -> int:
    return v & 0xFFFFFFFF


def _as_d(v: int) -> int:  # an unsigned int given to %d
    v = _u32(v)
    return v - (1 << 32) if v >= 1 << 31 else v


def c_print_stars(out: list[str], val: int, val_max: int, width: int) -> None:
    num_stars = _u32(min(val, val_max) * width) // val_max
    num_spaces = width - num_stars
    need_plus = val > val_max
    out.append("*" * num_stars)
    out.append(" " * num_spaces)
    if need_plus:
        out.append("+")


def c_print_log2_hist(vals: list[int], val_type: str) -> str:
    out: list[str] = []
    stars_max, idx_max, val_max = 40, -1, 0
    vals = [_u32(v) for v in vals]
    for i, val in enumerate(vals):
        if val > 0:
            idx_max = i
        if val > val_max:
            val_max = val
    if idx_max < 0:
        return ""
    out.append("%*s%-*s : count    distribution\n" % (  # noqa: UP031 - the C's printf format, as it is
        5 if idx_max <= 32 else 15, "", 19 if idx_max <= 32 else 29, val_type))
    stars = stars_max if idx_max <= 32 else stars_max // 2
    for i in range(idx_max + 1):
        low = (1 << (i + 1)) >> 1
        high = (1 << (i + 1)) - 1
        if low == high:
            low -= 1
        val = vals[i]
        width = 10 if idx_max <= 32 else 20
        out.append("%*d -> %-*d : %-8d |" % (width, low, width, high, _as_d(val)))  # noqa: UP031
        c_print_stars(out, val, val_max, stars)
        out.append("|\n")
    return "".join(out)


def c_print_linear_hist(vals: list[int], base: int, step: int, val_type: str) -> str:
    out: list[str] = []
    stars_max, idx_min, idx_max, val_max = 40, -1, -1, 0
    vals = [_u32(v) for v in vals]
    for i, val in enumerate(vals):
        if val > 0:
            idx_max = i
            if idx_min < 0:
                idx_min = i
        if val > val_max:
            val_max = val
    if idx_max < 0:
        return ""
    out.append("     %-13s : count     distribution\n" % val_type)  # noqa: UP031
    for i in range(idx_min, idx_max + 1):
        val = vals[i]
        if not val:
            continue
        out.append("        %-10d : %-8d |" % (_as_d(base + i * step), _as_d(val)))  # noqa: UP031
        c_print_stars(out, val, val_max, stars_max)
        out.append("|\n")
    return "".join(out)


def printed(text: str) -> str:
    """What ``print(text)`` writes for a non-empty picture (render() leaves the last newline off)."""
    buf = io.StringIO()
    with redirect_stdout(buf):
        if text:
            print(text)
    return buf.getvalue()


# ------------------------------------------------------------------- by hand
def test_log2_by_hand() -> None:
    got = printed(hist.log2_hist([1, 0, 4, 2], "usecs").render(style="libbpf-tools"))
    bar40 = "*" * 40
    assert got == (
        "     usecs               : count    distribution\n"
        "         0 -> 1          : 1        |**********                              |\n"
        "         2 -> 3          : 0        |                                        |\n"
        "         4 -> 7          : 4        |" + bar40 + "|\n"
        "         8 -> 15         : 2        |********************                    |\n")
    # bcc's picture differs in the header only, for these counts
    assert hist.log2_hist([1, 0, 4, 2], "usecs").render().splitlines()[0] == \
        "     usecs               : count     distribution"


def test_linear_by_hand_skips_zero_rows() -> None:
    got = printed(hist.linear_hist([0, 3, 0, 6], "msecs", base=10, step=5).render(style="libbpf-tools"))
    assert got == (
        "     msecs         : count     distribution\n"
        "        15         : 3        |********************                    |\n"
        "        25         : 6        |****************************************|\n")


def test_wide_log2_by_hand() -> None:
    counts = [0] * 34
    counts[33] = 1
    got = hist.log2_hist(counts, "nsecs").render(style="libbpf-tools").splitlines()
    assert got[0] == " " * 15 + "nsecs" + " " * 24 + " : count    distribution"
    assert got[-1] == f"{8589934592:>20d} -> {17179869183:<20d} : 1        |{'*' * 20}|"
    assert got[1] == f"{0:>20d} -> {1:<20d} : 0        |{' ' * 20}|"


def test_empty_prints_nothing() -> None:
    assert hist.log2_hist([0, 0, 0]).render(style="libbpf-tools") == ""
    assert hist.linear_hist([]).render(style="libbpf-tools") == ""


def test_unknown_style_refused() -> None:
    from bpfkit.errors import UsageError

    with pytest.raises(UsageError):
        hist.log2_hist([1]).render(style="bpftrace")  # type: ignore[arg-type]


# ------------------------------------------------------------------- many shapes
def _shapes() -> list[list[int]]:
    rng = random.Random(38)
    shapes = [[1], [0, 1], [5, 0, 0, 0, 1], [0, 0, 0, 7, 7, 7], [1] * 27, [3] * 33, [0] * 32 + [9],
              [0] * 33 + [9], [1] + [0] * 40 + [2], [0xFFFFFFFF, 1, 2], [0x80000000, 0x7FFFFFFF],
              [200_000_000, 199_999_999, 1], [1 << 32 | 5, 3]]
    for _ in range(200):
        n = rng.randint(1, 64)
        top = rng.choice([1, 10, 1000, 10**6, 10**9, 4_000_000_000])
        shapes.append([rng.choice([0, 0, rng.randint(0, top)]) for _ in range(n)])
    return shapes


@pytest.mark.parametrize("unit", ["usecs", "msecs", "a-long-unit-name-past-the-column"])
def test_log2_matches_the_c(unit: str) -> None:
    for counts in _shapes():
        want = c_print_log2_hist(counts, unit)
        got = printed(hist.log2_hist(counts, unit).render(style="libbpf-tools"))
        assert got == want, counts


def test_linear_matches_the_c() -> None:
    for i, counts in enumerate(_shapes()):
        base, step = (0, 1) if i % 3 == 0 else (i, 1 + i % 7)
        want = c_print_linear_hist(counts, base, step, "slots")
        got = printed(hist.linear_hist(counts, "slots", base=base, step=step).render(style="libbpf-tools"))
        assert got == want, (counts, base, step)


# ------------------------------------------------------------------- per-key sections
class _Hist:
    """A typed map value as bpfkit decodes runqlat's ``struct hist {__u32 slots[26]; char comm[16];}``."""

    _fields = ("slots", "comm")

    def __init__(self, slots: list[int], comm: bytes | str) -> None:
        self.slots = slots
        self.comm = comm


def test_runqlat_per_process_sections() -> None:
    maps = {42: _Hist([0, 2, 1] + [0] * 23, b"sleepy\0\0\0"), 7: _Hist([1] + [0] * 25, "cat")}
    hists = hist.per_key(maps, "usecs")
    assert [h.value_fields for h in hists] == [{"comm": "cat"}, {"comm": b"sleepy\0\0\0"}]
    got = printed(hist.render(hists, style="libbpf-tools", section="pid = {label} {comm}"))
    want = "".join("\npid = %d %s\n" % (pid, comm) + c_print_log2_hist(v.slots, "usecs")  # noqa: UP031 - runqlat.c's
                   for pid, comm, v in ((7, "cat", maps[7]), (42, "sleepy", maps[42])))
    assert got == want


def test_section_from_key_fields_and_callable() -> None:
    pairs = [({"dev": 8, "slot": 1}, 3), ({"dev": 8, "slot": 2}, 1)]
    hists = hist.per_key(pairs)
    assert hist.render(hists, section="disk = {label}\t").startswith("\ndisk = 8\t\n")
    pairs2 = [({"dev": 8, "op": 1, "slot": 0}, 3)]
    text = hist.render(hist.per_key(pairs2), section="disk = {dev} op {op}", style="libbpf-tools")
    assert text.startswith("\ndisk = 8 op 1\n")
    assert hist.render(hists, section=lambda h: f"<{h.label}>").startswith("\n<8>\n")


def test_section_naming_a_missing_field_says_what_it_may_name() -> None:
    from bpfkit.errors import UsageError

    with pytest.raises(UsageError, match=r"\{comm\}"):
        hist.render(hist.per_key({1: _Hist([1], "x")}), section="{pid}")


def test_empty_histogram_under_a_section() -> None:
    hists = hist.per_key({1: _Hist([0, 0], "idle"), 2: _Hist([1], "busy")})
    got = printed(hist.render(hists, style="libbpf-tools", section="pid = {label} {comm}"))
    assert got == "\npid = 1 idle\n" + "\npid = 2 busy\n" + c_print_log2_hist([1], "value")


def test_bcc_picture_unchanged() -> None:
    """The default stays bcc's (tests/test_hist.py checks it against bcc's table.py)."""
    h = hist.log2_hist([1, 0, 4, 2], "usecs")
    assert h.render() == h.render(style="bcc") == str(h)
    assert hist.render([h]) == h.render()

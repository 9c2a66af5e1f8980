# SPDX-License-Identifier: Apache-2.0
"""A self-contained interactive SVG flame graph, written by bpfkit (no external script, font
or stylesheet): the layout of Brendan Gregg's flamegraph.pl, root at the bottom, each frame
as wide as its share of the total, children sorted by name. In a browser: hover shows a
frame's name, value and share; click zooms into a frame (its ancestors stay, dimmed; "Reset
Zoom" or Escape returns); "Search" (or Ctrl-F) highlights frames matching a regular
expression and shows the share they cover. Frames narrower than 0.1 px are left out, as
flamegraph.pl's --minwidth does. Kernel frames (``_[k]``) are coloured orange, others by a
hash of the name in the reds and yellows, so a name keeps its colour across graphs.

Names come from symbol tables other people wrote: each goes through bpfkit._visible (XML 1.0
allows no C0 control but tab, newline and carriage return, not even as ``&#1;``, no lone
surrogate and not U+FFFE/U+FFFF; newline and tab in an attribute would be read back as
spaces), then html.escape; the graph is well-formed XML whatever the names hold.
"""

from __future__ import annotations

import zlib
from html import escape
from typing import Any

from .._visible import visible
from .model import KERNEL_SUFFIX, Profile

__all__ = ["to_svg"]

WIDTH = 1200
FRAME_H = 16
FONT = 12
XPAD = 10
TOP = 3 * FRAME_H
BOTTOM = 2 * FRAME_H
MIN_WIDTH_PX = 0.1
CHAR_W = 0.59 * FONT  # flamegraph.pl's estimate for Verdana

_SCRIPT = r"""
"use strict";
var W = %(width)d, XPAD = %(xpad)d, CHAR_W = %(char_w)f, TOTAL = %(total)d, UNIT = "%(unit)s";
var frames, details, unzoombtn, matchedtxt, searching = null, zoomed = null;
function init() {
  frames = Array.prototype.slice.call(document.getElementById("frames").getElementsByTagName("g"));
  details = document.getElementById("details");
  unzoombtn = document.getElementById("unzoom");
  matchedtxt = document.getElementById("matched");
  frames.forEach(function (g) {
    g.addEventListener("click", function (e) { zoom(g); e.stopPropagation(); });
    g.addEventListener("mouseover", function () { details.textContent = describe(g); });
    g.addEventListener("mouseout", function () { details.textContent = " "; });
  });
  document.getElementById("search").addEventListener("click", searchPrompt);
  unzoombtn.addEventListener("click", unzoom);
  window.addEventListener("keydown", function (e) {
    if ((e.ctrlKey || e.metaKey) && e.key === "f") { e.preventDefault(); searchPrompt(); }
    else if (e.key === "Escape") { resetSearch(); unzoom(); }
  });
  layout(0, TOTAL, -1);
}
function num(g, k) { return parseFloat(g.getAttribute("data-" + k)); }
function describe(g) {
  var v = num(g, "v");
  return g.getAttribute("data-n") + " (" + v + " " + UNIT + ", " + (100 * v / TOTAL).toFixed(2) + "%%)";
}
function fit(g, w) {
  var t = g.getElementsByTagName("text")[0], name = g.getAttribute("data-n");
  var n = Math.floor((w - 6) / CHAR_W);
  t.textContent = n < 3 ? "" : (name.length <= n ? name : name.substring(0, n - 2) + "..");
}
function layout(s0, v0, d0) {
  frames.forEach(function (g) {
    var s = num(g, "s"), v = num(g, "v"), d = num(g, "d");
    var r = g.getElementsByTagName("rect")[0], t = g.getElementsByTagName("text")[0];
    var inside = s >= s0 && s + v <= s0 + v0 && d >= d0;
    var above = s <= s0 && s + v >= s0 + v0 && d < d0;
    if (!inside && !above) { g.style.display = "none"; return; }
    g.style.display = "";
    var x, w;
    if (inside) { x = XPAD + (s - s0) / v0 * (W - 2 * XPAD); w = v / v0 * (W - 2 * XPAD); }
    else { x = XPAD; w = W - 2 * XPAD; }
    g.setAttribute("class", above ? "f parent" : "f");
    r.setAttribute("x", x); r.setAttribute("width", Math.max(w, 0));
    t.setAttribute("x", x + 3);
    fit(g, w);
  });
}
function zoom(g) {
  zoomed = g;
  layout(num(g, "s"), num(g, "v"), num(g, "d"));
  unzoombtn.setAttribute("class", "btn");
  if (searching) search(searching);
}
function unzoom() {
  zoomed = null;
  layout(0, TOTAL, -1);
  unzoombtn.setAttribute("class", "btn hide");
}
function searchPrompt() {
  var term = window.prompt("Search for (a regular expression)", searching ? searching.source : "");
  if (term) search(new RegExp(term)); else resetSearch();
}
function resetSearch() {
  searching = null;
  frames.forEach(function (g) { var r = g.getElementsByTagName("rect")[0]; r.setAttribute("fill", r.getAttribute("data-fill")); });
  matchedtxt.textContent = " ";
}
function search(re) {
  searching = re;
  var spans = [];
  frames.forEach(function (g) {
    var r = g.getElementsByTagName("rect")[0];
    if (re.test(g.getAttribute("data-n"))) {
      r.setAttribute("fill", "rgb(230,0,230)");
      spans.push([num(g, "s"), num(g, "s") + num(g, "v")]);
    } else r.setAttribute("fill", r.getAttribute("data-fill"));
  });
  spans.sort(function (a, b) { return a[0] - b[0]; });
  var covered = 0, end = -1;
  spans.forEach(function (p) {
    if (p[0] >= end) { covered += p[1] - p[0]; end = p[1]; }
    else if (p[1] > end) { covered += p[1] - end; end = p[1]; }
  });
  matchedtxt.textContent = "Matched: " + (100 * covered / TOTAL).toFixed(1) + "%%";
}
window.addEventListener("load", init);
"""

_STYLE = f"""
text {{ font-family: Verdana, sans-serif; font-size: {FONT}px; fill: rgb(0,0,0); }}
#title {{ text-anchor: middle; font-size: {FONT + 5}px; }}
.btn {{ cursor: pointer; }} .btn:hover {{ text-decoration: underline; }} .hide {{ display: none; }}
.f {{ cursor: pointer; }} .f:hover rect {{ stroke: black; stroke-width: 0.5; }}
.parent {{ opacity: 0.5; }}
#matched {{ text-anchor: end; }}
"""


def _color(name: str) -> str:
    h = zlib.crc32(name.encode())
    a, b, c = h & 0xFF, (h >> 8) & 0xFF, (h >> 16) & 0xFF
    if name.endswith(KERNEL_SUFFIX):  # orange, as flamegraph.pl --colors=java's kernel frames
        return f"rgb({200 + a % 56},{110 + b % 80},{c % 40})"
    return f"rgb({205 + a % 50},{b % 230},{c % 55})"  # "hot"


def _tree(profile: Profile) -> dict[str, Any]:
    root: dict[str, Any] = {"v": 0, "c": {}}
    shown = {n: visible(n) for n in set[str]().union(*profile.stacks)}  # once per distinct name
    for stack, value in profile.stacks.items():
        if value <= 0:
            continue
        root["v"] += value
        node = root
        for name in stack:
            node = node["c"].setdefault(shown[name], {"v": 0, "c": {}})
            node["v"] += value
    return root


def to_svg(profile: Profile, title: str = "Flame Graph") -> str:
    root = _tree(profile)
    total = root["v"]
    unit = visible(profile.unit) if profile.unit not in ("count", "") else "samples"
    title = visible(title)
    span = WIDTH - 2 * XPAD
    rows: list[tuple[str, int, int, int]] = []  # (name, start, value, depth)

    def walk(node: dict[str, Any], name: str, start: int, depth: int) -> int:
        if total and node["v"] / total * span < MIN_WIDTH_PX:
            return 0
        rows.append((name, start, node["v"], depth))
        x = start
        for child_name in sorted(node["c"]):
            child = node["c"][child_name]
            walk(child, child_name, x, depth + 1)
            x += child["v"]
        return depth

    if total:
        walk(root, "all", 0, 0)
    max_depth = max((r[3] for r in rows), default=0)
    height = TOP + (max_depth + 1) * FRAME_H + BOTTOM
    out = [
        '<?xml version="1.0" standalone="no"?>',
        f'<svg version="1.1" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" '
        'xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink">',
        f"<style>{_STYLE}</style>",
        "<script><![CDATA[" + _SCRIPT % {"width": WIDTH, "xpad": XPAD, "char_w": CHAR_W, "total": max(total, 1),
                                         "unit": escape(unit)} + "]]></script>",
        f'<rect x="0" y="0" width="{WIDTH}" height="{height}" fill="rgb(248,248,238)"/>',
        f'<text id="title" x="{WIDTH // 2}" y="{FRAME_H + 4}">{escape(title)}</text>',
        f'<text id="details" x="{XPAD}" y="{height - FRAME_H // 2}"> </text>',
        f'<text id="unzoom" class="btn hide" x="{XPAD}" y="{FRAME_H + 4}">Reset Zoom</text>',
        f'<text id="search" class="btn" x="{WIDTH - XPAD - 100}" y="{FRAME_H + 4}">Search</text>',
        f'<text id="matched" x="{WIDTH - XPAD}" y="{height - FRAME_H // 2}"> </text>',
        '<g id="frames">',
    ]
    for name, start, value, depth in rows:
        x = XPAD + start / total * span
        w = value / total * span
        y = height - BOTTOM - (depth + 1) * FRAME_H
        n = int((w - 6) // CHAR_W)
        label = "" if n < 3 else (name if len(name) <= n else name[: n - 2] + "..")
        fill = _color(name)
        share = 100 * value / total
        out.append(
            f'<g class="f" data-n="{escape(name)}" data-s="{start}" data-v="{value}" data-d="{depth}">'
            f"<title>{escape(name)} ({value} {escape(unit)}, {share:.2f}%)</title>"
            f'<rect x="{x:.2f}" y="{y}" width="{w:.2f}" height="{FRAME_H - 1}" rx="2" ry="2" fill="{fill}" '
            f'data-fill="{fill}"/>'
            f'<text x="{x + 3:.2f}" y="{y + FRAME_H - 4}">{escape(label)}</text></g>'
        )
    out += ["</g>", "</svg>", ""]
    return "\n".join(out)

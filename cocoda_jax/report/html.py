"""The run report a person looks at: ``workdir/report.html``, one self-contained page.

    from cocoda_jax.report import write_html_report
    write_html_report(workdir)          # -> workdir / "report.html"

It is rendered from what a finished co-evolution run leaves in its workdir:

* ``report.json`` (required; :func:`cocoda_jax.report.build_report` plus the keys the co-evolution
  launcher adds: ``test_accuracy``, ``test_per_category``, ``decisions``, ``retrieval``,
  ``rods_per_epoch``, ``warm``, ``frozen_library``);
* ``library/round_XXX.json`` (optional): the library in force after each round, loaded with
  :meth:`cocoda_jax.library.LibrarySnapshot.from_json` (static re-checks only, nothing is run);
* ``metrics.jsonl`` (optional): :func:`cocoda_jax.report.read_metrics`;
* ``plots/library_dag.svg`` (optional): a drawing shown only when there is nothing to draw the DAG
  from (no library file, no composites in report.json).

Sections: a summary, accuracy per round with each round's decision and its reason, library growth
(primitives, composites and depth per round; the tools each saved library added or removed), the
learned DAG, composite uses, the RODS regions per epoch, the retrieval cost, test accuracy (per
category when the domain has categories) and a few training curves.

Decisions:

* Self-contained: no script, no stylesheet, font or image is fetched. Charts are inline SVG drawn
  here (hover tooltips are SVG ``<title>`` elements, not JavaScript); fonts are the viewer's own
  system fonts. The page has no JavaScript at all, so it cannot log a console error of its own.
* Every text taken from the inputs (tool names, reasons, categories, keys) goes through
  :func:`html.escape`, in HTML and in SVG alike.
* The DAG drawing is inlined as ``<svg>`` (its XML prolog stripped) when it is plain drawing
  markup. If it holds a script, ``foreignObject``, an event-handler attribute or a link that is
  neither an in-document ``#fragment`` nor a ``data:image/`` URI, it is embedded as an
  ``<img src="data:image/svg+xml;base64,...">`` instead, where the browser runs no script and loads
  nothing (the drawing is ours, but a file in a workdir is not trusted to be).
* The DAG is drawn here, as inline SVG on :func:`cocoda_jax.library.draw.layered_layout`: boxes in
  a monospace font placed side by side, so no two labels overlap however large the library; a
  layer wider than the page wraps onto more rows; tools that no composite calls are listed under
  it, and past :data:`~cocoda_jax.library.draw.MAX_DRAWN_TOOLS` tools the rest are named, not drawn.
  Hovering a box shows the whole name, calls, callers, signature and description.
* Every table sits in its own horizontally scrolling box, and long tool names may wrap at their
  underscores, so no table widens the page.
* Two retrieval numbers are shown, each named by what it counts: the cascade's cost model
  (``retrieval_tokens_per_query``: what an LM ranking every stage would read, per query) and the
  measured prompt (``retrieval.prompt_tokens_per_episode``: the planner's prompt per test episode).
* Missing optional pieces never fail the page: the section says what is missing (no RODS in a run
  without a curriculum, no drawing, an unreadable library file or metrics file, ...), and the list
  of such notes is shown near the top. Only a missing or unparsable ``report.json`` raises
  (:class:`FileNotFoundError` / :class:`ValueError`): without it there is no run to report.
* Accuracies (values in [0, 1]) are shown as percentages; a measurement that is ``None`` is shown
  as an en dash ("not measured").
* The output depends only on the inputs (no clock, no absolute paths), and is written atomically
  (a temporary file in the workdir, then ``os.replace``).
"""

from __future__ import annotations

import base64
import html
import json
import math
import os
import pathlib
import re
from collections.abc import Mapping, Sequence
from typing import Any

from cocoda_jax import storage
from cocoda_jax.report.coevolution import write_text_atomic

REPORT_HTML = "report.html"

#: Outcome -> (colour, label); the colours of :mod:`cocoda_jax.report.coevolution`'s plots.
OUTCOME_STYLE = {
    "initial": ("#636363", "initial (after SFT)"),
    "accept": ("#31a354", "accepted"),
    "accept_planner": ("#3182bd", "accepted (planner only)"),
    "reject": ("#de2d26", "rejected"),
}

#: RODS regions in the order they are stacked (others follow, sorted), with their colours.
RODS_REGIONS = {"hard": "#de2d26", "boundary": "#fd8d3c", "mastered": "#31a354", "unobserved": "#bdbdbd"}

#: metrics.jsonl keys drawn as training curves (when present), with their titles.
CURVES = (
    ("sft/loss", "SFT loss"),
    ("reward_mean", "GRPO reward (mean over rollouts)"),
    ("accuracy", "GRPO rollout accuracy"),
    ("grpo/kl", "KL to the reference policy"),
    ("val/accuracy", "validation accuracy"),
    ("rods/live", "RODS live pool size"),
)

#: At most this many points of one metrics series are drawn (evenly thinned beyond it).
MAX_CURVE_POINTS = 1500
#: At most this many added/removed tool names are listed per saved library.
MAX_NAMES_LISTED = 40

_PALETTE = ("#3182bd", "#e6550d", "#31a354", "#756bb1", "#636363", "#d6616b", "#8c6d31", "#17becf")


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


_NA = '<span class="na" title="not measured">&ndash;</span>'


def _is_real(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _num(v: Any, digits: int = 3) -> str:
    if not _is_real(v):
        return _NA
    if isinstance(v, int):
        return f"{v:,}"
    if abs(v) >= 1000:
        return f"{v:,.1f}"
    if v != 0 and abs(v) < 10.0 ** -digits:
        return f"{v:.{digits}g}"
    return f"{v:.{digits}f}".rstrip("0").rstrip(".")


def _pct(v: Any) -> str:
    return f"{100.0 * v:.1f}%" if _is_real(v) else _NA


def _pct_text(v: Any) -> str:
    return f"{100.0 * v:.1f}%" if _is_real(v) else "not measured"


def _seconds(v: Any) -> str:
    if not _is_real(v):
        return _NA
    v = float(v)
    if v < 120:
        return f"{v:.1f} s"
    if v < 7200:
        return f"{v / 60:.1f} min"
    return f"{v / 3600:.2f} h"


def _dicts(value: Any) -> list[dict]:
    return [v for v in value if isinstance(v, Mapping)] if isinstance(value, Sequence) and not isinstance(
        value, (str, bytes)) else []


# -- SVG charts ---------------------------------------------------------------------------------

def _nice_ticks(lo: float, hi: float, n: int = 5, integer: bool = False) -> tuple[float, float, list[float]]:
    """A range covering [lo, hi] and ticks on it at a step of 1, 2, 2.5 or 5 times a power of ten."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        lo, hi = 0.0, 1.0
    if hi <= lo:  # one value: a range around it (from 0 for a zero series: counts, rates)
        pad = abs(lo) * 0.1 or 1.0
        lo, hi = (0.0, 1.0) if lo == 0 else (lo - pad, hi + pad)
    raw = (hi - lo) / max(n, 1)
    mag = 10.0 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw * (1 - 1e-9))
    if integer:
        step = max(1.0, float(math.ceil(step)))
    start = math.floor(lo / step + 1e-9) * step
    end = math.ceil(hi / step - 1e-9) * step
    count = int(round((end - start) / step))
    return start, end, [start + i * step for i in range(count + 1)]


def _tick_label(v: float, step: float) -> str:
    if abs(v) < step * 1e-6:
        v = 0.0
    if abs(v) >= 1e5:
        return f"{v:.3g}"
    decimals = max(0, -int(math.floor(math.log10(step) + 1e-9))) if step > 0 else 0
    if step > 0 and decimals > 0 and abs(round(step, decimals) - step) > step * 1e-6:
        decimals += 1
    return f"{v:.{decimals}f}"


class _Frame:
    """A plot area inside an SVG of ``width`` x ``height`` with a linear x and y scale."""

    def __init__(self, width: int, height: int, x_range: tuple[float, float], y_range: tuple[float, float],
                 left: int = 58, right: int = 16, top: int = 14, bottom: int = 42):
        self.width, self.height = width, height
        self.left, self.right, self.top, self.bottom = left, right, top, bottom
        self.x0, self.x1 = x_range
        self.y0, self.y1 = y_range
        self.parts: list[str] = []

    def x(self, v: float) -> float:
        span = (self.x1 - self.x0) or 1.0
        return self.left + (v - self.x0) / span * (self.width - self.left - self.right)

    def y(self, v: float) -> float:
        span = (self.y1 - self.y0) or 1.0
        return self.height - self.bottom - (v - self.y0) / span * (self.height - self.top - self.bottom)

    def add(self, markup: str) -> None:
        self.parts.append(markup)

    def axes(self, x_ticks: Sequence[tuple[float, str]], y_ticks: Sequence[tuple[float, str]], xlabel: str,
             ylabel: str) -> None:
        pb = self.height - self.bottom
        for v, label in y_ticks:
            yy = self.y(v)
            self.add(f'<line x1="{self.left}" y1="{yy:.1f}" x2="{self.width - self.right}" y2="{yy:.1f}" '
                     f'class="grid"/>')
            self.add(f'<text x="{self.left - 6}" y="{yy + 4:.1f}" text-anchor="end" class="tick">{_e(label)}</text>')
        for v, label in x_ticks:
            xx = self.x(v)
            self.add(f'<line x1="{xx:.1f}" y1="{pb}" x2="{xx:.1f}" y2="{pb + 4}" class="axis"/>')
            self.add(f'<text x="{xx:.1f}" y="{pb + 16}" text-anchor="middle" class="tick">{_e(label)}</text>')
        self.add(f'<line x1="{self.left}" y1="{pb}" x2="{self.width - self.right}" y2="{pb}" class="axis"/>')
        self.add(f'<line x1="{self.left}" y1="{self.top}" x2="{self.left}" y2="{pb}" class="axis"/>')
        if xlabel:
            cx = (self.left + self.width - self.right) / 2
            self.add(f'<text x="{cx:.1f}" y="{self.height - 6}" text-anchor="middle" class="label">{_e(xlabel)}</text>')
        if ylabel:
            cy = (self.top + pb) / 2
            self.add(f'<text x="14" y="{cy:.1f}" text-anchor="middle" class="label" '
                     f'transform="rotate(-90 14 {cy:.1f})">{_e(ylabel)}</text>')

    def svg(self, title: str) -> str:
        return (f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {self.width} {self.height}" '
                f'width="{self.width}" height="{self.height}" role="img" aria-label="{_e(title)}">'
                f'<title>{_e(title)}</title>' + "".join(self.parts) + "</svg>")


def _marker(shape: str, x: float, y: float, color: str, tip: str, hollow: bool = False) -> str:
    fill = "#ffffff" if hollow else color
    style = f'fill="{fill}" stroke="{color}" stroke-width="1.5"'
    tip = f"<title>{_e(tip)}</title>"
    if shape == "square":
        return f'<rect x="{x - 4:.1f}" y="{y - 4:.1f}" width="8" height="8" {style}>{tip}</rect>'
    if shape == "diamond":
        return (f'<path d="M{x:.1f} {y - 5:.1f}L{x + 5:.1f} {y:.1f}L{x:.1f} {y + 5:.1f}L{x - 5:.1f} {y:.1f}Z" '
                f'{style}>{tip}</path>')
    if shape == "cross":
        return (f'<path d="M{x - 4:.1f} {y - 4:.1f}L{x + 4:.1f} {y + 4:.1f}M{x - 4:.1f} {y + 4:.1f}L{x + 4:.1f} '
                f'{y - 4:.1f}" fill="none" stroke="{color}" stroke-width="2.5">{tip}</path>')
    return f'<circle cx="{x:.1f}" cy="{y:.1f}" r="4" {style}>{tip}</circle>'


def _legend(items: Sequence[tuple[str, str, str]]) -> str:
    """An HTML legend: (colour, label, kind) with kind 'line', 'dash', 'dot', 'ring', 'box' or 'none'."""
    out = []
    for color, label, kind in items:
        out.append(f'<span class="key"><span class="sw sw-{_e(kind)}" style="--c:{_e(color)}"></span>'
                   f'{_e(label)}</span>')
    return '<div class="legend">' + "".join(out) + "</div>"


def line_chart(series: Sequence[Mapping[str, Any]], *, title: str, xlabel: str, ylabel: str,
               y_range: tuple[float, float] | None = None, integer_x: bool = True, width: int = 620,
               height: int = 280, hlines: Sequence[Mapping[str, Any]] = (), y_format=None) -> str:
    """An inline SVG line chart. Each series: ``name``, ``color``, ``points`` [(x, y or None, tip,
    marker colour or None, marker shape or None)], optional ``dash`` and ``line`` (False: markers
    only). A ``None`` y breaks the line. ``hlines``: horizontal reference lines (``y``, ``color``,
    ``name``). Returns the SVG markup (the legend is the caller's)."""
    xs = [p[0] for s in series for p in s["points"]]
    ys = [p[1] for s in series for p in s["points"] if _is_real(p[1])] + [h["y"] for h in hlines if _is_real(h["y"])]
    if not xs:
        return f'<p class="na">{_e(title)}: no data.</p>'
    x_lo, x_hi = min(xs), max(xs)
    if x_hi == x_lo:
        x_lo, x_hi = x_lo - 1, x_hi + 1
    x0, x1, xt = _nice_ticks(x_lo, x_hi, 8, integer=integer_x)
    if integer_x:
        x0, x1 = min(x0, x_lo), max(x1, x_hi)
    if y_range is not None:
        y0, y1 = y_range
        _, _, yt = _nice_ticks(y0, y1, 5)
        yt = [t for t in yt if y0 - 1e-9 <= t <= y1 + 1e-9]
    else:
        y0, y1, yt = _nice_ticks(min(ys, default=0.0), max(ys, default=1.0), 5)
    ystep = (yt[1] - yt[0]) if len(yt) > 1 else 1.0
    xstep = (xt[1] - xt[0]) if len(xt) > 1 else 1.0
    f = _Frame(width, height, (x0, x1), (y0, y1))
    fmt_y = y_format or (lambda v: _tick_label(v, ystep))
    f.axes([(v, _tick_label(v, xstep)) for v in xt], [(v, fmt_y(v)) for v in yt], xlabel, ylabel)
    for h in hlines:
        if _is_real(h["y"]):
            yy = f.y(h["y"])
            f.add(f'<line x1="{f.left}" y1="{yy:.1f}" x2="{width - f.right}" y2="{yy:.1f}" stroke="{_e(h["color"])}" '
                  f'stroke-width="1.5" stroke-dasharray="6 4"><title>{_e(h["name"])}</title></line>')
    for s in series:
        color = _e(s["color"])
        if s.get("line", True):
            runs, cur = [], []
            for p in s["points"]:
                if _is_real(p[1]):
                    cur.append(f"{f.x(p[0]):.1f},{f.y(p[1]):.1f}")
                elif cur:
                    runs.append(cur)
                    cur = []
            if cur:
                runs.append(cur)
            dash = f' stroke-dasharray="{_e(s["dash"])}"' if s.get("dash") else ""
            for run in runs:
                if len(run) > 1:
                    f.add(f'<polyline points="{" ".join(run)}" fill="none" stroke="{color}" stroke-width="1.8"'
                          f'{dash}/>')
        if s.get("markers", True):
            for p in s["points"]:
                if _is_real(p[1]):
                    mcolor = p[3] if len(p) > 3 and p[3] else s["color"]
                    shape = p[4] if len(p) > 4 and p[4] else s.get("shape", "circle")
                    f.add(_marker(shape, f.x(p[0]), f.y(p[1]), _e(mcolor), p[2], hollow=bool(s.get("hollow"))))
    return f.svg(title)


def stacked_bars(columns: Sequence[Any], stacks: Sequence[tuple[str, str, Sequence[float]]], *, title: str,
                 xlabel: str, ylabel: str, annotations: Sequence[str] | None = None, width: int = 620,
                 height: int = 280) -> str:
    """An inline SVG of vertical stacked bars: one bar per column, ``stacks`` = (name, colour, values)
    bottom to top; ``annotations``: a text above each bar."""
    if not columns:
        return f'<p class="na">{_e(title)}: no data.</p>'
    totals = [sum(v[i] for _, _, v in stacks if _is_real(v[i])) for i in range(len(columns))]
    y0, y1, yt = _nice_ticks(0.0, max(max(totals, default=1.0), 1.0) * (1.12 if annotations else 1.0), 5,
                             integer=True)
    f = _Frame(width, height, (-0.5, len(columns) - 0.5), (0.0, y1))
    ystep = (yt[1] - yt[0]) if len(yt) > 1 else 1.0
    every = max(1, math.ceil(len(columns) / 16))
    f.axes([(i, str(c)) for i, c in enumerate(columns) if i % every == 0], [(v, _tick_label(v, ystep)) for v in yt],
           xlabel, ylabel)
    slot = (f.x(1) - f.x(0)) if len(columns) > 1 else (width - f.left - f.right) / 2
    bw = max(2.0, min(60.0, slot * 0.7))
    for i, col in enumerate(columns):
        base = 0.0
        cx = f.x(i)
        for name, color, values in stacks:
            v = values[i]
            if not _is_real(v) or v <= 0:
                continue
            top, bottom = f.y(base + v), f.y(base)
            f.add(f'<rect x="{cx - bw / 2:.1f}" y="{top:.1f}" width="{bw:.1f}" height="{bottom - top:.1f}" '
                  f'fill="{_e(color)}"><title>{_e(f"{xlabel} {col}: {name} {_plain(v)}")}</title></rect>')
            base += v
        if annotations and annotations[i]:
            f.add(f'<text x="{cx:.1f}" y="{f.y(base) - 4:.1f}" text-anchor="middle" class="tick">'
                  f'{_e(annotations[i])}</text>')
    return f.svg(title)


def hbars(rows: Sequence[tuple[str, float, str]], *, title: str, max_value: float | None = None,
          color: str = "#3182bd", value_format=None, width: int = 620) -> str:
    """An inline SVG of horizontal bars: (label, value, tooltip) per row; long labels are cut (the
    whole label is in the tooltip)."""
    if not rows:
        return f'<p class="na">{_e(title)}: no data.</p>'
    value_format = value_format or _plain
    longest = max(len(r[0]) for r in rows)
    label_w = min(260, 12 + 7 * min(longest, 36))
    row_h = 22
    height = 10 + row_h * len(rows) + 10
    top = max((r[1] for r in rows if _is_real(r[1])), default=0.0)
    vmax = max_value if max_value is not None else (top or 1.0)
    plot_w = width - label_w - 70
    parts = []
    for i, (label, value, tip) in enumerate(rows):
        y = 10 + i * row_h
        shown = label if len(label) <= 36 else label[:35] + "\u2026"
        parts.append(f'<text x="{label_w - 6}" y="{y + 15}" text-anchor="end" class="tick">{_e(shown)}'
                     f'<title>{_e(label)}</title></text>')
        v = value if _is_real(value) else 0.0
        w = max(0.0, v / vmax * plot_w) if vmax > 0 else 0.0
        parts.append(f'<rect x="{label_w}" y="{y + 3}" width="{w:.1f}" height="{row_h - 6}" fill="{_e(color)}">'
                     f'<title>{_e(tip)}</title></rect>')
        parts.append(f'<text x="{label_w + w + 5:.1f}" y="{y + 15}" class="tick">'
                     f'{_e(value_format(value) if _is_real(value) else "not measured")}</text>')
    parts.append(f'<line x1="{label_w}" y1="6" x2="{label_w}" y2="{height - 6}" class="axis"/>')
    return (f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="{width}" '
            f'height="{height}" role="img" aria-label="{_e(title)}"><title>{_e(title)}</title>' + "".join(parts)
            + "</svg>")


def _plain(v: Any) -> str:
    if isinstance(v, bool) or not _is_real(v):
        return str(v)
    if isinstance(v, int) or float(v).is_integer():
        return f"{int(v):,}"
    return f"{v:.4g}"


# -- inputs -------------------------------------------------------------------------------------

def _load_report(workdir: pathlib.Path) -> dict[str, Any]:
    path = workdir / "report.json"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no report.json; write_html_report needs a finished run's workdir")
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ValueError(f"{path}: not a JSON report ({err})") from None
    if not isinstance(report, dict):
        raise ValueError(f"{path}: expected a JSON object, got {type(report).__name__}")
    return report


_ROUND_FILE = re.compile(r"^round_(\d+)\.json$")


def _load_libraries(workdir: pathlib.Path, notes: list[str]) -> list[tuple[int, Any]]:
    """(round, LibrarySnapshot) per readable ``library/round_XXX.json``, by round."""
    lib_dir = workdir / "library"
    if not lib_dir.is_dir():
        notes.append("no library/ folder: the per-round library snapshots are not shown")
        return []
    found = sorted((int(m.group(1)), p) for p in lib_dir.iterdir() if (m := _ROUND_FILE.match(p.name)))
    if not found:
        notes.append("library/ holds no round_XXX.json: the per-round library snapshots are not shown")
        return []
    from cocoda_jax.library import LibrarySnapshot

    out = []
    for r, p in found:
        try:
            out.append((r, LibrarySnapshot.from_json(p.read_bytes())))
        except Exception as err:  # noqa: BLE001 -- a bad file is reported on the page, not raised
            notes.append(f"library/{p.name} could not be read: {type(err).__name__}: {err}")
    return out


def _load_metrics(workdir: pathlib.Path, notes: list[str]) -> list[dict[str, Any]]:
    path = workdir / "metrics.jsonl"
    if not path.is_file():
        notes.append("no metrics.jsonl: the training curves are not shown")
        return []
    from cocoda_jax.report.metrics import read_metrics

    try:
        return read_metrics(path)
    except Exception as err:  # noqa: BLE001
        notes.append(f"metrics.jsonl could not be read: {type(err).__name__}: {err}")
        return []


_UNSAFE_SVG = re.compile(r"<\s*script|<\s*foreignObject|<\s*iframe|<\s*object|<\s*embed|\son[a-z]+\s*=|"
                         r"javascript:|@import|url\(\s*['\"]?(?!#)", re.IGNORECASE)
_HREF = re.compile(r"""(?:xlink:)?href\s*=\s*(["'])(.*?)\1""", re.IGNORECASE | re.DOTALL)


def _svg_inline(text: str) -> tuple[str, bool]:
    """(markup, inlined): the ``<svg>`` element of ``text`` when it is plain drawing markup, else an
    ``<img>`` with the file as a data URI (see the module docstring)."""
    start = text.find("<svg")
    safe = start >= 0 and not _UNSAFE_SVG.search(text) and all(
        h.startswith("#") or h.startswith("data:image/") for _, h in _HREF.findall(text))
    if safe:
        return text[start:], True
    data = base64.b64encode(text.encode("utf-8")).decode("ascii")
    return f'<img class="dag-img" alt="the library DAG" src="data:image/svg+xml;base64,{data}">', False


# -- sections -----------------------------------------------------------------------------------

def _section(anchor: str, title: str, body: str) -> str:
    return f'<section id="{_e(anchor)}"><h2>{_e(title)}</h2>{body}</section>'


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], cls: str = "") -> str:
    """An HTML table in its own horizontally scrolling box (a wide table never widens the page);
    header cells are escaped here, row cells must already be markup."""
    head = "".join(f"<th>{_e(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return (f'<div class="tablebox"><table class="{_e(cls)}"><thead><tr>{head}</tr></thead>'
            f'<tbody>{body}</tbody></table></div>')


def _badge(outcome: Any) -> str:
    color, label = OUTCOME_STYLE.get(outcome, ("#969696", str(outcome)))
    return f'<span class="badge" style="background:{color}">{_e(label)}</span>'


def _breakable(name: Any) -> str:
    """``name`` escaped, with a line-break chance after each underscore: long tool names wrap at
    their words inside a narrow table cell instead of widening the table."""
    return "_<wbr>".join(_e(part) for part in str(name).split("_"))


def _names(names: Sequence[Any], limit: int = MAX_NAMES_LISTED) -> str:
    names = [str(n) for n in names]
    if not names:
        return '<span class="na">&ndash;</span>'
    shown = ", ".join(f"<code>{_breakable(n)}</code>" for n in names[:limit])
    if len(names) > limit:
        shown += f" <span class=\"na\">and {len(names) - limit} more</span>"
    return shown


_SHAPES = {"initial": "diamond", "accept": "circle", "accept_planner": "square", "reject": "cross"}


def _summary(report: Mapping[str, Any], rounds: list[dict]) -> str:
    acc = report.get("accuracy") if isinstance(report.get("accuracy"), Mapping) else {}
    lib = report.get("library") if isinstance(report.get("library"), Mapping) else {}
    cards = [
        ("test accuracy", _pct(report.get("test_accuracy")), _e("the final planner and library on the test split")),
        ("validation accuracy", f"{_pct(acc.get('sft'))} &rarr; {_pct(acc.get('final'))}",
         _e("after SFT (round 0) and in the last round")),
        ("rounds", f"{_e(report.get('rounds', len([r for r in rounds if r.get('round', 0) >= 1])))}",
         f"{_e(report.get('accepted_rounds', '?'))} accepted, {_e(report.get('rejected_rounds', '?'))} rejected"),
        ("library", f"{_num(lib.get('size'))} tools",
         f"{_num(lib.get('primitives'))} primitives, {_num(lib.get('composites'))} composites, "
         f"max depth {_num(lib.get('max_depth'))}"),
        ("composite share", _pct(report.get("composite_share")), _e("of the tool calls in validation (final state)")),
        *_retrieval_cards(report),
        ("wall time", _seconds(report.get("wall_s")), _e("sum over the rounds (round 0 includes SFT)")),
    ]
    base = report.get("baseline_frozen_library")
    if isinstance(base, Mapping):
        cards.insert(1, ("frozen-library baseline", _pct(base.get("accuracy")), _e("the same steps, primitives only")))
    out = "".join(f'<div class="card"><div class="k">{_e(k)}</div><div class="v">{v}</div>'
                  f'<div class="s">{s}</div></div>' for k, v, s in cards)
    mode = "frozen-library baseline (no mining)" if report.get("frozen_library") else "co-evolution"
    return f'<p class="mode">Run kind: <b>{_e(mode)}</b></p><div class="cards">{out}</div>'


def _accuracy_section(report: Mapping[str, Any], rounds: list[dict], decisions: dict[int, dict]) -> str:
    if not rounds:
        return _section("accuracy", "Accuracy and decisions per round",
                        '<p class="na">report.json has no per-round records.</p>')
    val_pts, train_pts, proposal_pts = [], [], []
    for r in rounds:
        n, outcome = r.get("round"), r.get("outcome")
        if not _is_real(n):
            continue
        color = OUTCOME_STYLE.get(outcome, ("#969696", ""))[0]
        tip = f"round {n}: {outcome}; validation accuracy {_pct_text(r.get('val_accuracy'))}"
        if r.get("reason"):
            tip += f" ({r['reason']})"
        val_pts.append((n, r.get("val_accuracy"), tip, color, _SHAPES.get(outcome, "circle")))
        train_pts.append((n, r.get("train_accuracy"),
                          f"round {n}: train accuracy {_pct_text(r.get('train_accuracy'))}"))
        d = decisions.get(n)
        if outcome == "reject" and d is not None and _is_real(d.get("reward")):
            proposal_pts.append((n, d["reward"], f"round {n}: the refused proposal's validation score "
                                                 f"{_pct_text(d['reward'])}"))
    series = [{"name": "validation accuracy", "color": "#969696", "points": val_pts},
              {"name": "train accuracy", "color": "#756bb1", "points": train_pts, "dash": "2 3", "markers": False}]
    legend = [(OUTCOME_STYLE[o][0], OUTCOME_STYLE[o][1], "dot") for o in OUTCOME_STYLE
              if any(r.get("outcome") == o for r in rounds)]
    legend += [("#969696", "validation accuracy", "line"), ("#756bb1", "train accuracy (mean over the round)", "dash")]
    if proposal_pts:
        series.append({"name": "refused proposal", "color": OUTCOME_STYLE["reject"][0], "points": proposal_pts,
                       "line": False, "hollow": True})
        legend.append((OUTCOME_STYLE["reject"][0], "refused proposal's score", "ring"))
    hlines = []
    if _is_real(report.get("test_accuracy")):
        hlines.append({"y": report["test_accuracy"], "color": "#e6550d",
                       "name": f"test accuracy (final) {_pct_text(report['test_accuracy'])}"})
        legend.append(("#e6550d", "test accuracy (final)", "dash"))
    base = report.get("baseline_frozen_library")
    if isinstance(base, Mapping) and _is_real(base.get("accuracy")):
        hlines.append({"y": base["accuracy"], "color": "#636363", "name": "frozen-library baseline"})
        legend.append(("#636363", "frozen-library baseline", "dash"))
    chart = line_chart(series, title="accuracy per round", xlabel="round", ylabel="accuracy", y_range=(0.0, 1.0),
                       hlines=hlines, y_format=lambda v: f"{100 * v:.0f}%")
    rows = []
    for r in rounds:
        d = decisions.get(r.get("round"), {})
        score = ""
        if d:
            score = (f"{_pct(d.get('reward'))} vs {_pct(d.get('reference'))} "
                     f"&plusmn; {_pct(d.get('tolerance'))}")
        rows.append([
            _e(r.get("round")), _badge(r.get("outcome")), _e(r.get("reason", "")),
            _pct(r.get("val_accuracy")), _pct(r.get("train_accuracy")), _num(r.get("val_reward")),
            score or _NA, _e(d.get("kept", "")) if d else _NA, _names(d.get("missing_tools") or []) if d else _NA,
            _names(r.get("inserted") or []), _num(r.get("tool_calls_per_solved"), 2), _pct(r.get("composite_share")),
            _seconds(r.get("wall_s")),
        ])
    table = _table(["round", "decision", "reason", "val acc", "train acc", "val reward",
                    "score vs reference \u00b1 tolerance", "kept", "missing tools", "inserted",
                    "calls / solved", "composite share", "wall"], rows, "rounds")
    note = ('<p class="hint">A rejected round keeps the incumbent: its row shows the kept pair\'s numbers, and '
            'the hollow marker the refused proposal\'s score.</p>' if proposal_pts else "")
    return _section("accuracy", "Accuracy and decisions per round",
                    f'<div class="fig">{chart}{_legend(legend)}</div>{note}{table}')


def _library_section(report: Mapping[str, Any], rounds: list[dict], libraries: list[tuple[int, Any]]) -> str:
    parts = []
    source = [(r.get("round"), r.get("primitives"), r.get("composites"), r.get("max_depth")) for r in rounds
              if _is_real(r.get("round"))]
    if not source and libraries:
        from cocoda_jax.report.coevolution import library_summary
        source = [(n, s["primitives"], s["composites"], s["max_depth"])
                  for n, s in ((n, library_summary(snap)) for n, snap in libraries)]
    if source:
        chart = stacked_bars([s[0] for s in source],
                             [("primitives", "#c7e9c0", [s[1] for s in source]),
                              ("composites", "#9ecae1", [s[2] for s in source])],
                             title="library size per round", xlabel="round", ylabel="tools",
                             annotations=[f"d{s[3]}" if _is_real(s[3]) else "" for s in source])
        parts.append(f'<div class="fig">{chart}' + _legend([("#c7e9c0", "primitives", "box"),
                                                            ("#9ecae1", "composites", "box"),
                                                            ("#444444", "dN above a bar: max depth", "none")])
                     + "</div>")
    else:
        parts.append('<p class="na">No per-round library counts.</p>')
    warm = report.get("warm")
    if isinstance(warm, Mapping):
        warm_rounds = _dicts(warm.get("rounds"))
        accepted = [n for w in warm_rounds for n in (w.get("accepted") or [])]
        parts.append(f'<p>Warm library (stage 1): {len(accepted)} composite(s) accepted over {len(warm_rounds)} '
                     f'abstraction round(s) from {_num(warm.get("demos"))} demonstrations in '
                     f'{_seconds(warm.get("seconds"))}: {_names(accepted)}</p>')
    if libraries:
        rows, prev = [], None
        for n, snap in libraries:
            names = set(snap.names())
            composites = sum(1 for t in names if snap.children(t))
            depth = max((snap.depth(t) for t in names), default=0)
            if prev is None:
                added, removed = sorted(t for t in names if snap.children(t)), []
            else:
                added, removed = sorted(names - prev), sorted(prev - names)
            added_txt = _names([f"{t} (depth {snap.depth(t)})" for t in added])
            rows.append([f"<code>round_{n:03d}.json</code>", _num(len(names)), _num(len(names) - composites),
                         _num(composites), _num(depth), added_txt, _names(removed)])
            prev = names
        parts.append("<h3>Saved libraries (<code>library/round_XXX.json</code>)</h3>"
                     "<p class=\"hint\">The library in force after each round (a rejected round keeps the "
                     "incumbent's). The first row's \"added\" lists its composites.</p>"
                     + _table(["file", "tools", "primitives", "composites", "max depth", "added", "removed"], rows))
    return _section("library", "Library growth", "".join(parts))


#: The inline DAG's font size (px) and the width its layers wrap at (px): it fits a laptop's page
#: at full size, and a narrower window scrolls it in its box instead of shrinking the text.
DAG_FONT_PX = 12.0
DAG_MAX_WIDTH = 1040.0

_SUB = ' class="sub"'
#: The DAG's label font: monospace, so a label's width follows from its length (the layout's premise);
#: set on the SVG itself, so the drawing keeps it outside this page too.
_MONO = "DejaVu Sans Mono, Menlo, Consolas, Liberation Mono, monospace"
_DAG_KINDS = {"composite": ("#9ecae1", "composite (calls other tools)"),
              "primitive": ("#c7e9c0", "tool without children")}


def _dag_graph(report: Mapping[str, Any], libraries: list[tuple[int, Any]], notes: list[str]):
    """(graph, where from) of the final library: the last saved snapshot, else report.json's
    ``composites`` (which name only the tools a composite calls), else (None, "")."""
    from cocoda_jax.library.draw import DrawingError, graph_from_composites, to_networkx
    if libraries:
        n, snap = libraries[-1]
        return to_networkx(snap), f"library/round_{n:03d}.json"
    comps = _dicts(report.get("composites"))
    if comps:
        try:
            return graph_from_composites(comps), "the composites of report.json"
        except DrawingError as err:
            notes.append(f"report.json's composites cannot be drawn: {err}")
    return None, ""


def _tool_tip(graph, name: str) -> str:
    d = graph.nodes[name]
    tip = f"{name}: depth {d.get('depth')}"
    if d.get("composite"):
        calls = [f"{c} \u00d7{graph.edges[name, c]['multiplicity']}" if graph.edges[name, c]["multiplicity"] > 1
                 else c for c in sorted(graph.successors(name), key=lambda c: graph.edges[name, c]["order"])]
        tip += f", flat calls {d.get('flat')}, \u03a6 {d.get('phi')} (saved calls); calls {', '.join(calls)}"
    callers = sorted(graph.predecessors(name))
    if callers:
        tip += f"; called by {', '.join(callers)}"
    if d.get("signature"):
        tip += f"\n{d['signature']}"
    if d.get("description"):
        tip += f"\n{d['description']}"
    return tip


def dag_svg(graph, *, font_px: float = DAG_FONT_PX, max_width: float = DAG_MAX_WIDTH) -> tuple[str, Any]:
    """(inline SVG markup, layout) of the library graph on :func:`~cocoda_jax.library.draw.layered_layout`:
    one box per tool, labels in a monospace font cut at
    :data:`~cocoda_jax.library.draw.MAX_LABEL_CHARS`; hovering a box shows its whole name, Phi,
    calls, callers, signature and description (an SVG ``<title>``, no script)."""
    from cocoda_jax.library.draw import layered_layout, node_kind

    layout = layered_layout(graph, font_size=font_px, max_width=max_width)
    m = 8.0
    w, h = layout.width + 2 * m, layout.height + 2 * m
    parts = []
    for u, v, d in graph.edges(data=True):
        if u in layout.boxes and v in layout.boxes:
            (ux, _), (vx, _) = layout.centre(u), layout.centre(v)
            k = d.get("multiplicity", 1)
            parts.append(f'<line x1="{vx + m:.1f}" y1="{layout.boxes[v][1] + m:.1f}" x2="{ux + m:.1f}" '
                         f'y2="{layout.boxes[u][3] + m:.1f}" stroke-width="{min(1.0 + 0.8 * (k - 1), 4):.1f}">'
                         f'<title>{_e(u)} calls {_e(v)}{f" ({k} times)" if k > 1 else ""}</title></line>')
    for n, (x0, y0, x1, y1) in layout.boxes.items():
        color = _DAG_KINDS[node_kind(graph, n)][0]
        lines = layout.labels[n]
        step = 1.25 * font_px
        first = (y0 + y1) / 2 - step * (len(lines) - 1) / 2 + 0.35 * font_px
        text = "".join(f'<text x="{(x0 + x1) / 2 + m:.1f}" y="{first + i * step + m:.1f}"'
                       f'{_SUB if i else ""}>{_e(line)}</text>' for i, line in enumerate(lines))
        parts.append(f'<g class="tool"><title>{_e(_tool_tip(graph, n))}</title>'
                     f'<rect x="{x0 + m:.1f}" y="{y0 + m:.1f}" width="{x1 - x0:.1f}" height="{y1 - y0:.1f}" rx="4" '
                     f'fill="{color}" stroke="#444" stroke-width="0.8"/>{text}</g>')
    markup = (f'<svg class="dag-own" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {w:.0f} {h:.0f}" '
              f'width="{w:.0f}" height="{h:.0f}" role="img" aria-label="the learned library DAG" '
              f'font-size="{font_px:g}" text-anchor="middle" font-family="{_MONO}">'
              '<title>the learned library DAG</title>'
              f'<g class="edges" stroke="#888" stroke-opacity="0.7">{"".join(p for p in parts if p.startswith("<line"))}</g>'
              + "".join(p for p in parts if not p.startswith("<line")) + "</svg>")
    return markup, layout


def _dag_section(report: Mapping[str, Any], libraries: list[tuple[int, Any]], workdir: pathlib.Path,
                 notes: list[str]) -> str:
    graph, source = _dag_graph(report, libraries, notes)
    if graph is not None and len(graph):
        return _dag_drawn(report, graph, source)
    path = workdir / "plots" / "library_dag.svg"
    if not path.is_file():
        notes.append("no library, no composites and no plots/library_dag.svg: the DAG drawing is not shown")
        return _section("dag", "The learned DAG", '<p class="na">No drawing (no library/round_XXX.json, no '
                                                  'composites in report.json, plots/library_dag.svg is missing).</p>')
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        notes.append(f"plots/library_dag.svg could not be read: {type(err).__name__}: {err}")
        return _section("dag", "The learned DAG", '<p class="na">The drawing could not be read.</p>')
    markup, inlined = _svg_inline(text)
    if not inlined:
        notes.append("plots/library_dag.svg holds more than drawing markup: embedded as an image, not inline")
    return _section("dag", "The learned DAG",
                    '<p class="hint">Primitives at the bottom, deeper composites higher; an edge goes from a tool '
                    'to the composite that calls it. Green: starting primitives, blue: composites.</p>'
                    f'<div class="dag scroll">{markup}</div>')


def _dag_drawn(report: Mapping[str, Any], graph, source: str) -> str:
    from cocoda_jax.library.draw import MAX_DRAWN_TOOLS, MAX_LABEL_CHARS

    markup, layout = dag_svg(graph)
    lib = report.get("library") if isinstance(report.get("library"), Mapping) else {}
    composites = sum(1 for n in graph if graph.nodes[n]["composite"])
    total = lib.get("size") if _is_real(lib.get("size")) else len(graph)
    drawn = len(layout.boxes)
    caption = (f"{drawn} of {_plain(total)} tools drawn ({composites} composites), from {_e(source)}. "
               "Deepest composites on top, tools without children at the bottom; a line joins a composite "
               "(above) to each tool it calls (thicker: called more than once). "
               f"Names longer than {MAX_LABEL_CHARS} characters are cut in the middle; hover a box for the "
               "whole name, its calls and callers.")
    after = []
    if layout.hidden:
        after.append(f"<p>Tools called by no composite, not drawn ({len(layout.hidden)}): "
                     f"{_names(layout.hidden)}</p>")
    unlisted = (total - len(graph)) if _is_real(total) else 0
    if unlisted > 0:
        after.append(f"<p>{_plain(unlisted)} tools called by no composite are not drawn (report.json names only "
                     "the tools a composite calls).</p>")
    if layout.capped:
        after.append(f"<p>At most {MAX_DRAWN_TOOLS} tools are drawn: {len(layout.capped)} more (the shallowest, "
                     f"least-called) are left out: {_names(layout.capped)}</p>")
    legend = _legend([(c, label, "box") for c, label in _DAG_KINDS.values()])
    return _section("dag", "The learned DAG", f'<p class="hint">{caption}</p>{legend}'
                    f'<div class="dag scroll">{markup}</div>' + "".join(after))


def _composites_section(report: Mapping[str, Any], rounds: list[dict]) -> str:
    comps = _dicts(report.get("composites"))
    if not comps:
        return _section("composites", "Composite uses", '<p class="na">The final library has no composites.</p>')
    parts = []
    used = [c for c in comps if _is_real(c.get("uses")) and c["uses"] > 0]
    if used:
        rows = [(str(c.get("name")), c["uses"], f"{c.get('name')}: {c['uses']} uses") for c in
                sorted(used, key=lambda c: (-c["uses"], str(c.get("name"))))]
        parts.append(f'<div class="fig">{hbars(rows, title="composite uses over all rounds")}</div>')
    else:
        parts.append('<p class="na">No composite was called in any round\'s validation episodes.</p>')
    rows = [[f"<code>{_e(c.get('name'))}</code>", _num(c.get("depth")), _num(c.get("flat")), _num(c.get("phi")),
             _names(c.get("children") or []), _num(c.get("uses"))] for c in comps]
    parts.append(_table(["composite", "depth", "flat calls", "\u03a6 (saved calls)", "calls", "uses"], rows))
    per_round = [(r.get("round"), r.get("composite_uses")) for r in rounds
                 if isinstance(r.get("composite_uses"), Mapping)]
    names = sorted({n for _, u in per_round for n, k in u.items() if _is_real(k) and k > 0})
    if names:
        header = ["composite"] + [f"round {n}" for n, _ in per_round]
        body = [[f"<code>{_e(n)}</code>"] + [_num(u.get(n, 0)) for _, u in per_round] for n in names]
        parts.append("<details><summary>Uses per round (validation episodes)</summary>"
                     + _table(header, body) + "</details>")
    return _section("composites", "Composite uses", "".join(parts))


def _rods_section(report: Mapping[str, Any]) -> str:
    epochs = _dicts(report.get("rods_per_epoch"))
    if not epochs:
        return _section("rods", "RODS regions per epoch",
                        '<p class="na">No RODS curriculum in this run (report.json has no rods_per_epoch).</p>')
    sizes = [e.get("region_sizes") if isinstance(e.get("region_sizes"), Mapping) else {} for e in epochs]
    regions = [r for r in RODS_REGIONS if any(r in s for s in sizes)]
    regions += sorted({r for s in sizes for r in s} - set(regions))
    colors = [RODS_REGIONS.get(r, _PALETTE[i % len(_PALETTE)]) for i, r in enumerate(regions)]
    labels = [e.get("epoch", i) for i, e in enumerate(epochs)]
    chart = stacked_bars(labels, [(r, c, [s.get(r, 0) for s in sizes]) for r, c in zip(regions, colors)],
                         title="RODS live pool by region per epoch", xlabel="epoch", ylabel="tasks")
    rows = []
    for e, s in zip(epochs, sizes):
        synth = e.get("synthesis") if isinstance(e.get("synthesis"), Mapping) else {}
        rows.append([_e(e.get("epoch", "")), _num(e.get("live")), _num(e.get("live_generated"))]
                    + [_num(s.get(r)) for r in regions]
                    + [_num(e.get("injected")),
                       f"{_num(synth.get('accepted'))} / {_num(synth.get('jobs'))}" if synth else _NA,
                       _num(e.get("boundary_variance_ratio")), _num(e.get("injected_mean_reward"))])
    table = _table(["epoch", "live", "generated"] + regions
                   + ["injected", "synthesis accepted / jobs", "boundary variance ratio", "injected mean reward"], rows)
    return _section("rods", "RODS regions per epoch",
                    f'<div class="fig">{chart}{_legend([(c, r, "box") for r, c in zip(regions, colors)])}</div>{table}')


#: The two retrieval numbers a run reports, named so that neither is read as the other.
COST_MODEL_LABEL = "retrieval cost model (LM ranker)"
PROMPT_LABEL = "planner prompt (measured)"
COST_MODEL_MEANS = ("modelled, not spent: the tokens an LM would read per query if it ranked the typed "
                    "cascade's stages itself (one-line records, specs, worked examples) plus the final cards, "
                    "counted by the cascade's token counter")
PROMPT_MEANS = ("measured: the tokens of the planner's prompt per test episode (the question and the cards "
                "retrieval put in it), counted by the planner's tokenizer")


def _prompt_setting(ret: Mapping[str, Any]) -> str:
    bits = [f"{_plain(ret['k'])} cards" if _is_real(ret.get("k")) else "",
            f"{ret['card_style']} style" if isinstance(ret.get("card_style"), str) else "",
            f"{ret['mode']} retrieval" if isinstance(ret.get("mode"), str) else ""]
    return ", ".join(b for b in bits if b)


def _retrieval_cards(report: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """The cost model's number and the measured prompt size as two cards, each saying what it counts
    (the Retrieval cost section says it at length)."""
    cards = [(COST_MODEL_LABEL, f"{_num(report.get('retrieval_tokens_per_query'), 1)} "
                                '<span class="unit">tokens / query</span>',
              _e("modelled: what an LM ranking every cascade stage would read; not the planner's prompt "
                 "(final state)"))]
    ret = report.get("retrieval") if isinstance(report.get("retrieval"), Mapping) else {}
    if "prompt_tokens_per_episode" in ret:
        setting = _prompt_setting(ret)
        cards.append((PROMPT_LABEL, f"{_num(ret.get('prompt_tokens_per_episode'), 1)} "
                                    '<span class="unit">tokens / episode</span>',
                      _e("the planner's whole prompt per test episode" + (f" ({setting})" if setting else ""))))
    return cards


def _retrieval_section(report: Mapping[str, Any], rounds: list[dict]) -> str:
    ret = report.get("retrieval") if isinstance(report.get("retrieval"), Mapping) else {}
    setting = _prompt_setting(ret)
    prompt = ret.get("prompt_tokens_per_episode")
    parts = ['<dl class="cost">'
             f'<dt>{_e(COST_MODEL_LABEL)}: {_num(report.get("retrieval_tokens_per_query"), 1)} tokens per query '
             '(final state; per round in the chart)</dt>'
             f'<dd>{_e(COST_MODEL_MEANS)}. It prices retrieval in the paper\'s setting, where an LM reads every '
             'stage; it is not what this run\'s planner was shown.</dd>'
             f'<dt>{_e(PROMPT_LABEL)}: {_num(prompt, 1) if "prompt_tokens_per_episode" in ret else _NA} tokens per '
             'test episode</dt>'
             f'<dd>{_e(PROMPT_MEANS)}{_e(f" ({setting})") if setting else ""}. '
             + ("This is what the run paid in its prompts." if "prompt_tokens_per_episode" in ret
                else "report.json has no retrieval section: not measured.") + "</dd></dl>"]
    pts = [(r.get("round"), r.get("retrieval_tokens_per_query"),
            f"round {r.get('round')}: cost model {_plain(r.get('retrieval_tokens_per_query'))} tokens per query")
           for r in rounds if _is_real(r.get("round"))]
    if any(_is_real(p[1]) for p in pts):
        hlines = []
        if _is_real(prompt):
            hlines.append({"y": prompt, "color": "#e6550d",
                           "name": f"{PROMPT_LABEL}: {_plain(prompt)} tokens per test episode"})
        chart = line_chart([{"name": COST_MODEL_LABEL, "color": "#3182bd", "points": pts}],
                           title="retrieval cost model per round: tokens an LM ranker would read per query",
                           xlabel="round", ylabel="tokens", hlines=hlines)
        legend = [("#3182bd", f"{COST_MODEL_LABEL}, tokens per query", "line")]
        if hlines:
            legend.append(("#e6550d", f"{PROMPT_LABEL}, tokens per test episode (final library)", "dash"))
        parts.append(f'<div class="fig">{chart}{_legend(legend)}</div>')
    else:
        parts.append('<p class="na">The retrieval cost model was not computed in any round.</p>')
    if ret:
        labels = {"all_gold_found": "share of test tasks whose gold tools are all retrieved",
                  "gold_recall": "mean share of gold tools retrieved",
                  "prompt_tokens_per_episode": f"{PROMPT_LABEL}: tokens of the planner's prompt per test episode",
                  "overflow_episodes": "episodes whose prompt left no room for a step",
                  "k": "cards retrieved per query", "card_style": "how much of a card the prompt shows",
                  "library_size": "tools in the library retrieved from", "tasks": "test tasks with a gold program",
                  "mode": "retrieval method"}
        rows = []
        for k, v in ret.items():
            shown = _pct(v) if k in ("all_gold_found", "gold_recall") else (_num(v, 1) if _is_real(v) else _e(v))
            rows.append([f"<code>{_e(k)}</code>", shown, _e(labels.get(k, ""))])
        parts.append("<h3>Retrieval on the test split (final library)</h3>" + _table(["key", "value", "meaning"], rows))
    return _section("retrieval", "Retrieval cost", "".join(parts))


def _test_section(report: Mapping[str, Any]) -> str:
    parts = [f'<p class="big">Test accuracy: <b>{_pct(report.get("test_accuracy"))}</b></p>']
    outcomes = report.get("test_outcomes")
    if isinstance(outcomes, Mapping) and outcomes:
        solved = sum(1 for v in outcomes.values() if v is True or v == 1)
        parts.append(f"<p>{solved} of {len(outcomes)} test tasks solved.</p>")
    cats = report.get("test_per_category")
    if isinstance(cats, Mapping) and cats:
        items = [(str(c), v) for c, v in cats.items() if isinstance(v, Mapping)]
        rows = [(c, v.get("accuracy"), f"{c}: {_pct_text(v.get('accuracy'))} of {_plain(v.get('n'))} tasks")
                for c, v in items]
        chart = hbars(rows, title="test accuracy per category", max_value=1.0, color="#31a354",
                      value_format=lambda v: f"{100 * v:.1f}%")
        parts.append(f'<div class="fig">{chart}</div>')
        parts.append(_table(["category", "tasks", "accuracy"],
                            [[_e(c), _num(v.get("n")), _pct(v.get("accuracy"))] for c, v in items]))
    else:
        parts.append('<p class="na">No per-category breakdown (the domain has one category).</p>')
    return _section("test", "Test accuracy", "".join(parts))


def _curves_section(metrics: list[dict[str, Any]]) -> str:
    if not metrics:
        return _section("curves", "Training curves", '<p class="na">No metrics records.</p>')
    charts = []
    for key, title in CURVES:
        pts = [(rec["step"], rec[key], f"step {rec['step']}: {key} = {_plain(rec[key])}") for rec in metrics
               if key in rec and _is_real(rec[key]) and _is_real(rec.get("step"))]
        if not pts:
            continue
        if len(pts) > MAX_CURVE_POINTS:
            stride = math.ceil(len(pts) / MAX_CURVE_POINTS)
            pts = pts[::stride] + ([pts[-1]] if (len(pts) - 1) % stride else [])
        chart = line_chart([{"name": key, "color": "#3182bd", "points": pts, "markers": len(pts) <= 60}],
                           title=title, xlabel="step", ylabel=key, width=460, height=230)
        charts.append(f'<div class="fig small"><h3>{_e(title)} <code>{_e(key)}</code></h3>{chart}</div>')
    keys = sorted({k for rec in metrics for k in rec if k != "step"})
    steps = [rec["step"] for rec in metrics if _is_real(rec.get("step"))]
    body = (f'<p>{len(metrics)} records, steps {_e(min(steps, default="?"))}&ndash;{_e(max(steps, default="?"))}.</p>'
            + (f'<div class="grid2">{"".join(charts)}</div>' if charts else '<p class="na">None of the usual keys.</p>')
            + f"<details><summary>All {len(keys)} metric keys</summary><p>{_names(keys, limit=10_000)}</p></details>")
    return _section("curves", "Training curves (metrics.jsonl)", body)


_CSS = """
:root{--fg:#222;--muted:#777;--line:#ddd;--bg:#fff}
*{box-sizing:border-box}
body{margin:0;padding:24px 32px 64px;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",
Helvetica,Arial,sans-serif;color:var(--fg);background:var(--bg)}
h1{font-size:24px;margin:0 0 4px}h2{font-size:19px;margin:32px 0 10px;padding-top:8px;border-top:2px solid #eee}
h3{font-size:15px;margin:18px 0 6px}
nav a{color:#3182bd;text-decoration:none}nav{margin:8px 0 12px;display:flex;flex-wrap:wrap;gap:4px 14px}
.mode{margin:6px 0}.na{color:var(--muted)}.hint{color:#555;font-size:13px}.big{font-size:20px}
.cards{display:flex;flex-wrap:wrap;gap:10px}.card{border:1px solid var(--line);border-radius:6px;padding:10px 14px;
min-width:170px;flex:1 1 170px;background:#fafafa}.card .k{font-size:12px;color:var(--muted);text-transform:uppercase;
letter-spacing:.03em}.card .v{font-size:22px;font-weight:600;margin:2px 0}.card .unit{font-size:13px;font-weight:400;
color:#555}.card .s{font-size:12px;color:#555}
.notes{border-left:4px solid #fd8d3c;background:#fff8f0;padding:6px 12px;margin:12px 0}.notes li{margin:2px 0}
html,body{max-width:100%}body>*{max-width:100%}
.scroll{overflow-x:auto;max-width:100%}
.tablebox{overflow-x:auto;max-width:100%;margin:8px 0}
table{border-collapse:collapse;font-size:13px;max-width:100%}th,td{border:1px solid var(--line);padding:4px 8px;
text-align:left;vertical-align:top;overflow-wrap:break-word}th{background:#f3f3f3}tbody tr:nth-child(even){background:#fbfbfb}
pre{overflow-x:auto;max-width:100%;white-space:pre-wrap;overflow-wrap:anywhere}
code{font:12px/1.3 ui-monospace,"DejaVu Sans Mono",Menlo,Consolas,monospace;background:#f5f5f5;padding:0 3px;
border-radius:3px}
.badge{display:inline-block;color:#fff;border-radius:10px;padding:0 8px;font-size:12px;white-space:nowrap}
.fig{margin:8px 0 12px}.grid2{display:flex;flex-wrap:wrap;gap:16px}.fig.small h3{font-size:13px;margin:4px 0}
svg.chart{max-width:100%;height:auto;font-family:inherit;background:#fff}
svg.chart .grid{stroke:#eee;stroke-width:1}svg.chart .axis{stroke:#888;stroke-width:1}
svg.chart .tick{font-size:11px;fill:#444}svg.chart .label{font-size:12px;fill:#222}
.legend{font-size:12px;color:#333;margin:2px 0 0 58px;display:flex;flex-wrap:wrap;gap:2px 14px}
.key{min-width:0}
.sw{display:inline-block;width:18px;height:10px;margin-right:5px;vertical-align:middle}
.sw-line{border-top:2px solid var(--c);height:0}.sw-dash{border-top:2px dashed var(--c);height:0}
.sw-dot{width:10px;border-radius:50%;background:var(--c)}
.sw-ring{width:10px;border-radius:50%;border:2px solid var(--c)}
.sw-box{background:var(--c)}.sw-none{width:0;margin:0}
.dag{border:1px solid var(--line);border-radius:6px;padding:6px;background:#fff}
.dag img,.dag svg:not(.dag-own){max-width:100%;height:auto}
svg.dag-own{display:block}
svg.dag-own text{fill:#111}svg.dag-own text.sub{fill:#555}
svg.dag-own g.tool:hover rect{stroke:#e6550d;stroke-width:2}
table.rounds td:nth-child(3){min-width:160px}td{max-width:480px}
.cost{border-left:4px solid #3182bd;background:#f5f9fd;padding:6px 12px;margin:8px 0}.cost dt{font-weight:600}
.cost dd{margin:0 0 6px 0}
details{margin:6px 0}summary{cursor:pointer;color:#3182bd}
"""


def render_html_report(workdir: str | os.PathLike) -> str:
    """The report page of ``workdir`` as text (see the module docstring); :func:`write_html_report`
    writes it."""
    workdir = storage.path_of(workdir)  # a local path or a bucket URL
    report = _load_report(workdir)
    notes: list[str] = []
    rounds = _dicts(report.get("per_round"))
    decisions = {d["round"]: d for d in _dicts(report.get("decisions")) if _is_real(d.get("round"))}
    libraries = _load_libraries(workdir, notes)
    metrics = _load_metrics(workdir, notes)
    sections = [
        _accuracy_section(report, rounds, decisions),
        _library_section(report, rounds, libraries),
        _dag_section(report, libraries, workdir, notes),
        _composites_section(report, rounds),
        _rods_section(report),
        _retrieval_section(report, rounds),
        _test_section(report),
        _curves_section(metrics),
    ]
    if not _dicts(report.get("rods_per_epoch")):
        notes.append("no RODS epochs in report.json (run without a curriculum)")
    config = report.get("config")
    if config is not None:
        sections.append(_section("config", "Configuration",
                                 f"<details><summary>config</summary><pre>"
                                 f"{_e(json.dumps(config, indent=2, sort_keys=True))}</pre></details>"))
    nav = "".join(f'<a href="#{a}">{_e(t)}</a>' for a, t in (
        ("accuracy", "accuracy"), ("library", "library"), ("dag", "DAG"), ("composites", "composites"),
        ("rods", "RODS"), ("retrieval", "retrieval"), ("test", "test"), ("curves", "curves")))
    notes_html = ('<div class="notes"><b>Not shown</b><ul>' + "".join(f"<li>{_e(n)}</li>" for n in notes)
                  + "</ul></div>") if notes else ""
    title = f"Co-evolution run report: {(workdir if storage.is_remote(workdir) else workdir.resolve()).name}"
    return ("<!DOCTYPE html>\n"
            f'<html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{_e(title)}</title><style>{_CSS}</style></head><body>"
            f"<h1>{_e(title)}</h1><nav>{nav}</nav>{_summary(report, rounds)}{notes_html}"
            + "".join(sections) + "</body></html>\n")


def write_html_report(workdir: str | os.PathLike) -> pathlib.Path:
    """Renders ``workdir/report.html`` from the run's files (atomically) and returns its path.
    Raises :class:`FileNotFoundError` without ``report.json`` and :class:`ValueError` if it is not
    a JSON object; missing optional files only leave a note on the page."""
    workdir = storage.path_of(workdir)
    text = render_html_report(workdir)
    return write_text_atomic(workdir / REPORT_HTML, text)


__all__ = ["CURVES", "MAX_CURVE_POINTS", "OUTCOME_STYLE", "REPORT_HTML", "RODS_REGIONS", "hbars", "line_chart",
           "render_html_report", "stacked_bars", "write_html_report"]

"""The co-evolution run report: one JSON summary of the rounds, their plots, and a drawing of the learned DAG.

    rounds = [...]   # one RoundRecord (or its JSON) per round, round 0 = the state after SFT
    report = build_report(rounds, sft_accuracy=0.41, final_accuracy=0.63, final_library=snap,
                          primitive_names=primitives.names(), wall_s=3600.0)
    write_report(report, workdir / "report.json")
    plot_coevolution(rounds, workdir / "plots")          # library, accuracy, tool_calls, ... .png
    draw_library(snap, workdir / "plots" / "library_dag.svg", primitive_names=primitives.names())

Decisions:

* A round record is checked before anything is computed from it (:class:`~.rounds.RoundRecord`, whose
  schema is the report's per-round rows; :class:`ReportError` names the round and the key); round
  numbers strictly increase.
* The *final* state of a run is the last round whose outcome is ``initial``, ``accept`` or
  ``accept_planner``: a rejected round's measurements are those of a candidate that was thrown away.
  ``tool_calls_per_solved.final``, ``composite_share`` and ``retrieval_tokens_per_query`` are read
  from that record; ``tool_calls_per_solved.first_round`` from round 1 (round 0 when no RL round ran).
* ``library`` is counted on ``final_library`` itself, structurally (a composite is a tool with
  children, as in :class:`~cocoda_jax.library.LibrarySnapshot`); ``primitive_names`` (the starting
  primitives) adds ``library.learned``, the number of tools that are not starting primitives.
* ``composites[i].uses`` is the sum of that composite's ``composite_uses`` over every round record;
  composites are listed in topological order (depth, then name).
* ``extra`` may not overwrite a key the report already has (ReportError): a silent clobber of, say,
  ``accuracy`` would be a wrong report.
* Plots and drawings use matplotlib's object API with the Agg canvas (no pyplot, no global backend),
  and every file is written to a temporary name and renamed.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import pathlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from cocoda_jax import storage
from cocoda_jax.report.rounds import Outcome, ReportError, read_rounds

#: The outcomes whose planner is kept (the final state of a run is the last such round's).
ACCEPTED = (Outcome.ACCEPT, Outcome.ACCEPT_PLANNER)

PLOT_NAMES = ("library.png", "accuracy.png", "tool_calls.png", "composite_share.png", "retrieval_tokens.png")


def _is_real(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def validate_rounds(rounds: Any) -> list[dict[str, Any]]:
    """The round records checked (:func:`.rounds.read_rounds`) and written as the report's rows."""
    return [r.to_json() for r in read_rounds(rounds)]


def _number_or_none(name: str, v: Any) -> float | None:
    if v is not None and not _is_real(v):
        raise ReportError(f"{name} must be a finite number or None, got {v!r}")
    return v


def _json_ready(name: str, value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = dataclasses.asdict(value)
    try:
        json.dumps(value, allow_nan=False, sort_keys=True)
    except (TypeError, ValueError) as err:
        raise ReportError(f"{name} is not JSON-ready: {err}") from None
    return value


# -- the report ---------------------------------------------------------------------------------

def _final_state(rounds: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    for r in reversed(rounds):
        if r["outcome"] != "reject":
            return r
    return None


def library_summary(snapshot, primitive_names: Iterable[str] | None = None) -> dict[str, int]:
    """``{"primitives", "composites", "max_depth", "size"}`` of a snapshot (plus ``"learned"``: tools
    outside ``primitive_names``, when given)."""
    names = snapshot.names()
    composites = sum(1 for n in names if snapshot.children(n))
    out = {"primitives": len(names) - composites, "composites": composites,
           "max_depth": max((snapshot.depth(n) for n in names), default=0), "size": len(names)}
    if primitive_names is not None:
        out["learned"] = len(set(names) - set(primitive_names))
    return out


def build_report(rounds: Sequence[Mapping[str, Any]], *, sft_accuracy: float | None, final_accuracy: float | None,
                 final_library, primitive_names: Iterable[str], wall_s: float,
                 config: Any = None, baseline: Mapping[str, Any] | None = None, rods: Any = None,
                 extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The JSON-ready run report (key order fixed; see the module docstring for each decision).

    ``rounds``: the per-round records (round 0 = after SFT). ``config``: a JSON-ready value or a
    dataclass. ``baseline``: the frozen-library baseline, a dict with at least ``"accuracy"``.
    ``rods``: the RODS results, as given. ``extra``: more top-level keys (no overwriting).
    Raises :class:`ReportError` for any malformed input.
    """
    checked = validate_rounds(rounds)
    if isinstance(primitive_names, (str, bytes)) or not isinstance(primitive_names, Iterable):
        raise ReportError(f"primitive_names must be an iterable of str, got {type(primitive_names).__name__}")
    primitive_names = list(primitive_names)
    if not all(isinstance(n, str) for n in primitive_names):
        raise ReportError("primitive_names must hold only str")
    if not all(hasattr(final_library, a) for a in ("names", "children", "depth", "flat", "phi")):
        raise ReportError(f"final_library must be a LibrarySnapshot, got {type(final_library).__name__}")
    if not (_is_real(wall_s) and wall_s >= 0):
        raise ReportError(f"wall_s must be a finite number >= 0, got {wall_s!r}")

    rl = [r for r in checked if r["round"] >= 1]
    first = next((r for r in checked if r["round"] == 1), None) or next((r for r in checked if r["round"] == 0), None)
    final = _final_state(checked)
    uses: dict[str, int] = {}
    for r in checked:
        for name, count in r["composite_uses"].items():
            uses[name] = uses.get(name, 0) + count
    composites = [
        {"name": n, "depth": final_library.depth(n), "flat": final_library.flat(n), "phi": final_library.phi(n),
         "children": list(final_library.children(n)), "uses": uses.get(n, 0)}
        for n in sorted(final_library.names(), key=lambda n: (final_library.depth(n), n))
        if final_library.children(n)]
    report: dict[str, Any] = {
        "rounds": len(rl),
        "per_round": checked,
        "library": library_summary(final_library, primitive_names),
        "accuracy": {"sft": _number_or_none("sft_accuracy", sft_accuracy),
                     "final": _number_or_none("final_accuracy", final_accuracy),
                     "per_round": [r["val_accuracy"] for r in checked]},
        "tool_calls_per_solved": {"first_round": first["tool_calls_per_solved"] if first else None,
                                  "final": final["tool_calls_per_solved"] if final else None},
        "composite_share": final["composite_share"] if final else None,
        "retrieval_tokens_per_query": final["retrieval_tokens_per_query"] if final else None,
        "accepted_rounds": sum(r["outcome"] in ACCEPTED for r in checked),
        "rejected_rounds": sum(r["outcome"] == "reject" for r in checked),
        "wall_s": wall_s,
        "composites": composites,
    }
    if config is not None:
        report["config"] = _json_ready("config", config)
    if baseline is not None:
        if not isinstance(baseline, Mapping) or "accuracy" not in baseline:
            raise ReportError(f"baseline must be a dict with at least 'accuracy', got {baseline!r}")
        _number_or_none("baseline['accuracy']", baseline["accuracy"])
        report["baseline_frozen_library"] = _json_ready("baseline", dict(baseline))
    if rods is not None:
        report["rods"] = _json_ready("rods", rods)
    if extra is not None:
        if not isinstance(extra, Mapping):
            raise ReportError(f"extra must be a dict, got {type(extra).__name__}")
        clash = sorted(set(extra) & set(report))
        if clash:
            raise ReportError(f"extra would overwrite report key(s) {clash}")
        for key, value in extra.items():
            if not isinstance(key, str):
                raise ReportError(f"extra key {key!r} is not a str")
            report[key] = _json_ready(f"extra[{key!r}]", value)
    _json_ready("the report", report)
    return report


def write_report(report: Mapping[str, Any], path: str | os.PathLike) -> pathlib.Path:
    """Writes ``report`` as JSON (sorted keys, indent 2, strict: no NaN) to ``path`` atomically
    (:func:`write_text_atomic`); parents are created."""
    path = storage.path_of(path)
    try:
        text = json.dumps(report, sort_keys=True, indent=2, allow_nan=False) + "\n"
    except (TypeError, ValueError) as err:
        raise ReportError(f"the report is not JSON-ready: {err}") from None
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_text_atomic(path, text)


def write_text_atomic(path: str | os.PathLike, text: str, mode: int = 0o644) -> pathlib.Path:
    """Writes ``text`` to ``path`` so that a reader sees the old file or the whole new one, never a
    part: locally a temporary file in the same folder, flushed to disk, then ``os.replace``; in a
    bucket one upload (:func:`cocoda_jax.storage.write_atomic`)."""
    return storage.write_atomic(path, text, mode)


# -- retrieval cost -----------------------------------------------------------------------------

def retrieval_tokens_per_query(snapshot, questions: Sequence[str], k: int = 8, *, answer_type: str = "float",
                               counter: Any = None) -> float:
    """Mean ``Retrieval.total_tokens`` (every LM-read stage plus the final cards) of the typed cascade
    over ``questions``, on a :class:`~cocoda_jax.retrieval.RetrievalIndex` built here for ``snapshot``
    (nothing is cached between calls). ``counter``: a :class:`~cocoda_jax.retrieval.TokenCounter`
    (default: the cascade's own). Raises ``ValueError`` for no questions."""
    from cocoda_jax.retrieval import CascadeConfig, RetrievalIndex, retrieve_query

    questions = [questions] if isinstance(questions, str) else list(questions)
    if not questions:
        raise ValueError("retrieval_tokens_per_query needs at least one question")
    index = RetrievalIndex.build(snapshot, counter)
    config = CascadeConfig(k=k)
    total = sum(retrieve_query(index, q, answer_type, config).total_tokens for q in questions)
    return total / len(questions)


# -- plots --------------------------------------------------------------------------------------

_OUTCOME_STYLE = {  # marker, colour, label
    "initial": ("D", "#636363", "initial (after SFT)"),
    "accept": ("o", "#31a354", "accepted"),
    "accept_planner": ("s", "#3182bd", "accepted (planner only)"),
    "reject": ("X", "#de2d26", "rejected"),
}


def _points(rounds: Sequence[Mapping[str, Any]], key: str) -> tuple[list[int], list[float]]:
    pairs = [(r["round"], float(r[key])) for r in rounds if r[key] is not None]
    return [x for x, _ in pairs], [y for _, y in pairs]


def _new_axes(title: str, ylabel: str):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    fig = Figure(figsize=(6.4, 3.6), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    ax.set_title(title, fontsize=10, loc="left")
    ax.set_xlabel("round")
    ax.set_ylabel(ylabel)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.grid(True, alpha=0.3)
    return fig, ax


def _no_data(ax, what: str) -> None:
    ax.text(0.5, 0.5, f"{what}: not measured", transform=ax.transAxes, ha="center", va="center", color="#888888")


def _save(fig, path: pathlib.Path) -> pathlib.Path:
    with storage.staged_file(path) as tmp:  # matplotlib writes local files
        fig.savefig(tmp, format="png", dpi=100)
    return path


def _series_plot(rounds, key: str, title: str, ylabel: str, path: pathlib.Path) -> pathlib.Path:
    fig, ax = _new_axes(title, ylabel)
    xs, ys = _points(rounds, key)
    if xs:
        ax.plot(xs, ys, color="#3182bd", marker="o", markersize=4, linewidth=1.4)
    else:
        _no_data(ax, key)
    return _save(fig, path)


def _library_plot(rounds, path: pathlib.Path) -> pathlib.Path:
    fig, ax = _new_axes("library size and depth", "tools")
    if rounds:
        xs = [r["round"] for r in rounds]
        ax.plot(xs, [r["library_size"] for r in rounds], color="#3182bd", marker="o", markersize=4, label="size")
        ax.plot(xs, [r["composites"] for r in rounds], color="#3182bd", linestyle="--", linewidth=1.0,
                label="composites")
        right = ax.twinx()
        right.plot(xs, [r["max_depth"] for r in rounds], color="#e6550d", marker="^", markersize=4, label="max depth")
        right.set_ylabel("max depth")
        from matplotlib.ticker import MaxNLocator
        right.yaxis.set_major_locator(MaxNLocator(integer=True))
        right.set_ylim(bottom=0)
        handles = ax.get_legend_handles_labels()
        more = right.get_legend_handles_labels()
        ax.legend(handles[0] + more[0], handles[1] + more[1], fontsize=8, loc="upper left")
    else:
        _no_data(ax, "library")
    return _save(fig, path)


def _accuracy_plot(rounds, path: pathlib.Path) -> pathlib.Path:
    fig, ax = _new_axes("validation accuracy per round", "accuracy")
    xs, ys = _points(rounds, "val_accuracy")
    if xs:
        ax.plot(xs, ys, color="#969696", linewidth=1.0, zorder=1)
        for outcome, (marker, color, label) in _OUTCOME_STYLE.items():
            pts = [(r["round"], r["val_accuracy"]) for r in rounds
                   if r["outcome"] == outcome and r["val_accuracy"] is not None]
            if pts:
                ax.scatter([p[0] for p in pts], [p[1] for p in pts], marker=marker, color=color, s=40,
                           label=label, zorder=2)
        txs, tys = _points(rounds, "train_accuracy")
        if txs:
            ax.plot(txs, tys, color="#756bb1", linestyle=":", linewidth=1.0, marker=".", markersize=6,
                    label="train accuracy")
        ax.legend(fontsize=8)
    else:
        _no_data(ax, "val_accuracy")
    return _save(fig, path)


def plot_coevolution(rounds: Sequence[Mapping[str, Any]], outdir: str | os.PathLike) -> list[pathlib.Path]:
    """Writes the five PNGs of :data:`PLOT_NAMES` into ``outdir`` (created) and returns their paths in
    that order. ``None`` values are left out of a series; a series with no value shows a note.
    Raises :class:`ReportError` for malformed records."""
    checked = validate_rounds(rounds)
    outdir = storage.path_of(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    library, accuracy, calls, share, tokens = (outdir / n for n in PLOT_NAMES)
    return [
        _library_plot(checked, library),
        _accuracy_plot(checked, accuracy),
        _series_plot(checked, "tool_calls_per_solved", "tool calls per solved task", "tool calls", calls),
        _series_plot(checked, "composite_share", "share of tool calls that are composites", "composite share", share),
        _series_plot(checked, "retrieval_tokens_per_query", "retrieval tokens shown to the LM per query", "tokens",
                     tokens),
    ]


# -- the learned DAG ----------------------------------------------------------------------------


def draw_library(snapshot, path: str | os.PathLike, *, primitive_names: Iterable[str] | None = None) -> str:
    """Draws the whole library DAG to ``path`` (``.png`` or ``.svg``) and returns the path: tools
    layered by depth in boxes that never overlap, a figure that grows with the library, the tools no
    composite calls folded away and counted in the caption (:func:`cocoda_jax.library.draw.draw_dag`).
    Colours: the starting primitives (``primitive_names``), other learned tools without children,
    composites."""
    from cocoda_jax.library.draw import draw_dag, to_networkx

    with storage.staged_file(path) as local:  # matplotlib writes local files
        draw_dag(to_networkx(snapshot), local, primitive_names=primitive_names)
    return os.fspath(path)


__all__ = [
    "ACCEPTED", "PLOT_NAMES", "ReportError", "build_report",
    "draw_library", "library_summary", "plot_coevolution", "retrieval_tokens_per_query", "validate_rounds", "write_report", "write_text_atomic",
]

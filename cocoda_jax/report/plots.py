"""PNG plots from a metrics JSONL file: any keys against step, one panel each (matplotlib Agg).

Why a figure builder apart from the saver: the report saves PNGs, tests look at the very data the
panels draw. The Agg backend is used explicitly so plotting works on a headless machine and never
opens a window.
"""

from __future__ import annotations

import math
import os
import pathlib
from collections.abc import Mapping, Sequence
from typing import Any

from cocoda_jax.report.metrics import iter_series, read_metrics


def _records(source: os.PathLike | str | Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    if isinstance(source, (str, os.PathLike)):
        return read_metrics(source)
    return list(source)


def series(source: os.PathLike | str | Sequence[Mapping[str, Any]], key: str) -> tuple[list[int], list[float]]:
    """Steps and values of ``key`` (in file order), from a JSONL path or from records."""
    pairs = list(iter_series(_records(source), key))
    return [s for s, _ in pairs], [float(v) for _, v in pairs]


def metrics_figure(source: os.PathLike | str | Sequence[Mapping[str, Any]], keys: Sequence[str], *,
                   title: str | None = None, xlabel: str = "step"):
    """A figure with one panel per key (shared x axis), stacked in the order of ``keys``.

    Raises ``KeyError`` naming every key that no record holds, and ``ValueError`` for no keys.
    """
    from matplotlib.figure import Figure

    keys = list(keys)
    if not keys:
        raise ValueError("no metric keys to plot")
    records = _records(source)
    data = {k: series(records, k) for k in keys}
    missing = [k for k in keys if not data[k][0]]
    if missing:
        raise KeyError(f"no record holds {missing}; keys present: {sorted({k for r in records for k in r} - {'step'})}")
    fig = Figure(figsize=(6.4, 2.2 * len(keys) + 0.4), layout="constrained")
    axes = fig.subplots(len(keys), 1, sharex=True, squeeze=False)[:, 0]
    for ax, key in zip(axes, keys):
        steps, values = data[key]
        ax.plot(steps, values, marker="o" if len(steps) <= 30 else None, markersize=3, linewidth=1.2)
        ax.set_ylabel(key)
        ax.set_title(key, fontsize=9, loc="left")
        ax.grid(True, alpha=0.3)
        finite = [v for v in values if math.isfinite(v)]
        if finite and min(finite) == max(finite):
            ax.set_ylim(finite[0] - 1, finite[0] + 1)   # a flat series still shows as a line
    axes[-1].set_xlabel(xlabel)
    if title:
        fig.suptitle(title)
    return fig


def plot_metrics(source: os.PathLike | str | Sequence[Mapping[str, Any]], keys: Sequence[str],
                 out: os.PathLike | str, *, title: str | None = None, xlabel: str = "step",
                 dpi: int = 100) -> pathlib.Path:
    """Saves :func:`metrics_figure` as a PNG at ``out`` (parents created) and returns the path.

    Written to a temporary name and renamed, so a reader never sees half a PNG."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    fig = metrics_figure(source, keys, title=title, xlabel=xlabel)
    FigureCanvasAgg(fig)
    out = pathlib.Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    fig.savefig(tmp, format="png", dpi=dpi)
    os.replace(tmp, out)
    return out


__all__ = ["metrics_figure", "plot_metrics", "series"]

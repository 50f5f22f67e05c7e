"""Intervals for accuracies and paired comparisons of two arms on the same tasks.

A run's accuracy on ``n`` tasks comes with a 95% Wilson interval (:func:`accuracy_interval`); two
arms evaluated on the same tasks (same seed, same split) are compared task by task
(:func:`paired_difference`): the mean of the per-task differences with its 95% normal interval,
and the discordant counts (tasks only one arm solved), which is all that differs between them.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path

Z95 = 1.959963984540054


def accuracy_interval(correct: int, n: int, z: float = Z95) -> dict[str, float]:
    """``{"accuracy", "low", "high", "n"}``: the Wilson score interval (sensible at 0 and n too)."""
    if n < 1 or not 0 <= correct <= n:
        raise ValueError(f"need 0 <= correct <= n and n >= 1, got {correct}/{n}")
    p = correct / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    low = 0.0 if correct == 0 else min(p, max(0.0, centre - half))  # exact at the ends (no rounding)
    high = 1.0 if correct == n else max(p, min(1.0, centre + half))
    return {"accuracy": p, "low": low, "high": high, "n": n}


def paired_difference(a: Mapping[str, int], b: Mapping[str, int], z: float = Z95) -> dict[str, float]:
    """``a - b`` over the tasks both arms saw: ``{"diff", "low", "high", "n", "only_a", "only_b"}``
    (mean per-task difference and its normal 95% interval; tasks solved by one arm only)."""
    common = sorted(set(a) & set(b))
    if not common:
        raise ValueError("the two arms share no task")
    d = [int(a[t]) - int(b[t]) for t in common]
    n = len(d)
    mean = sum(d) / n
    var = sum((x - mean) ** 2 for x in d) / (n - 1) if n > 1 else 0.0
    half = z * math.sqrt(var / n)
    return {"diff": mean, "low": mean - half, "high": mean + half, "n": n,
            "only_a": sum(x > 0 for x in d), "only_b": sum(x < 0 for x in d)}


def run_outcomes(run_dir: str | Path) -> dict[str, int]:
    """A finished run's ``test_outcomes`` from its ``report.json`` (``launch.coevolve``) or
    ``train_summary.json`` (``launch.train``), or the ``outcomes`` of a JSON file that
    ``launch.evaluate_run`` wrote; a clear error when it has none."""
    d = Path(run_dir)
    if d.is_file():
        doc = json.loads(d.read_text())
        if "outcomes" not in doc:
            raise ValueError(f"{d} has no outcomes (not written by launch.evaluate_run?)")
        return {str(k): int(v) for k, v in doc["outcomes"].items()}
    for name in ("report.json", "train_summary.json"):
        if (d / name).is_file():
            doc = json.loads((d / name).read_text())
            if "test_outcomes" not in doc:
                raise ValueError(f"{d / name} has no test_outcomes (written by an older version?)")
            return {str(k): int(v) for k, v in doc["test_outcomes"].items()}
    raise FileNotFoundError(f"{d} holds neither report.json nor train_summary.json (an unfinished run?)")


def compare_runs(run_dirs: Sequence[str | Path]) -> dict:
    """Each run's test accuracy with its interval, and each run against the first, paired by task
    (a run is a run directory or a ``launch.evaluate_run`` JSON file)."""
    outs = [run_outcomes(r) for r in run_dirs]
    runs = [{"dir": str(r), **accuracy_interval(sum(o.values()), len(o))} for r, o in zip(run_dirs, outs)]
    paired = [{"dir": str(r), **paired_difference(o, outs[0])} for r, o in zip(run_dirs[1:], outs[1:])]
    return {"runs": runs, "paired_vs_first": paired}


__all__ = ["accuracy_interval", "compare_runs", "paired_difference", "run_outcomes"]

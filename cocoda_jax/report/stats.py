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


def mean_interval(scores: Sequence[float], z: float = Z95) -> dict[str, float]:
    """``{"mean", "low", "high", "n"}``: a graded per-task score's mean with its normal 95% interval."""
    n = len(scores)
    if n < 1:
        raise ValueError("mean_interval needs at least one score")
    mean = sum(scores) / n
    var = sum((x - mean) ** 2 for x in scores) / (n - 1) if n > 1 else 0.0
    half = z * math.sqrt(var / n)
    return {"mean": mean, "low": mean - half, "high": mean + half, "n": n}


def paired_difference(a: Mapping[str, float], b: Mapping[str, float], z: float = Z95) -> dict[str, float]:
    """``a - b`` over the tasks both arms saw: ``{"diff", "low", "high", "n", "only_a", "only_b"}``
    (mean per-task difference and its normal 95% interval; tasks where one arm scored higher: for
    0/1 outcomes, the tasks solved by one arm only). Scores may be graded (e.g. turns passed)."""
    common = sorted(set(a) & set(b))
    if not common:
        raise ValueError("the two arms share no task")
    d = [float(a[t]) - float(b[t]) for t in common]
    m = mean_interval(d, z)
    return {"diff": m["mean"], "low": m["low"], "high": m["high"], "n": m["n"],
            "only_a": sum(x > 0 for x in d), "only_b": sum(x < 0 for x in d)}


#: What a comparison scores per task: ``solved`` (1 if verified) or ``turns_passed`` (multi-turn
#: only: the share of user turns passed before the first failure).
MEASURES = {"solved": ("test_outcomes", "outcomes"), "turns_passed": ("test_turns_passed", "turns_passed")}


def run_outcomes(run_dir: str | Path, measure: str = "solved") -> dict[str, float]:
    """A finished run's per-task scores: ``test_outcomes`` (or ``test_turns_passed`` for
    ``measure="turns_passed"``) from its ``report.json`` (``launch.coevolve``) or
    ``train_summary.json`` (``launch.train``), or ``outcomes`` (``turns_passed``) of a JSON file that
    ``launch.evaluate_run`` wrote; a clear error when it has none."""
    if measure not in MEASURES:
        raise ValueError(f"measure must be one of {sorted(MEASURES)}, got {measure!r}")
    run_key, eval_key = MEASURES[measure]
    cast = int if measure == "solved" else float
    d = Path(run_dir)
    if d.is_file():
        doc = json.loads(d.read_text())
        if not doc.get(eval_key):
            raise ValueError(f"{d} has no {eval_key} (not written by launch.evaluate_run, or not multi-turn?)")
        return {str(k): cast(v) for k, v in doc[eval_key].items()}
    for name in ("report.json", "train_summary.json"):
        if (d / name).is_file():
            doc = json.loads((d / name).read_text())
            if not doc.get(run_key):
                raise ValueError(f"{d / name} has no {run_key} (written by an older version, or not multi-turn?)")
            return {str(k): cast(v) for k, v in doc[run_key].items()}
    raise FileNotFoundError(f"{d} holds neither report.json nor train_summary.json (an unfinished run?)")


def compare_runs(run_dirs: Sequence[str | Path], measure: str = "solved") -> dict:
    """Each run's test score with its interval (accuracy: Wilson; turns passed: the mean's normal
    interval), and each run against the first, paired by task (a run is a run directory or a
    ``launch.evaluate_run`` JSON file)."""
    outs = [run_outcomes(r, measure) for r in run_dirs]
    if measure == "solved":
        runs = [{"dir": str(r), **accuracy_interval(sum(o.values()), len(o))} for r, o in zip(run_dirs, outs)]
    else:
        runs = [{"dir": str(r), **mean_interval(list(o.values()))} for r, o in zip(run_dirs, outs)]
    paired = [{"dir": str(r), **paired_difference(o, outs[0])} for r, o in zip(run_dirs[1:], outs[1:])]
    return {"measure": measure, "runs": runs, "paired_vs_first": paired}


__all__ = ["MEASURES", "accuracy_interval", "compare_runs", "mean_interval", "paired_difference", "run_outcomes"]

"""The study's statistics: pure numpy (scipy for one t quantile), no JAX.

Outcomes are ``{seed: {task_id: 0 or 1}}`` (report.json's ``test_outcomes`` of each seed's run).

* :func:`accuracy_ci`: the accuracy (mean over seeds of the per-seed accuracy) with a two-level
  percentile bootstrap interval: each replicate resamples the seeds with replacement, then the
  tasks within each drawn seed with replacement (a seed drawn twice gets two independent task
  resamples). With one seed only the task level varies.
* :func:`paired_delta`: an arm minus the reference arm on the same (seed, task) pairs (the test
  split of a seed is the same tasks for every arm), bootstrapped the same way on the per-pair
  differences; :func:`distinguishable`: the interval excludes 0.
* :func:`seed_t_interval`: a Student t interval over the per-seed values, the seeds (whole training
  runs) as the units. With three seeds the bootstrap's seed level sees ten distinct resamples and
  understates how much a run varies; this interval does not, at the price of width.
* :func:`per_depth`: the pooled accuracy per task depth.

A task resample of ``n`` values is drawn as multinomial counts over the distinct values (the same
distribution as drawing ``n`` indices with replacement, at a fraction of the cost). Every
function takes ``seed`` for its generator: the same inputs and seed give the same interval.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

Outcomes = Mapping[Any, Mapping[str, float]]  # seed -> task id -> outcome

DEFAULT_B = 2000
DEFAULT_LEVEL = 0.95


@dataclasses.dataclass(frozen=True)
class Estimate:
    """A point estimate with its bootstrap interval ``[lo, hi]``; ``per_seed``: the statistic of
    each seed, in the order of the seeds given."""

    point: float
    lo: float
    hi: float
    per_seed: tuple[float, ...]
    n_pairs: int

    @property
    def ci(self) -> list[float]:
        return [self.lo, self.hi]


def _as_arrays(values_per_seed: Sequence[Sequence[float]]) -> list[np.ndarray]:
    arrays = [np.asarray(v, dtype=np.float64).ravel() for v in values_per_seed]
    if not arrays:
        raise ValueError("no seeds")
    for i, a in enumerate(arrays):
        if a.size == 0:
            raise ValueError(f"seed #{i} has no tasks")
        if not np.all(np.isfinite(a)):
            raise ValueError(f"seed #{i} has non-finite values")
    return arrays


def _resampled_means(values: np.ndarray, size: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """Means of ``size`` task resamples (with replacement, ``len(values)`` draws each)."""
    uniq, counts = np.unique(values, return_counts=True)
    n = values.size
    if uniq.size == 1:
        return np.full(size, float(uniq[0]))
    draws = rng.multinomial(n, counts / n, size=size)  # size + (len(uniq),)
    return draws @ uniq / n


def bootstrap_mean(values_per_seed: Sequence[Sequence[float]], *, b: int = DEFAULT_B, seed: int = 0,
                   level: float = DEFAULT_LEVEL) -> Estimate:
    """The mean over seeds of each seed's mean, with the seeds-then-tasks percentile bootstrap."""
    if b < 1:
        raise ValueError(f"b must be >= 1, got {b}")
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    arrays = _as_arrays(values_per_seed)
    s = len(arrays)
    per_seed = tuple(float(a.mean()) for a in arrays)
    point = float(np.mean(per_seed))
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, s, size=(b, s)) if s > 1 else np.zeros((b, 1), dtype=np.int64)
    # for each seed, the task-resampled means it would contribute in every (replicate, slot)
    means = np.stack([_resampled_means(a, (b, s), rng) for a in arrays])  # (s, b, s)
    replicate = means[picks, np.arange(b)[:, None], np.arange(s)[None, :]].mean(axis=1)
    alpha = (1.0 - level) / 2.0
    lo, hi = np.quantile(replicate, [alpha, 1.0 - alpha])
    return Estimate(point, float(lo), float(hi), per_seed, int(sum(a.size for a in arrays)))


def _ordered(outcomes: Outcomes, seeds: Sequence[Any] | None) -> list[Any]:
    order = list(outcomes) if seeds is None else list(seeds)
    missing = [s for s in order if s not in outcomes]
    if missing:
        raise KeyError(f"no outcomes for seed(s) {missing}")
    return order


def accuracy_ci(outcomes: Outcomes, seeds: Sequence[Any] | None = None, *, b: int = DEFAULT_B, seed: int = 0,
                level: float = DEFAULT_LEVEL) -> Estimate:
    """The accuracy over ``seeds`` (default: every seed of ``outcomes``) with its interval."""
    order = _ordered(outcomes, seeds)
    values = [[float(outcomes[s][t]) for t in sorted(outcomes[s])] for s in order]
    return bootstrap_mean(values, b=b, seed=seed, level=level)


def paired_differences(arm: Outcomes, reference: Outcomes, seeds: Sequence[Any] | None = None
                       ) -> list[np.ndarray]:
    """Per seed, ``arm - reference`` on each test task (sorted by task id). The two arms must have
    the same test tasks for every seed: anything else means the pairing is broken."""
    order = _ordered(arm, seeds if seeds is not None else list(reference))
    _ordered(reference, order)
    out = []
    for s in order:
        a, r = arm[s], reference[s]
        if set(a) != set(r):
            only_a, only_r = sorted(set(a) - set(r)), sorted(set(r) - set(a))
            raise ValueError(f"seed {s}: the arms' test tasks differ (only in arm: {only_a[:3]}..., "
                             f"only in reference: {only_r[:3]}...); paired comparison impossible")
        out.append(np.array([float(a[t]) - float(r[t]) for t in sorted(a)], dtype=np.float64))
    return out


def paired_delta(arm: Outcomes, reference: Outcomes, seeds: Sequence[Any] | None = None, *, b: int = DEFAULT_B,
                 seed: int = 0, level: float = DEFAULT_LEVEL) -> Estimate:
    """``accuracy(arm) - accuracy(reference)`` on the same (seed, task) pairs, with the paired
    seeds-then-tasks bootstrap interval."""
    return bootstrap_mean(paired_differences(arm, reference, seeds), b=b, seed=seed, level=level)


def seed_t_interval(per_seed: Sequence[float], level: float = DEFAULT_LEVEL) -> list[float] | None:
    """``mean +- t(level, s - 1) * sd / sqrt(s)`` over the ``s`` per-seed values (each seed's accuracy
    or paired delta); ``None`` with fewer than two seeds (no spread to measure)."""
    from scipy import stats as _scipy_stats  # here: only the study's summary needs it

    values = np.asarray(per_seed, dtype=np.float64)
    if values.size < 2:
        return None
    if not np.all(np.isfinite(values)):
        raise ValueError(f"non-finite per-seed values: {values.tolist()}")
    half = float(_scipy_stats.t.ppf(0.5 + level / 2.0, values.size - 1) * values.std(ddof=1) / np.sqrt(values.size))
    mean = float(values.mean())
    return [mean - half, mean + half]


def distinguishable(ci: Sequence[float]) -> bool:
    """The interval excludes 0 (both ends strictly on one side)."""
    lo, hi = float(ci[0]), float(ci[1])
    return lo > 0.0 or hi < 0.0


def verdict(ci: Sequence[float] | None) -> str:
    """The table's word for a delta interval."""
    if ci is None or ci[0] is None:
        return "n/a"
    if not distinguishable(ci):
        return "not distinguishable"
    return "better" if ci[0] > 0 else "worse"


def _labels(depths: Mapping[Any, Mapping[str, int]]) -> dict[Any, dict[str, str]]:
    """Depths as group labels (``"3"``); tasks without a depth are left out."""
    return {s: {t: str(int(d)) for t, d in per.items() if d is not None} for s, per in depths.items()}


def _by_depth(out: Mapping[str, Any]) -> dict[str, Any]:
    return dict(sorted(out.items(), key=lambda kv: int(kv[0])))


def per_depth(outcomes: Outcomes, depths: Mapping[Any, Mapping[str, int]]) -> dict[str, float]:
    """The accuracy per task depth, pooled over seeds: ``{"1": acc, "2": acc, ...}`` (string keys,
    as in JSON). ``depths``: seed -> task id -> depth; tasks without a depth are left out."""
    return _by_depth(per_group(outcomes, _labels(depths)))


def per_depth_delta(arm: Outcomes, reference: Outcomes, depths: Mapping[Any, Mapping[str, int]],
                    seeds: Sequence[Any] | None = None, *, b: int = DEFAULT_B, seed: int = 0,
                    level: float = DEFAULT_LEVEL) -> dict[str, dict[str, Any]]:
    """The paired delta ``arm - reference`` restricted to the tasks of each depth (the same
    seeds-then-tasks bootstrap): ``{"3": {"delta": d, "ci95": [lo, hi], "n": tasks}, ...}``. Where
    composition decides whether a task is solvable is a depth; a pooled delta can hide it."""
    return _by_depth(per_group_delta(arm, reference, _labels(depths), seeds, b=b, seed=seed, level=level))


def per_group(outcomes: Outcomes, groups: Mapping[Any, Mapping[str, str]]) -> dict[str, float]:
    """The accuracy per task group (e.g. ``seen``/``unseen`` structure), pooled over seeds.
    ``groups``: seed -> task id -> label; tasks without a label are left out."""
    hits: dict[str, list[float]] = {}
    for s, tasks in outcomes.items():
        labels = groups.get(s, {})
        for t, o in tasks.items():
            if labels.get(t) is not None:
                hits.setdefault(str(labels[t]), []).append(float(o))
    return {g: float(np.mean(v)) for g, v in sorted(hits.items())}


def per_group_delta(arm: Outcomes, reference: Outcomes, groups: Mapping[Any, Mapping[str, str]],
                    seeds: Sequence[Any] | None = None, *, b: int = DEFAULT_B, seed: int = 0,
                    level: float = DEFAULT_LEVEL) -> dict[str, dict[str, Any]]:
    """The paired delta ``arm - reference`` on each group's tasks (the seeds-then-tasks bootstrap):
    ``{label: {"delta": d, "ci95": [lo, hi], "n": (seed, task) pairs}}``."""
    order = _ordered(arm, seeds if seeds is not None else list(reference))
    out: dict[str, dict[str, Any]] = {}
    for g in sorted({str(v) for s in order for v in groups.get(s, {}).values() if v is not None}):
        pairs = {(s, t) for s in order for t, v in groups.get(s, {}).items() if str(v) == g and t in arm[s]}
        keep = [s for s in order if any(p[0] == s for p in pairs)]
        if not keep:  # the labels name none of the arm's tasks
            continue
        sub_a = {s: {t: arm[s][t] for t in arm[s] if (s, t) in pairs} for s in keep}
        sub_r = {s: {t: reference[s][t] for t in reference[s] if (s, t) in pairs} for s in keep}
        est = paired_delta(sub_a, sub_r, keep, b=b, seed=seed, level=level)
        out[g] = {"delta": est.point, "ci95": list(est.ci), "n": len(pairs)}
    return out


__all__ = ["DEFAULT_B", "DEFAULT_LEVEL", "Estimate", "Outcomes", "accuracy_ci", "bootstrap_mean", "distinguishable",
           "paired_delta", "paired_differences", "per_depth", "per_depth_delta", "per_group", "per_group_delta",
           "seed_t_interval", "verdict"]

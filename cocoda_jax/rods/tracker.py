"""Per-task reward statistics from GRPO groups: the zero-cost boundary detector of RODS.

Every GRPO group already computes ``G`` rewards for one task; the tracker keeps, per task, the last
``window`` groups as ``(epoch, n, mean, M2)`` and answers the windowed mean and variance (pooled over
the window's rewards), the mean within-group variance, the region (mastered / boundary / hard) and
the priority ``phi(r) = 4 r (1 - r)``. Updates return a new :class:`Tracker`; nothing mutates.
The reward to feed is what GRPO trains on (the co-evolution loop's default, ``rods.signal =
"reward"``: ``R = R_res + lambda * sum Phi``, so reward variance is the advantages' signal and a group
that is all wrong is "hard" however its progress varies), or the progress reward where the domain
has gold intermediate values (``rods.signal = "progress"``, the RODS paper's R_P; :func:`tracking_reward`).
A training reward can exceed 1 (saved-call credit): a mean above ``mastered`` is mastered, and the
priority clips the mean to [0, 1].
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Any

from cocoda_jax.rods.config import RodsConfig
from cocoda_jax.rods.errors import RodsStateError

FORMAT = "cocoda-rods-tracker/v1"
REGIONS = ("mastered", "boundary", "hard")


def phi(r: float) -> float:
    """Priority ``4 r (1 - r)``: the Bhatia-Davis bound on a [0,1] reward's variance, scaled to peak 1
    (``r`` clipped to [0, 1]: a training reward with saved-call credit can pass 1)."""
    r = min(max(r, 0.0), 1.0)
    return 4.0 * r * (1.0 - r)


def region(mean: float, config: RodsConfig) -> str:
    """``mastered`` above ``config.mastered``, ``hard`` below ``config.hard``, else ``boundary``."""
    if mean > config.mastered:
        return "mastered"
    if mean < config.hard:
        return "hard"
    return "boundary"


SIGNALS = ("reward", "progress")


def tracking_reward(outcome: Any, has_gold_intermediates: bool, signal: str = "progress",
                    training_reward: float | None = None) -> float:
    """The reward RODS tracks for one rollout. ``signal="reward"``: ``training_reward``, the total
    GRPO optimises (its variance is the advantages'). ``"progress"``: ``outcome.progress`` (R_P) where
    the task has gold intermediate values, else ``outcome.r_res`` (the RODS paper's choice: binary
    accuracy instead costs 3 points there)."""
    if signal not in SIGNALS:
        raise ValueError(f"signal must be one of {SIGNALS}, got {signal!r}")
    if signal == "reward":
        if training_reward is None:
            raise ValueError("signal='reward' needs the training_reward")
        return float(training_reward)
    value = outcome.progress if has_gold_intermediates else outcome.r_res
    return float(value)


@dataclasses.dataclass(frozen=True)
class GroupObs:
    """One GRPO group's rewards for a task, summarised (``m2``: sum of squared deviations)."""

    epoch: int
    n: int
    mean: float
    m2: float

    @classmethod
    def of(cls, epoch: int, rewards: Sequence[float]) -> "GroupObs":
        values = [float(r) for r in rewards]
        if not values:
            raise RodsStateError("rewards", "a group needs at least one reward")
        for i, v in enumerate(values):
            if not math.isfinite(v):
                raise RodsStateError(f"rewards[{i}]", f"not a finite number: {v!r}")
        mean = math.fsum(values) / len(values)
        return cls(int(epoch), len(values), mean, math.fsum((v - mean) ** 2 for v in values))

    @property
    def variance(self) -> float:
        return self.m2 / self.n


@dataclasses.dataclass(frozen=True)
class TaskStats:
    """The last ``window`` groups of one task plus lifetime counters."""

    groups: tuple[GroupObs, ...]
    total_groups: int
    first_epoch: int

    @property
    def last_epoch(self) -> int:
        return self.groups[-1].epoch

    @property
    def n(self) -> int:
        return sum(g.n for g in self.groups)

    @property
    def mean(self) -> float:
        """Mean reward over all rewards in the window."""
        return math.fsum(g.mean * g.n for g in self.groups) / self.n

    @property
    def variance(self) -> float:
        """Population variance of all rewards in the window (Chan's pooled formula)."""
        mu = self.mean
        return math.fsum(g.m2 + g.n * (g.mean - mu) ** 2 for g in self.groups) / self.n

    @property
    def group_variance(self) -> float:
        """Mean within-group variance: what GRPO's advantages see."""
        return math.fsum(g.variance for g in self.groups) / len(self.groups)

    @property
    def phi(self) -> float:
        return phi(self.mean)

    def region(self, config: RodsConfig) -> str:
        return region(self.mean, config)


@dataclasses.dataclass(frozen=True)
class Tracker:
    """Immutable map task id -> :class:`TaskStats`; :meth:`observe` returns a new tracker."""

    config: RodsConfig
    stats: Mapping[str, TaskStats] = dataclasses.field(default_factory=lambda: MappingProxyType({}))

    def __post_init__(self) -> None:
        if not isinstance(self.stats, MappingProxyType):
            object.__setattr__(self, "stats", MappingProxyType(dict(self.stats)))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Tracker) and self.config == other.config and dict(self.stats) == dict(other.stats)

    __hash__ = None  # type: ignore[assignment]

    # -- updates -------------------------------------------------------------------------------------
    def observe(self, task_id: str, rewards: Sequence[float], epoch: int) -> "Tracker":
        """The tracker after one group of ``rewards`` for ``task_id`` in ``epoch``."""
        return self.observe_groups({task_id: rewards}, epoch)

    def observe_groups(self, groups: Mapping[str, Sequence[float]] | Iterable[tuple[str, Sequence[float]]],
                       epoch: int) -> "Tracker":
        """The tracker after several groups (task id -> rewards; a task may repeat in a pair list)."""
        items = groups.items() if isinstance(groups, Mapping) else groups
        new = dict(self.stats)
        w = self.config.window
        for task_id, rewards in items:
            if not isinstance(task_id, str) or not task_id:
                raise RodsStateError("task_id", f"must be a non-empty str, got {task_id!r}")
            obs = GroupObs.of(epoch, rewards)
            old = new.get(task_id)
            if old is not None and epoch < old.last_epoch:
                raise RodsStateError(f"epoch[{task_id}]", f"{epoch} is before the last observed epoch {old.last_epoch}")
            if old is None:
                new[task_id] = TaskStats((obs,), 1, int(epoch))
            else:
                new[task_id] = TaskStats((old.groups + (obs,))[-w:], old.total_groups + 1, old.first_epoch)
        return Tracker(self.config, MappingProxyType(new))

    def observe_batch(self, task_ids: Sequence[str], rewards: Sequence[float], group_size: int,
                      epoch: int) -> "Tracker":
        """From a GRPO batch laid out as ``len(task_ids)`` consecutive groups of ``group_size`` rewards."""
        flat = [float(r) for r in rewards]
        if group_size < 1 or len(flat) != len(task_ids) * group_size:
            raise RodsStateError("rewards", f"{len(flat)} rewards for {len(task_ids)} groups of {group_size}")
        pairs = [(t, flat[i * group_size:(i + 1) * group_size]) for i, t in enumerate(task_ids)]
        return self.observe_groups(pairs, epoch)

    # -- queries -------------------------------------------------------------------------------------
    def get(self, task_id: str) -> TaskStats | None:
        return self.stats.get(task_id)

    def region_of(self, task_id: str) -> str | None:
        s = self.stats.get(task_id)
        return None if s is None else s.region(self.config)

    def by_region(self, task_ids: Iterable[str] | None = None) -> dict[str, tuple[str, ...]]:
        """Observed tasks per region (sorted ids); unobserved ids are left out."""
        out: dict[str, list[str]] = {r: [] for r in REGIONS}
        ids = sorted(self.stats) if task_ids is None else sorted(set(task_ids))
        for t in ids:
            s = self.stats.get(t)
            if s is not None:
                out[s.region(self.config)].append(t)
        return {r: tuple(v) for r, v in out.items()}

    def boundary(self, task_ids: Iterable[str] | None = None) -> tuple[str, ...]:
        """Boundary tasks, highest phi first (ties by id): the synthesis seeds."""
        ids = self.by_region(task_ids)["boundary"]
        return tuple(sorted(ids, key=lambda t: (-self.stats[t].phi, t)))

    def region_variances(self, task_ids: Iterable[str] | None = None) -> dict[str, float | None]:
        """Mean within-group reward variance per region (None for an empty region)."""
        out: dict[str, float | None] = {}
        for r, ids in self.by_region(task_ids).items():
            out[r] = math.fsum(self.stats[t].group_variance for t in ids) / len(ids) if ids else None
        return out

    def boundary_variance_ratio(self, task_ids: Iterable[str] | None = None) -> float | None:
        """Mean group variance of boundary tasks over that of all other observed tasks (paper: ~2x).

        None when it is undefined: no boundary task, no other observed task, or others whose groups
        all agree (variance 0, as a few mastered or all-fail tasks do early in a run); the ratio would
        be infinite, and the run's JSON records (metrics, checkpoint payloads) refuse infinities."""
        regions = self.by_region(task_ids)
        others = regions["mastered"] + regions["hard"]
        if not regions["boundary"] or not others:
            return None
        b = math.fsum(self.stats[t].group_variance for t in regions["boundary"]) / len(regions["boundary"])
        o = math.fsum(self.stats[t].group_variance for t in others) / len(others)
        return None if o == 0 else b / o

    # -- JSON ----------------------------------------------------------------------------------------
    def to_dict(self) -> dict:
        return {
            "format": FORMAT,
            "config": self.config.to_dict(),
            "tasks": {t: {"total_groups": s.total_groups, "first_epoch": s.first_epoch,
                          "groups": [[g.epoch, g.n, g.mean, g.m2] for g in s.groups]}
                      for t, s in sorted(self.stats.items())},
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True, allow_nan=False)

    @classmethod
    def from_dict(cls, d: Any) -> "Tracker":
        if not isinstance(d, dict) or d.get("format") != FORMAT:
            raise RodsStateError("tracker.format", f"expected {FORMAT!r}, got {d.get('format') if isinstance(d, dict) else type(d).__name__!r}")
        try:
            config = RodsConfig.from_dict(d["config"])
        except (KeyError, TypeError, ValueError) as exc:
            raise RodsStateError("tracker.config", str(exc)) from None
        stats = {}
        tasks = d.get("tasks")
        if not isinstance(tasks, dict):
            raise RodsStateError("tracker.tasks", "missing or not an object")
        for t, rec in tasks.items():
            try:
                groups = tuple(GroupObs(int(e), int(n), float(m), float(m2)) for e, n, m, m2 in rec["groups"])
                s = TaskStats(groups, int(rec["total_groups"]), int(rec["first_epoch"]))
            except (KeyError, TypeError, ValueError) as exc:
                raise RodsStateError(f"tracker.tasks[{t!r}]", f"malformed record: {exc}") from None
            if not groups or len(groups) > config.window or any(g.n < 1 or g.m2 < 0 for g in groups):
                raise RodsStateError(f"tracker.tasks[{t!r}]", "groups must be 1..window entries with n >= 1, m2 >= 0")
            stats[t] = s
        return cls(config, MappingProxyType(stats))

    @classmethod
    def from_json(cls, text: str | bytes) -> "Tracker":
        try:
            d = json.loads(text)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise RodsStateError("tracker", f"not valid JSON: {exc}") from None
        return cls.from_dict(d)

"""A RODS run driven by a simulated policy with known per-task success probabilities.

Stands in for the GRPO learner (not finished yet) so that detection, the pool's dynamics and
restart can be measured and tested end to end. The policy's success probability for a task is
``sigmoid(base_logit(task) + rate * epoch)``: a seed's base logit is drawn from a hash of its id; a
variant inherits its parent's plus a small jitter (same skeleton, similar difficulty). Rewards are
Bernoulli draws from a key derived from ``(seed, epoch, task)``, so a resumed run sees the same ones.

The epoch boundary, in order: observe the epoch's groups; collect the synthesis jobs planned at the
previous boundary; inject (:func:`pool.advance_epoch`); plan new jobs; save atomically.
"""

from __future__ import annotations

import dataclasses
import math
import random
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from cocoda_jax.rods import persistence
from cocoda_jax.rods.config import RodsConfig
from cocoda_jax.rods.pool import PoolState, advance_epoch, candidate_of, epoch_metrics, initial_pool, plan_synthesis
from cocoda_jax.rods.synthesis import (BackgroundSynthesizer, Job, Outcome, acceptance_rate, derived_seed,
                                       rejection_counts)
from cocoda_jax.rods.tracker import Tracker


def _unit(*parts: Any) -> float:
    return (derived_seed(*parts) % (1 << 53)) / float(1 << 53)


@dataclasses.dataclass(frozen=True)
class SimulatedPolicy:
    """Known success probabilities (see the module docstring); ``jitter``: std of a variant's offset."""

    seed: int = 0
    rate: float = 0.3
    group_size: int = 8
    spread: float = 4.0
    jitter: float = 0.5

    def base_logit(self, task_id: str, parents: Mapping[str, str]) -> float:
        parent = parents.get(task_id)
        if parent is None:
            return self.spread * (2.0 * _unit("sim-base", self.seed, task_id) - 1.0)
        u1, u2 = max(_unit("sim-j1", self.seed, task_id), 1e-12), _unit("sim-j2", self.seed, task_id)
        gauss = math.sqrt(-2.0 * math.log(u1)) * math.cos(2.0 * math.pi * u2)
        return self.base_logit(parent, parents) + self.jitter * gauss

    def prob(self, task_id: str, epoch: int, parents: Mapping[str, str] = {}) -> float:
        return 1.0 / (1.0 + math.exp(-(self.base_logit(task_id, parents) + self.rate * epoch)))

    def rewards(self, task_id: str, epoch: int, parents: Mapping[str, str] = {}) -> tuple[float, ...]:
        p = self.prob(task_id, epoch, parents)
        rng = random.Random(derived_seed("sim-rollout", self.seed, epoch, task_id))
        return tuple(1.0 if rng.random() < p else 0.0 for _ in range(self.group_size))


class SimulatedCrash(RuntimeError):
    """Raised by fault-injection writers to simulate a kill in the middle of a save."""


@dataclasses.dataclass(frozen=True)
class SimResult:
    tracker: Tracker
    pool: PoolState
    tasks: Mapping[str, Any]
    metrics: tuple[dict, ...]
    outcomes: tuple[Outcome, ...]


def run(seeds: Sequence[Any], config: RodsConfig, epochs: int, checkpoint_dir: str | Path,
        synthesize: Callable[[Job], Outcome], policy: SimulatedPolicy, *, background: bool = False,
        write: Callable[[Path, bytes], None] = persistence.atomic_write,
        stop_after_epoch: int | None = None) -> SimResult:
    """Run (or resume, when ``checkpoint_dir`` holds RODS state) until the pool reaches ``epochs``.

    ``stop_after_epoch``: return right after saving the state at the start of that epoch (a clean
    kill). ``write``: the file writer (a fault-injecting one simulates a kill mid-save).
    """
    tasks: dict[str, Any] = {t.id: t for t in seeds}
    parents: dict[str, str] = {}
    if persistence.exists(checkpoint_dir):
        r = persistence.load(checkpoint_dir)
        tracker, pool = r.tracker, r.pool
        for rec in r.generated:
            tasks[rec.task.id] = rec.task
            parents[rec.task.id] = rec.parent_id
        pending = tuple((p, int(a)) for p, a in r.extra.get("pending", ()))
    else:
        tracker, pool, pending = Tracker(config), initial_pool(seeds, config), ()
        persistence.save(checkpoint_dir, tracker, pool, (), {"pending": []}, write=write)
    metrics: list[dict] = []
    outcomes_all: list[Outcome] = []
    bg = BackgroundSynthesizer(synthesize, capacity=max(config.queue_capacity, 1)) if background else None

    def jobs_of(keys: Sequence[tuple[str, int]], pool_state: PoolState) -> list[Job]:
        frozen = pool_state.all_keys()
        return [Job(tasks[p], a, frozen) for p, a in keys]

    try:
        if bg is not None and pending:
            bg.submit(jobs_of(pending, pool))
        while pool.epoch < epochs:
            if stop_after_epoch is not None and pool.epoch >= stop_after_epoch:
                break
            e = pool.epoch
            live = pool.live_ids()
            tracker = tracker.observe_groups([(t, policy.rewards(t, e, parents)) for t in live], e)
            if bg is not None:
                outcomes = bg.collect(pending)
            else:
                outcomes = tuple(synthesize(j) for j in jobs_of(pending, pool))
            outcomes_all.extend(outcomes)
            records = [persistence.GeneratedRecord(o.task, o.parent_id, o.attempt, e) for o in outcomes if o.accepted]
            for rec in records:
                tasks[rec.task.id] = rec.task
                parents[rec.task.id] = rec.parent_id
            candidates = [candidate_of(rec.task, rec.parent_id, tracker) for rec in records]
            pool = advance_epoch(pool, tracker, candidates, config)
            pool, pending = plan_synthesis(pool, tracker, config)
            if bg is not None:
                bg.submit(jobs_of(pending, pool))
            m = epoch_metrics(pool, tracker, e)
            m["synthesis"] = {"jobs": len(outcomes), "accepted": sum(o.accepted for o in outcomes),
                              "acceptance_rate": acceptance_rate(outcomes),
                              "rejections": rejection_counts(outcomes)}
            metrics.append(m)
            persistence.save(checkpoint_dir, tracker, pool, records, {"pending": [list(j) for j in pending]}, write=write)
    finally:
        if bg is not None:
            bg.close()
    return SimResult(tracker, pool, tasks, tuple(metrics), tuple(outcomes_all))

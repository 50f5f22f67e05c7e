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
from cocoda_jax.rods.curriculum import Curriculum
from cocoda_jax.rods.pool import PoolState
from cocoda_jax.rods.synthesis import Job, Outcome, derived_seed
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

    A :class:`.Curriculum` does the work; each epoch every live task gets one group from ``policy``.
    ``stop_after_epoch``: return right after saving the state at the start of that epoch (a clean
    kill). ``write``: the file writer (a fault-injecting one simulates a kill mid-save).
    """
    metrics: list[dict] = []
    outcomes_all: list[Outcome] = []
    with Curriculum(seeds, config, checkpoint_dir, run_seed=policy.seed, synthesize=synthesize,
                    background=background, write=write) as cur:
        while cur.epoch < epochs:
            if stop_after_epoch is not None and cur.epoch >= stop_after_epoch:
                break
            e = cur.epoch
            cur.observe([(t, policy.rewards(t, e, cur.parents)) for t in cur.pool.live_ids()])
            metrics.append(cur.end_epoch())
            outcomes_all.extend(cur.last_outcomes)
    return SimResult(cur.tracker, cur.pool, dict(cur.all_tasks), tuple(metrics), tuple(outcomes_all))

"""The optimizer side of a GRPO/SFT update: optax optimizer and schedule from a config, gradient
clipping, and the global norm the learner reports.

The update step itself (exact micro-batched gradients, one optimizer update) is
:class:`cocoda_jax.rl.learner.Learner`'s; PPO epochs over the same rollouts are
:func:`cocoda_jax.rl.loop.grpo_iteration`'s.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import optax

SCHEDULES = ("constant", "linear", "cosine")
OPTIMIZERS = ("adamw", "sgd")


@dataclasses.dataclass(frozen=True)
class OptimConfig:
    """Optimizer, schedule and gradient clipping. ``warmup_steps`` ramp linearly from 0; after it
    ``linear``/``cosine`` decay to ``end_fraction * learning_rate`` at ``total_steps``."""

    learning_rate: float = 1e-6
    optimizer: str = "adamw"
    schedule: str = "constant"
    warmup_steps: int = 0
    total_steps: int = 1000
    end_fraction: float = 0.0
    clip_norm: float | None = 1.0
    weight_decay: float = 0.0
    b1: float = 0.9
    b2: float = 0.999

    def __post_init__(self) -> None:
        if not self.learning_rate > 0:
            raise ValueError(f"learning_rate must be > 0, got {self.learning_rate}")
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {OPTIMIZERS}, got {self.optimizer!r}")
        if self.schedule not in SCHEDULES:
            raise ValueError(f"schedule must be one of {SCHEDULES}, got {self.schedule!r}")
        if not 0 <= self.warmup_steps <= self.total_steps or self.total_steps < 1:
            raise ValueError(f"need 0 <= warmup_steps <= total_steps and total_steps >= 1, got "
                             f"{self.warmup_steps}, {self.total_steps}")
        if not 0 <= self.end_fraction <= 1:
            raise ValueError(f"end_fraction must be in [0, 1], got {self.end_fraction}")
        if self.clip_norm is not None and not self.clip_norm > 0:
            raise ValueError(f"clip_norm must be > 0 or None, got {self.clip_norm}")
        if not self.weight_decay >= 0:
            raise ValueError(f"weight_decay must be >= 0, got {self.weight_decay}")


def make_schedule(cfg: OptimConfig) -> optax.Schedule:
    peak, end = cfg.learning_rate, cfg.learning_rate * cfg.end_fraction
    decay_steps = cfg.total_steps - cfg.warmup_steps
    if cfg.schedule == "constant" or decay_steps == 0:
        after = optax.constant_schedule(peak)
    elif cfg.schedule == "linear":
        after = optax.linear_schedule(peak, end, decay_steps)
    else:
        after = optax.cosine_decay_schedule(peak, decay_steps, alpha=cfg.end_fraction)
    if cfg.warmup_steps == 0:
        return after
    return optax.join_schedules([optax.linear_schedule(0.0, peak, cfg.warmup_steps), after], [cfg.warmup_steps])


def make_optimizer(cfg: OptimConfig) -> optax.GradientTransformation:
    """Global-norm clipping (if set), then AdamW or SGD under the schedule."""
    schedule = make_schedule(cfg)
    if cfg.optimizer == "adamw":
        core = optax.adamw(schedule, b1=cfg.b1, b2=cfg.b2, weight_decay=cfg.weight_decay)
    else:
        core = optax.sgd(schedule)
    parts = ([optax.clip_by_global_norm(cfg.clip_norm)] if cfg.clip_norm is not None else []) + [core]
    return optax.chain(*parts)


def global_norm(tree: Any) -> jax.Array:
    """The l2 norm over all leaves (what ``clip_by_global_norm`` compares with ``clip_norm``)."""
    return jnp.sqrt(sum(jnp.sum(jnp.square(x.astype(jnp.float32))) for x in jax.tree.leaves(tree)))


__all__ = ["OPTIMIZERS", "OptimConfig", "SCHEDULES", "global_norm", "make_optimizer", "make_schedule"]

"""The model-agnostic part of a GRPO/SFT update: optax optimizer and schedule from a config, one
jitted optimizer step over exact micro-batches, and PPO epochs over shuffled minibatches.

Nothing here knows the planner: the caller passes ``sums_fn(params, batch) -> LossSums`` (for the
planner: a forward pass to token log-probs, then :func:`cocoda_jax.rl.grpo.grpo_loss`). So the
same code trains the tiny linear "policy" of the tests and the sharded decoder of the learner.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import optax

from cocoda_jax.rl.grpo import LossSums, scan_gradients

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


def make_update_step(sums_fn: Callable[[Any, Any], LossSums], optimizer: optax.GradientTransformation,
                     num_micro_batches: int = 1, *, donate: bool = False) -> Callable:
    """A jitted ``step(params, opt_state, minibatch) -> (params, opt_state, metrics)``: the exact
    minibatch gradient from ``num_micro_batches`` scanned slices, one optimizer update; metrics add
    the gradient's global norm before clipping and the update's norm.

    Sharding follows the inputs (place the minibatch split over a data axis and the params as the
    model's rules say; XLA inserts the reductions), so the same step runs on one device or a mesh.
    ``donate`` lets XLA reuse the params' and optimizer state's buffers (the caller must not read
    the old ones again)."""
    if num_micro_batches < 1:
        raise ValueError(f"num_micro_batches must be >= 1, got {num_micro_batches}")

    def step(params, opt_state, minibatch):
        grads, metrics = scan_gradients(sums_fn, params, minibatch, num_micro_batches)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        params = optax.apply_updates(params, updates)
        metrics = dict(metrics, grad_norm=global_norm(grads), update_norm=global_norm(updates))
        return params, opt_state, metrics

    return jax.jit(step, donate_argnums=(0, 1) if donate else ())


def global_norm(tree: Any) -> jax.Array:
    """The l2 norm over all leaves (what ``clip_by_global_norm`` compares with ``clip_norm``)."""
    return jnp.sqrt(sum(jnp.sum(jnp.square(x.astype(jnp.float32))) for x in jax.tree.leaves(tree)))


def minibatch_indices(key: jax.Array, batch_size: int, num_minibatches: int) -> jax.Array:
    """``[num_minibatches, batch_size // num_minibatches]`` indices: one shuffled pass over the batch."""
    if batch_size % num_minibatches:
        raise ValueError(f"batch of {batch_size} does not split into {num_minibatches} minibatches")
    return jax.random.permutation(key, batch_size).reshape(num_minibatches, -1)


def ppo_update(step: Callable, params: Any, opt_state: Any, batch: Any, key: jax.Array, *, epochs: int = 1,
               num_minibatches: int = 1) -> tuple[Any, Any, list[dict[str, jax.Array]]]:
    """``epochs`` passes over ``batch`` (its ``old`` log-probs fixed: those of the sampler), each
    shuffled into ``num_minibatches`` optimizer steps. Returns new params, optimizer state and the
    metrics of every optimizer step in order. Deterministic in ``key``."""
    if epochs < 1:
        raise ValueError(f"epochs must be >= 1, got {epochs}")
    size = {x.shape[0] for x in jax.tree.leaves(batch)}
    if len(size) != 1:
        raise ValueError(f"batch arrays disagree on the leading size: {sorted(size)}")
    (batch_size,) = size
    history = []
    for epoch_key in jax.random.split(key, epochs):
        for idx in minibatch_indices(epoch_key, batch_size, num_minibatches):
            params, opt_state, metrics = step(params, opt_state, jax.tree.map(lambda x, i=idx: x[i], batch))
            history.append(metrics)
    return params, opt_state, history


__all__ = [
    "OPTIMIZERS", "OptimConfig", "SCHEDULES", "global_norm", "make_optimizer", "make_schedule", "make_update_step",
    "minibatch_indices", "ppo_update",
]

"""Rewards of a finished rollout: pure functions, registered by name, apart from the loop.

The paper's DAG-induced reward (the CoCoDA paper, §A.4 of the paper digest)::

    R(tau) = R_res(tau) + lambda * sum_i Phi(t_i)

over the top-level tool calls ``t_i`` of ``tau`` that ran to completion (a step that failed while
running earns no credit: it saved nothing), with ``Phi(v) = flat(v) - 1`` read from the
LibrarySnapshot the rollout ran against. Calling a primitive earns nothing, a composite that
expands to ``k`` primitive calls earns ``lambda * (k - 1)``; so among trajectories with the same
verified result the one that reuses composites scores higher, by exactly ``lambda * Phi(v)`` per
primitive run replaced by ``v`` (the compositional advantage, tested as a property).

Options (:class:`RewardConfig`, all off by default so the default is the paper's formula):

* ``credit_requires_success``: composite credit only when ``R_res == 1`` (a wrong answer made of
  composites should not beat a wrong answer made of primitives);
* ``credit_cap``: the credit term is at most this (bounds the incentive to pad with composites);
* ``normalize_by_calls``: the credit is divided by the number of credited calls, i.e. ``lambda``
  times the mean saved calls per call (insensitive to trajectory length; breaks the exact
  ``lambda * Phi`` advantage, which is why it is off by default);
* ``malformed_penalty`` per step the checker refused for its form (``malformed``, ``bad_target``,
  ``unknown_tool``, ``bad_arguments``, ``unbound_name``) and ``ill_typed_penalty`` per ``ill_typed``
  step, subtracted from ``R`` (teaches the action format during RL).

A reward function takes an *outcome* — anything with ``r_res`` (float), ``calls`` (tool names, in
order) and ``step_kinds`` (per step ``"ok"`` or an error kind), such as a
:class:`~cocoda_jax.rl.trajectory.Trajectory` or an :class:`Outcome` — the snapshot and the config,
and returns a :class:`RewardBreakdown`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

#: Static verdict kinds that count as a malformed step for ``malformed_penalty``.
MALFORMED_KINDS = frozenset({"malformed", "bad_target", "unknown_tool", "bad_arguments", "unbound_name"})
ILL_TYPED_KINDS = frozenset({"ill_typed"})


@dataclasses.dataclass(frozen=True)
class Outcome:
    """The minimum a reward reads from a rollout (a Trajectory has the same three attributes)."""

    r_res: float
    calls: tuple[str, ...] = ()
    step_kinds: tuple[str, ...] = ()
    progress: float = 0.0


@dataclasses.dataclass(frozen=True)
class RewardConfig:
    """Which reward and its options (see the module docstring). Validates itself on construction."""

    name: str = "dag"
    lam: float = 0.2
    credit_requires_success: bool = False
    credit_cap: float | None = None
    normalize_by_calls: bool = False
    malformed_penalty: float = 0.0
    ill_typed_penalty: float = 0.0

    def __post_init__(self) -> None:
        if not self.lam >= 0:
            raise ValueError(f"lam must be >= 0, got {self.lam}")
        if self.credit_cap is not None and not self.credit_cap >= 0:
            raise ValueError(f"credit_cap must be >= 0 or None, got {self.credit_cap}")
        for field in ("malformed_penalty", "ill_typed_penalty"):
            if not getattr(self, field) >= 0:
                raise ValueError(f"{field} is subtracted, so it must be >= 0, got {getattr(self, field)}")
        if self.name not in _REGISTRY:
            raise ValueError(f"unknown reward {self.name!r}; registered: {sorted(_REGISTRY)}")


@dataclasses.dataclass(frozen=True)
class RewardBreakdown:
    """``total = r_res + credit - penalty``; ``saved_calls = sum Phi`` over the credited calls;
    ``n_calls`` the credited calls; ``n_composite_calls`` those with ``Phi >= 1``."""

    total: float
    r_res: float
    credit: float
    penalty: float
    saved_calls: int
    n_calls: int
    n_composite_calls: int


RewardFn = Callable[[Any, Any, RewardConfig], RewardBreakdown]
_REGISTRY: dict[str, RewardFn] = {}


def register_reward(name: str) -> Callable[[RewardFn], RewardFn]:
    """Registers ``fn(outcome, snapshot, config) -> RewardBreakdown`` under ``name``."""
    def deco(fn: RewardFn) -> RewardFn:
        if name in _REGISTRY:
            raise ValueError(f"a reward named {name!r} is already registered")
        _REGISTRY[name] = fn
        return fn
    return deco


def get_reward(name: str) -> RewardFn:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown reward {name!r}; registered: {sorted(_REGISTRY)}") from None


def registered_rewards() -> tuple[str, ...]:
    return tuple(sorted(_REGISTRY))


def saved_calls(calls: Sequence[str], snapshot: Any) -> int:
    """``sum_i Phi(t_i)``: primitive calls the trajectory saved by calling composites."""
    return sum(snapshot.phi(c) for c in calls)


def penalty(step_kinds: Sequence[str], config: RewardConfig) -> float:
    return (config.malformed_penalty * sum(k in MALFORMED_KINDS for k in step_kinds)
            + config.ill_typed_penalty * sum(k in ILL_TYPED_KINDS for k in step_kinds))


@register_reward("dag")
def dag_reward(outcome: Any, snapshot: Any, config: RewardConfig) -> RewardBreakdown:
    """``R_res + lambda * sum Phi(t_i)`` with the options of :class:`RewardConfig`."""
    r_res = float(outcome.r_res)
    if not 0.0 <= r_res <= 1.0:
        raise ValueError(f"r_res must be in [0, 1], got {r_res}")
    calls = tuple(outcome.calls)
    saved = saved_calls(calls, snapshot)
    credit = config.lam * saved
    if config.normalize_by_calls:
        credit = credit / len(calls) if calls else 0.0
    if config.credit_cap is not None:
        credit = min(credit, config.credit_cap)
    if config.credit_requires_success and r_res != 1.0:
        credit = 0.0
    pen = penalty(tuple(outcome.step_kinds), config)
    return RewardBreakdown(total=r_res + credit - pen, r_res=r_res, credit=credit, penalty=pen, saved_calls=saved,
                           n_calls=len(calls), n_composite_calls=sum(snapshot.phi(c) >= 1 for c in calls))


@register_reward("result")
def result_reward(outcome: Any, snapshot: Any, config: RewardConfig) -> RewardBreakdown:
    """``R_res`` alone (minus the step penalties): the ablation without the graph-aware term."""
    return dag_reward(outcome, snapshot, dataclasses.replace(config, lam=0.0))


@register_reward("progress")
def progress_reward(outcome: Any, snapshot: Any, config: RewardConfig) -> RewardBreakdown:
    """RODS's progress reward ``R_P`` (share of gold intermediate states reached) in place of
    ``R_res``, plus the same composite credit: dense signal for long chains."""
    return dag_reward(Outcome(float(outcome.progress), tuple(outcome.calls), tuple(outcome.step_kinds)), snapshot,
                      config)


def reward(outcome: Any, snapshot: Any, config: RewardConfig = RewardConfig()) -> RewardBreakdown:
    """The configured reward of one outcome."""
    return get_reward(config.name)(outcome, snapshot, config)


def group_rewards(outcomes: Sequence[Any], snapshot: Any, config: RewardConfig = RewardConfig()) -> tuple[float, ...]:
    """The totals of a group of rollouts, in order (what the GRPO advantages are computed from)."""
    fn = get_reward(config.name)
    return tuple(fn(o, snapshot, config).total for o in outcomes)


def rollout_metrics(breakdowns: Sequence[RewardBreakdown]) -> dict[str, float]:
    """Per-step logging of a batch of rollouts: reward mean and (population) std, R_res, composite
    credit and penalty means, tool calls per trajectory and the share of calls that hit a composite."""
    n = len(breakdowns)
    if n == 0:
        raise ValueError("no rollouts to summarise")
    totals = [b.total for b in breakdowns]
    mean = sum(totals) / n
    calls = sum(b.n_calls for b in breakdowns)
    return {
        "reward_mean": mean,
        "reward_std": (sum((t - mean) ** 2 for t in totals) / n) ** 0.5,
        "r_res_mean": sum(b.r_res for b in breakdowns) / n,
        "credit_mean": sum(b.credit for b in breakdowns) / n,
        "penalty_mean": sum(b.penalty for b in breakdowns) / n,
        "calls_per_trajectory": calls / n,
        "saved_calls_per_trajectory": sum(b.saved_calls for b in breakdowns) / n,
        "composite_call_share": sum(b.n_composite_calls for b in breakdowns) / calls if calls else 0.0,
    }


def primitive_expansion(name: str, snapshot: Any) -> tuple[str, ...]:
    """The primitive calls a tool stands for, in execution order with multiplicity (its leaves:
    ``len == flat(name)``); a primitive expands to itself."""
    children = snapshot.children(name)
    if not children:
        return (name,)
    return tuple(p for c in children for p in primitive_expansion(c, snapshot))


__all__ = [
    "ILL_TYPED_KINDS", "MALFORMED_KINDS", "Outcome", "RewardBreakdown", "RewardConfig", "RewardFn", "dag_reward",
    "get_reward", "group_rewards", "penalty", "primitive_expansion", "progress_reward", "register_reward",
    "registered_rewards", "result_reward", "reward", "rollout_metrics", "saved_calls",
]

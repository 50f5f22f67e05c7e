"""GRPO as pure jnp math, apart from the learner loop (tunix's style: registered advantage and loss
functions; losses as ``(sum, count)``).

Variants are registered by name (:func:`register_advantage`, :func:`register_loss`) and chosen by
:class:`GRPOConfig`'s ``advantage`` and ``loss``; the rollout loop and the learner call only
:func:`compute_advantages` and :func:`compute_loss`, which dispatch on those names. Registered:

* ``grpo``: group-normalised advantages (``normalize_std``) and the clipped loss aggregated by
  ``aggregation``;
* ``dr_grpo`` (Dr. GRPO, Liu et al. 2025, "Understanding R1-Zero-Like Training"): advantages only
  centred on the group mean (never divided by its std), and the loss summed over each sequence's
  tokens and divided by the constant ``num_sequences * max_tokens`` (``constant`` aggregation,
  whatever ``aggregation`` says): neither length nor difficulty bias;
* ``grpo_gar`` (graph-aware, decoupled; advantage only): ``A_i = (res_i - mean(res)) / (std(res) + eps)
  + (credit_i - mean(credit))`` over the group, with ``credit`` the composite credit ``lam * sum Phi`` and
  ``res = reward - credit``. Under ``grpo`` the std division cancels a credit that all of a group's
  successes share (rewards ``[1.4, 1.4, 0, 0]`` and ``[1, 1, 0, 0]`` both give ``+-1``), so composite use
  changes the update only where successes differ in ``Phi``. Here the credit part is centred but kept in
  reward units: successes that call composites are pushed harder than equal ones that do not, and two
  successes with different ``Phi`` are told apart even when every rollout of the group succeeded. It
  reads the per-rollout credit (``compute_advantages(..., credit=...)``); the loss is ``config.loss``'s.

Why ``(sum, count)``: the learner may split a batch into micro-batches that do not fit in memory
together. Each micro-batch returns the *sum* of its per-unit losses and the *count* of units; the
learner adds the gradients of the sums and the counts, and divides once at the end. Because every
aggregation below is a ratio of a sum over units to a count that does not depend on how the batch
was split, the result equals the full-batch gradient exactly (up to float summation order):

* ``token_mean``: units are tokens; count = number of loss tokens in the batch (DAPO-style).
* ``seq_mean``: units are sequences, each contributing the mean over its own tokens; count =
  number of sequences that have at least one loss token (the original GRPO).
* ``constant``: Dr. GRPO — units are tokens, count = number of sequences times the *constant*
  ``max_tokens`` of the config (never the batch's own longest sequence, which would change with
  the split), so no length bias enters the gradient.

Per token, with ``ratio = exp(logp - old_logp)`` and advantage ``A`` of the token's sequence::

    loss = -min(ratio * A, clip(ratio, 1 - eps_low, 1 + eps_high) * A) + beta * k3
    k3   = exp(ref_logp - logp) - (ref_logp - logp) - 1     (>= 0; unbiased for KL(pi || ref))

With ``beta == 0`` the reference is never read (``ref_logp`` may be ``None``: no reference forward).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import NamedTuple

import chex
import jax
import jax.numpy as jnp

from cocoda_jax.errors import CocodaError

AGGREGATIONS = ("token_mean", "seq_mean", "constant")


class UnknownVariantError(CocodaError, ValueError):
    """An advantage or loss name that nothing registered (raised when the config is built)."""


@dataclasses.dataclass(frozen=True)
class GRPOConfig:
    """The GRPO hyper-parameters (the CoCoDA paper's defaults, §A.6 of the paper digest). Validates itself on construction.

    ``epsilon_high``: the upper clip (``None``: symmetric, ``epsilon``); DAPO's clip-higher uses a
    larger one. ``normalize_std``: divide group-centred rewards by the group's std (``False`` is
    Dr. GRPO's unbiased advantage). ``max_tokens``: the constant normaliser of ``constant``.
    ``advantage`` / ``loss``: registered variant names (an unknown one is an
    :class:`UnknownVariantError` here). ``temperature``: the policy's log-probs in the loss (and the
    reference's) are those of its logits over it; the run sets it to the rollouts' sampling temperature,
    so the policy the loss improves is the one that sampled (and the sampler's log-probs are the ratio's
    ``old_logp``). At 1 the loss scores the model's own distribution.
    """

    epsilon: float = 0.2
    epsilon_high: float | None = None
    beta: float = 0.01
    aggregation: str = "token_mean"
    normalize_std: bool = True
    std_eps: float = 1e-6
    max_tokens: int = 512
    advantage: str = "grpo"
    loss: str = "grpo"
    temperature: float = 1.0

    def __post_init__(self) -> None:
        if not self.temperature > 0:
            raise ValueError(f"temperature must be > 0, got {self.temperature}")
        if not 0 < self.epsilon < 1:
            raise ValueError(f"epsilon must be in (0, 1), got {self.epsilon}")
        if self.epsilon_high is not None and not self.epsilon_high > 0:
            raise ValueError(f"epsilon_high must be > 0, got {self.epsilon_high}")
        if not self.beta >= 0:
            raise ValueError(f"beta must be >= 0, got {self.beta}")
        if self.aggregation not in AGGREGATIONS:
            raise ValueError(f"aggregation must be one of {AGGREGATIONS}, got {self.aggregation!r}")
        if not self.std_eps > 0:
            raise ValueError(f"std_eps must be > 0, got {self.std_eps}")
        if self.max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {self.max_tokens}")
        get_advantage(self.advantage)  # an unknown name fails here, not at the first step
        get_loss(self.loss)

    @property
    def upper_clip(self) -> float:
        return self.epsilon if self.epsilon_high is None else self.epsilon_high


_ADVANTAGES: dict[str, Callable[..., jax.Array]] = {}
_CREDIT_READERS: set[str] = set()
_LOSSES: dict[str, Callable[..., "LossSums"]] = {}


def register_advantage(name: str, *, reads_credit: bool = False):
    """Registers ``fn(rewards[B], group_size, config) -> advantages[B]``; with ``reads_credit``,
    ``fn(rewards[B], group_size, config, credit[B])`` (the per-rollout composite credit, which
    :func:`compute_advantages` hands only to such variants)."""
    def deco(fn):
        if name in _ADVANTAGES:
            raise ValueError(f"an advantage named {name!r} is already registered")
        _ADVANTAGES[name] = fn
        if reads_credit:
            _CREDIT_READERS.add(name)
        return fn
    return deco


def register_loss(name: str):
    """Registers ``fn(logp, old_logp, ref_logp, advantages, mask, config) -> LossSums``."""
    def deco(fn):
        if name in _LOSSES:
            raise ValueError(f"a loss named {name!r} is already registered")
        _LOSSES[name] = fn
        return fn
    return deco


def get_advantage(name: str) -> Callable[..., jax.Array]:
    if name not in _ADVANTAGES:
        raise UnknownVariantError(f"unknown advantage {name!r}; registered: {sorted(_ADVANTAGES)}")
    return _ADVANTAGES[name]


def get_loss(name: str) -> Callable[..., "LossSums"]:
    if name not in _LOSSES:
        raise UnknownVariantError(f"unknown loss {name!r}; registered: {sorted(_LOSSES)}")
    return _LOSSES[name]


def advantage_reads_credit(name: str) -> bool:
    """Whether the advantage registered as ``name`` reads the per-rollout credit."""
    get_advantage(name)
    return name in _CREDIT_READERS


def compute_advantages(rewards: jax.Array, group_size: int, config: GRPOConfig,
                       credit: jax.Array | None = None) -> jax.Array:
    """The advantages of ``config.advantage`` (the one call site of the advantage registry).

    ``credit``: per rollout, the part of ``rewards`` that is composite credit (``lam * sum Phi``),
    handed to the variants registered with ``reads_credit`` (one of those without it is a
    ``ValueError``); the others ignore it."""
    fn = get_advantage(config.advantage)
    if advantage_reads_credit(config.advantage):
        return fn(rewards, group_size, config, credit)
    return fn(rewards, group_size, config)


def compute_loss(logp: jax.Array, old_logp: jax.Array | None, ref_logp: jax.Array | None, advantages: jax.Array,
                 mask: jax.Array, config: GRPOConfig) -> "LossSums":
    """The :class:`LossSums` of ``config.loss`` (the one call site of the loss registry)."""
    return get_loss(config.loss)(logp, old_logp, ref_logp, advantages, mask, config)


# ------------------------------------------------------------------------------------------------
# Advantages
# ------------------------------------------------------------------------------------------------


@register_advantage("grpo")
def group_advantages(rewards: jax.Array, group_size: int, config: GRPOConfig | None = None) -> jax.Array:
    """``A_i = (r_i - mean_group) / (std_group + eps)`` (or without the division, Dr. GRPO).

    ``rewards`` is ``[num_groups * group_size]`` with each group contiguous (the G rollouts of one
    task). std is the population std (``ddof=0``); a group whose rewards are all equal gets zero
    advantages either way, so it contributes no gradient.
    """
    config = GRPOConfig() if config is None else config
    rewards = jnp.asarray(rewards, jnp.float32)
    if rewards.ndim != 1 or rewards.shape[0] % group_size:
        raise ValueError(f"rewards of shape {rewards.shape} do not split into groups of {group_size}")
    grouped = rewards.reshape(-1, group_size)
    centred = grouped - grouped.mean(axis=1, keepdims=True)
    if config.normalize_std:
        centred = centred / (grouped.std(axis=1, keepdims=True) + config.std_eps)
    return centred.reshape(-1)


@register_advantage("dr_grpo")
def dr_grpo_advantages(rewards: jax.Array, group_size: int, config: GRPOConfig | None = None) -> jax.Array:
    """Dr. GRPO: ``A_i = r_i - mean_group``, never divided by the group's std (whatever
    ``normalize_std`` says): no question is up-weighted for having a small reward spread."""
    config = GRPOConfig() if config is None else config
    return group_advantages(rewards, group_size, dataclasses.replace(config, normalize_std=False))


#: A group whose values spread less than this share of ``1 + max|value|`` is flat (about 16 float32
#: ulps): ``res = reward - credit`` rounds, and ``std`` division would blow that noise up to O(1).
_FLAT_RTOL = 2e-6


def _centred(grouped: jax.Array, normalize: bool, eps: float) -> jax.Array:
    """Each group centred on its mean (and divided by its std + eps if ``normalize``), exactly 0 on a
    flat group (spread within float rounding, :data:`_FLAT_RTOL`)."""
    centred = grouped - grouped.mean(axis=1, keepdims=True)
    if normalize:
        centred = centred / (grouped.std(axis=1, keepdims=True) + eps)
    spread = grouped.max(axis=1, keepdims=True) - grouped.min(axis=1, keepdims=True)
    flat = spread <= _FLAT_RTOL * (1.0 + jnp.abs(grouped).max(axis=1, keepdims=True))
    return jnp.where(flat, 0.0, centred)


@register_advantage("grpo_gar", reads_credit=True)
def gar_advantages(rewards: jax.Array, group_size: int, config: GRPOConfig | None = None,
                   credit: jax.Array | None = None) -> jax.Array:
    """Graph-aware decoupled advantages: ``A_i = (res_i - mean(res)) / (std(res) + eps) +
    (credit_i - mean(credit))`` per group, ``res = rewards - credit`` (the result reward less
    penalties).

    The result part is group-normalised like ``grpo``'s (always, whatever ``normalize_std`` says);
    the credit part is only centred, so ``lam * Phi`` moves the advantages in reward units instead of
    cancelling in the std division. A group whose ``res`` (or ``credit``) is flat up to float rounding
    gets exactly 0 from that part, so a group with both flat has all-zero advantages (the rollout
    loop's uniform-group mask). With zero credit this is ``grpo``'s advantage wherever a group's
    rewards are not flat up to rounding.
    """
    if credit is None:
        raise ValueError("the 'grpo_gar' advantage needs the per-rollout composite credit "
                         "(compute_advantages(rewards, group_size, config, credit=...))")
    config = GRPOConfig() if config is None else config
    rewards = jnp.asarray(rewards, jnp.float32)
    credit = jnp.asarray(credit, jnp.float32)
    chex.assert_rank(rewards, 1)
    chex.assert_equal_shape([rewards, credit])
    if rewards.shape[0] % group_size:
        raise ValueError(f"rewards of shape {rewards.shape} do not split into groups of {group_size}")
    res = (rewards - credit).reshape(-1, group_size)
    grouped_credit = credit.reshape(-1, group_size)
    adv = _centred(res, True, config.std_eps) + _centred(grouped_credit, False, config.std_eps)
    chex.assert_shape(adv, (rewards.shape[0] // group_size, group_size))
    return adv.reshape(-1)


def group_stats(rewards: jax.Array, group_size: int) -> tuple[jax.Array, jax.Array]:
    """Per group, the reward mean and variance (what a RODS tracker reads; §B.1)."""
    grouped = jnp.asarray(rewards, jnp.float32).reshape(-1, group_size)
    return grouped.mean(axis=1), grouped.var(axis=1)


# ------------------------------------------------------------------------------------------------
# Per-token terms
# ------------------------------------------------------------------------------------------------


def k3_kl(logp: jax.Array, ref_logp: jax.Array) -> jax.Array:
    """The k3 estimator ``exp(d) - d - 1`` with ``d = ref_logp - logp``: non-negative, unbiased for
    ``KL(pi || ref)`` on tokens sampled from ``pi``, low variance."""
    d = ref_logp - logp
    return jnp.exp(d) - d - 1.0


def clipped_surrogate(logp: jax.Array, old_logp: jax.Array, advantages: jax.Array, epsilon: float,
                      epsilon_high: float | None = None) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Per token ``(-min(r A, clip(r) A), r, clipped)`` where ``clipped`` marks the tokens whose
    gradient the clip removed (``r > 1 + eps_high`` with ``A > 0`` or ``r < 1 - eps`` with ``A < 0``)."""
    high = epsilon if epsilon_high is None else epsilon_high
    ratio = jnp.exp(logp - old_logp)
    unclipped = ratio * advantages
    clipped = jnp.clip(ratio, 1.0 - epsilon, 1.0 + high) * advantages
    active = ((ratio > 1.0 + high) & (advantages > 0)) | ((ratio < 1.0 - epsilon) & (advantages < 0))
    return -jnp.minimum(unclipped, clipped), ratio, active


# ------------------------------------------------------------------------------------------------
# The loss as (sum, count)
# ------------------------------------------------------------------------------------------------


class LossSums(NamedTuple):
    """A loss and its metrics as sums with their counts (a pytree: the leafwise sum of two
    micro-batches' is exactly the concatenated batch's).

    ``loss_sum / loss_count`` is the loss. Token metrics (``*_sum``) divide by ``token_count``:
    ``kl`` (k3; 0 when no reference was given), ``clip`` (clip fraction), ``entropy`` (``-logp``, a one-sample
    estimate of the policy's entropy on the sampled tokens), ``ratio`` and ``logp_gap``
    (``|logp - old_logp|``, the sampler/trainer mismatch on the first epoch).
    """

    loss_sum: jax.Array
    loss_count: jax.Array
    token_count: jax.Array
    kl_sum: jax.Array
    clip_sum: jax.Array
    entropy_sum: jax.Array
    ratio_sum: jax.Array
    logp_gap_sum: jax.Array


def finalize(sums: LossSums) -> dict[str, jax.Array]:
    """Loss and metric means from sums (a count of zero gives zeros, never NaN)."""
    tokens = jnp.maximum(sums.token_count, 1.0)
    return {
        "loss": sums.loss_sum / jnp.maximum(sums.loss_count, 1e-9),
        "kl": sums.kl_sum / tokens,
        "clip_fraction": sums.clip_sum / tokens,
        "entropy": sums.entropy_sum / tokens,
        "ratio": sums.ratio_sum / tokens,
        "logp_gap": sums.logp_gap_sum / tokens,
        "tokens": sums.token_count,
    }


def aggregate(per_token: jax.Array, mask: jax.Array, aggregation: str, max_tokens: int) -> tuple[jax.Array, jax.Array]:
    """``(sum, count)`` of per-token values under ``mask`` by the rule of the module docstring."""
    mask = mask.astype(per_token.dtype)
    masked = per_token * mask
    if aggregation == "token_mean":
        return masked.sum(), mask.sum()
    lengths = mask.sum(axis=-1)
    has_tokens = (lengths > 0).astype(per_token.dtype)
    if aggregation == "seq_mean":
        return (masked.sum(axis=-1) / jnp.maximum(lengths, 1.0)).sum(), has_tokens.sum()
    if aggregation == "constant":
        if per_token.shape[-1] > max_tokens:
            raise ValueError(f"sequences of {per_token.shape[-1]} tokens exceed max_tokens={max_tokens}")
        return masked.sum(), jnp.asarray(per_token.shape[0] * max_tokens, per_token.dtype)
    raise ValueError(f"aggregation must be one of {AGGREGATIONS}, got {aggregation!r}")


@register_loss("grpo")
def grpo_loss(logp: jax.Array, old_logp: jax.Array | None, ref_logp: jax.Array | None, advantages: jax.Array,
              mask: jax.Array, config: GRPOConfig | None = None) -> LossSums:
    """The clipped GRPO objective with the k3 KL penalty, as :class:`LossSums`.

    Shapes: ``logp``, ``old_logp``, ``ref_logp`` and ``mask`` are ``[B, T]`` (log-probs of the
    sampled tokens; mask 1 on the planner's own action tokens), ``advantages`` is ``[B]``.
    ``old_logp=None`` means on-policy (the first epoch: the ratio is 1 but its gradient is kept).
    With ``config.beta == 0`` the loss never reads ``ref_logp`` (``None`` is fine); if it is given
    anyway the KL is still reported as a metric (drift monitoring without the penalty).
    """
    config = GRPOConfig() if config is None else config
    logp = jnp.asarray(logp, jnp.float32)
    mask = jnp.asarray(mask, jnp.float32)
    old = jax.lax.stop_gradient(logp) if old_logp is None else jax.lax.stop_gradient(jnp.asarray(old_logp, jnp.float32))
    adv = jnp.asarray(advantages, jnp.float32)[:, None]
    surrogate, ratio, active = clipped_surrogate(logp, old, adv, config.epsilon, config.epsilon_high)
    if config.beta > 0 and ref_logp is None:
        raise ValueError("beta > 0 needs the reference log-probs (ref_logp)")
    if ref_logp is None:
        kl = jnp.zeros_like(logp)
    else:
        kl = k3_kl(logp, jax.lax.stop_gradient(jnp.asarray(ref_logp, jnp.float32)))
    per_token = surrogate + config.beta * kl if config.beta > 0 else surrogate
    loss_sum, loss_count = aggregate(per_token, mask, config.aggregation, config.max_tokens)
    sg = jax.lax.stop_gradient

    def tok(x):
        return sg((x * mask).sum())

    return LossSums(loss_sum=loss_sum, loss_count=sg(loss_count), token_count=sg(mask.sum()), kl_sum=tok(kl),
                    clip_sum=tok(active.astype(jnp.float32)), entropy_sum=tok(-logp), ratio_sum=tok(ratio),
                    logp_gap_sum=tok(jnp.abs(logp - old)))


@register_loss("dr_grpo")
def dr_grpo_loss(logp: jax.Array, old_logp: jax.Array | None, ref_logp: jax.Array | None, advantages: jax.Array,
                 mask: jax.Array, config: GRPOConfig | None = None) -> LossSums:
    """Dr. GRPO: :func:`grpo_loss` with each sequence's token sum divided by the constant
    ``max_tokens`` (then averaged over sequences), whatever ``config.aggregation`` says: a long
    wrong answer is not penalised less per token than a short one."""
    config = GRPOConfig() if config is None else config
    return grpo_loss(logp, old_logp, ref_logp, advantages, mask, dataclasses.replace(config, aggregation="constant"))


def sft_loss(logp: jax.Array, mask: jax.Array, aggregation: str = "token_mean", max_tokens: int = 512) -> tuple[jax.Array, jax.Array]:
    """Supervised warm start on demonstrations: negative log-likelihood of the action tokens as
    ``(sum, count)`` (observations and the prompt are masked out, like in GRPO)."""
    return aggregate(-jnp.asarray(logp, jnp.float32), jnp.asarray(mask, jnp.float32), aggregation, max_tokens)


# ------------------------------------------------------------------------------------------------
# Diagnostics
# ------------------------------------------------------------------------------------------------


def full_entropy(logits: jax.Array, mask: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Exact entropy of the policy per position, as ``(sum, count)`` over masked positions (when
    the logits are at hand; :class:`LossSums` has the one-sample estimate from log-probs)."""
    logp = jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)
    ent = -(jnp.exp(logp) * logp).sum(-1)
    mask = mask.astype(jnp.float32)
    return (ent * mask).sum(), mask.sum()


__all__ = [
    "AGGREGATIONS", "GRPOConfig", "LossSums", "UnknownVariantError", "advantage_reads_credit", "aggregate",
    "clipped_surrogate", "compute_advantages", "compute_loss", "dr_grpo_advantages", "dr_grpo_loss", "finalize",
    "full_entropy", "gar_advantages", "get_advantage", "get_loss", "group_advantages", "group_stats", "grpo_loss",
    "k3_kl", "register_advantage", "register_loss", "sft_loss",
]

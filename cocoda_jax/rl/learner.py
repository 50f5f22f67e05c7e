"""The learner: jitted, sharded SFT and GRPO train steps on the NNX planner.

The planner is split once into ``(graphdef, params)``; a :class:`TrainState` holds the params (an
``nnx.State``), the optax state and the step. Each step is one ``jax.jit`` over one mesh with the
state donated: the batch is placed along the mesh's batch axes (``act_batch``: data x fsdp), the
params keep the model's logical-axis shardings, and the new state leaves the step with the
shardings it came in with (so the next call never recompiles).

Batches are dicts of arrays aligned with ``tokens`` ``[B, T]`` (what
:func:`cocoda_jax.rl.trajectory.pad_episodes` returns, plus the RL columns):

* ``tokens`` int ids; ``loss_mask`` 1 on the planner's own action tokens; ``valid`` 1 on real
  (non-padding) tokens.
* GRPO only: ``advantages`` ``[B]``; ``old_logp`` ``[B, T]`` the sampler's log-prob of
  ``tokens[:, t]`` (optional: absent means on-policy); ``ref_logp`` ``[B, T]`` the frozen
  reference's (needed only when ``beta > 0``: with ``beta == 0`` no reference forward is ever run).
  The GRPO step and :meth:`Learner.log_probs` score at ``config.grpo.temperature`` (the rollouts'),
  the SFT step at temperature 1.

Position ``t`` of a per-token column scores ``tokens[:, t]`` given ``tokens[:, :t]``, so column 0
is never a loss position; the learner compares ``logits[:, :-1]`` with ``tokens[:, 1:]``.

Packed rows (SFT only; :func:`cocoda_jax.rl.trajectory.pack_episodes`): ``segments`` ``[B, T]`` numbers
the episodes of a row from 1 (0: padding); the model attends within a segment and counts positions
from its start, and an episode's first token carries no loss, so the step's loss and gradient are
those of the same episodes one a row (``token_mean``: the same tokens over the same count).

A shared prompt (GRPO only; :func:`cocoda_jax.rl.loop.shared_group_prefix`): ``prefix`` ``[n, c]``
holds the first ``c`` tokens common to each group of ``g = B / n`` consecutive rows, and the other
columns hold the rest of each row (``tokens[:, c:]`` of the full batch, ...). The prefix then runs
through the model once per group instead of once per row (``Transformer.__call__(prefix=)``), and
micro-batches take whole groups; the loss and its gradient are the full batch's.

Micro-batching (:func:`accumulate_gradients`, the one gradient-accumulation path): the batch is cut
into ``num_micro_batches`` strided slices (row ``i`` goes to slice ``i % n``, so each slice stays
spread over every data shard), scanned with ``lax.scan``; the gradients of the losses' *sums* are
added and divided once by the total *count* (:mod:`cocoda_jax.rl.grpo`), which gives exactly the
full-batch gradient.

The GRPO loss is the registered one that ``config.grpo.loss`` names
(:func:`cocoda_jax.rl.grpo.compute_loss`); an unknown name fails when the config is built.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

import flax.struct
import jax
import jax.numpy as jnp
import optax
from flax import nnx

from cocoda_jax.errors import CocodaError
from cocoda_jax.models.sharding import constrain, logical_to_spec, opt_state_shardings, param_shardings
from cocoda_jax.models.transformer import token_log_probs
from cocoda_jax.rl import grpo as G
from cocoda_jax.rl.update import OptimConfig, global_norm, make_optimizer, make_schedule

SFT_KEYS = ("tokens", "loss_mask", "valid")
SFT_OPTIONAL = ("segments",)
GRPO_KEYS = SFT_KEYS + ("advantages",)
GRPO_OPTIONAL = ("old_logp", "ref_logp", "prefix")


@dataclasses.dataclass(frozen=True)
class LearnerConfig:
    """What the train steps need besides the model: optimizer, GRPO hyper-parameters, the number
    of micro-batches per step, the SFT loss aggregation (``constant`` uses ``sft_max_tokens``) and
    whether the forward rematerialises its layers (``remat``: same gradients, less memory)."""

    optim: OptimConfig = dataclasses.field(default_factory=lambda: OptimConfig(learning_rate=1e-3))
    grpo: G.GRPOConfig = dataclasses.field(default_factory=G.GRPOConfig)
    num_micro_batches: int = 1
    sft_aggregation: str = "token_mean"
    sft_max_tokens: int = 512
    remat: bool = False  # rematerialise each layer in the train steps' forward (Transformer.__call__)
    logits_chunk: int = 0  # > 0: the head's logits this many positions at a time (Transformer.target_scores)
    scan_layers: bool = False  # the layers as one lax.scan in the train steps' forward (Transformer.__call__)

    def __post_init__(self) -> None:
        if self.num_micro_batches < 1:
            raise ValueError(f"num_micro_batches must be >= 1, got {self.num_micro_batches}")
        if self.sft_aggregation not in G.AGGREGATIONS:
            raise ValueError(f"sft_aggregation must be one of {G.AGGREGATIONS}, got {self.sft_aggregation!r}")
        if self.sft_max_tokens < 1:
            raise ValueError(f"sft_max_tokens must be >= 1, got {self.sft_max_tokens}")


@flax.struct.dataclass
class TrainState:
    """Everything a step changes: the planner's params, the optimizer state, the step count."""

    params: nnx.State
    opt_state: Any
    step: jax.Array


class BatchError(CocodaError, ValueError):
    """A batch lacks a column, has inconsistent shapes, or does not split into micro-batches."""


class Learner:
    """Holds the planner's graphdef, the mesh and the jitted steps; the state travels explicitly.

    ``sft_step(state, batch)`` and ``grpo_step(state, batch)`` return ``(new_state, metrics)``;
    the old ``state`` is donated (do not read it again). ``mesh=None`` runs on the default device.
    """

    def __init__(self, model: nnx.Module, config: LearnerConfig | None = None, mesh: jax.sharding.Mesh | None = None):
        params, _ = self._setup(model, LearnerConfig() if config is None else config, mesh)
        if mesh is not None:  # onto the mesh by the logical-axis rules (a no-op where already there)
            params = jax.device_put(params, self._state_shardings.params)
        # Only the initial params are kept (the model's own arrays where they were already placed):
        # a step-0 state, with its copy of the params and fresh optimizer moments, is made on demand,
        # so a learner never holds a second copy of the params nor the moments (2x params for Adam).
        self._initial_params = params
        self._fresh = jax.jit(lambda p: TrainState(params=jax.tree.map(jnp.copy, p), opt_state=self.optimizer.init(p),
                                                   step=jnp.zeros((), jnp.int32)),
                              out_shardings=self._state_shardings)
        self._score = jax.jit(self._log_probs)

    def _setup(self, model: nnx.Module, config: LearnerConfig, mesh: jax.sharding.Mesh | None) -> tuple[Any, Any]:
        """What concrete and abstract learners share: the split planner, the optimizer, the state's
        shardings and the jitted steps. Returns the params and the optimizer state's shapes."""
        self.config, self.mesh = config, mesh
        self.graphdef, params = nnx.split(model)
        self.optimizer = make_optimizer(config.optim)
        self.schedule = make_schedule(config.optim)
        opt_shapes = jax.eval_shape(self.optimizer.init, params)
        if mesh is not None:
            shardings = param_shardings(params, mesh)
            # moments sharded like their params (XLA would replicate the zeros)
            opt_shardings = opt_state_shardings(self.optimizer, opt_shapes, shardings, mesh)
            step_sharding = self._replicated()
        else:  # concrete params on one device
            shardings = jax.tree.map(lambda x: x.sharding, params)
            step_sharding = jax.sharding.SingleDeviceSharding(jax.tree.leaves(params)[0].devices().pop())
            opt_shardings = jax.tree.map(lambda _: step_sharding, opt_shapes)
        self._state_shardings = TrainState(params=shardings, opt_state=opt_shardings, step=step_sharding)
        shaped = lambda x, sh: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=sh)  # noqa: E731
        self._abstract_state = TrainState(params=jax.tree.map(shaped, params, shardings),
                                          opt_state=jax.tree.map(shaped, opt_shapes, opt_shardings),
                                          step=jax.ShapeDtypeStruct((), jnp.int32, sharding=step_sharding))
        self._sft = self._make_step(self._sft_sums, _finalize_sft)
        self._grpo = self._make_step(self._grpo_sums, self._finalize_grpo)
        return params, opt_shapes

    @classmethod
    def abstract(cls, model: nnx.Module, config: LearnerConfig, mesh: jax.sharding.Mesh) -> "Learner":
        """A learner over an abstract planner (``transformer.abstract_model``: shapes only, no weights)
        whose steps can be lowered and compiled but not run: what ``launch.coevolve --dry_run`` sizes
        without allocating a real-scale model. :meth:`abstract_state` is its state's shapes and shardings."""
        self = cls.__new__(cls)
        self._setup(model, config, mesh)
        return self

    def abstract_state(self) -> TrainState:
        """The train state as ``jax.ShapeDtypeStruct`` leaves with their shardings: what a checkpoint
        is restored into (nothing allocated), and what an abstract learner's steps are lowered on."""
        return self._abstract_state

    def lower_step(self, kind: str, rows: int, length: int, *, with_ref: bool = False, packed: bool = False) -> Any:
        """The ``"sft"`` or ``"grpo"`` step lowered for a ``[rows, length]`` batch of the learner's
        abstract state (nothing is allocated): ``.compile().memory_analysis()`` sizes it. The GRPO step
        is lowered without a shared prompt (``batch["prefix"]``): the loop shares one only where every
        group's prompt is at least a length bucket long, so a batch of short prompts runs this step and
        it is the one a memory plan must fit (a shared prefix only shortens the rows). ``packed``: the SFT
        step of packed rows (with ``segments``)."""
        keys = {"sft": SFT_KEYS + (SFT_OPTIONAL if packed else ()),
                "grpo": GRPO_KEYS + ("old_logp",) + (("ref_logp",) if with_ref else ())}[kind]
        batch = {}
        for k in keys:
            shape = (rows,) if k == "advantages" else (rows, length)
            dtype = {"tokens": jnp.int32, "segments": jnp.int32, "valid": jnp.bool_}.get(k, jnp.float32)
            spec = logical_to_spec(("act_batch",) + (None,) * (len(shape) - 1), shape, self.mesh)
            batch[k] = jax.ShapeDtypeStruct(shape, dtype, sharding=jax.sharding.NamedSharding(self.mesh, spec))
        with self._ctx():
            return (self._sft if kind == "sft" else self._grpo).lower(self._abstract_state, batch)

    # -------------------------------------------------------------------------------- public API
    def init_state(self) -> TrainState:
        """A fresh state of step 0: a copy of the model's params and a new optimizer state. A copy,
        because the steps donate their state: the model given to the constructor stays valid (it
        can serve as the frozen reference) and every call starts the same run again."""
        with self._ctx():
            return self._fresh(self._initial_params)

    def state_from_params(self, params: nnx.State) -> TrainState:
        """A step-0 state around existing params (e.g. GRPO starting from the SFT planner, with this
        learner's own optimizer): the params are copied onto this learner's shardings."""
        with self._ctx():
            return self._fresh(jax.device_put(params, self._state_shardings.params))

    def model(self, state: TrainState) -> nnx.Module:
        """The planner with ``state``'s params (for the sampler or evaluation)."""
        return nnx.merge(self.graphdef, state.params)

    def shard_batch(self, batch: Mapping[str, Any]) -> dict[str, jax.Array]:
        """Places every column with its leading (batch) axis split over the mesh's batch axes."""
        out = {}
        for k, v in batch.items():
            if v is None:
                continue
            x = jnp.asarray(v)
            if self.mesh is None:
                out[k] = x
            else:
                spec = logical_to_spec(("act_batch",) + (None,) * (x.ndim - 1), x.shape, self.mesh)
                out[k] = jax.device_put(x, jax.sharding.NamedSharding(self.mesh, spec))
        return out

    def sft_step(self, state: TrainState, batch: Mapping[str, Any]) -> tuple[TrainState, dict[str, jax.Array]]:
        """One optimizer step of supervised NLL on the action tokens of demonstrations."""
        if batch.get("segments") is not None and self.config.sft_aggregation != "token_mean":
            # seq_mean would average per row (several episodes), constant per row count: another loss
            raise BatchError(f"packed rows need sft_aggregation='token_mean', not {self.config.sft_aggregation!r}")
        batch = self._check(batch, SFT_KEYS, SFT_OPTIONAL)
        with self._ctx():
            return self._sft(state, batch)

    def grpo_step(self, state: TrainState, batch: Mapping[str, Any]) -> tuple[TrainState, dict[str, jax.Array]]:
        """One optimizer step of the clipped GRPO objective (+ k3 KL when ``beta > 0``)."""
        if self.config.grpo.beta > 0 and batch.get("ref_logp") is None:
            raise BatchError("beta > 0 needs the reference log-probs (batch['ref_logp'])")
        batch = self._check(batch, GRPO_KEYS, GRPO_OPTIONAL)
        with self._ctx():
            return self._grpo(state, batch)

    def log_probs(self, params: nnx.State, tokens: Any, valid: Any, prefix: Any = None) -> jax.Array:
        """``[B, T]`` log-probs of ``tokens[:, t]`` given the tokens before (column 0 is 0), at the GRPO
        temperature: what a frozen reference contributes as ``ref_logp``, or the current policy as ``old_logp``. With a
        shared ``prefix`` ``[n, c]`` (see the module's docstring) ``tokens`` are the rows' own columns and
        column 0 is 0 too (its token follows the prefix, but no loss reads it)."""
        batch = self.shard_batch({"tokens": tokens, "valid": valid, "prefix": prefix})
        _check_prefix(batch, 1)
        with self._ctx():
            return self._score(params, batch["tokens"], batch["valid"], batch.get("prefix"))

    # -------------------------------------------------------------------------------- internals
    def _ctx(self):
        return contextlib.nullcontext() if self.mesh is None else jax.set_mesh(self.mesh)

    def _replicated(self):
        if self.mesh is None:
            return None
        return jax.sharding.NamedSharding(self.mesh, jax.sharding.PartitionSpec())

    def _check(self, batch: Mapping[str, Any], required: tuple[str, ...], optional: tuple[str, ...]) -> dict:
        missing = [k for k in required if batch.get(k) is None]
        if missing:
            raise BatchError(f"batch lacks {missing}; it has {sorted(batch)}")
        if batch.get("prefix") is not None and "prefix" not in optional:
            raise BatchError("a shared prefix is for GRPO batches only")
        if batch.get("segments") is not None and "segments" not in optional:
            raise BatchError("packed rows (batch['segments']) are for SFT batches only")
        keys = required + tuple(k for k in optional if batch.get(k) is not None)
        out = {k: batch[k] for k in keys}
        if len(jnp.shape(out["tokens"])) != 2:
            raise BatchError(f"batch['tokens'] must be [batch, time], got shape {tuple(jnp.shape(out['tokens']))}")
        b, t = jnp.shape(out["tokens"])
        for k, v in out.items():
            if k == "prefix":
                continue
            want = (b,) if k == "advantages" else (b, t)
            if tuple(jnp.shape(v)) != want:
                raise BatchError(f"batch[{k!r}] has shape {tuple(jnp.shape(v))}, expected {want}")
        n = self.config.num_micro_batches
        if b % n:
            raise BatchError(f"a batch of {b} rows does not split into {n} micro-batches")
        _check_prefix(out, n)
        return self.shard_batch(out)

    def _forward_logp(self, params, tokens, valid, prefix=None, segments=None, temperature=1.0):
        """The log-probs ``[b, T-1]`` of ``tokens[:, 1:]`` (the logits over ``temperature``) and whether
        each is the argmax (every scorer's path); with ``logits_chunk`` the full logits never exist at
        once. ``prefix``: the rows' shared first tokens; ``segments``: packed rows' episode ids (see the
        module's docstring)."""
        model = nnx.merge(self.graphdef, params)
        chunk = self.config.logits_chunk
        kw = dict(attention_mask=valid, remat=self.config.remat, scan=self.config.scan_layers, prefix=prefix,
                  segment_ids=segments)
        if chunk > 0:
            x = model(tokens, hidden=True, **kw)[:, :-1]
            return model.target_scores(x, tokens[:, 1:], chunk, temperature)
        logits = model(tokens, **kw)[:, :-1]
        return token_log_probs(logits, tokens[:, 1:], temperature), jnp.argmax(logits, axis=-1) == tokens[:, 1:]

    def _log_probs(self, params, tokens, valid, prefix=None):
        temperature = self.config.grpo.temperature
        return jnp.pad(self._forward_logp(params, tokens, valid, prefix, temperature=temperature)[0], ((0, 0), (1, 0)))

    def _shifted_logp(self, params, micro, temperature=1.0):
        """Log-probs of ``tokens[:, 1:]`` at ``temperature``, their argmax hits, and the matching loss mask
        ``[b, T-1]``."""
        logp, top1 = self._forward_logp(params, micro["tokens"], micro["valid"], micro.get("prefix"),
                                        micro.get("segments"), temperature)
        mask = micro["loss_mask"][:, 1:].astype(jnp.float32) * micro["valid"][:, 1:].astype(jnp.float32)
        return top1, logp, mask

    def _sft_sums(self, params, micro):
        top1, logp, mask = self._shifted_logp(params, micro)
        cfg = self.config
        loss_sum, loss_count = G.sft_loss(logp, mask, cfg.sft_aggregation, cfg.sft_max_tokens)
        sg = jax.lax.stop_gradient
        correct = top1.astype(jnp.float32)
        return loss_sum, {"loss_sum": sg(loss_sum), "loss_count": sg(loss_count), "token_count": mask.sum(),
                          "nll_sum": sg(-(logp * mask).sum()), "correct_sum": (correct * mask).sum()}

    def _grpo_sums(self, params, micro):
        _, logp, mask = self._shifted_logp(params, micro, self.config.grpo.temperature)
        old = micro.get("old_logp")
        ref = micro.get("ref_logp")
        sums = G.compute_loss(logp, None if old is None else old[:, 1:], None if ref is None else ref[:, 1:],
                              micro["advantages"], mask, self.config.grpo)
        return sums.loss_sum, sums

    def _finalize_grpo(self, sums, batch):
        adv = batch["advantages"].astype(jnp.float32)
        return dict(G.finalize(sums), advantage_mean=adv.mean(), advantage_std=adv.std())

    def _make_step(self, sums_fn: Callable, finalize: Callable) -> Callable:
        n = self.config.num_micro_batches

        def step(state: TrainState, batch: dict) -> tuple[TrainState, dict]:
            if "prefix" in batch:  # micro-batches of whole groups: every leaf led by the group axis
                grads, sums = accumulate_gradients(lambda p, m: sums_fn(p, _ungroup_rows(m)), state.params,
                                                   _group_rows(batch), n)
            else:
                grads, sums = accumulate_gradients(sums_fn, state.params, batch, n)
            updates, opt_state = self.optimizer.update(grads, state.opt_state, state.params)
            params = optax.apply_updates(state.params, updates)
            metrics = dict(finalize(sums, batch), grad_norm=global_norm(grads), update_norm=global_norm(updates),
                           learning_rate=jnp.asarray(self.schedule(state.step), jnp.float32),
                           step=state.step + 1)
            return TrainState(params=params, opt_state=opt_state, step=state.step + 1), metrics

        return jax.jit(step, donate_argnums=(0,), out_shardings=(self._state_shardings, None))


def _check_prefix(batch: Mapping[str, Any], num_micro_batches: int) -> None:
    """A shared prefix is ``[groups, c >= 1]``, its groups divide the rows and the micro-batches."""
    prefix = batch.get("prefix")
    if prefix is None:
        return
    shape, rows = tuple(jnp.shape(prefix)), jnp.shape(batch["tokens"])[0]
    if len(shape) != 2 or shape[0] < 1 or shape[1] < 1 or rows % shape[0]:
        raise BatchError(f"batch['prefix'] has shape {shape}: want [groups, length >= 1] with groups dividing "
                         f"the {rows} rows")
    if shape[0] % num_micro_batches:
        raise BatchError(f"{shape[0]} prefix groups do not split into {num_micro_batches} micro-batches")


def _group_rows(batch: dict) -> dict:
    """Every row column ``[B, ...]`` as ``[n, B / n, ...]`` for a batch with ``prefix`` ``[n, c]``."""
    n = batch["prefix"].shape[0]
    return {k: v if k == "prefix" else v.reshape(n, v.shape[0] // n, *v.shape[1:]) for k, v in batch.items()}


def _ungroup_rows(batch: dict) -> dict:
    return {k: v if k == "prefix" else v.reshape(-1, *v.shape[2:]) for k, v in batch.items()}


def _finalize_sft(sums: dict, batch: dict) -> dict[str, jax.Array]:
    tokens = jnp.maximum(sums["token_count"], 1.0)
    return {"loss": sums["loss_sum"] / jnp.maximum(sums["loss_count"], 1e-9), "nll": sums["nll_sum"] / tokens,
            "accuracy": sums["correct_sum"] / tokens, "tokens": sums["token_count"]}


def accumulate_gradients(sums_fn: Callable[[Any, Any], tuple[jax.Array, Any]], params: Any, batch: Any,
                         num_micro_batches: int) -> tuple[Any, Any]:
    """The full-batch gradient of ``loss_sum / loss_count`` from ``num_micro_batches`` micro-batches.

    ``sums_fn(params, micro) -> (loss_sum, sums)`` where ``sums`` is a pytree of sums that holds the
    loss's count (a :class:`~cocoda_jax.rl.grpo.LossSums` or a dict with ``"loss_count"``). The
    micro-batches are strided slices of ``batch``'s leading axis (row ``i`` to slice ``i % n``, so
    each keeps the batch sharding), scanned with ``lax.scan`` (one compiled body, the memory of one
    micro-batch). The gradients are added in float32 whatever the params' dtype, divided once by
    the total count and cast to the params' dtypes. Returns ``(gradient, sums of the whole batch)``. Jit-able (``sums_fn`` and ``n`` static).
    """
    n = num_micro_batches
    leading = {x.shape[0] for x in jax.tree.leaves(batch)}
    if n < 1 or len(leading) != 1 or next(iter(leading)) % n:
        raise ValueError(f"batch leading sizes {sorted(leading)} do not split into {n} micro-batches")
    grad_fn = jax.grad(sums_fn, has_aux=True)
    if n == 1:
        grads, sums = grad_fn(params, batch)
    else:
        def split(x):
            return jnp.swapaxes(x.reshape(x.shape[0] // n, n, *x.shape[1:]), 0, 1)

        stacked = jax.tree.map(split, batch)

        def spread(x):
            return constrain(x, ("act_batch",) + (None,) * (x.ndim - 1))

        first = jax.tree.map(lambda x: x[0], stacked)
        sums_shape = jax.eval_shape(lambda: sums_fn(params, first)[1])
        # gradients add up in float32 whatever the params' dtype (bf16 sums would lose the small slices)
        zero = (jax.tree.map(lambda p: jnp.zeros(p.shape, jnp.float32), params),
                jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), sums_shape))

        def body(carry, micro):
            g, sums = grad_fn(params, jax.tree.map(spread, micro))
            return jax.tree.map(lambda a, x: a + x.astype(a.dtype), carry, (g, sums)), None

        (grads, sums), _ = jax.lax.scan(body, zero, stacked)
    count = jnp.maximum(sums["loss_count"] if isinstance(sums, Mapping) else sums.loss_count, 1e-9)
    return jax.tree.map(lambda g, p: (g / count).astype(p.dtype), grads, params), sums


__all__ = ["BatchError", "GRPO_KEYS", "GRPO_OPTIONAL", "Learner", "LearnerConfig", "SFT_KEYS", "SFT_OPTIONAL",
           "TrainState", "accumulate_gradients"]

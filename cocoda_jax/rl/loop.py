"""The learner's outer loop as functions: SFT on demonstrations, GRPO iterations, evaluation.

Each function takes the learner, a :class:`~cocoda_jax.rl.learner.TrainState` and plain values,
and returns new ones; nothing here keeps state between calls, so a launcher can checkpoint between
any two calls and a resumed run repeats exactly what the uninterrupted run would have done. All
randomness comes from ``seed`` and the step or iteration number:

* SFT step ``s`` draws its batch with ``numpy.random.default_rng([seed, s])``;
* GRPO iteration ``i`` samples with ``fold_in(key(seed), i)`` (per turn folded again by the policy).
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np

from cocoda_jax.models.sampler import SamplingParams
from cocoda_jax.models.sharding import LOGICAL_RULES
from cocoda_jax.rl import grpo as G
from cocoda_jax.rl import rewards as R
from cocoda_jax.rl import trajectory as T
from cocoda_jax.rl.learner import Learner, TrainState
from cocoda_jax.rl.rollout import Tokenizer, TokenRecord, bucket_length, grpo_batch, sample_rollouts


# ------------------------------------------------------------------------------------------------
# Rollout settings
# ------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class RolloutConfig:
    """How episodes are played: turn limit, token budget, sampling, sandbox timeout.
    ``length_multiple`` buckets batch lengths (fewer compilations). ``top_k`` (0: off) and ``top_p``
    (nucleus, 1.0: off) truncate the sampling distribution of the GRPO rollouts; greedy evaluation
    ignores both. Which tool cards a prompt shows is
    :class:`~cocoda_jax.rl.prompts.RetrievalConfig`'s business."""

    max_steps: int = 8
    max_len: int = 384
    max_new_tokens: int = 24
    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    timeout_s: float = 10.0
    length_multiple: int = 64
    #: CPU hosts: the rollout rows in this many slices, each decoded from its own host thread (XLA's CPU
    #: runtime decodes one batch on one core; :class:`~cocoda_jax.rl.rollout.ShardedPolicy`). Outcomes
    #: depend on it (shard ``j`` samples with ``fold_in(key, j)``); 1 is the one-batch path.
    host_shards: int = 1

    def __post_init__(self) -> None:
        for name in ("max_steps", "max_len", "max_new_tokens", "length_multiple", "host_shards"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if not self.temperature > 0:
            raise ValueError(f"temperature must be > 0, got {self.temperature}")
        if self.top_k < 0:
            raise ValueError(f"top_k must be >= 0, got {self.top_k}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")

    def sampling(self, greedy: bool = False) -> SamplingParams:
        return SamplingParams(max_new_tokens=self.max_new_tokens, temperature=self.temperature, top_k=self.top_k,
                              top_p=self.top_p, greedy=greedy)


# ------------------------------------------------------------------------------------------------
# SFT
# ------------------------------------------------------------------------------------------------


def gold_segments(tasks: Sequence[Any], cards: T.CardSource) -> list[tuple[T.Segment, ...]]:
    """Each task's gold program in the action format, observations from its recorded values, under
    the prompt ``cards`` give it (:class:`~cocoda_jax.rl.prompts.PromptCards`); under a search
    setting with the search steps its ``demonstration`` inserts and their cards as observations."""
    searcher = getattr(cards, "searcher", None)
    if searcher is None:
        return [T.demonstration_segments(t, T.cards_of(cards, t)) for t in tasks]
    return [T.demonstration_segments(t, T.cards_of(cards, t), program=cards.demonstration(t, t.program),
                                     search=searcher) for t in tasks]


def demonstration_records(segments: Sequence[Sequence[T.Segment]], tokenizer: Tokenizer, rc: RolloutConfig
                          ) -> list[T.TokenizedEpisode]:
    """Demonstrations (gold :func:`gold_segments`, or played trajectories' ``segments()``, e.g.
    refactored programs that call composites) tokenized segment by segment with the loss on the
    actions only; one longer than ``max_len`` is dropped (never cut: a cut demonstration teaches a
    cut program)."""
    out = []
    for segs in segments:
        ep = T.tokenize_segments(segs, tokenizer.encode)
        if len(ep) <= rc.max_len:
            out.append(ep)
    return out


def sft_batch(episodes: Sequence[T.TokenizedEpisode], batch_size: int, step: int, seed: int, rc: RolloutConfig,
              pad_id: int, *, pack_length: int = 0, row_multiple: int = 1) -> dict[str, np.ndarray]:
    """The batch of SFT step ``step``: ``batch_size`` demonstrations drawn without replacement by
    ``default_rng([seed, step])`` (with replacement when there are fewer), right-padded one a row, or
    with ``pack_length > 0`` packed several to a row of that many tokens (of the longest episode's
    length bucket where that is longer; :func:`cocoda_jax.rl.trajectory.pack_episodes`, rows in
    multiples of ``row_multiple``): the same episodes, so the same loss, in fewer token slots."""
    if not episodes:
        raise ValueError("no demonstrations to train on")
    rng = np.random.default_rng([seed, step])
    idx = rng.choice(len(episodes), batch_size, replace=len(episodes) < batch_size)
    chosen = [episodes[i] for i in idx]
    length = bucket_length(max(len(e) for e in chosen), rc.length_multiple, rc.max_len)
    if pack_length > 0:
        tokens, mask, valid, segments = T.pack_episodes(chosen, max(length, pack_length), pad_id,
                                                        row_multiple=row_multiple)
        return {"tokens": tokens, "loss_mask": mask, "valid": valid, "segments": segments}
    tokens, mask, valid = T.pad_episodes(chosen, length, pad_id)
    return {"tokens": tokens, "loss_mask": mask, "valid": valid}


def sft_phase(learner: Learner, state: TrainState, episodes: Sequence[T.TokenizedEpisode], *, steps: int,
              batch_size: int, seed: int, rc: RolloutConfig, pad_id: int, pack_length: int = 0,
              on_step: Callable[[int, dict], None] | None = None) -> TrainState:
    """SFT steps from ``state.step`` up to ``steps``; ``on_step(step, metrics)`` for each, in order
    (metrics on the host), for logging; a checkpoint is the caller's, between calls.
    ``pack_length``: see :func:`sft_batch` (packed rows come in whole micro-batches and mesh shards).

    The device never waits for the host between steps: step ``k + 1``'s batch is built while the
    device runs step ``k`` (dispatch is asynchronous), step ``k + 1`` is dispatched, and only then
    are step ``k``'s metrics read (the one wait for the device, with the next step already queued)
    and handed to ``on_step``: logging runs one step behind. Without ``on_step`` nothing is read."""
    pending = None  # (step, metrics on the device) not yet handed to on_step
    rows = math.lcm(learner.config.num_micro_batches, batch_shards(learner.mesh))
    for step in range(int(state.step), steps):
        batch = sft_batch(episodes, batch_size, step, seed, rc, pad_id, pack_length=pack_length, row_multiple=rows)
        state, metrics = learner.sft_step(state, batch)
        if pending is not None and on_step is not None:
            on_step(pending[0], _host_scalars(pending[1]))
        pending = (step + 1, metrics)
    if pending is not None and on_step is not None:
        on_step(pending[0], _host_scalars(pending[1]))
    return state


def _host_scalars(metrics: dict[str, jax.Array]) -> dict[str, float]:
    return {k: float(v) for k, v in jax.device_get(metrics).items()}


# ------------------------------------------------------------------------------------------------
# Evaluation
# ------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Evaluation:
    """Greedy rollouts on a split: accuracy (share with ``R_res == 1``), mean reward, tool calls per
    solved task, the share of composite calls, and every tool a correct trajectory used."""

    accuracy: float
    reward_mean: float
    calls_per_solved: float | None
    composite_share: float
    used_tools: frozenset[str]
    composite_uses: dict[str, int]
    trajectories: tuple[T.Trajectory, ...]

    def outcomes(self) -> dict[str, int]:
        """Per task id, 1 when its (greedy) trajectory was verified correct: what a paired comparison
        of two runs on the same tasks reads (:func:`cocoda_jax.report.stats.paired_difference`)."""
        return {t.task_id: int(t.correct) for t in self.trajectories}

    def metrics(self, prefix: str) -> dict[str, float]:
        out = {f"{prefix}/accuracy": self.accuracy, f"{prefix}/reward_mean": self.reward_mean,
               f"{prefix}/composite_share": self.composite_share}
        if self.calls_per_solved is not None:
            out[f"{prefix}/calls_per_solved"] = self.calls_per_solved
        return out


def evaluate(model: Any, tokenizer: Tokenizer, tasks: Sequence[Any], snapshot: Any, sandbox: Any,
             rc: RolloutConfig, *, cards: T.CardSource, reward_config: R.RewardConfig = R.RewardConfig(),
             seed: int = 0, batch_size: int = 64, scan_layers: bool = False) -> Evaluation:
    """Greedy decoding (the key only matters for ties), in batches of ``batch_size`` tasks; each
    prompt shows ``cards`` (a :class:`~cocoda_jax.rl.prompts.PromptCards` over ``snapshot``);
    ``scan_layers``: the sampler's layers as one ``lax.scan``."""
    trajectories: list[T.Trajectory] = []
    for start in range(0, len(tasks), batch_size):
        part = tasks[start:start + batch_size]
        trajs, _ = sample_rollouts(model, tokenizer, part, snapshot, sandbox, sampling=rc.sampling(greedy=True),
                                   key=jax.random.fold_in(jax.random.key(seed), start), max_steps=rc.max_steps,
                                   max_len=rc.max_len, cards=cards, timeout_s=rc.timeout_s, scan_layers=scan_layers,
                                   host_shards=rc.host_shards)
        trajectories += trajs
    return summarize(trajectories, snapshot, reward_config)


def summarize(trajectories: Sequence[T.Trajectory], snapshot: Any,
              reward_config: R.RewardConfig = R.RewardConfig()) -> Evaluation:
    n = max(len(trajectories), 1)
    solved = [t for t in trajectories if t.correct]
    calls = [c for t in trajectories for c in t.calls]
    composite_calls = [c for c in calls if snapshot.phi(c) >= 1]
    uses: dict[str, int] = {}
    for c in composite_calls:
        uses[c] = uses.get(c, 0) + 1
    return Evaluation(
        accuracy=len(solved) / n,
        reward_mean=sum(R.reward(t, snapshot, reward_config).total for t in trajectories) / n,
        calls_per_solved=(sum(len(t.calls) for t in solved) / len(solved)) if solved else None,
        composite_share=len(composite_calls) / len(calls) if calls else 0.0,
        used_tools=frozenset(c for t in solved for c in t.calls),
        composite_uses=dict(sorted(uses.items())),
        trajectories=tuple(trajectories))


# ------------------------------------------------------------------------------------------------
# GRPO
# ------------------------------------------------------------------------------------------------

#: Plays a GRPO iteration's rows: ``(state, rows, key) -> (trajectories, token records, reward
#: breakdowns)``, one of each per row, in row order.
Rollouts = Callable[[TrainState, Sequence[Any], jax.Array],
                    tuple[Sequence[T.Trajectory], Sequence[TokenRecord], Sequence[R.RewardBreakdown]]]


def play_rows(learner: Learner, state: TrainState, tokenizer: Tokenizer, rows: Sequence[Any], snapshot: Any,
              sandbox: Any, *, rc: RolloutConfig, cards: T.CardSource, key: jax.Array,
              reward_config: R.RewardConfig = R.RewardConfig(), rollouts: Rollouts | None = None
              ) -> tuple[list[T.Trajectory], list[TokenRecord], list[R.RewardBreakdown]]:
    """One sampled rollout of each of ``rows`` (a task per row) with ``state``'s planner, run and
    scored: by ``rollouts`` when given (a multi-process run's shares), else all by this process.
    The one place GRPO's iterations and the rounds' search sample from."""
    if rollouts is not None:  # sampled, run and scored in shares, then exchanged
        trajs, records, breakdowns = rollouts(state, rows, key)
        return list(trajs), list(records), list(breakdowns)
    trajs, records = sample_rollouts(learner.model(state), tokenizer, rows, snapshot, sandbox,
                                     sampling=rc.sampling(), key=key, max_steps=rc.max_steps,
                                     max_len=rc.max_len, cards=cards, timeout_s=rc.timeout_s,
                                     scan_layers=learner.config.scan_layers, host_shards=rc.host_shards)
    return list(trajs), list(records), [R.reward(t, snapshot, reward_config) for t in trajs]


@dataclasses.dataclass(frozen=True)
class Iteration:
    """One GRPO iteration's rollouts: G per task, contiguous; their rewards and token records."""

    trajectories: tuple[T.Trajectory, ...]
    records: tuple[TokenRecord, ...]
    breakdowns: tuple[R.RewardBreakdown, ...]
    group_size: int

    def group_rewards(self, key: Callable[[T.Trajectory, R.RewardBreakdown], float]
                      ) -> list[tuple[str, tuple[float, ...]]]:
        """Per group (task id, the G values of ``key``): what a RODS tracker observes."""
        out = []
        for g in range(0, len(self.trajectories), self.group_size):
            trajs = self.trajectories[g:g + self.group_size]
            out.append((trajs[0].task_id, tuple(key(t, b) for t, b in
                                                zip(trajs, self.breakdowns[g:g + self.group_size]))))
        return out


def grpo_iteration(learner: Learner, state: TrainState, tokenizer: Tokenizer, tasks: Sequence[Any], snapshot: Any,
                   sandbox: Any, *, group_size: int, rc: RolloutConfig, cards: T.CardSource, key: jax.Array,
                   reward_config: R.RewardConfig = R.RewardConfig(), ref_params: Any = None,
                   mask_uniform_groups: bool = True, ppo_epochs: int = 1, share_prefix: bool = True,
                   refill: Callable[[int], Sequence[Any]] | None = None, min_informative_groups: int = 0,
                   max_refills: int = 0, rollouts: Rollouts | None = None
                   ) -> tuple[TrainState, dict[str, float], Iteration]:
    """Samples ``group_size`` rollouts per task with the current planner, scores them with the
    configured reward, and takes one GRPO step on the sampled tokens.

    The advantages are ``config.grpo.advantage``'s, handed the per-rollout composite credit of the
    reward breakdowns (read by the variants that take it, e.g. ``grpo_gar``).
    ``mask_uniform_groups``: a group whose advantages are all zero (under ``grpo``: whose rewards are
    all equal; under ``grpo_gar``: whose result rewards and credits both are) has its tokens
    left out of the loss (DAPO's dynamic sampling, without re-sampling) instead of diluting the
    token mean and still paying KL. Where the loss's count does not see rows without loss tokens
    (:func:`drops_masked_rows_exactly`) those rows are also left out of the step's batch
    (:func:`without_masked_groups`): the same gradient for a fraction of the compute.
    ``ppo_epochs``: optimizer steps on the same rollouts; the sampler's log-probs stay the old
    policy's, so from the second epoch on the ratio moves away from 1 and the clip bounds the step.
    The metrics are the last epoch's. ``share_prefix``: each group's prompt is run once in the step
    and the reference forward, not once per rollout (:func:`shared_group_prefix`; the same loss).

    Dynamic sampling (DAPO's, with the task source's own draws): while fewer than
    ``min_informative_groups`` groups have a non-zero advantage, up to ``max_refills`` more draws
    ``refill(k)`` (k = 1, 2, ...) are sampled with ``fold_in(key, k)``; the step then trains on at most
    ``len(tasks)`` informative groups, the first ones. Why: Adam takes a step of about the learning
    rate per parameter whatever the number of rows that carry the gradient, so a step made of a few
    informative groups is a full-size step in a noisy direction (measured: GRPO steps on draws of
    mostly all-fail groups took the dev accuracy from 0.58 to 0.23 in 25 iterations). Every sampled
    group is returned (the curriculum observes them all).

    ``rollouts``: who plays the rows (default: this process samples, runs and scores all of them);
    a multi-process run passes one that plays this process's share and gathers the others'
    (:func:`cocoda_jax.runs.shares.share_rollouts`), so every process holds the whole iteration;
    refills are played the same way.
    """
    if ppo_epochs < 1:
        raise ValueError(f"ppo_epochs must be >= 1, got {ppo_epochs}")
    grpo_cfg = learner.config.grpo
    if grpo_cfg.beta > 0 and ref_params is None:
        raise ValueError("beta > 0 needs the reference params (ref_params)")

    def play(batch_tasks: Sequence[Any], k: int) -> tuple[list, list, list[R.RewardBreakdown]]:
        expanded = [t for t in batch_tasks for _ in range(group_size)]
        return play_rows(learner, state, tokenizer, expanded, snapshot, sandbox, rc=rc, cards=cards,
                         key=key if k == 0 else jax.random.fold_in(key, k), reward_config=reward_config,
                         rollouts=rollouts)

    def advantages_of(breakdowns: Sequence[R.RewardBreakdown]) -> tuple[np.ndarray, np.ndarray]:
        totals = np.asarray([b.total for b in breakdowns], np.float32)
        credit = np.asarray([b.credit for b in breakdowns], np.float32)
        return totals, np.asarray(G.compute_advantages(totals, group_size, grpo_cfg, credit=credit))

    t0 = time.perf_counter()
    trajs, records, breakdowns = play(tasks, 0)
    totals, advantages = advantages_of(breakdowns)
    refills = 0
    while (refill is not None and refills < max_refills
           and int((~uniform_groups(advantages, totals, group_size, grpo_cfg)).sum()) < min_informative_groups):
        refills += 1
        more = list(refill(refills))
        if not more:
            break
        more_trajs, more_records, more_breakdowns = play(more, refills)
        trajs, records, breakdowns = trajs + more_trajs, records + more_records, breakdowns + more_breakdowns
        totals, advantages = advantages_of(breakdowns)  # per group: the earlier groups' values are unchanged
    rollout_s = time.perf_counter() - t0  # in shares: the exchange included
    length = bucket_length(max(len(r) for r in records), rc.length_multiple, rc.max_len)
    batch = grpo_batch(records, advantages, length, tokenizer.pad_id)
    uniform_group = uniform_groups(advantages, totals, group_size, grpo_cfg)
    uniform = np.repeat(uniform_group, group_size)
    if mask_uniform_groups:
        # at most len(tasks) informative groups train (the first ones): the step keeps its planned size
        uniform = uniform | (np.repeat(np.cumsum(~uniform_group) > len(tasks), group_size))
        batch["loss_mask"][uniform] = 0.0
        if drops_masked_rows_exactly(grpo_cfg):
            # rows in quarters of the batch (whole groups, whole micro-batches, whole shards of the mesh's
            # batch axes): each new shape compiles the step again (~12 s for the tiny planner on a core),
            # so few shapes beat a tight fit
            unit = math.lcm(group_size, learner.config.num_micro_batches, batch_shards(learner.mesh))
            rows = unit * -(-len(tasks) // 4)
            batch = without_masked_groups(batch, uniform, row_multiple=rows, length_multiple=rc.length_multiple,
                                          max_len=rc.max_len)
    train_tokens = float(batch["valid"].sum())
    if share_prefix:
        # the shared length in whole length buckets, so the rows' own length is one too: the step sees no
        # more shapes than without sharing (in the default study, a multiple of 16 cost more in new shapes'
        # compiles, 12-21 s each, than it saved)
        batch = shared_group_prefix(batch, group_size, multiple=rc.length_multiple,
                                    num_micro_batches=learner.config.num_micro_batches)
    if grpo_cfg.beta > 0:
        batch["ref_logp"] = np.asarray(learner.log_probs(ref_params, batch["tokens"], batch["valid"],
                                                         batch.get("prefix")))
    t1 = time.perf_counter()
    for _ in range(ppo_epochs):
        state, step_metrics = learner.grpo_step(state, batch)
    step_metrics = {k: float(v) for k, v in jax.device_get(step_metrics).items()}
    # over every sampled row, not only the rows the step trained on
    step_metrics.update(advantage_mean=float(advantages.mean()), advantage_std=float(advantages.std()))
    update_s = time.perf_counter() - t1
    sampled = int(sum(sum(r.loss_mask) for r in records))
    metrics = {**R.rollout_metrics(breakdowns), **{f"grpo/{k}": v for k, v in step_metrics.items()},
               "accuracy": float(np.mean([t.correct for t in trajs])),
               "uniform_group_share": float(uniform_group.mean()), "refills": float(refills),
               "informative_groups": float((~uniform_group).sum()), "train_rows": float(batch["tokens"].shape[0]),
               "rollout_tokens_per_s": sampled / max(rollout_s, 1e-9),
               "train_tokens_per_s": train_tokens / max(update_s, 1e-9),
               "shared_prefix_len": float(batch["prefix"].shape[1]) if "prefix" in batch else 0.0,
               "rollout_s": rollout_s, "update_s": update_s}
    return state, metrics, Iteration(tuple(trajs), tuple(records), tuple(breakdowns), group_size)


def uniform_groups(advantages: np.ndarray, totals: np.ndarray, group_size: int, config: G.GRPOConfig) -> np.ndarray:
    """Per group, whether it carries no learning signal: all its advantages are zero.

    A variant that reads the credit (``grpo_gar``) returns exact zeros for a group whose result
    rewards and credits are both flat, and a group of equal totals may still rank its rollouts by
    credit: its advantages decide. For the others (``grpo``, ``dr_grpo``) the rule stays the one on
    the totals, a zero std: the same groups, except that float rounding of a group mean can leave
    tiny nonzero advantages in a group of equal totals (which the std rule still masks)."""
    if G.advantage_reads_credit(config.advantage):
        return (np.asarray(advantages).reshape(-1, group_size) == 0).all(axis=1)
    return np.asarray(totals, np.float32).reshape(-1, group_size).std(axis=1) == 0


def batch_shards(mesh: Any) -> int:
    """How many ways ``mesh`` splits a batch's rows (its ``act_batch`` axes; 1 without a mesh)."""
    if mesh is None:
        return 1
    return math.prod(int(mesh.shape[a]) for a in LOGICAL_RULES["act_batch"] if a in mesh.shape)


def drops_masked_rows_exactly(config: G.GRPOConfig) -> bool:
    """Whether a row whose loss mask is all zero can leave the batch without changing the step:
    true for the ``grpo`` loss under ``token_mean`` and ``seq_mean`` (their counts are loss tokens
    and sequences with loss tokens), false under ``constant`` (its count is the batch's row count
    times ``max_tokens``), ``dr_grpo`` (always ``constant``) and any loss registered elsewhere."""
    return config.loss == "grpo" and config.aggregation in ("token_mean", "seq_mean")


def without_masked_groups(batch: dict[str, np.ndarray], masked: np.ndarray, *, row_multiple: int,
                          length_multiple: int, max_len: int) -> dict[str, np.ndarray]:
    """``batch`` without most of its ``masked`` rows (rows whose loss mask is all zero).

    The rows left are every unmasked row plus the first masked ones needed to make their count a
    multiple of ``row_multiple`` (at least one: an optimizer step still runs, so Adam's moments move
    as they would have), in the batch's order; the columns are cut to the longest unmasked row,
    rounded up to ``length_multiple`` (a masked row cut short loses only tokens that carry no loss).
    Rows and columns are bucketed so the jitted step sees few shapes.
    A masked row adds nothing to the loss's sum (nor, where :func:`drops_masked_rows_exactly`, to
    its count), and a causal model's valid positions never read the padding after them, so the
    step's gradient is the full batch's up to float summation order.
    """
    masked = np.asarray(masked, bool)
    rows = masked.shape[0]
    if np.any(batch["loss_mask"][masked] != 0):
        raise ValueError("a row to drop still has loss tokens")
    kept = np.flatnonzero(~masked)
    n = min(rows, max(row_multiple, -(-len(kept) // row_multiple) * row_multiple))
    if n >= rows:
        return batch
    pad = np.flatnonzero(masked)[:n - len(kept)]
    take = np.sort(np.concatenate([kept, pad]))
    longest = int(batch["valid"][kept].sum(axis=1).max()) if len(kept) else 1
    length = min(batch["tokens"].shape[1], bucket_length(longest, length_multiple, max_len))
    return {k: (v[take] if v.ndim == 1 else v[take, :length]) for k, v in batch.items()}


def shared_group_prefix(batch: dict[str, np.ndarray], group_size: int, *, multiple: int = 1,
                        num_micro_batches: int = 1) -> dict[str, np.ndarray]:
    """``batch`` (rows in groups of ``group_size`` consecutive rollouts of one prompt) with its shared
    first columns moved to ``batch["prefix"]`` ``[groups, c]``, once per group, and every other column
    cut to ``[:, c:]``: the learner then runs the prompt once per group instead of ``group_size``
    times (:mod:`cocoda_jax.rl.learner`). The loss and gradient are the full batch's (up to float
    summation order).

    ``c`` is the longest run of leading columns that, in every group, hold the same token in all its
    rows, are real and carry no loss, less one (the last shared column starts each row's own part:
    its hidden state predicts the row's first scored token), rounded down to ``multiple`` (few
    shapes: each compiles the step again). The batch comes back unchanged where ``c`` would be 0,
    where the rows are not whole groups, or where the groups do not split into
    ``num_micro_batches`` (micro-batches take whole groups)."""
    tokens = np.asarray(batch["tokens"])
    rows, length = tokens.shape
    if group_size < 1 or rows % group_size or (rows // group_size) % num_micro_batches:
        return batch
    grouped = lambda x: np.asarray(x).reshape(rows // group_size, group_size, length)  # noqa: E731
    g = grouped(tokens)
    shared = ((g == g[:, :1]).all(axis=1) & grouped(batch["valid"]).astype(bool).all(axis=1)
              & (grouped(batch["loss_mask"]) == 0).all(axis=1))  # [groups, length]
    runs = np.where(shared.all(axis=1), length, np.argmin(shared, axis=1))
    c = (min(int(runs.min()), length - 1) - 1) // multiple * multiple
    if c < 1:
        return batch
    out = {k: (v if np.ndim(v) == 1 else np.asarray(v)[:, c:]) for k, v in batch.items()}
    out["prefix"] = tokens[::group_size, :c]
    return out


def sample_tasks(pool: Sequence[Any], n: int, seed: int, iteration: int, stream: int = 7) -> list[Any]:
    """``n`` distinct tasks of ``pool`` for GRPO iteration ``iteration`` (a static task source):
    a pure function of ``(seed, stream, iteration)``; ``stream`` keeps two users' draws apart."""
    rng = np.random.default_rng([seed, stream, iteration])
    return [pool[i] for i in rng.choice(len(pool), n, replace=False)]


def iteration_key(seed: int, iteration: int) -> jax.Array:
    """The sampling key of GRPO iteration ``iteration`` (a pure function of the run's seed)."""
    return jax.random.fold_in(jax.random.key(seed), iteration)


__all__ = [
    "Evaluation", "Iteration", "RolloutConfig", "Rollouts", "batch_shards", "demonstration_records",
    "drops_masked_rows_exactly", "evaluate", "gold_segments", "grpo_iteration", "iteration_key", "play_rows",
    "sample_tasks", "sft_batch", "sft_phase", "shared_group_prefix", "summarize", "uniform_groups",
    "without_masked_groups",
]

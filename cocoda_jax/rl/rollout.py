"""Token-level rollouts: the KV-cache sampler plays the planner inside the text-level episode loop.

:func:`~cocoda_jax.rl.trajectory.run_episodes` knows nothing about tokens; :class:`SamplerPolicy`
plugs the :class:`~cocoda_jax.models.Sampler` into it (``with_rows=True``) and records, per row,
exactly the token sequence the model saw: the prompt, then per turn the sampled action tokens (with
the sampler's fp32 log-probs) and the observation tokens it was fed. That record — not a
re-tokenisation of the text — is what GRPO trains on, so the loss mask and the old log-probs line up
with the sampled tokens by construction.

A turn ends at the newline token (the action format is one step per line). Observations are
appended with :meth:`Sampler.continue_generation` (the prefix is never recomputed). Finished
episodes leave the sampler's batch (:meth:`Sampler.select_rows`) once the live ones fit a
power-of-two row count half the size or less: a finished row costs a decode step what a live one
costs, and at the default preset's evaluation 46% of the row-turns were finished rows. A row whose
conversation would pass ``max_len`` tokens stops generating (its later turns are empty, i.e.
malformed steps); its record is never longer than ``max_len``.

Randomness: the key of turn ``t`` is ``fold_in(key, t)``, so a rollout batch is a pure function of
(params, tasks, library, key).

Host shards (``RolloutConfig.host_shards``, CPU hosts): the rows may be split into contiguous slices,
each its own sampler conversation decoded from its own thread (:class:`ShardedPolicy`), because XLA's
CPU runtime decodes one batch on one core; shard ``j`` uses ``fold_in(key, j)`` as its key, so a batch
is then a pure function of (params, tasks, library, key, shard count).
"""

from __future__ import annotations

import bisect
import dataclasses
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import jax
import numpy as np

from cocoda_jax.models.sampler import Sampler, SamplingParams, bucket_size, off_mesh
from cocoda_jax.rl import trajectory as T


@dataclasses.dataclass(frozen=True)
class Generation:
    """What the policy returns for one row and turn (kept as ``StepRecord.generation``)."""

    text: str
    tokens: tuple[int, ...]
    log_probs: tuple[float, ...]
    stop: str


@dataclasses.dataclass(frozen=True)
class TokenRecord:
    """The exact token sequence of one rollout: ``ids``; ``loss_mask`` 1 on sampled tokens;
    ``old_logp`` the sampler's log-prob of each sampled token (0 elsewhere)."""

    ids: tuple[int, ...]
    loss_mask: tuple[int, ...]
    old_logp: tuple[float, ...]

    def __len__(self) -> int:
        return len(self.ids)


class Tokenizer:
    """The two functions rollouts need from an HF tokenizer: ``encode`` without special tokens and
    ``decode``; plus the newline id that ends a turn and the padding id."""

    def __init__(self, hf_tokenizer: Any):
        self.hf = hf_tokenizer
        newline = self.encode("\n")
        if len(newline) != 1:
            raise ValueError(f"the tokenizer must encode a newline as one token, got {newline}")
        self.newline_id = newline[0]
        # every id whose text ends a line (Qwen's BPE merges ")\n" into one token, for example):
        # all of them stop a turn
        self.line_end_ids = tuple(sorted(
            {self.newline_id} | {i for i in range(len(hf_tokenizer)) if self.decode([i]).endswith("\n")}))
        pad = getattr(hf_tokenizer, "pad_token_id", None)
        self.pad_id = int(pad) if pad is not None else 0

    def encode(self, text: str) -> list[int]:
        return [int(i) for i in self.hf.encode(text, add_special_tokens=False)]

    def decode(self, ids: Sequence[int]) -> str:
        return self.hf.decode(list(ids), skip_special_tokens=False, clean_up_tokenization_spaces=False)

    @property
    def vocab_size(self) -> int:
        return len(self.hf)


class SamplerPolicy:
    """A batch policy for ``run_episodes(..., with_rows=True)`` backed by a :class:`Sampler`.

    One instance serves one call of ``run_episodes`` (it holds the batch's KV cache); afterwards
    :meth:`records` gives each row's :class:`TokenRecord`.
    """

    def __init__(self, sampler: Sampler, tokenizer: Tokenizer, params: SamplingParams, key: jax.Array, *,
                 max_len: int, drop_finished: bool = True, forced: Mapping[tuple[int, int], str] | None = None):
        if params.stop_tokens and not set(tokenizer.line_end_ids) <= set(params.stop_tokens):
            raise ValueError("every line-ending token must be among the stop tokens (a turn is one line)")
        self.sampler = sampler
        self.tok = tokenizer
        self.params = dataclasses.replace(params, stop_tokens=tuple(params.stop_tokens) or tokenizer.line_end_ids)
        self._line_end = frozenset(tokenizer.line_end_ids)
        self.key = key
        self.max_len = int(max_len)
        self.drop_finished = bool(drop_finished)
        self._state = None   # the sampler's state once a row has been sampled
        self._started = False
        self._turn = 0
        self._segments: list[list[tuple[tuple[int, ...], int, tuple[float, ...]]]] = []
        self._ended_with_newline: list[bool] = []
        self._exhausted: list[bool] = []
        self._physical: list[int] = []  # the episode row held in each of the sampler's batch rows
        self.overflowed = 0
        self.row_turns = 0  # the sampler's batch rows summed over the turns (the decode's cost)
        # (row, turn) -> text the turn's step starts with, read as given (no loss, no log-prob) before the
        # planner writes the rest: a search that tries each tool at a step (:func:`forced_branches`)
        self.forced = {k: v for k, v in (forced or {}).items() if v}

    def _forced_ids(self, row: int) -> list[int]:
        text = self.forced.get((row, self._turn))
        return self.tok.encode(text) if text else []

    def __call__(self, contexts: Sequence[str], rows: Sequence[int]) -> list[Generation]:
        key = jax.random.fold_in(self.key, self._turn)
        if not self._started:
            self._started = True
            prompts = [self.tok.encode(c) for c in contexts]
            self._segments = [[(tuple(p), 0, (0.0,) * len(p))] for p in prompts]
            self._ended_with_newline = [True] * len(prompts)
            # a prompt that leaves no room for one step within max_len is never sampled: its rollout
            # writes nothing (and fails); counted in ``overflowed``
            forced = [self._forced_ids(row) for row in range(len(prompts))]
            for row, ids in enumerate(forced):
                if ids:
                    self._segments[row].append((tuple(ids), 0, (0.0,) * len(ids)))
            self._exhausted = [len(p) + len(f) + self.params.max_new_tokens > self.max_len
                               for p, f in zip(prompts, forced)]
            self.overflowed = sum(self._exhausted)
            if all(self._exhausted):
                self._turn += 1
                return [Generation("", (), (), "max_len") for _ in rows]
            out = self.sampler.generate([[self.tok.pad_id] if x else p + f
                                         for p, f, x in zip(prompts, forced, self._exhausted)], self.params, key)
            self._physical = list(range(len(prompts)))
        else:
            n = len(self._segments)
            obs: list[list[int]] = [[] for _ in range(n)]
            for ctx, row in zip(contexts, rows):
                text = _last_line(ctx)
                if not self._ended_with_newline[row]:
                    text = "\n" + text
                ids = self.tok.encode(text) + self._forced_ids(row)
                if self._length(row) + len(ids) + self.params.max_new_tokens > self.max_len:
                    self._exhausted[row] = True
                if not self._exhausted[row]:
                    obs[row] = ids
                    self._segments[row].append((tuple(ids), 0, (0.0,) * len(ids)))
            if not any(obs):  # every live row is out of room (or none was ever sampled): nothing to sample
                self._turn += 1
                return [Generation("", (), (), "max_len") for _ in rows]
            held = set(self._physical)
            back = [row for row in range(n) if obs[row] and row not in held]
            if back:
                raise ValueError(f"rows {back} finished earlier and left the sampler's batch: an episode never resumes")
            if self.drop_finished:
                self._drop_finished([row for row in range(n) if obs[row]])
            out = self.sampler.continue_generation(self._state, [obs[r] for r in self._physical], self.params, key)
        self._state = out.state
        self._turn += 1
        self.row_turns += len(self._physical)
        at = {row: j for j, row in enumerate(self._physical)}
        gens = []
        for row in rows:
            if self._exhausted[row]:
                gens.append(Generation("", (), (), "max_len"))
                continue
            toks = tuple(int(t) for t in out.tokens[at[row]])
            lps = tuple(float(x) for x in out.log_probs[at[row]])
            self._segments[row].append((toks, 1, lps))
            self._ended_with_newline[row] = bool(toks) and toks[-1] in self._line_end
            text = self.forced.get((row, self._turn - 1), "") + self.tok.decode(toks)
            gens.append(Generation(text, toks, lps, out.stop_reasons[at[row]]))
        return gens

    def _drop_finished(self, live: list[int]) -> None:
        """Shrinks the sampler's batch to the smallest power of two (>= 8) that holds the ``live``
        rows, when that is at most half the current batch (few shapes: each row count compiles the
        decode once): the live rows first, then finished ones as filler (they generate nothing).
        Off a mesh only (:meth:`Sampler.select_rows`)."""
        if not off_mesh():
            return
        size = bucket_size(len(live), 8)
        if 2 * size > len(self._physical):
            return
        alive = set(live)
        keep = [j for j, row in enumerate(self._physical) if row in alive]
        keep += [j for j, row in enumerate(self._physical) if row not in alive][:size - len(keep)]
        self._state = self.sampler.select_rows(self._state, keep)
        self._physical = [self._physical[j] for j in keep]

    def _length(self, row: int) -> int:
        return sum(len(s[0]) for s in self._segments[row])

    def records(self) -> list[TokenRecord]:
        out = []
        for segs in self._segments:
            ids = [i for s in segs for i in s[0]]
            mask = [s[1] for s in segs for _ in s[0]]
            lps = [x for s in segs for x in s[2]]
            out.append(TokenRecord(tuple(ids[:self.max_len]), tuple(mask[:self.max_len]), tuple(lps[:self.max_len])))
        return out


def _last_line(context: str) -> str:
    """The observation the episode loop appended last (the context ends with it and a newline)."""
    body = context[:-1] if context.endswith("\n") else context
    return body.rsplit("\n", 1)[-1] + "\n"


def sample_rollouts(model: Any, tokenizer: Tokenizer, tasks: Sequence[Any], snapshot: Any, sandbox: Any, *,
                    sampling: SamplingParams, key: jax.Array, max_steps: int, max_len: int,
                    cards: Sequence[str] | None = None, timeout_s: float | None = None,
                    verify: Callable[[Any, Any], float] = T.default_verify, scan_layers: bool = False,
                    host_shards: int = 1, forced: Mapping[tuple[int, int], str] | None = None
                    ) -> tuple[list[T.Trajectory], list[TokenRecord]]:
    """One rollout per entry of ``tasks`` (repeat a task G times for a GRPO group) with ``model``;
    returns the text-level trajectories and the token records, aligned. ``scan_layers``: the
    sampler's layers as one ``lax.scan`` (:class:`~cocoda_jax.models.sampler.Sampler`).
    ``host_shards`` > 1: the rows in that many contiguous slices, each its own sampler conversation
    decoded from its own host thread (:class:`ShardedPolicy`; shard ``j`` samples with
    ``fold_in(key, j)``, so outcomes depend on the shard count, never on thread timing).
    ``forced``: (row, turn) -> the text that row's step at that turn starts with (:class:`SamplerPolicy`)."""
    if host_shards < 1:
        raise ValueError(f"host_shards must be >= 1, got {host_shards}")
    shards = min(host_shards, len(tasks))
    cache_size = rollout_cache_size(max_len, sampling.max_new_tokens)

    def policy_for(tok, shard_key, first_row: int = 0, end_row: int | None = None) -> SamplerPolicy:
        sampler = Sampler(model, cache_size=cache_size, pad_id=tok.pad_id, tokenizer=tok.decode, scan_layers=scan_layers)
        end = len(tasks) if end_row is None else end_row
        local = {(row - first_row, turn): text for (row, turn), text in (forced or {}).items()
                 if first_row <= row < end}
        return SamplerPolicy(sampler, tok, sampling, shard_key, max_len=max_len, forced=local)

    def play(policy) -> list[T.Trajectory]:
        return T.run_episodes(policy, tasks, snapshot, sandbox, max_steps, cards=cards, timeout_s=timeout_s,
                              verify=verify, with_rows=True)

    if shards <= 1:
        policy = policy_for(tokenizer, key)
        return play(policy), policy.records()
    tok = SerialTokenizer(tokenizer)
    cuts = shard_cuts(len(tasks), shards)
    with ThreadPoolExecutor(shards, thread_name_prefix="rollout-shard") as pool:
        policy = ShardedPolicy([policy_for(tok, jax.random.fold_in(key, j), cuts[j], cuts[j + 1])
                                for j in range(shards)], cuts, pool)
        trajectories = play(policy)
    return trajectories, policy.records()


def shard_cuts(rows: int, shards: int, unit: int = 1) -> list[int]:
    """Where ``shards`` contiguous slices of ``rows`` rows begin, and the end: as even as whole
    ``unit``-row blocks allow (``unit``: a GRPO group, so no group is split). Slice ``j`` is
    ``cuts[j]:cuts[j + 1]``; with more shards than blocks some slices are empty."""
    if shards < 1 or unit < 1 or rows % unit:
        raise ValueError(f"{rows} rows do not split into {shards} slices of whole {unit}-row blocks")
    blocks = rows // unit
    return [unit * (blocks * j // shards) for j in range(shards + 1)]


class SerialTokenizer:
    """A :class:`Tokenizer` whose ``encode`` and ``decode`` run one at a time (the other attributes
    are the wrapped one's): an HF fast tokenizer's Rust object may refuse a second thread while it is
    borrowed ("Already borrowed"), and both are host work under the GIL, so the lock costs no overlap."""

    def __init__(self, tokenizer: Tokenizer):
        self._tokenizer = tokenizer
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._tokenizer, name)

    def encode(self, text: str) -> list[int]:
        with self._lock:
            return self._tokenizer.encode(text)

    def decode(self, ids: Sequence[int]) -> str:
        with self._lock:
            return self._tokenizer.decode(ids)


class ShardedPolicy:
    """``run_episodes``' batch policy as several :class:`SamplerPolicy` over contiguous slices of the
    rows (``cuts[j] <= row < cuts[j + 1]``: policy ``j``), each turn's shards run from the threads of
    ``pool`` at once.

    Why: XLA's CPU runtime runs the decode loop's small matrix products ([rows, d] x [d, ffn]) on one
    thread, so a second core does nothing for one batch's decode, while two separate executions use
    two (the GRPO bench's 32 rows on 2 cores: the sampler 66 -> 43-46 ms; docs/experiments.md,
    sections J and K). On an accelerator one batch is the better shape: keep ``host_shards = 1`` there.
    The shards share nothing but the model's (read-only) params and the tokenizer (serialised)."""

    def __init__(self, policies: Sequence[SamplerPolicy], cuts: Sequence[int], pool: ThreadPoolExecutor):
        if len(cuts) != len(policies) + 1 or list(cuts) != sorted(cuts) or cuts[0] != 0:
            raise ValueError(f"cuts {list(cuts)} do not split the rows into {len(policies)} slices")
        self.policies = list(policies)
        self.cuts = list(cuts)
        self.pool = pool

    def __call__(self, contexts: Sequence[str], rows: Sequence[int]) -> list[Generation]:
        parts: list[tuple[list[str], list[int]]] = [([], []) for _ in self.policies]
        where = []
        for ctx, row in zip(contexts, rows):
            if not 0 <= row < self.cuts[-1]:
                raise ValueError(f"row {row} is outside the {self.cuts[-1]} rows of the batch")
            j = bisect.bisect_right(self.cuts, row) - 1
            parts[j][0].append(ctx)
            parts[j][1].append(row - self.cuts[j])
            where.append((j, len(parts[j][1]) - 1))

        def turn(j: int) -> list[Generation]:
            return self.policies[j](*parts[j]) if parts[j][1] else []

        outs = list(self.pool.map(turn, range(len(self.policies))))
        return [outs[j][k] for j, k in where]

    @property
    def overflowed(self) -> int:
        return sum(p.overflowed for p in self.policies)

    @property
    def row_turns(self) -> int:
        return sum(p.row_turns for p in self.policies)

    def records(self) -> list[TokenRecord]:
        return [r for p in self.policies for r in p.records()]


def rollout_cache_size(max_len: int, max_new_tokens: int) -> int:
    """KV slots for rollouts of at most ``max_len`` tokens: the largest re-prefill bucket plus one turn.

    A row never passes ``max_len`` (:class:`SamplerPolicy`), so the sampler's compaction always leaves
    room for a turn and a history re-prefilled into its power-of-two bucket (at most
    ``bucket_size(max_len)`` slots) still has ``max_new_tokens`` free: no ``CacheFullError`` and no
    turn cut short by the cache. 536 for ``max_len`` 384 or 512 (the cache was ``2 * max_len`` before
    compaction); a decode step attends over every slot of the buffer, which holds only as many of
    these as the batch can reach so far (:class:`~cocoda_jax.models.sampler.Sampler`'s ``grow_step``)."""
    return bucket_size(max_len) + int(max_new_tokens)


def bucket_length(n: int, multiple: int, maximum: int) -> int:
    """``n`` rounded up to a multiple of ``multiple`` (capped at ``maximum``): few distinct batch
    shapes, so the jitted steps compile a handful of times per run."""
    return min(maximum, -(-max(n, 1) // multiple) * multiple)


def grpo_batch(records: Sequence[TokenRecord], advantages: Sequence[float], length: int, pad_id: int = 0
               ) -> dict[str, np.ndarray]:
    """Right-padded learner columns: ``tokens``, ``loss_mask``, ``valid``, ``old_logp`` ``[B, length]``
    and ``advantages`` ``[B]`` (position ``t`` scores ``tokens[t]``, as the learner expects)."""
    if len(records) != len(advantages):
        raise ValueError(f"{len(records)} records but {len(advantages)} advantages")
    b = len(records)
    tokens = np.full((b, length), pad_id, np.int32)
    mask = np.zeros((b, length), np.float32)
    valid = np.zeros((b, length), bool)
    old = np.zeros((b, length), np.float32)
    for i, r in enumerate(records):
        if len(r) > length:
            raise ValueError(f"record {i} has {len(r)} tokens, more than length={length}")
        n = len(r)
        tokens[i, :n] = r.ids
        mask[i, :n] = r.loss_mask
        valid[i, :n] = True
        old[i, :n] = r.old_logp
    return {"tokens": tokens, "loss_mask": mask, "valid": valid, "old_logp": old,
            "advantages": np.asarray(advantages, np.float32)}


__all__ = ["Generation", "SamplerPolicy", "SerialTokenizer", "ShardedPolicy", "TokenRecord", "Tokenizer",
           "bucket_length", "grpo_batch", "rollout_cache_size", "sample_rollouts", "shard_cuts"]

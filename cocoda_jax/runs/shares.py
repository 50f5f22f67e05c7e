"""Each process's share of a GRPO iteration on a multi-process run, and the checks that keep the
processes in step.

With P processes, process ``p`` samples, runs in the sandbox and scores only its contiguous share of
the iteration's GRPO groups (:func:`group_share`: whole groups, sizes differing by at most one), then
the shares' trajectories, token records and reward breakdowns are exchanged
(:func:`allgather_objects`) so that every process goes on with the whole iteration, in row order, as
if it had played every row itself: the GRPO step, RODS, mining and the round's decisions read the
same values everywhere. The sandbox and the host-side decoding are the work split P ways; the
learner's step was already split over the mesh.

Sampling keys: the sampler draws a whole batch from one key (per turn folded again), so a row's
draw depends on the batch it is in. Process ``p`` samples its share with ``fold_in(key, p)``: on P
processes an iteration equals the one-process iteration with ``rollout.host_shards = P`` (shard ``j``
samples with ``fold_in(key, j)``) when the shards' row cuts coincide (P divides the number of
groups) and the planner's params are the same bits (docs/scale.md says when they are). On one
process nothing is split, folded or exchanged.

After each round every process hashes what the round decided (:func:`round_digest`) and the digests
are compared (:func:`check_agreement`) before the round writes anything: a process that decided
otherwise stops the run with :class:`DivergedProcessesError`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import pickle
from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np

from cocoda_jax.errors import CocodaError

#: The pickle protocol of the exchanged shares (every process runs the same Python and code).
PICKLE_PROTOCOL = 5

Gather = Callable[[Any], list]


class DivergedProcessesError(CocodaError, RuntimeError):
    """The processes of one run decided a round differently: their digests of the round differ.
    Raised on every process before the round writes anything."""


# ------------------------------------------------------------------------------------------------
# Pure arithmetic
# ------------------------------------------------------------------------------------------------


def group_share(n_groups: int, process_index: int, process_count: int) -> slice:
    """The groups process ``process_index`` of ``process_count`` plays: a contiguous slice, the
    slices of all processes partition ``range(n_groups)`` in order, sizes differ by at most one."""
    if process_count < 1 or not 0 <= process_index < process_count or n_groups < 0:
        raise ValueError(f"no share for process {process_index} of {process_count} over {n_groups} groups")
    return slice(n_groups * process_index // process_count, n_groups * (process_index + 1) // process_count)


def row_share(n_rows: int, group_size: int, process_index: int, process_count: int) -> slice:
    """The rows of :func:`group_share` when each group is ``group_size`` consecutive rows."""
    if group_size < 1 or n_rows % group_size:
        raise ValueError(f"{n_rows} rows are not whole groups of {group_size}")
    groups = group_share(n_rows // group_size, process_index, process_count)
    return slice(groups.start * group_size, groups.stop * group_size)


def round_digest(decided: Any) -> str:
    """sha256 of ``decided`` (plain JSON data) as canonical JSON, every key named like a duration
    (``*_s``, ``seconds``) dropped at any depth: what a round decided, not how long it took."""
    text = json.dumps(_without_times(decided), sort_keys=True, separators=(",", ":"), default=repr)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _without_times(x: Any) -> Any:
    if isinstance(x, dict):
        return {k: _without_times(v) for k, v in x.items() if not (str(k).endswith("_s") or k == "seconds")}
    if isinstance(x, (list, tuple)):
        return [_without_times(v) for v in x]
    return x


def disagreeing(digests: Sequence[str]) -> list[int]:
    """The processes whose digest differs from process 0's (empty: all agree)."""
    return [i for i, d in enumerate(digests) if d != digests[0]]


# ------------------------------------------------------------------------------------------------
# Collectives
# ------------------------------------------------------------------------------------------------


def allgather_objects(obj: Any) -> list:
    """Every process's ``obj``, in process order (on one process ``[obj]``, no collective).

    Python objects travel as pickled bytes: each process's payload is padded to the longest, the
    uint8 arrays and their lengths are gathered with ``process_allgather`` and unpickled. Every
    process must call it at the same point (a collective); the peers are the run's own processes."""
    if jax.process_count() == 1:
        return [obj]
    from jax.experimental import multihost_utils

    payload = np.frombuffer(pickle.dumps(obj, protocol=PICKLE_PROTOCOL), np.uint8)
    sizes = np.asarray(multihost_utils.process_allgather(np.asarray([payload.size], np.int32))).reshape(-1)
    padded = np.zeros(int(sizes.max()), np.uint8)
    padded[:payload.size] = payload
    gathered = np.asarray(multihost_utils.process_allgather(padded))
    return [pickle.loads(gathered[i, :int(n)].tobytes()) for i, n in enumerate(sizes)]


def check_agreement(what: str, decided: Any, *, gather: Gather = allgather_objects) -> str:
    """Compares :func:`round_digest` of ``decided`` across the processes; returns the digest, or
    raises :class:`DivergedProcessesError` naming ``what`` and the processes that differ."""
    digest = round_digest(decided)
    digests = gather(digest)
    odd = disagreeing(digests)
    if odd:
        raise DivergedProcessesError(
            f"{what}: processes {odd} decided otherwise than process 0 (digests "
            + ", ".join(f"{i}: {d[:12]}" for i, d in enumerate(digests)) + ")")
    return digest


# ------------------------------------------------------------------------------------------------
# A GRPO iteration's rollouts in shares
# ------------------------------------------------------------------------------------------------


class CountingSandbox:
    """A sandbox that counts the programs it was asked to run (``programs``); everything else is
    the wrapped sandbox's. What a run reports as each process's share of the sandbox work."""

    def __init__(self, sandbox: Any):
        self._sandbox = sandbox
        self.programs = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sandbox, name)

    def run_many(self, programs: Sequence[str], *args: Any, **kwargs: Any) -> Any:
        programs = list(programs)
        self.programs += len(programs)
        return self._sandbox.run_many(programs, *args, **kwargs)

    def run(self, program: str, *args: Any, **kwargs: Any) -> Any:
        self.programs += 1
        return self._sandbox.run(program, *args, **kwargs)


def local_params(params: Any) -> Any:
    """``params`` as arrays on this process's first device: a replicated global array's local copy
    (no communication), anything sharded across processes gathered whole (a collective). Sampling a
    share is then this process's own computation, whatever the other processes sample."""
    from jax.experimental import multihost_utils

    device = jax.local_devices()[0]

    def local(x: Any) -> Any:
        if not isinstance(x, jax.Array) or x.is_fully_addressable:
            return x
        if x.is_fully_replicated:
            return jax.device_put(x.addressable_data(0), device)
        return jax.device_put(np.asarray(multihost_utils.process_allgather(x, tiled=True)), device)

    return jax.tree.map(local, params)


@dataclasses.dataclass(frozen=True)
class ShareStats:
    """What one process did for one iteration: its rows and the sandbox programs they ran; and the
    programs of the whole iteration (its steps that passed the checker: one sandbox program each),
    which the processes' shares add up to."""

    rows: int
    sandbox_programs: int
    iteration_programs: int = 0


def shared_rows(play: Callable[[slice], tuple[list, list, list]], n_rows: int, group_size: int, *,
                process_index: int, process_count: int, gather: Gather = allgather_objects
                ) -> tuple[list, list, list]:
    """Every row's (trajectory, token record, reward breakdown), each process playing only its
    :func:`row_share` with ``play(rows)`` (an empty share plays nothing), in row order."""
    share = row_share(n_rows, group_size, process_index, process_count)
    mine = play(share) if share.stop > share.start else ([], [], [])
    if len(mine[0]) != share.stop - share.start:
        raise ValueError(f"process {process_index} played {len(mine[0])} rows of its share {share}")
    parts = gather(tuple(list(x) for x in mine))
    out: tuple[list, list, list] = ([], [], [])
    for part in parts:
        for whole, piece in zip(out, part):
            whole.extend(piece)
    if len(out[0]) != n_rows:
        raise ValueError(f"the shares hold {len(out[0])} rows, not the iteration's {n_rows}")
    return out


def share_rollouts(learner: Any, tokenizer: Any, snapshot: Any, sandbox: Any, *, rc: Any, cards: Any,
                   reward_config: Any, group_size: int, on_share: Callable[[ShareStats], None] | None = None,
                   process_index: int | None = None, process_count: int | None = None,
                   gather: Gather = allgather_objects) -> Callable:
    """``grpo_iteration``'s ``rollouts`` for a multi-process run: ``(state, rows, key)`` -> every
    row's (trajectories, token records, reward breakdowns), this process sampling (with
    ``fold_in(key, process_index)``, ``key`` itself on one process, from a local copy of the
    params), running and scoring its share. ``on_share`` is told this process's rows and sandbox
    programs and the whole iteration's programs."""
    from cocoda_jax.rl import rewards as R
    from cocoda_jax.rl.rollout import sample_rollouts

    p = jax.process_index() if process_index is None else process_index
    n = jax.process_count() if process_count is None else process_count

    def rollouts(state: Any, rows: Sequence[Any], key: jax.Array) -> tuple[list, list, list]:
        model = _merge(learner.graphdef, local_params(state.params))  # a collective only if sharded
        counted = CountingSandbox(sandbox)
        share_key = key if n == 1 else jax.random.fold_in(key, p)

        def play(share: slice) -> tuple[list, list, list]:
            trajs, records = sample_rollouts(
                model, tokenizer, rows[share], snapshot, counted, sampling=rc.sampling(), key=share_key,
                max_steps=rc.max_steps, max_len=rc.max_len, cards=cards, timeout_s=rc.timeout_s,
                scan_layers=learner.config.scan_layers, host_shards=rc.host_shards)
            return trajs, records, [R.reward(t, snapshot, reward_config) for t in trajs]

        out = shared_rows(play, len(rows), group_size, process_index=p, process_count=n, gather=gather)
        if on_share is not None:
            share = row_share(len(rows), group_size, p, n)
            ran = sum(1 for t in out[0] for step in t.steps if step.outcome is not None)
            on_share(ShareStats(share.stop - share.start, counted.programs, ran))
        return out

    return rollouts


def _merge(graphdef: Any, params: Any) -> Any:
    from flax import nnx

    return nnx.merge(graphdef, params)


__all__ = ["CountingSandbox", "DivergedProcessesError", "ShareStats", "allgather_objects", "check_agreement",
           "disagreeing", "group_share", "local_params", "round_digest", "row_share", "share_rollouts",
           "shared_rows"]

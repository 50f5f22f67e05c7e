"""RODS as the training loop's task source, one epoch (one co-evolution round) at a time.

:func:`.simulate.run` drives RODS in a closed loop with a simulated policy; :class:`Curriculum`
opens that loop for a real learner::

    with Curriculum(seeds, config, workdir, run_seed=0, library=snapshot, sandbox=sb) as cur:
        while cur.epoch < rounds:
            batch = cur.sample(n_groups, seed=round_seed)     # the GRPO groups' tasks
            ...                                               # roll out, train
            cur.observe({task.id: group_rewards, ...})        # one GRPO group per task
            cur.set_library(grown_snapshot)                   # optional, before end_epoch
            metrics = cur.end_epoch()                         # boundary + atomic save

State on disk is :mod:`.persistence`'s layout under ``directory/rods/``. Constructing a
:class:`Curriculum` on a directory that holds RODS state resumes from it exactly (tracker, pool,
generated tasks, the synthesis jobs planned at the last boundary); otherwise it starts from
:func:`.pool.initial_pool` and saves that. What is observed during an epoch lives in memory only
until :meth:`Curriculum.end_epoch` saves it: a run stopped mid-epoch resumes at the start of that
epoch and must redo it.

Determinism: the state after each :meth:`~Curriculum.end_epoch` is a pure function of the seeds,
the config, ``run_seed`` and the inputs given to :meth:`~Curriculum.observe` (and of the library in
effect when each synthesis job was planned). Background synthesis cannot change it: the boundary
waits for exactly the jobs planned at the previous boundary, and their outcomes are ordered by
job key, as they are without a background thread.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any

from cocoda_jax import failpoints, storage
from cocoda_jax.rods import persistence
from cocoda_jax.rods.config import RodsConfig
from cocoda_jax.rods.errors import RodsStateError
from cocoda_jax.rods.pool import (PoolState, add_found_variants, admit_found, advance_epoch, candidate_of,
                                  epoch_metrics, initial_pool, plan_synthesis, pool_hash)
from cocoda_jax.rods.synthesis import (BackgroundSynthesizer, Job, Outcome, Synthesizer, acceptance_rate,
                                       derived_seed, rejection_counts)
from cocoda_jax.rods.tasks import task_from_dict, task_to_dict
from cocoda_jax.rods.tracker import Tracker

#: How :meth:`Curriculum.sample` picks from the live pool: a draw weighted by the tracker, or uniformly
#: (the ``rods_random`` ablation: the same pool, synthesis and retirement, no boundary targeting).
SELECTIONS = ("priority", "uniform")

#: Where a task stands when drawn: one of the tracker's regions, or never observed (a seed task:
#: ``unobserved``; a generated task: ``variant``; a task admitted from outside GRPO's draw: ``found``).
DRAW_REGIONS = ("boundary", "mastered", "hard", "unobserved", "variant", "found")


def draw_regions(task_ids: Iterable[str], pool: PoolState, tracker: Tracker) -> dict[str, str]:
    """Task id -> its :data:`DRAW_REGIONS` entry given ``pool`` and ``tracker`` (ids not in the pool:
    :class:`.RodsStateError`)."""
    origin = {it.task_id: it.origin for it in pool.items}
    out: dict[str, str] = {}
    for t in task_ids:
        s = tracker.get(t)
        if s is not None:
            out[t] = s.region(tracker.config)
        elif t in origin:
            out[t] = {"generated": "variant", "found": "found"}.get(origin[t], "unobserved")
        else:
            raise RodsStateError("task_id", f"{t!r} is not in the pool")
    return out


def draw_weight(region: str, phi: float, config: RodsConfig) -> float:
    """A task's weight in the priority draw, relative to a boundary task at ``phi = 1``.

    Boundary: its tracked ``phi`` (floored at ``recheck_weight``: never below a settled task), so
    the draw follows GRPO's signal. Unobserved variant or found task: ``variant_weight`` (synthesised
    from a boundary parent, or solved by the search now and then; it must be drawn to be judged).
    Unobserved seed: ``explore_weight``.
    Mastered and hard: ``recheck_weight`` (a mastered task can regress, a hard one become reachable).
    """
    if region == "boundary":
        return max(phi, config.recheck_weight)
    if region in ("variant", "found"):
        return config.variant_weight
    if region == "unobserved":
        return config.explore_weight
    if region in ("mastered", "hard"):
        return config.recheck_weight
    raise ValueError(f"region must be one of {DRAW_REGIONS}, got {region!r}")


def _clock(seed: int, epoch: int, task_id: str) -> float:
    """An Exp(1) variate from a hash of ``(seed, epoch, task id)``: no RNG state, so the same in
    every process and after a resume."""
    u = ((derived_seed("rods-sample", seed, epoch, task_id) % (1 << 53)) + 0.5) / float(1 << 53)
    return -math.log(u)


def priority_order(pool: PoolState, tracker: Tracker, config: RodsConfig, seed: int) -> tuple[str, ...]:
    """The live pool in the order of a seeded weighted draw without replacement.

    Each task gets an exponential clock of rate ``w`` (:func:`draw_weight`, rounded to 12 digits);
    taking tasks as their clocks ring is drawing one at a time with probability proportional to
    weight among those left (the exponential-race form of Gumbel-top-k). Weight-0 tasks come
    last, in seeded order; ties by task id.
    """
    live = pool.live_ids()
    regions = draw_regions(live, pool, tracker)

    def key(t: str) -> tuple[int, float, str]:
        s = tracker.get(t)
        w = round(draw_weight(regions[t], 0.0 if s is None else s.phi, config), 12)
        c = _clock(seed, pool.epoch, t)
        return (0, c / w, t) if w > 0 else (1, c, t)

    return tuple(sorted(live, key=key))


def uniform_order(pool: PoolState, seed: int) -> tuple[str, ...]:
    """The live pool in a seeded uniform order (the ``rods_random`` ablation)."""
    return tuple(sorted(pool.live_ids(), key=lambda t: (derived_seed("rods-sample", seed, pool.epoch, t), t)))


class Curriculum:
    """RODS as the training loop's task source, one epoch at a time (an epoch = one co-evolution round).

    ``seeds``: the seed tasks (objects with ``.id``; MathTask/TableTask for the built-in synthesizer).
    ``directory``: the checkpoint directory handed to :func:`.persistence.save`/``load`` (files land
    in ``directory/rods/``). ``synthesize``: runs one :class:`.Job`; by default a
    :class:`.Synthesizer` over ``sandbox`` and ``library`` with ``run_seed`` (both then required).
    ``background``: run the jobs planned at a boundary on a daemon thread during the next epoch
    (results are identical either way). ``write``: the file writer (fault-injection tests).
    ``collect_timeout_s``: how long a boundary waits for background jobs (None: no limit).

    On resume the saved tracker's config must equal ``config`` and every pool item must be a seed
    in ``seeds``, a saved generated task or a saved found one (:meth:`admit`); otherwise
    :class:`.RodsStateError`. A corrupt state
    raises :class:`.CorruptStateError` and nothing is written.
    """

    def __init__(self, seeds: Sequence[Any], config: RodsConfig, directory: str | os.PathLike, *, run_seed: int,
                 synthesize: Callable[[Job], Outcome] | None = None, background: bool = True,
                 library: Any = None, sandbox: Any = None,
                 write: Callable[[Path, bytes], None] = persistence.atomic_write,
                 collect_timeout_s: float | None = None, selection: str = "priority"):
        if selection not in SELECTIONS:
            raise ValueError(f"selection must be one of {SELECTIONS}, got {selection!r}")
        self.selection = selection
        self.config = config
        self.directory = storage.path_of(directory)
        self.run_seed = int(run_seed)
        self._write = write
        self._collect_timeout_s = collect_timeout_s
        self._closed = False
        self._failed: BaseException | None = None
        if synthesize is None:
            if library is None or sandbox is None:
                raise ValueError("Curriculum needs synthesize=, or library= and sandbox= for the built-in Synthesizer")
            self._synthesizer: Synthesizer | None = Synthesizer(sandbox, library, config, run_seed=self.run_seed)
            self._synthesize: Callable[[Job], Outcome] = self._synthesizer.run
        else:
            self._synthesizer = None
            self._synthesize = synthesize

        self._tasks: dict[str, Any] = {}
        self._found_records: list[persistence.GeneratedRecord] = []  # this epoch's, saved at its end
        for t in seeds:
            self._tasks.setdefault(t.id, t)
        self._parents: dict[str, str] = {}
        if persistence.exists(self.directory):
            r = persistence.load(self.directory)
            if r.tracker.config != config:
                raise RodsStateError("config", f"the saved RODS state under {persistence.rods_dir(self.directory)} "
                                               "was made with another RodsConfig")
            for rec in r.generated:
                self._tasks[rec.task.id] = rec.task
                self._parents[rec.task.id] = rec.parent_id
            for found in r.extra.get("found", ()):
                task = task_from_dict(found)
                self._tasks.setdefault(task.id, task)
            tracker, pool = r.tracker, r.pool
            pending = tuple((str(p), int(a)) for p, a in r.extra.get("pending", ()))
            unknown = [it.task_id for it in pool.items if it.task_id not in self._tasks]
            unknown += [p for p, _ in pending if p not in self._tasks]
            if unknown:
                raise RodsStateError("seeds", f"the saved pool names tasks that are neither seeds nor generated: "
                                              f"{unknown[:3]}")
        else:
            tracker, pool, pending = Tracker(config), initial_pool(seeds, config), ()
            persistence.save(self.directory, tracker, pool, (), {"pending": []}, write=write)
        self._tracker: Tracker = tracker
        self._pool: PoolState = pool
        self._pending: tuple[tuple[str, int], ...] = pending
        self._last_outcomes: tuple[Outcome, ...] = ()
        # The synthesize function each pending job runs with, bound when the job was planned, so that
        # set_library() during an epoch changes only jobs planned at later boundaries.
        self._bound: dict[tuple[str, int], Callable[[Job], Outcome]] = {k: self._synthesize for k in pending}
        self._bg: BackgroundSynthesizer | None = None
        if background:
            need = config.synth_per_epoch * config.variants_per_seed
            self._bg = BackgroundSynthesizer(self._run_bound, capacity=max(config.queue_capacity, need, 1))
            try:
                self._submit()
            except BaseException:
                self.close()
                raise

    # -- plumbing ------------------------------------------------------------------------------------
    def _run_bound(self, job: Job) -> Outcome:
        return self._bound[job.key](job)

    def _jobs(self) -> list[Job]:
        frozen = self._pool.all_keys()
        return [Job(self._tasks[p], a, frozen) for p, a in self._pending]

    def _submit(self) -> None:
        assert self._bg is not None
        refused = self._bg.submit(self._jobs())
        if refused:  # cannot happen with the capacity chosen above; never wait for a job not queued
            raise RuntimeError(f"the background synthesizer refused {len(refused)} jobs")

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("the curriculum is closed")
        if self._failed is not None:
            raise RuntimeError(f"an epoch boundary failed ({self._failed!r}); resume from {self.directory} "
                               "with a new Curriculum") from self._failed

    # -- state ---------------------------------------------------------------------------------------
    @property
    def epoch(self) -> int:
        """The pool's current epoch (the one being observed)."""
        return self._pool.epoch

    @property
    def tracker(self) -> Tracker:
        return self._tracker

    @property
    def pool(self) -> PoolState:
        return self._pool

    @property
    def pending(self) -> tuple[tuple[str, int], ...]:
        """``(parent_id, attempt)`` of the synthesis jobs planned at the last boundary."""
        return self._pending

    @property
    def parents(self) -> Mapping[str, str]:
        """Generated task id -> parent id."""
        return MappingProxyType(self._parents)

    @property
    def all_tasks(self) -> Mapping[str, Any]:
        """Every task known to the run: the seeds and every generated task (live or not)."""
        return MappingProxyType(self._tasks)

    @property
    def last_outcomes(self) -> tuple[Outcome, ...]:
        """The synthesis outcomes collected at the last :meth:`end_epoch` (in job-key order)."""
        return self._last_outcomes

    def task(self, task_id: str) -> Any:
        return self._tasks[task_id]

    def tasks(self) -> tuple[Any, ...]:
        """The live pool tasks (burn-in items included), in the pool's insertion order."""
        return tuple(self._tasks[t] for t in self._pool.live_ids())

    def state_hash(self) -> str:
        """sha256 over the pool (as :func:`.pool_hash`), the tracker and the pending synthesis jobs."""
        blob = json.dumps([pool_hash(self._pool), self._tracker.to_json(), [list(k) for k in self._pending]])
        return hashlib.sha256(blob.encode()).hexdigest()

    # -- the epoch -----------------------------------------------------------------------------------
    def sample(self, n: int, seed: int) -> tuple[Any, ...]:
        """``n`` live tasks for this epoch's GRPO groups; a pure function of (pool, tracker, ``seed``),
        so a curriculum resumed from its directory draws exactly what the uninterrupted one draws.

        ``selection="priority"``: :func:`priority_order`, a seeded weighted draw without replacement
        that follows the tracker (weights: :func:`draw_weight`); boundary tasks keep being redrawn
        while they stay informative, and unobserved variants get tracked soon after injection.
        ``selection="uniform"`` (the ``rods_random`` ablation): :func:`uniform_order`, a seeded
        uniform permutation. ``n <= live``: no duplicates; ``n > live``: the whole order repeats
        (every task ``n // live`` or ``n // live + 1`` times).
        """
        if not isinstance(n, int) or isinstance(n, bool) or n < 0:
            raise ValueError(f"n must be an int >= 0, got {n!r}")
        if n == 0:
            return ()
        if not self._pool.live_ids():
            raise RodsStateError("pool", "no live tasks to sample")
        if self.selection == "uniform":
            order = uniform_order(self._pool, seed)
        else:
            order = priority_order(self._pool, self._tracker, self.config, seed)
        picked = [order[i % len(order)] for i in range(n)]
        return tuple(self._tasks[t] for t in picked)

    def regions_of(self, task_ids: Iterable[str]) -> dict[str, str]:
        """Task id -> its :data:`DRAW_REGIONS` entry now (call it on a batch before observing it, to
        count the draws per region). Pure; a pool item that is not live keeps its region; an id
        that is not in the pool raises :class:`.RodsStateError`."""
        return draw_regions(task_ids, self._pool, self._tracker)

    def observe(self, groups: Mapping[str, Sequence[float]] | Iterable[tuple[str, Sequence[float]]]) -> None:
        """Record GRPO groups of this epoch: task id -> the group's tracking rewards (the training
        reward or the progress reward, see :func:`.tracking_reward`). May be called
        several times per epoch (a pair list may repeat a task); each call adds one group per entry.
        Only live pool tasks can be observed (RodsStateError otherwise; nothing is recorded then)."""
        self._check_open()
        pairs = list(groups.items() if isinstance(groups, Mapping) else groups)
        live = set(self._pool.live_ids())
        bad = [t for t, _ in pairs if t not in live]
        if bad:
            raise RodsStateError("observe", f"not live pool tasks at epoch {self.epoch}: {bad[:3]}")
        self._tracker = self._tracker.observe_groups(pairs, self._pool.epoch)

    def admit(self, tasks: Sequence[Any]) -> tuple[str, ...]:
        """Tasks found outside GRPO's draw during this epoch (the rounds' search: solved now and then)
        join the live pool, drawn at ``variant_weight`` until observed; ``found_variants`` variants of
        each are made at once, else they are the first synthesis parents at the boundary
        (:func:`.pool.admit_found`, :func:`.pool.plan_synthesis`). Returns the ids
        added (a task already in the pool is skipped). Like observations, they are saved by
        :meth:`end_epoch` (the tasks themselves in the saved run state, so a resume knows them)."""
        self._check_open()
        before = {it.task_id for it in self._pool.items}
        self._pool = admit_found(self._pool, tasks)
        added = tuple(it.task_id for it in self._pool.items if it.task_id not in before)
        for t in tasks:
            if t.id in added:
                self._tasks[t.id] = t
        if self.config.found_variants and added:
            self._add_found_variants(added)
        return added

    def _add_found_variants(self, found: Sequence[str]) -> None:
        """``found_variants`` synthesis jobs for each of ``found`` run now; the accepted variants go live
        at once (:func:`.pool.add_found_variants`) and are saved with the boundary's generated tasks."""
        keys = self._pool.all_keys()
        jobs = [Job(self._tasks[t], a, keys) for t in found for a in range(self.config.found_variants)]
        outcomes = [self._synthesize(j) for j in jobs]
        records = [persistence.GeneratedRecord(o.task, o.parent_id, o.attempt, self.epoch) for o in outcomes
                   if o.accepted]
        candidates = [candidate_of(rec.task, rec.parent_id, self._tracker) for rec in records]
        self._pool = add_found_variants(self._pool, candidates, {t: self.config.found_variants for t in found},
                                        self.config)
        in_pool = {it.task_id for it in self._pool.items}
        for rec in records:
            if rec.task.id in in_pool and rec.task.id not in self._tasks:
                self._tasks[rec.task.id] = rec.task
                self._parents[rec.task.id] = rec.parent_id
                self._found_records.append(rec)

    def end_epoch(self) -> dict:
        """The epoch boundary, as :func:`.simulate.run` does it: collect the jobs planned at the
        previous boundary, record the accepted variants, :func:`.advance_epoch`, :func:`.plan_synthesis`,
        submit the new jobs, save atomically. Returns the epoch's metrics: :func:`.epoch_metrics`
        (``region_sizes`` also counting ``unobserved``) plus ``synthesis`` {jobs, accepted,
        acceptance_rate, rejections} and ``injected_mean_reward`` (the mean over generated items
        injected at earlier boundaries and observed this epoch of their mean reward this epoch;
        None if none). ``region_variance`` and ``boundary_variance_ratio`` are the tracker's (mean
        within-group variance, what GRPO's advantages see), over the next epoch's live pool.

        If the boundary fails (a synthesis job raised, the save failed), this object refuses further
        use: resume from the directory with a new :class:`Curriculum`.
        """
        self._check_open()
        try:
            return self._end_epoch()
        except BaseException as exc:
            self._failed = exc
            raise

    def _end_epoch(self) -> dict:
        e = self._pool.epoch
        tracker = self._tracker
        if self._bg is not None:
            outcomes = self._bg.collect(self._pending, timeout_s=self._collect_timeout_s)
        else:
            outcomes = tuple(self._bound[j.key](j) for j in self._jobs())
        outcomes = tuple(sorted(outcomes, key=lambda o: o.key))
        records = [persistence.GeneratedRecord(o.task, o.parent_id, o.attempt, e) for o in outcomes if o.accepted]
        candidates = [candidate_of(rec.task, rec.parent_id, tracker) for rec in records]
        records += self._found_records  # already live: saved with the boundary's own
        before = self._pool
        pool = advance_epoch(before, tracker, candidates, self.config)
        pool, pending = plan_synthesis(pool, tracker, self.config)

        m = epoch_metrics(pool, tracker, e)
        m["region_sizes"] = {**m["region_sizes"], "unobserved": m["unobserved"]}
        m["synthesis"] = {"jobs": len(outcomes), "accepted": sum(o.accepted for o in outcomes),
                          "acceptance_rate": acceptance_rate(outcomes), "rejections": rejection_counts(outcomes)}
        m["injected_mean_reward"] = _injected_mean_reward(before, tracker, e)

        found = [task_to_dict(self._tasks[it.task_id]) for it in pool.items if it.origin == "found"]
        extra = {"pending": [list(k) for k in pending], "found": found}
        persistence.save(self.directory, tracker, pool, records, extra, write=self._write)
        failpoints.hit("rods/saved")
        for rec in records:
            self._tasks[rec.task.id] = rec.task
            self._parents[rec.task.id] = rec.parent_id
        self._pool, self._pending, self._last_outcomes = pool, pending, outcomes
        self._found_records = []
        self._bound = {k: self._synthesize for k in pending}
        if self._bg is not None:
            self._submit()
        return m

    # -- the library ---------------------------------------------------------------------------------
    def set_library(self, snapshot: Any) -> None:
        """Hand over the grown library (a LibrarySnapshot) to the built-in synthesizer. It applies to
        the jobs planned at the next :meth:`end_epoch` and later; jobs already planned keep the library
        they were planned with. On resume, pass as ``library=`` the one in effect at the last
        :meth:`end_epoch` (the pending jobs run with it)."""
        self._check_open()
        if self._synthesizer is None:
            raise ValueError("set_library needs the built-in Synthesizer (this Curriculum was given synthesize=)")
        self._synthesizer = Synthesizer(self._synthesizer.runner, snapshot, self.config, run_seed=self.run_seed)
        self._synthesize = self._synthesizer.run

    # -- lifetime ------------------------------------------------------------------------------------
    def close(self) -> None:
        """Stop the background synthesizer (idempotent). The saved state is untouched."""
        self._closed = True
        if self._bg is not None:
            self._bg.close()
            self._bg = None

    def __enter__(self) -> "Curriculum":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _injected_mean_reward(pool: PoolState, tracker: Tracker, epoch: int) -> float | None:
    """Mean over generated items of ``pool`` (the pool during ``epoch``) observed in ``epoch`` of
    their mean reward in that epoch (groups pooled per item)."""
    per_item = []
    for it in pool.items:
        if it.origin != "generated" or it.added_epoch > epoch:
            continue
        s = tracker.get(it.task_id)
        groups = [g for g in (s.groups if s is not None else ()) if g.epoch == epoch]
        if groups:
            per_item.append(math.fsum(g.mean * g.n for g in groups) / sum(g.n for g in groups))
    return math.fsum(per_item) / len(per_item) if per_item else None

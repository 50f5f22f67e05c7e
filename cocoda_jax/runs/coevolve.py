"""Co-evolution of the planner and the tool library: ``launch/coevolve.py``'s job.

Stage 1 (warm library): the symbolic abstractor folds the gold demonstrations into composites;
the demonstrations are refactored to call them. Stage 2 (SFT): the planner learns the refactored
demonstrations. Stage 3: rounds of

    tasks (RODS curriculum or a static pool) -> G rollouts each -> reward -> GRPO step   (x K)
    -> mine the round's successful trajectories -> validate -> INSERTTOOL
    -> refactor the stored demonstrations with the new composites -> a short SFT refresh on them
       (only when a composite was inserted: the planner must learn to call it)
    -> evaluate on the validation split -> accept the (planner, library) pair or keep the incumbent

one function per arrow group, each returning what the next one reads: :func:`grpo_phase`,
:func:`mine_and_validate`, :func:`refactor_and_refresh`, :func:`decide`, :func:`record`; the
round loop (``_rounds``) threads the run's :class:`~cocoda_jax.runs.progress.RunProgress`, library
and train state through them and writes the checkpoint.

``coevolve.mine_in_rounds=False`` (the -CTD ablation): the warm library, then no growth in the rounds.

``frozen_library`` (the baseline): no warm library, no mining, hence no refresh: the same GRPO
steps on the same tasks with the primitives only. With ``coevolve.direct_answer`` too (the
``direct`` baseline), the library is ``state_answer`` alone and the demonstrations state the gold
answer in one step (:mod:`cocoda_jax.data.direct_answer`).

Checkpoints: one after SFT and one after every round (train state, the incumbent library, the
run's progress record, the stored demonstrations' programs, the RODS files). A resumed run repeats
the remaining rounds exactly as the uninterrupted run would: every batch and key derives from the
seed, the round and the iteration; the validation rewrite and INSERTTOOL are deterministic.
"""

from __future__ import annotations

import collections
import contextlib
import itertools
import dataclasses
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import jax
import ml_collections
import numpy as np

from cocoda_jax import failpoints, storage
from cocoda_jax.coevolve import acceptance
from cocoda_jax.coevolve.abstractor import Candidate, CombinedAbstractor, SymbolicAbstractor, fold_all
from cocoda_jax.coevolve.rounds import abstraction_round, warm_library
from cocoda_jax.coevolve.sequences import SequenceAbstractor, pattern_from_json, pattern_to_json
from cocoda_jax.coevolve.teacher import TeacherAbstractor, TeacherConfig
from cocoda_jax.coevolve.traces import Trace, gold_trace, trace_from_trajectory
from cocoda_jax.coevolve.validate import ValidationConfig, play_programs
from cocoda_jax.data import direct_answer
from cocoda_jax.execution import Sandbox
from cocoda_jax.library import LibrarySnapshot
from cocoda_jax.report import MetricsWriter, write_html_report
from cocoda_jax.report.coevolution import (build_report, draw_library, library_summary,
                                           plot_coevolution, retrieval_tokens_per_query, write_report,
                                           write_text_atomic)
from cocoda_jax.report.rounds import Outcome, RoundRecord
from cocoda_jax.rl import loop, trajectory
from cocoda_jax.rl.learner import Learner, TrainState
from cocoda_jax.rl.prompts import PromptCards, all_cards, search_step
from cocoda_jax.rl.rewards import RewardBreakdown
from cocoda_jax.rl.rollout import Tokenizer
from cocoda_jax.rods.source import TaskSource
from cocoda_jax.rods.tracker import tracking_reward
from cocoda_jax.runs import builders, domains, host_memory, hosts, logs, numerics, rundir, shares, stage0
from cocoda_jax.runs.settings import require
from cocoda_jax.errors import ConfigError
from cocoda_jax.runs.progress import IncumbentRecord, RunProgress
from cocoda_jax.runs.settings import RodsSettings, RunSettings

ProgramPairs = tuple[tuple[str, str], ...]  # stored demonstrations: (task id, program)


def _bar(total: int, initial: int, desc: str, enabled: bool):
    from tqdm import tqdm
    return tqdm(total=total, initial=initial, desc=desc, disable=not enabled, dynamic_ncols=True, leave=False)


# ------------------------------------------------------------------------------------------------
# Small pure helpers
# ------------------------------------------------------------------------------------------------


def rods_scalars(m: dict[str, Any]) -> dict[str, float]:
    """The RODS epoch metrics that are numbers, flattened for the metrics file and TensorBoard."""
    out: dict[str, float] = {"rods/live": m["live"], "rods/live_generated": m["live_generated"],
                             "rods/injected": m["injected"]}
    for region, n in (m.get("region_sizes") or {}).items():
        out[f"rods/size/{region}"] = n
    for region, v in (m.get("region_variance") or {}).items():
        if v is not None:
            out[f"rods/variance/{region}"] = v
    for key in ("boundary_variance_ratio", "injected_mean_reward", "injected_first_reward"):
        if m.get(key) is not None:
            out[f"rods/{key}"] = m[key]
    synth = m.get("synthesis") or {}
    if synth.get("acceptance_rate") is not None:
        out["rods/synthesis_acceptance_rate"] = synth["acceptance_rate"]
    return out


def read_tree(root: Path) -> dict[str, str]:
    """Every file under ``root`` as ``relative path -> text`` (the RODS state, for the checkpoint)."""
    return {rel: p.read_text() for rel, p in storage.list_files(root).items()}


def write_tree(root: Path, files: dict[str, str]) -> None:
    """Replaces ``root`` by exactly ``files`` (:func:`cocoda_jax.storage.replace_tree`)."""
    storage.replace_tree(root, files)


# ------------------------------------------------------------------------------------------------
# What a run builds once
# ------------------------------------------------------------------------------------------------


#: The config sections the co-evolution job reads (``distributed`` is optional).
_SECTIONS = ("seed", "domain", "model", "mesh", "rollout", "reward", "sft", "grpo", "sandbox", "checkpoint", "warm",
            "coevolve", "rods", "report", "retrieval")


def _settings(config: ml_collections.ConfigDict) -> RunSettings:
    """The whole config parsed and checked once, before anything is built; the sections only
    this job reads (``warm``, ``coevolve``, ``rods``, ``report``) are required here."""
    require(config, *_SECTIONS)
    settings = RunSettings.parse(config)
    for name in ("warm", "coevolve", "rods", "report"):
        settings.required(name)
    if settings.coevolve.probation_iterations >= settings.grpo.iterations_per_round:
        raise ConfigError(
            f"config.coevolve.probation_iterations ({settings.coevolve.probation_iterations}) must be below "
            f"config.grpo.iterations_per_round ({settings.grpo.iterations_per_round}): mining reads the GRPO "
            "iterations before it")
    return settings


@dataclasses.dataclass
class _RunContext:
    """What one run builds once and every stage reads (never checkpointed: rebuilt on resume).
    Mutable only in its caches: ``tasks_by_id`` also learns the curriculum's generated tasks.
    ``config``: the ConfigDict itself, kept only for what stores it (checkpoints, the claimed
    workdir); every stage reads ``settings``."""

    config: ml_collections.ConfigDict
    settings: RunSettings
    workdir: Path
    sandbox: Sandbox
    domain: domains.Domain
    tokenizer: Tokenizer
    sft_learner: Learner
    grpo_learner: Learner
    refresh_learner: Learner
    tasks_by_id: dict[str, Any]
    start_library: LibrarySnapshot  # the domain's primitives (state_answer alone for the direct baseline)
    primitive_names: frozenset[str]
    show_progress: bool
    cards_cache: dict = dataclasses.field(default_factory=dict)
    #: The stored demonstrations over the incumbent library, by (task id, program): their played
    #: trajectories (stage 2; a resumed process's first round; read as traces on first use), their
    #: traces (an accepted round's refactoring), ``None`` for one that did not replay correctly. A
    #: round refactors them without playing them again in the sandbox (:func:`stored_traces`).
    demo_traces: dict[tuple[str, str], Trace | trajectory.Trajectory | None] = \
        dataclasses.field(default_factory=dict)
    teacher: TeacherAbstractor | None = None  # built on first use (coevolve.proposers "teacher"/"both")
    #: Per round this process ran, the GRPO rows it played and the programs they ran in the sandbox
    #: (a ``jax.distributed`` run only: :func:`_grpo_rollouts`).
    shares_by_round: dict[int, dict[str, int]] = dataclasses.field(default_factory=dict)
    #: Per round this process ran, the digest of what it decided (a ``jax.distributed`` run only).
    round_digests: dict[int, str] = dataclasses.field(default_factory=dict)

    @property
    def distributed(self) -> bool:
        """A ``jax.distributed`` run (``distributed.initialize``): GRPO plays in shares."""
        d = self.settings.distributed
        return d is not None and d.initialize

    @property
    def seed(self) -> int:
        return self.settings.seed

    @property
    def rounds_seed(self) -> int:
        """The seed of stage 3's randomness: ``seed``, or with ``coevolve.replicate`` r > 0 one drawn
        from (seed, r), below 2**20 so that the refresh's ``seed * 1000 + round`` stays a 32-bit seed."""
        r = self.settings.coevolve.replicate
        if r == 0:
            return self.seed
        return int(np.random.SeedSequence([self.seed, r]).generate_state(1)[0]) % (1 << 20)

    @property
    def frozen_library(self) -> bool:
        """The baseline: no warm library, no mining (``coevolve.frozen_library``)."""
        return self.settings.coevolve.frozen_library

    @property
    def library_grows(self) -> bool:
        """The rounds may insert composites, hence refactor the stored demonstrations."""
        return not self.frozen_library and self.settings.coevolve.mine_in_rounds

    @property
    def with_reference(self) -> bool:
        """GRPO has a KL term, hence a frozen reference planner (checkpointed with the state)."""
        return self.grpo_learner.config.grpo.beta > 0

    def rods_signal(self, t: trajectory.Trajectory, breakdown: RewardBreakdown) -> float:
        """The value RODS tracks for one rollout (the embedded domains record every gold value)."""
        return tracking_reward(t, True, self.settings.rods.signal, breakdown.total)

    def task(self, task_id: str) -> Any:
        return self.tasks_by_id[task_id]


def _context(config: ml_collections.ConfigDict, settings: RunSettings, workdir: Path, sandbox: Sandbox,
             show_progress: bool) -> _RunContext:
    """The domain, the tokenizer (trained on the gold demonstrations, or reused), the planner and
    its three learners."""
    domain = stage0.demonstrated(settings, workdir, sandbox, domains.build_domain(settings, sandbox),
                                 show_progress=show_progress)
    rods_seeds(domain, settings.rods)  # refused before any training, not when the rounds start
    cards = all_cards(domain.library, settings.retrieval.card_style)  # rendered only if a BPE is trained
    texts = (trajectory.segments_text(trajectory.demonstration_segments(t, cards)) for t in domain.demonstrations)
    if settings.retrieval.cards != "question":  # the BPE also sees the search steps the demonstrations write
        typed = settings.retrieval.search_typed
        texts = itertools.chain(texts, ["\n".join(search_step(domain.library.tool(n), typed) for n in domain.library.names())])
    tokenizer = builders.tokenizer_for(workdir, texts, settings.model.vocab_size, settings.model.hf_checkpoint)
    mesh = builders.mesh_of(settings)
    model = builders.build_planner(settings, tokenizer.vocab_size, mesh)
    start_library = direct_answer.library(sandbox) if settings.coevolve.direct_answer else domain.library
    return _RunContext(
        config=config, settings=settings, workdir=workdir, sandbox=sandbox, domain=domain, tokenizer=tokenizer,
        sft_learner=builders.sft_learner(model, settings, mesh), grpo_learner=builders.grpo_learner(model, settings, mesh),
        refresh_learner=builders.refresh_learner(model, settings, mesh),
        tasks_by_id={str(t.id): t for t in (*domain.train, *domain.val, *domain.test, *domain.dev)},
        start_library=start_library, primitive_names=frozenset(start_library.names()),
        show_progress=show_progress)


def rods_seeds(domain: domains.Domain, rods: RodsSettings) -> tuple[Any, ...]:
    """GRPO's seed tasks: ``rods.n_seeds`` tasks of the ``rods.seed_pool`` (the training tasks, or those
    with answers only) from index ``rods.seed_start`` on; a ConfigError when the pool ends before it."""
    pool = domain.train if rods.seed_pool == "train" else domain.answer_only
    if rods.seed_start >= len(pool):
        what = ("training tasks" if rods.seed_pool == "train"
                else "answer-only training tasks (rods.seed_pool='answer_only')")
        raise ConfigError(f"config.rods.seed_start={rods.seed_start} is past the domain's {len(pool)} {what}")
    return tuple(pool[rods.seed_start:rods.seed_start + rods.n_seeds])


def _task_source(ctx: _RunContext, library: LibrarySnapshot) -> TaskSource:
    """GRPO's tasks: the RODS curriculum over :func:`rods_seeds`, its state under this process's
    ``rods/`` (a static draw from them with ``rods.curriculum`` unset)."""
    rods = ctx.settings.rods
    seeds = rods_seeds(ctx.domain, rods)
    return TaskSource.open(seeds, rods.curriculum, hosts.host_dir(ctx.workdir),
                           run_seed=ctx.rounds_seed, library=library, sandbox=ctx.sandbox, background=rods.background,
                           selection=rods.selection, tasks_per_iteration=ctx.settings.grpo.tasks_per_iteration)


# ------------------------------------------------------------------------------------------------
# Prompts, evaluations, demonstrations
# ------------------------------------------------------------------------------------------------


def _cards(ctx: _RunContext, snapshot: LibrarySnapshot, programs: Any) -> PromptCards:
    """The prompts' candidate sets over ``snapshot`` with the usage evidence of the stored
    ``programs`` (memoised per pair: a library and its refactored demonstrations go together)."""
    programs = tuple(tuple(p) for p in programs)
    key = (id(snapshot), hash(programs))
    hit = ctx.cards_cache.get(key)
    if hit is None or hit[0] is not snapshot:
        questions = {i: ctx.task(i).question for i, _ in programs}
        hit = (snapshot, builders.prompt_cards(snapshot, ctx.settings.retrieval, programs, questions))
        while len(ctx.cards_cache) >= 2:  # a round needs at most the incumbent's and the candidate's
            ctx.cards_cache.pop(next(iter(ctx.cards_cache)))
        ctx.cards_cache[key] = hit
    return hit[1]


def _evaluate(ctx: _RunContext, state: TrainState, snapshot: LibrarySnapshot, tasks: Sequence[Any],
              cards: PromptCards) -> loop.Evaluation:
    """Greedy rollouts of the GRPO learner's planner with ``state``'s params."""
    return loop.evaluate(ctx.grpo_learner.model(state), ctx.tokenizer, tasks, snapshot, ctx.sandbox,
                         ctx.settings.rollout, cards=cards, reward_config=ctx.settings.reward, seed=ctx.seed,
                         scan_layers=ctx.settings.model.scan_layers)


def _trace(ctx: _RunContext, played: trajectory.Trajectory, library: LibrarySnapshot) -> Trace:
    task = ctx.task(played.task_id)
    return trace_from_trajectory(played, library, task.inputs, getattr(task, "environment", None))


def _demo_trajectories(ctx: _RunContext, programs: Sequence[tuple[str, str]], snapshot: LibrarySnapshot,
                       cards: PromptCards, *, remember: bool = False) -> list[trajectory.Trajectory]:
    """Stored (task id, program) pairs played in the sandbox over ``snapshot`` under the prompts
    ``cards`` give; the correct ones. ``remember``: ``snapshot`` is the incumbent library and
    ``programs`` stored demonstrations; their plays go to ``ctx.demo_traces``. Under a search
    setting each program is played with its search steps (:meth:`PromptCards.demonstration`)."""
    if not programs:
        return []
    tasks = [ctx.task(i) for i, _ in programs]
    played = play_programs(tasks, [cards.demonstration(t, p) for t, (_, p) in zip(tasks, programs)], snapshot,
                           ctx.sandbox, cards=cards)
    if remember:
        for pair, t in zip(programs, played):
            ctx.demo_traces[tuple(pair)] = t if t.correct else None
    return [t for t in played if t.correct]


def stored_traces(ctx: _RunContext, programs: Sequence[tuple[str, str]], library: LibrarySnapshot,
                  cards: PromptCards) -> list[Trace]:
    """The traces of the stored demonstrations ``programs`` over the incumbent ``library`` that
    replay correctly, in order. Only those ``ctx.demo_traces`` lacks are played in the sandbox: in
    one process, none after stage 2 (an accepted round's refactored traces are what their programs
    replay to: the composites were validated on these very uses)."""
    pairs = [tuple(p) for p in programs]
    missing = [p for p in pairs if p not in ctx.demo_traces]
    if missing:
        _demo_trajectories(ctx, missing, library, cards, remember=True)
    traces = []
    for p in pairs:
        known = ctx.demo_traces[p]
        if isinstance(known, trajectory.Trajectory):
            known = ctx.demo_traces[p] = _trace(ctx, known, library)
        if known is not None:
            traces.append(known)
    return traces


def _sft_demos(ctx: _RunContext, programs: Sequence[tuple[str, str]], snapshot: LibrarySnapshot,
               usage_programs: Any = None, *, remember: bool = False) -> list[trajectory.TokenizedEpisode]:
    """SFT records of ``programs`` over ``snapshot``; the prompts' usage evidence is
    ``usage_programs`` (default: ``programs``), the library's whole stored demonstration set.
    ``remember``: as :func:`_demo_trajectories`."""
    cards = _cards(ctx, snapshot, programs if usage_programs is None else usage_programs)
    played = _demo_trajectories(ctx, programs, snapshot, cards, remember=remember)
    return loop.demonstration_records([t.segments() for t in played], ctx.tokenizer, ctx.settings.rollout)


def _abstractor(ctx: _RunContext, excluded: frozenset) -> Any:
    """The proposers of this run (``coevolve.proposers``). The symbolic one mines dataflow motifs,
    or runs of stateful calls when the tasks act on an environment (their calls share state, not
    values; see coevolve/sequences.py); the teacher LM (built once per run, :func:`_teacher`) is
    asked for composites; ``both`` asks the miner first, then the teacher."""
    co = ctx.settings.coevolve
    if ctx.domain.barrier_tools is not None:
        symbolic = SequenceAbstractor(co.abstractor, excluded, frozenset(ctx.domain.barrier_tools))
    else:
        symbolic = SymbolicAbstractor(co.abstractor, excluded)
    if co.proposers == "symbolic":
        return symbolic
    parts = (_teacher(ctx),) if co.proposers == "teacher" else (symbolic, _teacher(ctx))
    return CombinedAbstractor(parts, excluded)


def _teacher(ctx: _RunContext) -> TeacherAbstractor:
    """The run's teacher abstractor (its error counts add up over the run)."""
    if ctx.teacher is None:
        t = ctx.settings.coevolve.teacher
        ctx.teacher = TeacherAbstractor.from_endpoint(
            t.endpoint(), TeacherConfig(max_programs=t.max_programs, max_candidates=t.max_candidates,
                                        abstractor=ctx.settings.coevolve.abstractor))
    return ctx.teacher


# ------------------------------------------------------------------------------------------------
# Round records
# ------------------------------------------------------------------------------------------------


#: What a refused round's record carries over from the kept pair's (its numbers, not the refused proposal's).
_KEPT_PAIR_KEYS = ("val_accuracy", "val_reward", "tool_calls_per_solved", "composite_share", "composite_uses",
                   "val_per_category")


@contextlib.contextmanager
def _timed(stage_s: dict[str, float], stage: str) -> Iterator[None]:
    """Adds the block's wall seconds to ``stage_s[stage]``: the round records' ``stage_s`` say
    where a round's time went (what the loop's throughput work is measured by)."""
    t0 = time.perf_counter()
    try:
        yield
    finally:
        stage_s[stage] = stage_s.get(stage, 0.0) + time.perf_counter() - t0


def _library_fields(snapshot: LibrarySnapshot) -> dict[str, int]:
    """The round record's library fields, from the report module's summary."""
    lib = library_summary(snapshot)
    return {"library_size": lib["size"], "primitives": lib["primitives"], "composites": lib["composites"],
            "max_depth": lib["max_depth"]}


def _round_record(ctx: _RunContext, r: int, outcome: Outcome, reason: str, snapshot: LibrarySnapshot,
                  ev: loop.Evaluation, train_acc: float | None, inserted: Sequence[str], wall_s: float,
                  previous: RoundRecord | None = None, previous_library: LibrarySnapshot | None = None
                  ) -> RoundRecord:
    """``previous``/``previous_library``: the last record and its library; the retrieval cost is
    measured again only when the library changed (an index build per round otherwise)."""
    if previous is not None and previous_library is snapshot:
        tokens = previous.retrieval_tokens_per_query
    else:
        questions = [t.question for t in ctx.domain.val[:ctx.settings.report.retrieval_queries]]
        tokens = retrieval_tokens_per_query(snapshot, questions, k=ctx.settings.report.retrieval_k) \
            if questions else None
    return RoundRecord(round=r, outcome=outcome, reason=reason, **_library_fields(snapshot),
                       val_accuracy=ev.accuracy, val_reward=ev.reward_mean, train_accuracy=train_acc,
                       tool_calls_per_solved=ev.calls_per_solved, composite_share=ev.composite_share,
                       retrieval_tokens_per_query=tokens, inserted=tuple(inserted),
                       composite_uses=dict(sorted(ev.composite_uses.items())),
                       val_per_category=domains.per_category(ctx.domain, ctx.domain.val, ev), wall_s=wall_s)


def _dev_fields(ctx: _RunContext, state: TrainState, library: LibrarySnapshot, programs: Any) -> dict[str, Any]:
    """The kept (planner, library) on the dev split: progress measured on tasks no decision reads
    (acceptance chooses on validation, so validation accuracy flatters the kept pair)."""
    ev = _evaluate(ctx, state, library, ctx.domain.dev, _cards(ctx, library, programs))
    return {"dev_accuracy": ev.accuracy, "dev_per_category": domains.per_category(ctx.domain, ctx.domain.dev, ev)}


def _round_scalars(record: RoundRecord, rods_metrics: dict | None) -> dict[str, float]:
    """What the metrics file logs at the end of a round."""
    scalars = {"val/accuracy": record.val_accuracy, "library/size": record.library_size,
               "library/max_depth": record.max_depth, "val/composite_share": record.composite_share,
               "round/accepted": float(record.outcome.keeps_new_planner)}
    if record.tool_calls_per_solved is not None:
        scalars["val/calls_per_solved"] = record.tool_calls_per_solved
    if record.dev_accuracy is not None:
        scalars["dev/accuracy"] = record.dev_accuracy
    if rods_metrics is not None:
        scalars.update(rods_scalars(rods_metrics))
    return scalars


def _save(ctx: _RunContext, progress: RunProgress, library: LibrarySnapshot, state: TrainState, ref: Any) -> None:
    """The checkpoint of ``progress.global_step`` and the round's library JSON."""
    payloads = {"progress": progress.to_json(), "library": library}
    if ctx.settings.rods.enabled:
        payloads["rods_files"] = read_tree(hosts.host_dir(ctx.workdir) / "rods")
    rundir.save_checkpoint(ctx.workdir, progress.global_step, state, payloads, ctx.config, ref,
                           keep=ctx.settings.checkpoint.keep)
    failpoints.hit("library/json")
    _write_library_json(ctx.workdir, progress.round, library)


def _write_library_json(workdir: Path, r: int, library: LibrarySnapshot) -> None:
    """``library/round_{r:03d}.json``, atomically (a resume rewrites its checkpoint's own: a kill
    between the checkpoint and this file must not leave it missing or torn). The primary process only."""
    if not hosts.is_primary():
        return
    (workdir / "library").mkdir(exist_ok=True)
    write_text_atomic(workdir / "library" / f"round_{r:03d}.json", library.to_json())


# ------------------------------------------------------------------------------------------------
# The run
# ------------------------------------------------------------------------------------------------


def run(config: ml_collections.ConfigDict, workdir: str | Path, *, progress: bool = True,
        stop_after_round: int | None = None, allow_config_change: bool = False) -> dict[str, Any]:
    """Runs or resumes the co-evolution job; returns ``report.json``'s content (also written, with
    the plots, the DAG drawing and a library JSON per round, under ``workdir``). Resuming with a
    config other than the checkpoint's is a ConfigError unless ``allow_config_change``.
    ``progress``: show progress bars; ``stop_after_round``: return after that round's checkpoint."""
    settings = _settings(config)
    workdir = rundir.run_path(workdir)  # a local path or a bucket URL (docs/resume.md)
    workdir.mkdir(parents=True, exist_ok=True)
    builders.maybe_initialize_distributed(settings)
    if settings.distributed is not None and settings.distributed.initialize:
        import jax

        logs.route_process_logs(workdir, jax.process_index())  # process i > 0: logs/process_<i>.log
    t_process = time.perf_counter()
    with domains.sandbox_for(settings) as sandbox:
        ctx = _context(config, settings, workdir, sandbox, progress)
        latest = rundir.latest_checkpoint(workdir)
        writer = hosts.metrics_writer(workdir, resume_step=rundir.claim_workdir(workdir, config, latest,
                                                                                allow_config_change))
        if latest is None:
            run_progress, library, state, ref = _stages_1_and_2(ctx, writer)
            _save(ctx, run_progress, library, state, ref)
        else:
            run_progress, library, state, ref = _resume(ctx, latest)
            run_progress = _round0_under_this_reward(ctx, run_progress, library, state, latest.config)
        tasks = _task_source(ctx, library)
        try:
            run_progress, library, state = _rounds(ctx, run_progress, library, state, ref, writer, tasks,
                                                   stop_after_round)
        finally:
            tasks.close()
            writer.close()
        if stop_after_round is not None and run_progress.round < settings.coevolve.rounds:
            return {"stopped_after_round": run_progress.round}
        return _finish(ctx, run_progress, state, library, t_process)


def _resume(ctx: _RunContext, latest: Any) -> tuple[RunProgress, LibrarySnapshot, TrainState, Any]:
    """The newest checkpoint's progress, library, train state and reference; its RODS files back
    in place."""
    run_progress = RunProgress.from_json(latest.payloads["progress"])
    library = latest.payloads["library"]
    _write_library_json(ctx.workdir, run_progress.round, library)
    state, ref = rundir.restore_state(ctx.workdir, ctx.grpo_learner, latest.step, ctx.with_reference)
    if "rods_files" in latest.payloads and ctx.settings.rods.enabled:
        write_tree(hosts.host_dir(ctx.workdir) / "rods", latest.payloads["rods_files"])
    return run_progress, library, state, ref


def _round0_under_this_reward(ctx: _RunContext, run_progress: RunProgress, library: LibrarySnapshot,
                              state: TrainState, saved_config: Any) -> RunProgress:
    """``run_progress`` with round 0's validation reward measured under this run's reward, when the
    run resumes right after stage 2 from a checkpoint saved under another reward (a study's shared
    prefix: docs/study.md). Stages 1-2 never read the reward; round 0's record only reports it. The
    same greedy validation rollouts are played again (``stage_s["restate_reward"]`` says for how
    long); their accuracy must be the record's, else the checkpoint was not this run's stages 1-2
    and resuming it is a ConfigError. Anything else is returned unchanged."""
    saved = saved_config or {}
    if run_progress.round != 0 or "reward" not in saved:
        return run_progress
    try:
        if builders.reward_config(saved) == ctx.settings.reward:
            return run_progress
    except ConfigError:  # a section this version no longer parses: measured again, to be sure
        pass
    record = run_progress.records[0]
    t0 = time.perf_counter()
    ev = _evaluate(ctx, state, library, ctx.domain.val, _cards(ctx, library, run_progress.demo_programs))
    if ev.accuracy != record.val_accuracy:
        raise ConfigError(
            f"{ctx.workdir}: round 0 was saved with validation accuracy {record.val_accuracy!r}, but its "
            f"planner and library give {ev.accuracy!r} here: the checkpoint is not this run's stages 1-2")
    stage_s = {**(record.stage_s or {}), "restate_reward": time.perf_counter() - t0}
    restated = record.replace(val_reward=ev.reward_mean, stage_s=stage_s)
    return dataclasses.replace(run_progress, records=(restated, *run_progress.records[1:]))


# ------------------------------------------------------------------------------------------------
# Stages 1 and 2
# ------------------------------------------------------------------------------------------------


def _warm_start(ctx: _RunContext) -> tuple[LibrarySnapshot, ProgramPairs, list[dict[str, Any]]]:
    """Stage 1: the warm library folded from the gold demonstrations (the primitives when frozen),
    the demonstrations' programs refactored to call it, and the abstraction rounds' log."""
    train = ctx.domain.demonstrations[:ctx.settings.sft.n_demos]
    if ctx.settings.coevolve.direct_answer:  # the direct baseline: state the gold answer, no tools
        return ctx.start_library, tuple((str(t.id), direct_answer.program(t)) for t in train), []
    traces = [gold_trace(t) for t in train]
    if ctx.frozen_library:
        return ctx.start_library, tuple((tr.task_id, tr.program()) for tr in traces), []
    warm = warm_library(traces, ctx.start_library, ctx.sandbox, rounds=ctx.settings.warm.rounds,
                        config=ctx.settings.coevolve.abstractor,
                        make_abstractor=lambda excluded: _abstractor(ctx, excluded))
    programs = tuple((tr.task_id, tr.program()) for tr in warm.traces)
    return warm.snapshot, programs, [o.to_record() for o in warm.rounds]


def _sft(ctx: _RunContext, demos: list[trajectory.TokenizedEpisode], writer: MetricsWriter) -> TrainState:
    """Stage 2: ``config.sft.steps`` SFT steps on the demonstrations, each logged."""
    steps = ctx.settings.sft.steps
    bar = _bar(steps, 0, "stage 2: SFT", ctx.show_progress)

    def on_step(step, metrics):
        writer.write(step, {f"sft/{k}": v for k, v in metrics.items()})
        bar.update(1)
        bar.set_postfix(loss=f"{metrics['loss']:.3f}")
        failpoints.hit("sft/step")

    state = loop.sft_phase(ctx.sft_learner, ctx.sft_learner.init_state(), demos, steps=steps,
                           batch_size=ctx.settings.sft.batch_size, seed=ctx.seed, rc=ctx.settings.rollout,
                           pad_id=ctx.tokenizer.pad_id, pack_length=ctx.settings.sft.pack_length, on_step=on_step)
    bar.close()
    return state


def _stages_1_and_2(ctx: _RunContext, writer: MetricsWriter
                    ) -> tuple[RunProgress, LibrarySnapshot, TrainState, Any]:
    """Warm library (unless frozen), refactored demonstrations, SFT, the initial evaluation: round
    0's progress, the library, the GRPO learner's state and the KL reference (``None`` without)."""
    t0 = time.perf_counter()
    stage_s: dict[str, float] = {}
    with _timed(stage_s, "warm_library"):
        library, programs, warm_log = _warm_start(ctx)
    with _timed(stage_s, "play_demos"):
        demos = _sft_demos(ctx, programs, library, remember=ctx.library_grows)
    warm = {"rounds": warm_log, "seconds": time.perf_counter() - t0, "demos": len(demos)}
    with _timed(stage_s, "sft"):
        state = _sft(ctx, demos, writer)
    with _timed(stage_s, "evaluate"):
        ev = loop.evaluate(ctx.sft_learner.model(state), ctx.tokenizer, ctx.domain.val, library, ctx.sandbox,
                           ctx.settings.rollout, cards=_cards(ctx, library, programs),
                           reward_config=ctx.settings.reward, seed=ctx.seed,
                           scan_layers=ctx.settings.model.scan_layers)
    grpo_state = ctx.grpo_learner.state_from_params(state.params)
    ref = rundir.frozen_copy(grpo_state.params) if ctx.with_reference else None
    steps = ctx.settings.sft.steps
    writer.write(steps, {"val/accuracy": ev.accuracy})
    record = _round_record(ctx, 0, Outcome.INITIAL, "the SFT planner with the warm library", library, ev, None,
                           sorted(set(library.names()) - ctx.primitive_names), time.perf_counter() - t0)
    if ctx.domain.dev:
        with _timed(stage_s, "dev"):
            record = record.replace(**_dev_fields(ctx, grpo_state, library, programs))
    record = record.replace(stage_s=stage_s)
    incumbent = acceptance.initial("round-0", library, ev.accuracy, ev.used_tools)
    run_progress = RunProgress(round=0, global_step=steps, sft_accuracy=ev.accuracy,
                               incumbent=IncumbentRecord.of(incumbent), records=(record,), demo_programs=programs,
                               warm=warm)
    return run_progress, library, grpo_state, ref


# ------------------------------------------------------------------------------------------------
# Stage 3: a round's steps
# ------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class GrpoRound:
    """K GRPO iterations: the new state, the global step after them, each iteration's accuracy and
    the successes to mine (the first correct rollout of each (task, program) whose reward reaches
    ``coevolve.rho``, in order)."""

    state: TrainState
    step: int
    accuracies: tuple[float, ...]
    successes: tuple[trajectory.Trajectory, ...]
    #: per iteration, the scalars the round's ``mechanism`` summary reads; the tasks drawn per region
    diagnostics: tuple[dict[str, float], ...] = ()
    draws: tuple[tuple[str, int], ...] = ()

    def then(self, later: GrpoRound) -> GrpoRound:
        """This phase followed by ``later`` (the round's probation iterations)."""
        draws = dict(self.draws)
        for region, n in later.draws:
            draws[region] = draws.get(region, 0) + n
        return GrpoRound(later.state, later.step, self.accuracies + later.accuracies, self.successes,
                         self.diagnostics + later.diagnostics, tuple(sorted(draws.items())))


@dataclasses.dataclass(frozen=True)
class Mined:
    """A round's abstraction: the candidate library (the round's own when nothing was inserted),
    the inserted tools and their candidates, the refused patterns so far (JSON) and the log."""

    library: LibrarySnapshot
    inserted: tuple[str, ...] = ()
    accepted: tuple[Candidate, ...] = ()
    excluded: tuple[Any, ...] = ()
    log: dict[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class Refactored:
    """The stored demonstrations rewritten to call the inserted composites (and their traces, aligned;
    empty when nothing was inserted), and the state (and global step) after the SFT refresh on them."""

    programs: ProgramPairs
    state: TrainState
    step: int
    traces: tuple[Trace, ...] = ()
    new: ProgramPairs = ()  # the round's first demonstrations of answer-only tasks, over the incumbent library


@dataclasses.dataclass(frozen=True)
class Verdict:
    """The acceptance decision, the incumbent after it, the evaluation the round record reports
    (the accepted pair's, or (rejected) the refused proposal's), the planner state to go on
    with (``None`` when refused: the incumbent's, restored from the last checkpoint) and the
    proposed pair's validation accuracy and its calls of each composite there."""

    outcome: Outcome
    decision: acceptance.Decision
    incumbent: acceptance.Incumbent
    evaluation: loop.Evaluation
    state: TrainState | None = None
    pair_accuracy: float | None = None
    pair_composite_uses: dict[str, int] = dataclasses.field(default_factory=dict)


_DIAGNOSTIC_KEYS = ("uniform_group_share", "grpo/entropy", "grpo/update_norm")


def grpo_phase(ctx: _RunContext, r: int, step: int, library: LibrarySnapshot, cards: PromptCards,
               state: TrainState, ref: Any, tasks: TaskSource, writer: MetricsWriter,
               iterations: range | None = None) -> GrpoRound:
    """Round ``r``'s GRPO iterations ``iterations`` (default: all ``grpo.iterations_per_round``)
    from global step ``step``; iteration ``k`` of round ``r`` draws and samples with the global
    iteration number ``(r - 1) * per_round + k`` whichever phase runs it."""
    g = ctx.settings.grpo
    per_round = g.iterations_per_round
    successes: dict[tuple[str, str], trajectory.Trajectory] = {}
    accuracies, diagnostics, draws = [], [], {}
    for k in (range(per_round) if iterations is None else iterations):
        it = (r - 1) * per_round + k
        seen: set[str] = set()

        def draw(attempt: int, it: int = it) -> list[Any]:  # the iteration's draw, or a refill's new tasks
            batch, regions = tasks.sample(it, attempt)
            batch = [t for t in batch if str(t.id) not in seen]
            for t in batch:
                seen.add(str(t.id))
                ctx.tasks_by_id.setdefault(str(t.id), t)
            for region, n in (regions if attempt == 0 else tasks.regions_count(batch)).items():
                draws[region] = draws.get(region, 0) + n
            return batch

        state, metrics, iteration = loop.grpo_iteration(
            ctx.grpo_learner, state, ctx.tokenizer, draw(0), library, ctx.sandbox,
            group_size=g.group_size, rc=ctx.settings.rollout, cards=cards,
            key=loop.iteration_key(ctx.rounds_seed, it), reward_config=ctx.settings.reward, ref_params=ref,
            mask_uniform_groups=g.mask_uniform_groups, ppo_epochs=g.ppo_epochs, refill=draw,
            min_informative_groups=g.min_informative_groups, max_refills=g.max_refills,
            rollouts=_grpo_rollouts(ctx, r, library, cards))
        step += 1
        writer.write(step, {**metrics, "round": r})
        failpoints.hit("grpo/iteration")
        accuracies.append(metrics["accuracy"])
        diagnostics.append({k: float(metrics[k]) for k in _DIAGNOSTIC_KEYS if k in metrics})
        tasks.observe(dict(iteration.group_rewards(ctx.rods_signal)))
        for t, b in zip(iteration.trajectories, iteration.breakdowns):
            if t.correct and b.total >= ctx.settings.coevolve.rho:
                successes.setdefault((t.task_id, t.program), t)
    return GrpoRound(state, step, tuple(accuracies), tuple(successes.values()), tuple(diagnostics),
                     tuple(sorted(draws.items())))


@dataclasses.dataclass(frozen=True)
class Explored:
    """A round's best-of-N search: the answer-only training tasks it sampled, its rollouts, and the first
    correct rollout (reward >= ``coevolve.rho``) of each task it solved."""

    tasks: int = 0
    rollouts: int = 0
    successes: tuple[trajectory.Trajectory, ...] = ()
    #: the tasks solved at least once but not in every sample (GRPO's groups on them would carry signal)
    found: tuple[Any, ...] = ()
    admitted: int = 0  # how many of ``found`` joined RODS's pool (``rods.admit_explored``)

    def summary(self) -> dict[str, int]:
        return {"tasks": self.tasks, "rollouts": self.rollouts, "solved": len(self.successes),
                "found": len(self.found), "admitted": self.admitted}


#: ``fold_in`` stream of the search's sampling keys (GRPO's iteration keys use 0, 1, 2, ... of the same seed)
_EXPLORE_STREAM = 1 << 30


def explore(ctx: _RunContext, r: int, library: LibrarySnapshot, cards: PromptCards, state: TrainState,
            demo_programs: ProgramPairs) -> Explored:
    """Round ``r``'s best-of-N search (``coevolve.explore_tasks`` > 0): ``explore_samples`` rollouts of
    ``state``'s planner (GRPO's sampler settings) on each of ``explore_tasks`` answer-only training tasks
    with no stored demonstration, drawn from the round's seed. Why: on such a task the converged planner
    succeeds in ~2% of samples, so a GRPO group of 8 almost never holds a success to reinforce, while a
    single success kept as a demonstration is what the refresh learns a new structure from."""
    co = ctx.settings.coevolve
    known = {task for task, _ in demo_programs}
    pool = [t for t in ctx.domain.train if str(t.id) not in known]
    if co.explore_tasks <= 0 or not pool:
        return Explored()
    rng = np.random.default_rng([ctx.rounds_seed, 29, r])
    chosen = [pool[i] for i in sorted(rng.choice(len(pool), min(co.explore_tasks, len(pool)), replace=False))]
    for t in chosen:
        ctx.tasks_by_id.setdefault(str(t.id), t)
    rows = [t for t in chosen for _ in range(co.explore_samples)]
    key = jax.random.fold_in(jax.random.fold_in(jax.random.key(ctx.rounds_seed), _EXPLORE_STREAM), r)
    trajs, _, breakdowns = loop.play_rows(ctx.grpo_learner, state, ctx.tokenizer, rows, library, ctx.sandbox,
                                          rc=ctx.settings.rollout, cards=cards, key=key,
                                          reward_config=ctx.settings.reward,
                                          rollouts=_shared_rollouts(ctx, library, cards, co.explore_samples))
    first: dict[str, trajectory.Trajectory] = {}
    correct = collections.Counter(t.task_id for t in trajs if t.correct)
    for t, b in zip(trajs, breakdowns):
        if t.correct and b.total >= co.rho:
            first.setdefault(t.task_id, t)
    found = tuple(t for t in chosen if 0 < correct[str(t.id)] < co.explore_samples)
    return Explored(len(chosen), len(rows), tuple(first.values()), found)


def _grpo_rollouts(ctx: _RunContext, r: int, library: LibrarySnapshot, cards: PromptCards) -> loop.Rollouts | None:
    """A GRPO iteration's players (:func:`_shared_rollouts`), its share counted in ``ctx.shares_by_round[r]``."""
    def count(stats: shares.ShareStats) -> None:
        done = ctx.shares_by_round.setdefault(r, {"rows": 0, "sandbox_programs": 0, "iteration_programs": 0})
        done["rows"] += stats.rows
        done["sandbox_programs"] += stats.sandbox_programs
        done["iteration_programs"] += stats.iteration_programs

    return _shared_rollouts(ctx, library, cards, ctx.settings.grpo.group_size, on_share=count)


def _shared_rollouts(ctx: _RunContext, library: LibrarySnapshot, cards: PromptCards, group_size: int,
                     on_share: Any = None) -> loop.Rollouts | None:
    """On a ``jax.distributed`` run, rows of groups of ``group_size`` played in shares (each process its
    groups, then exchanged: :mod:`cocoda_jax.runs.shares`); ``None`` (this process plays every row) otherwise."""
    if not ctx.distributed:
        return None
    return shares.share_rollouts(ctx.grpo_learner, ctx.tokenizer, library, ctx.sandbox, rc=ctx.settings.rollout,
                                 cards=cards, reward_config=ctx.settings.reward, group_size=group_size,
                                 on_share=on_share)


def _check_round_agreement(ctx: _RunContext, r: int, run_progress: RunProgress, library: LibrarySnapshot) -> None:
    """On a ``jax.distributed`` run: every process's digest of round ``r``'s decisions (the progress
    record, the library kept, this process's RODS files; durations left out) must be process 0's,
    else :class:`~cocoda_jax.runs.shares.DivergedProcessesError` before the round's end-of-round
    metrics line, checkpoint and library JSON are written. The digest is kept for the report."""
    if not ctx.distributed:
        return
    rods = read_tree(hosts.host_dir(ctx.workdir) / "rods") if ctx.settings.rods.enabled else {}
    ctx.round_digests[r] = shares.check_agreement(
        f"round {r}", {"progress": run_progress.to_json(), "library": library.to_json(), "rods_files": rods})


def mine_and_validate(ctx: _RunContext, r: int, library: LibrarySnapshot, excluded: tuple[Any, ...],
                      successes: Sequence[trajectory.Trajectory]) -> Mined:
    """Round ``r``'s abstraction over the successes: propose (never a pattern of ``excluded``),
    validate, INSERTTOOL. Nothing when the library is frozen or nothing succeeded."""
    if ctx.frozen_library or not ctx.settings.coevolve.mine_in_rounds or not successes:
        return Mined(library, excluded=excluded)
    abstractor = _abstractor(ctx, frozenset(pattern_from_json(p) for p in excluded))
    outcome = abstraction_round([_trace(ctx, t, library) for t in successes], library, ctx.sandbox, abstractor,
                                ValidationConfig(), r)
    rejected = {rej.name for rej in outcome.result.rejections}
    inserted = tuple(t.name for t in outcome.result.accepted)
    return Mined(library=outcome.result.snapshot, inserted=inserted,
                 accepted=tuple(c for c in outcome.candidates if c.name in set(inserted)),
                 excluded=(*excluded, *(pattern_to_json(c.pattern) for c in outcome.candidates if c.name in rejected)),
                 log=_mining_log(ctx, outcome))


def _mining_log(ctx: _RunContext, outcome: Any) -> dict[str, Any]:
    """The round's abstraction record, plus the teacher's error counts so far when it is asked."""
    log = outcome.to_record()
    if ctx.teacher is not None:
        log["teacher_errors"] = dict(sorted(ctx.teacher.error_counts.items()))
    return log


def refactor_and_refresh(ctx: _RunContext, r: int, library: LibrarySnapshot, cards: PromptCards,
                         demo_programs: ProgramPairs, mined: Mined, trained: GrpoRound) -> Refactored:
    """The stored demonstrations, joined by the round's own successes on tasks that had none
    (``coevolve.keep_successes``: an answer-only task the planner solved is demonstrated from now on,
    as in expert iteration) and refactored with the inserted composites; then a short SFT refresh over
    the candidate library on up to ``coevolve.refresh_demos`` of them (:func:`refresh_selection`).
    Nothing happens when nothing was inserted and nothing new was solved."""
    co = ctx.settings.coevolve
    stored = tuple(tuple(p) for p in demo_programs)
    new = _new_demonstrations(stored, trained.successes) if co.keep_successes else ()
    if not mined.accepted and not new:
        return Refactored(stored, trained.state, trained.step)
    if mined.accepted:
        folded = tuple(fold_all(tr, mined.accepted) for tr in stored_traces(ctx, stored + new, library, cards))
        programs = [(tr.task_id, tr.program()) for tr in folded]
        refactored = Refactored(tuple(programs), trained.state, trained.step, folded, new=new)
    else:
        programs = list(stored + new)
        refactored = Refactored(tuple(programs), trained.state, trained.step, new=new)
    refresh = co.refresh_sft_steps
    if refresh <= 0:
        return refactored
    rng = np.random.default_rng([ctx.rounds_seed, 13, r])
    chosen = refresh_selection(programs, {task for task, _ in new} | learned_from_reward(ctx.domain, stored),
                               [c.name for c in mined.accepted], co.refresh_demos, rng, repeats=co.refresh_repeats)
    demos = _sft_demos(ctx, [programs[i] for i in chosen], mined.library, usage_programs=programs)
    if not demos:
        return refactored
    sft_state = loop.sft_phase(ctx.refresh_learner, ctx.refresh_learner.state_from_params(trained.state.params),
                               demos, steps=refresh, batch_size=ctx.settings.sft.batch_size, seed=ctx.rounds_seed * 1000 + r,
                               rc=ctx.settings.rollout, pad_id=ctx.tokenizer.pad_id,
                               pack_length=ctx.settings.sft.pack_length,
                               on_step=lambda *_: failpoints.hit("refresh/step"))
    return dataclasses.replace(refactored, state=ctx.grpo_learner.state_from_params(sft_state.params),
                               step=trained.step + refresh)


def learned_from_reward(domain: Any, programs: ProgramPairs) -> set[str]:
    """The tasks of ``programs`` the domain gave no program for: their demonstrations are the
    planner's own successes, kept by earlier rounds (none when every training task is demonstrated)."""
    given = getattr(domain, "demonstrated", None)
    return set() if given is None else {task for task, _ in programs if task not in given}


def refresh_selection(programs: Sequence[tuple[str, str]], fresh: set[str], inserted: Sequence[str], budget: int,
                      rng: np.random.Generator, *, repeats: int = 1) -> list[int]:
    """Which demonstrations (indices into ``programs``, an index at most ``repeats`` times) a round's
    refresh trains on, at most ``budget``: those that teach something new (a task in ``fresh``: solved
    from reward; a program calling an ``inserted`` composite), each up to ``repeats`` times, at most half
    the budget while others remain, and a uniform sample of the rest. A
    uniform sample of ~1,500 holds few calls of a new composite; a refresh of nothing else teaches the
    planner to call it everywhere (measured with a 30-step refresh at 1e-3 whose batch was every such
    demonstration: the pair's validation fell from 0.56 to 0.18; docs/experiments.md section O)."""
    calls = tuple(f"{name}(" for name in inserted)
    teaches = [task in fresh or any(c in program for c in calls) for task, program in programs]
    new_ones = [i for i, t in enumerate(teaches) if t] * repeats
    rest = [i for i, t in enumerate(teaches) if not t]
    room = budget - min(len(rest), budget // 2)
    first = [new_ones[i] for i in rng.choice(len(new_ones), min(room, len(new_ones)), replace=False)]
    others = [rest[i] for i in rng.choice(len(rest), min(len(rest), budget - len(first)), replace=False)]
    return sorted(first + others)


def _new_demonstrations(stored: ProgramPairs, successes: Sequence[trajectory.Trajectory]) -> ProgramPairs:
    """The first successful program of each task that has no stored demonstration, in order."""
    known = {task for task, _ in stored}
    out: dict[str, str] = {}
    for t in successes:
        if t.task_id not in known:
            out.setdefault(t.task_id, t.program)
    return tuple(out.items())


def _probation(ctx: _RunContext, r: int, library: LibrarySnapshot, cards: PromptCards, mined: Mined,
               refactored: Refactored, trained: GrpoRound, ref: Any, tasks: TaskSource, writer: MetricsWriter,
               iterations: range) -> tuple[GrpoRound, Refactored]:
    """The round's last GRPO iterations, from the refreshed planner. With new composites, they are
    the composites' probation: the planner trains with the candidate library in its prompts and GAR
    pays for calling them, so the pair :func:`decide` judges is a planner that has used them, not one
    that never saw them; the round's planner alone (the fallback) stays the one before the refresh.
    Without new composites they continue the round with the incumbent library (the same GRPO budget)."""
    lib = mined.library if mined.accepted else library
    phase = grpo_phase(ctx, r, refactored.step, lib, _cards(ctx, lib, refactored.programs), refactored.state, ref,
                       tasks, writer, iterations)
    merged = trained.then(phase)  # the round's diagnostics
    if mined.accepted:  # the planner alone (the fallback) stays the one before the refresh
        merged = dataclasses.replace(merged, state=trained.state, step=trained.step)
    return merged, dataclasses.replace(refactored, state=phase.state, step=phase.step)


def decide(ctx: _RunContext, r: int, incumbent: acceptance.Incumbent, library: LibrarySnapshot,
           cards: PromptCards, mined: Mined, refactored: Refactored, trained: GrpoRound) -> Verdict:
    """The round's (planner, candidate library) evaluated on the validation split and weighed
    against the incumbent. When the library changed, the round's planner *before* the refresh
    (``trained``: the GRPO update alone; the refresh trained it for the new library) is also
    evaluated with the incumbent library: always under ``growth_must_pay`` (the pair must then score
    at least as well), otherwise only if the pair is refused; it is kept if the planner alone is
    accepted (``accept_planner``)."""
    grew = mined.library is not library
    candidate_cards = _cards(ctx, mined.library, refactored.programs)
    ev = _evaluate(ctx, refactored.state, mined.library, ctx.domain.val, candidate_cards)
    proposal = acceptance.Proposal(r, f"round-{r}", mined.library, ev.accuracy, ev.used_tools)
    rule = ctx.settings.coevolve.acceptance
    new_incumbent, decision = acceptance.decide(incumbent, proposal, rule)
    pair_uses = dict(ev.composite_uses)
    if grew and (rule.growth_must_pay or decision.outcome is Outcome.REJECT):
        alone = _evaluate(ctx, trained.state, library, ctx.domain.val, cards)
        proposal = dataclasses.replace(proposal, planner_only_reward=alone.accuracy,
                                       planner_only_used_tools=alone.used_tools, planner_alone=f"round-{r}-grpo")
        new_incumbent, decision = acceptance.decide(incumbent, proposal, rule)
        if decision.outcome is Outcome.ACCEPT_PLANNER:
            ev = alone
    outcome = decision.outcome
    state = {Outcome.ACCEPT: refactored.state, Outcome.ACCEPT_PLANNER: trained.state}.get(outcome)
    return Verdict(outcome, decision, new_incumbent, ev, state, proposal.val_reward, pair_uses)


def mechanism(trained: GrpoRound, mined: Mined, refactored: Refactored, verdict: Verdict) -> dict[str, Any]:
    """What a round's learning did, for the report: the share of GRPO rows in groups with all-zero
    advantages, the sampled tokens' entropy (mean over iterations), the summed norm of the
    optimizer's updates, the tasks drawn per curriculum region, the answer-only tasks solved for the
    first time (demonstrated from now on, whatever the decision), and the composites mined in the
    round: proposed, validated (inserted into the candidate library), accepted (kept with the pair)
    and their calls in the pair's validation rollouts."""
    def mean(key: str) -> float | None:
        values = [d[key] for d in trained.diagnostics if key in d]
        return float(np.mean(values)) if values else None
    updates = [d["grpo/update_norm"] for d in trained.diagnostics if "grpo/update_norm" in d]
    uses = verdict.pair_composite_uses  # the new composites are in the pair's prompts, not the planner alone's
    return {"uniform_group_share": mean("uniform_group_share"), "entropy": mean("grpo/entropy"),
            "update_norm": float(sum(updates)) if updates else None, "rods_draws_by_region": dict(trained.draws),
            "new_demonstrations": len(refactored.new),
            "composites": {"proposed": len(mined.log.get("proposed", ())), "validated": len(mined.inserted),
                           "accepted": len(mined.inserted) if verdict.outcome is Outcome.ACCEPT else 0,
                           "called_on_validation": int(sum(uses.get(n, 0) for n in mined.inserted))}}


def record(ctx: _RunContext, r: int, before: RunProgress, previous_library: LibrarySnapshot,
           library: LibrarySnapshot, mined: Mined, refactored: Refactored, verdict: Verdict,
           accuracies: Sequence[float], rods_metrics: dict[str, Any] | None, wall_s: float,
           stage_s: dict[str, float] | None = None, extra: dict[str, Any] | None = None) -> RunProgress:
    """The progress after round ``r``: its record (a refused proposal's record carries the kept
    pair's numbers, and the proposal's accuracy beside them; a round that kept only the planner,
    its planner's numbers and the refused pair's accuracy), the decision, the incumbent, the
    demonstrations (refactored if accepted) and the refused patterns. ``library``: the one kept.
    ``stage_s``: the round's wall seconds per stage (up to this record)."""
    accepted = verdict.outcome is Outcome.ACCEPT
    rec = _round_record(ctx, r, verdict.outcome, verdict.decision.reason, library, verdict.evaluation,
                        float(np.mean(accuracies)), mined.inserted if accepted else (), wall_s,
                        previous=before.last_record, previous_library=previous_library)
    if verdict.outcome is Outcome.REJECT:  # the kept pair's numbers, not the refused proposal's
        kept = {key: getattr(before.last_record, key) for key in _KEPT_PAIR_KEYS}
        rec = rec.replace(**kept, proposal_val_accuracy=verdict.evaluation.accuracy)
    elif verdict.outcome is Outcome.ACCEPT_PLANNER and verdict.pair_accuracy is not None:
        rec = rec.replace(proposal_val_accuracy=verdict.pair_accuracy)
    rec = rec.replace(mining=mined.log, **(extra or {}), **({"stage_s": dict(stage_s)} if stage_s is not None else {}))
    return dataclasses.replace(
        before, round=r, global_step=refactored.step, records=(*before.records, rec),
        decisions=(*before.decisions, verdict.decision.to_record()), incumbent=IncumbentRecord.of(verdict.incumbent),
        demo_programs=kept_demonstrations(before.demo_programs, refactored, accepted), excluded=mined.excluded,
        rods_metrics=before.rods_metrics if rods_metrics is None else (*before.rods_metrics, rods_metrics))


def kept_demonstrations(stored: ProgramPairs, refactored: Refactored, accepted: bool) -> ProgramPairs:
    """The stored demonstrations after a round: the refactored set when its library is kept; else the
    incumbent's set joined by the round's first solutions of answer-only tasks, whose programs call
    only the incumbent library (they were sampled with it in the prompts). Refusing a library does not
    refuse what the planner found: a success is reward-verified data, and the next refreshes train on it
    (expert iteration needs it to outlive the round)."""
    return tuple(refactored.programs) if accepted else (*stored, *refactored.new)


def _rounds(ctx: _RunContext, run_progress: RunProgress, library: LibrarySnapshot, state: TrainState, ref: Any,
            writer: MetricsWriter, tasks: TaskSource, stop_after_round: int | None
            ) -> tuple[RunProgress, LibrarySnapshot, TrainState]:
    """Stage 3: the rounds left (up to ``stop_after_round``), each checkpointed."""
    total = ctx.settings.coevolve.rounds
    last = total if stop_after_round is None else min(total, stop_after_round)
    bar = _bar(total, run_progress.round, "stage 3: rounds", ctx.show_progress)
    while run_progress.round < last:
        r = run_progress.round + 1
        t_round = time.perf_counter()
        stage_s: dict[str, float] = {}
        cards = _cards(ctx, library, run_progress.demo_programs)
        per_round, probation = ctx.settings.grpo.iterations_per_round, ctx.settings.coevolve.probation_iterations
        with _timed(stage_s, "grpo"):
            trained = grpo_phase(ctx, r, run_progress.global_step, library, cards, state, ref, tasks, writer,
                                 range(per_round - probation))
        explored = None
        if ctx.settings.coevolve.explore_tasks > 0:
            with _timed(stage_s, "explore"):
                explored = explore(ctx, r, library, cards, trained.state, run_progress.demo_programs)
                trained = dataclasses.replace(trained, successes=trained.successes + explored.successes)
                if ctx.settings.rods.admit_explored:
                    explored = dataclasses.replace(explored, admitted=len(tasks.admit(explored.found)))
        with _timed(stage_s, "mine"):
            mined = mine_and_validate(ctx, r, library, run_progress.excluded, trained.successes)
        with _timed(stage_s, "refactor_and_refresh"):
            refactored = refactor_and_refresh(ctx, r, library, cards, run_progress.demo_programs, mined, trained)
        if probation:
            with _timed(stage_s, "probation"):
                trained, refactored = _probation(ctx, r, library, cards, mined, refactored, trained, ref, tasks,
                                                 writer, range(per_round - probation, per_round))
        with _timed(stage_s, "decide"):
            verdict = decide(ctx, r, run_progress.incumbent.incumbent(library), library, cards, mined, refactored,
                             trained)
        with _timed(stage_s, "incumbent_state"):
            if verdict.state is not None:
                state = verdict.state
            else:  # back to the incumbent planner: the last checkpoint's
                state = rundir.restore_state(ctx.workdir, ctx.grpo_learner, run_progress.global_step,
                                             ref is not None)[0]
        kept = mined.library if verdict.outcome is Outcome.ACCEPT else library
        if verdict.outcome is Outcome.ACCEPT and mined.accepted:  # the new stored set's traces over `kept`
            ctx.demo_traces = dict(zip(refactored.programs, refactored.traces))
        with _timed(stage_s, "curriculum"):
            rods_metrics = tasks.end_epoch(kept)
        extra = {"mechanism": mechanism(trained, mined, refactored, verdict)}
        if explored is not None:
            extra["mechanism"]["explore"] = explored.summary()
        if ctx.domain.dev:
            with _timed(stage_s, "dev"):
                extra.update(_dev_fields(ctx, state, kept, refactored.programs if verdict.outcome is Outcome.ACCEPT
                                         else run_progress.demo_programs))
        run_progress = record(ctx, r, run_progress, library, kept, mined, refactored, verdict, trained.accuracies,
                              rods_metrics, time.perf_counter() - t_round, stage_s, extra)
        library = kept
        _check_round_agreement(ctx, r, run_progress, library)
        writer.write(run_progress.global_step, _round_scalars(run_progress.last_record, rods_metrics))
        _save(ctx, run_progress, library, state, ref)
        bar.update(1)
        bar.set_postfix(acc=f"{run_progress.last_record.val_accuracy:.2f}",
                        lib=run_progress.last_record.library_size, outcome=verdict.outcome.value)
    bar.close()
    return run_progress, library, state


def _finish(ctx: _RunContext, run_progress: RunProgress, state: TrainState, library: LibrarySnapshot,
            t_process: float) -> dict[str, Any]:
    """The final test evaluation of the incumbent (the loop's last state: the accepted planner),
    report.json, plots and the DAG drawing."""
    cards = _cards(ctx, library, run_progress.demo_programs)
    t_test = time.perf_counter()
    test = _evaluate(ctx, state, library, ctx.domain.test, cards)
    test_eval_s = time.perf_counter() - t_test
    rounds = [rec.replace(mining=None, extra={}) for rec in run_progress.records]  # the mining logs stay in the checkpoint
    wall = sum(float(rec.wall_s) for rec in run_progress.records)
    extra = {"test_accuracy": test.accuracy, "frozen_library": ctx.frozen_library,
             "decisions": list(run_progress.decisions), "warm": run_progress.warm,
             "wall_s_this_process": time.perf_counter() - t_process, "test_eval_s": test_eval_s,
             "host_malloc": host_memory.status(),  # what the wall times ran under (docs/configs.md)
             "numerics": numerics.status(),  # what the floats ran under (docs/scale.md, replay)
             "retrieval": builders.retrieval_summary(cards, ctx.domain.test, test, ctx.tokenizer, ctx.settings.rollout),
             "test_outcomes": test.outcomes(),
             "test_per_category": domains.per_category(ctx.domain, ctx.domain.test, test),
             "test_turns_passed": domains.turns_passed(ctx.domain.test, test),  # multi-turn only, else None
             "test_composite_uses": dict(sorted(test.composite_uses.items())),  # calls in the test rollouts
             "rods_per_epoch": list(run_progress.rods_metrics) or None,
             # the kept pair after each round on tasks no decision read (validation chose the pairs)
             "dev_accuracy_per_round": [rec.dev_accuracy for rec in run_progress.records]
             if ctx.domain.dev else None}
    report = build_report(rounds, sft_accuracy=run_progress.sft_accuracy,
                          final_accuracy=run_progress.last_record.val_accuracy, final_library=library,
                          primitive_names=ctx.primitive_names, wall_s=wall, extra=extra)
    if ctx.distributed:  # every process's share of the GRPO rows and their sandbox programs
        report["hosts"] = _hosts_summary(ctx, library)
    failpoints.hit("report/write")
    if hosts.is_primary():
        write_report(report, ctx.workdir / "report.json")
        plot_coevolution(report["per_round"], ctx.workdir / "plots")
        draw_library(library, ctx.workdir / "plots" / "library_dag.svg", primitive_names=ctx.primitive_names)
        write_html_report(ctx.workdir)  # reads the report, the library JSONs, the metrics and the DAG drawing
    return report


def _hosts_summary(ctx: _RunContext, library: LibrarySnapshot) -> dict[str, Any]:
    """Per process (gathered: the same on every process), the GRPO rows it played and the
    sandbox programs they ran, per round this process ran (with the programs of the round's whole
    iterations, which the shares add up to) and in all; the rounds' agreed digests and the final
    library's sha256."""
    import hashlib

    import jax

    mine = {str(r): dict(v) for r, v in sorted(ctx.shares_by_round.items())}
    per_process = shares.allgather_objects(mine)
    return {"process_count": jax.process_count(),
            "round_digests": {str(r): d for r, d in sorted(ctx.round_digests.items())},
            "library_sha256": hashlib.sha256(library.to_json().encode("utf-8")).hexdigest(),
            "grpo": [{"process": i, "rounds": rounds, "rows": sum(v["rows"] for v in rounds.values()),
                      "sandbox_programs": sum(v["sandbox_programs"] for v in rounds.values())}
                     for i, rounds in enumerate(per_process)]}


__all__ = ["kept_demonstrations", "learned_from_reward", "pattern_from_json", "pattern_to_json", "read_tree",
           "refresh_selection", "rods_scalars", "rods_seeds", "run", "write_tree"]

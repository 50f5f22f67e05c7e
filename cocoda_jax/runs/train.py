"""SFT then GRPO on one domain with a fixed library (no co-evolution): ``launch/train.py``'s job.

Global step numbering (metrics and checkpoints): SFT steps are 1..S, GRPO iteration ``i`` (from 0)
is step ``S + i + 1``. The checkpoint after the last SFT step already holds the GRPO learner's
state (fresh optimizer, the SFT params as the frozen reference); ``progress.phase`` says which
learner a checkpoint belongs to. A run resumes from its work directory's newest checkpoint and
repeats exactly what the uninterrupted run would have done (every batch and key is a function of
the seed and the step).

The job is two stages, :func:`_sft_stage` and :func:`_grpo_stage`, each taking and returning a
:class:`_Position` (the typed :class:`~cocoda_jax.runs.progress.TrainProgress`, the train state and
the reference); a stage that reaches ``stop_after_step`` returns with ``stopped_at`` set.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import ml_collections

from cocoda_jax.execution import Sandbox
from cocoda_jax.report import MetricsWriter
from cocoda_jax.rl import loop, trajectory
from cocoda_jax.rl.learner import Learner, TrainState
from cocoda_jax.rl.prompts import PromptCards, all_cards
from cocoda_jax.rl.rewards import RewardConfig
from cocoda_jax.rl.rollout import Tokenizer
from cocoda_jax.runs import builders, domains, host_memory, hosts, numerics, rundir, stage0
from cocoda_jax.runs.settings import require
from cocoda_jax.errors import ConfigError
from cocoda_jax.runs.progress import Phase, TrainProgress, ValidationPoint
from cocoda_jax.runs.settings import RunSettings


def _progress_bar(total: int, initial: int, desc: str, enabled: bool):
    from tqdm import tqdm
    return tqdm(total=total, initial=initial, desc=desc, disable=not enabled, dynamic_ncols=True)


@dataclasses.dataclass(frozen=True)
class _Job:
    """What the run builds once (never checkpointed: rebuilt on resume): the domain and its fixed
    library, the prompts, the tokenizer and the tokenized gold demonstrations, the two learners.
    ``config``: the ConfigDict itself, kept only for the checkpoints; every stage reads ``settings``."""

    config: ml_collections.ConfigDict
    settings: RunSettings
    workdir: Path
    sandbox: Sandbox
    domain: domains.Domain
    cards: PromptCards
    tokenizer: Tokenizer
    demos: list[trajectory.TokenizedEpisode]
    sft_learner: Learner
    grpo_learner: Learner
    show_progress: bool
    stop_after_step: int | None

    @property
    def seed(self) -> int:
        return self.settings.seed

    @property
    def rollout(self) -> loop.RolloutConfig:
        return self.settings.rollout

    @property
    def reward(self) -> RewardConfig:
        return self.settings.reward

    @property
    def library(self) -> Any:
        return self.domain.library

    @property
    def sft_steps(self) -> int:
        return self.settings.sft.steps

    @property
    def grpo_iterations(self) -> int:
        return self.settings.grpo.iterations

    def stops_at(self, step: int) -> bool:
        """Whether the run returns after the checkpoint of ``step``."""
        return self.stop_after_step is not None and step >= self.stop_after_step

    def save(self, step: int, state: TrainState, progress: TrainProgress, ref: Any = None) -> None:
        rundir.save_checkpoint(self.workdir, step, state, {"progress": progress.to_json(), "library": self.library},
                               self.config, ref, keep=self.settings.checkpoint.keep)

    def evaluate(self, learner: Learner, state: TrainState, tasks: Sequence[Any]) -> loop.Evaluation:
        return loop.evaluate(learner.model(state), self.tokenizer, tasks, self.library, self.sandbox, self.rollout,
                             cards=self.cards, reward_config=self.reward, seed=self.seed,
                             scan_layers=learner.config.scan_layers)


@dataclasses.dataclass(frozen=True)
class _Position:
    """Where the job stands after a stage: its progress, the train state of the phase's learner,
    the KL reference (``None`` without a KL term or before GRPO) and, when ``stop_after_step`` ended
    the stage early, the step of the checkpoint it stopped after."""

    progress: TrainProgress
    state: TrainState
    ref: Any = None
    stopped_at: int | None = None


def run(config: ml_collections.ConfigDict, workdir: str | Path, *, progress: bool = True,
        stop_after_step: int | None = None, allow_config_change: bool = False) -> dict[str, Any]:
    """Runs (or resumes) the job; returns the summary also written to ``workdir/train_summary.json``.
    ``stop_after_step``: return after the checkpoint of that global step (tests of resumption)."""
    require(config, "seed", "domain", "model", "mesh", "rollout", "reward", "sft", "grpo", "sandbox",
                   "checkpoint", "retrieval")
    settings = RunSettings.parse(config)  # the whole config parsed and checked once, before anything is built
    workdir = rundir.run_path(workdir)  # a local path or a bucket URL (docs/resume.md)
    workdir.mkdir(parents=True, exist_ok=True)
    builders.maybe_initialize_distributed(settings)
    t_start = time.perf_counter()
    with domains.sandbox_for(settings) as sandbox:
        job = _build_job(config, settings, workdir, sandbox, progress, stop_after_step)
        latest = rundir.latest_checkpoint(workdir)
        start = TrainProgress.from_json(latest.payloads["progress"]) if latest else TrainProgress()
        writer = hosts.metrics_writer(workdir, resume_step=rundir.claim_workdir(workdir, config, latest,
                                                                                allow_config_change))
        if start.phase is Phase.SFT:
            position = _sft_stage(job, writer, start, latest)
        else:
            state, ref = rundir.restore_state(workdir, job.grpo_learner, latest.step, _with_reference(job))
            position = _Position(start, state, ref)
        if position.stopped_at is None:
            position = _grpo_stage(job, writer, position)
        if position.stopped_at is not None:
            writer.close()
            return {"stopped_at_step": position.stopped_at}
        return _finish(job, writer, position, t_start)


def _build_job(config: ml_collections.ConfigDict, settings: RunSettings, workdir: Path, sandbox: Sandbox,
               show_progress: bool, stop_after_step: int | None) -> _Job:
    """The domain, its prompts, the tokenizer (trained on the gold demonstrations, or reused), the
    demonstrations (a ConfigError if none fits ``rollout.max_len``), the planner and its learners."""
    rollout, retrieval = settings.rollout, settings.retrieval
    domain = stage0.demonstrated(settings, workdir, sandbox, domains.build_domain(settings, sandbox),
                                 show_progress=show_progress)
    library = domain.library
    shown = domain.demonstrations  # answer-only training tasks are GRPO's, never SFT's
    cards = builders.prompt_cards(library, retrieval, [(str(t.id), t.program) for t in shown],
                                {str(t.id): t.question for t in shown})
    segments = loop.gold_segments(shown, cards)
    # the BPE sees every tool name once, whatever the prompts show
    texts = itertools.chain(["\n".join(all_cards(library, retrieval.card_style))],
                            (trajectory.segments_text(s) for s in segments))
    tokenizer = builders.tokenizer_for(workdir, texts, settings.model.vocab_size, settings.model.hf_checkpoint)
    demos = loop.demonstration_records(segments, tokenizer, rollout)
    if not demos:
        raise ConfigError(f"every demonstration is longer than rollout.max_len={rollout.max_len} tokens (the "
                                 f"prompt shows {len(cards.tools(domain.train[0]))} tool cards in retrieval.mode="
                                 f"{retrieval.mode!r}): raise max_len or show fewer cards")
    mesh = builders.mesh_of(settings)
    model = builders.build_planner(settings, tokenizer.vocab_size, mesh)
    return _Job(config=config, settings=settings, workdir=workdir, sandbox=sandbox, domain=domain, cards=cards,
                tokenizer=tokenizer, demos=demos, sft_learner=builders.sft_learner(model, settings, mesh),
                grpo_learner=builders.grpo_learner(model, settings, mesh), show_progress=show_progress,
                stop_after_step=stop_after_step)


def _with_reference(job: _Job) -> bool:
    """GRPO has a KL term, hence a frozen reference (the SFT params), checkpointed with the state."""
    return job.grpo_learner.config.grpo.beta > 0


def _sft_stage(job: _Job, writer: MetricsWriter, progress: TrainProgress, latest: Any) -> _Position:
    """The SFT steps left (checkpointed every ``checkpoint.every_sft_steps``), then the SFT
    planner's validation and test accuracy and the GRPO learner's first checkpoint at step S."""
    sft = job.sft_learner
    steps = job.sft_steps
    state = rundir.restore_state(job.workdir, sft, latest.step, False)[0] if latest else sft.init_state()
    bar = _progress_bar(steps, int(state.step), "SFT", job.show_progress)
    every = job.settings.checkpoint.every_sft_steps

    def on_step(step, metrics):
        writer.write(step, {f"sft/{k}": v for k, v in metrics.items()})
        bar.update(1)
        bar.set_postfix(loss=f"{metrics['loss']:.3f}")

    while int(state.step) < steps:
        until = min(steps, (int(state.step) // every + 1) * every)  # the next checkpoint, or the end
        state = loop.sft_phase(sft, state, job.demos, steps=until, batch_size=job.settings.sft.batch_size,
                               seed=job.seed, rc=job.rollout, pad_id=job.tokenizer.pad_id,
                               pack_length=job.settings.sft.pack_length, on_step=on_step)
        if until < steps:
            job.save(until, state, progress)
            if job.stops_at(until):
                return _Position(progress, state, stopped_at=until)
    bar.close()
    ev = job.evaluate(sft, state, job.domain.val)
    writer.write(steps, ev.metrics("val"))
    sft_test = job.evaluate(sft, state, job.domain.test)
    writer.write(steps, sft_test.metrics("sft_test"))
    progress = dataclasses.replace(progress, phase=Phase.GRPO, sft_accuracy=ev.accuracy,
                                   sft_test_accuracy=sft_test.accuracy, iteration=0,
                                   evals=(ValidationPoint(steps, 0, ev.accuracy),))
    grpo_state = job.grpo_learner.state_from_params(state.params)
    ref = rundir.frozen_copy(grpo_state.params) if _with_reference(job) else None
    job.save(steps, grpo_state, progress, ref)
    return _Position(progress, grpo_state, ref, stopped_at=steps if job.stops_at(steps) else None)


def _grpo_stage(job: _Job, writer: MetricsWriter, position: _Position) -> _Position:
    """The GRPO iterations left: validation every ``grpo.eval_every`` and a checkpoint every
    ``checkpoint.every_iterations`` (both also after the last one)."""
    g, every_iterations, grpo = job.settings.grpo, job.settings.checkpoint.every_iterations, job.grpo_learner
    progress, state, ref = position.progress, position.state, position.ref
    total = job.grpo_iterations
    bar = _progress_bar(total, progress.iteration, "GRPO", job.show_progress)
    for it in range(progress.iteration, total):
        tasks = loop.sample_tasks(job.domain.train, g.tasks_per_iteration, job.seed, it)
        state, metrics, _ = loop.grpo_iteration(
            grpo, state, job.tokenizer, tasks, job.library, job.sandbox, group_size=g.group_size,
            rc=job.rollout, cards=job.cards, key=loop.iteration_key(job.seed, it), reward_config=job.reward,
            ref_params=ref, mask_uniform_groups=g.mask_uniform_groups, ppo_epochs=g.ppo_epochs)
        step, done = job.sft_steps + it + 1, it + 1
        writer.write(step, metrics)
        bar.update(1)
        bar.set_postfix(acc=f"{metrics['accuracy']:.2f}", r=f"{metrics['reward_mean']:.2f}")
        progress = dataclasses.replace(progress, iteration=done)
        if done % g.eval_every == 0 or done == total:
            ev = job.evaluate(grpo, state, job.domain.val)
            writer.write(step, ev.metrics("val"))
            progress = dataclasses.replace(progress, evals=(*progress.evals, ValidationPoint(step, done, ev.accuracy)))
        if done % every_iterations == 0 or done == total:
            job.save(step, state, progress, ref)
            if job.stops_at(step):
                return _Position(progress, state, ref, stopped_at=step)
    bar.close()
    return _Position(progress, state, ref)


def _finish(job: _Job, writer: MetricsWriter, position: _Position, t_start: float) -> dict[str, Any]:
    """The final test evaluation and ``train_summary.json``."""
    progress = position.progress
    final = job.evaluate(job.grpo_learner, position.state, job.domain.test)
    writer.write(job.sft_steps + job.grpo_iterations, final.metrics("test"))
    writer.close()
    evals = progress.evals
    best = max(evals, key=lambda e: e.val_accuracy)
    summary = {
        "sft_steps": job.sft_steps, "grpo_iterations": job.grpo_iterations,
        "accuracy": {"sft_val": progress.sft_accuracy, "grpo_val": evals[-1].val_accuracy,
                     "best_val": best.val_accuracy, "best_val_iteration": best.iteration,
                     "grpo_test": final.accuracy, "sft_test": progress.sft_test_accuracy},
        "val_curve": [e.to_json() for e in evals], "calls_per_solved_test": final.calls_per_solved,
        "retrieval": builders.retrieval_summary(job.cards, job.domain.test, final, job.tokenizer, job.rollout),
        "test_outcomes": final.outcomes(),
        "wall_s_this_process": time.perf_counter() - t_start,
        "host_malloc": host_memory.status(),  # what the wall time ran under (docs/configs.md)
        "numerics": numerics.status(),  # what the floats ran under (docs/scale.md, replay)
    }
    if hosts.is_primary():
        (job.workdir / "train_summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    return summary


__all__ = ["run"]

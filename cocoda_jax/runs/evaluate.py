"""A run's planner, scored again on a held-out split: ``launch/evaluate_run.py``,
``launch/evaluate_bfcl.py --policy=planner``.

The run directory holds everything needed (nothing is re-trained): the config it ran with and each
kept checkpoint's parameters and library (``checkpoints/``), the tokenizer (``tokenizer/``) and the
stored demonstrations whose usage evidence the prompts' candidate sets read. The domain is rebuilt
from the run's own config, so the split is the one the run held out.

A *dev set* (``domain_seed``): the same domain drawn with another seed, its ``split`` minus every task
whose question the run itself saw or holds out. With a validation split of 128 tasks one standard
error is about 4 points, too coarse to choose stage-3 settings on; a 1,000-task dev set from a
generator keeps the choice off the run's own test split (which is reported once).
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from cocoda_jax import checkpoint as ckpt
from cocoda_jax.rl import loop as L
from cocoda_jax.runs import builders, domains, rundir
from cocoda_jax.runs.settings import RunSettings
from cocoda_jax.errors import ConfigError


def _checkpoint(run_dir: Path, step: int | None) -> Any:
    """Checkpoint ``step`` (None: the newest) without its arrays; a clear error when absent."""
    directory = run_dir / "checkpoints"
    kept = ckpt.all_steps(directory) if directory.is_dir() else []
    if not kept:
        raise ConfigError(f"{run_dir} holds no checkpoint")
    if step is not None and step not in kept:
        raise ConfigError(f"{run_dir} has no checkpoint {step}; kept: {kept}")
    return ckpt.restore(directory, None, step)


def dev_tasks(settings: RunSettings, sandbox: Any, domain: domains.Domain, split: str, domain_seed: int) -> list[Any]:
    """``split`` of the domain drawn with ``domain_seed``, minus the tasks whose question is one of
    ``domain``'s (the run's own train/val/test): a dev set the run never saw."""
    options = dict(settings.domain.options)
    if "seed" not in options:
        raise ConfigError(f"domain {settings.domain.name!r} has no seed to draw a dev set with")
    options["seed"] = int(domain_seed)
    other = dataclasses.replace(settings, domain=dataclasses.replace(settings.domain, options=tuple(options.items())))
    seen = {t.question for t in (*domain.train, *domain.val, *domain.test)}
    return [t for t in getattr(domains.build_domain(other, sandbox), split) if t.question not in seen]


@dataclasses.dataclass(frozen=True)
class OpenedRun:
    """A finished run at one checkpoint, ready to play: its settings and rebuilt domain, the library
    and stored demonstrations of the checkpoint, the prompt cards they make, the tokenizer, the
    learner and its restored state, and the sandbox (open while :func:`open_run`'s block runs)."""

    run_dir: Path
    step: int
    settings: RunSettings
    domain: domains.Domain
    sandbox: Any
    library: Any
    programs: tuple[tuple[str, str], ...]
    cards: Any
    tokenizer: Any
    learner: Any
    state: Any
    tasks_by_id: dict[str, Any]  # every split's tasks (dev included), by id

    def model(self) -> Any:
        """The planner at this checkpoint (what the samplers take)."""
        return self.learner.model(self.state)


@contextlib.contextmanager
def open_run(run_dir: str | Path, step: int | None = None) -> Iterator[OpenedRun]:
    """``run_dir`` at checkpoint ``step`` (None: the last), for scoring or probing it in a script or a
    notebook: nothing is re-trained; the domain is rebuilt from the run's own config, the prompt cards
    from the checkpoint's library and stored demonstrations. The sandbox closes when the block ends."""
    run_dir = Path(run_dir)
    restored = _checkpoint(run_dir, step)
    settings = RunSettings.parse(restored.config)  # the config the run was saved with
    with domains.sandbox_for(settings) as sandbox:
        domain = domains.build_domain(settings, sandbox)
        library = restored.payloads["library"]
        by_id = {str(t.id): t for t in (*domain.train, *domain.val, *domain.test, *domain.dev)}
        programs = tuple(tuple(p) for p in restored.payloads["progress"]["demo_programs"] if p[0] in by_id)
        cards = builders.prompt_cards(library, settings.retrieval, programs, {i: by_id[i].question for i, _ in programs})
        tok = builders.tokenizer_for(run_dir, (), settings.model.vocab_size, settings.model.hf_checkpoint)
        mesh = builders.mesh_of(settings)
        learner = builders.grpo_learner(builders.build_planner(settings, tok.vocab_size, mesh), settings, mesh)
        state, _ = rundir.restore_state(run_dir, learner, restored.step, with_ref=False)
        yield OpenedRun(run_dir, restored.step, settings, domain, sandbox, library, programs, cards, tok, learner, state,
                        by_id)


def evaluate_run(run_dir: str | Path, *, split: str = "test", categories: Sequence[str] | None = None,
                 limit: int = 0, step: int | None = None, domain_seed: int | None = None) -> dict[str, Any]:
    """Greedy accuracy of the run's planner and library at checkpoint ``step`` (None: the last) on
    ``split`` (``val`` or ``test``), per category when the domain has categories, with each task's
    outcome (``outcomes``: id -> 1 if verified, for paired comparisons; on multi-turn tasks also
    ``turns_passed``: id -> share of user turns passed); ``categories`` keeps only
    those, ``limit`` at most that many tasks per category (0: all); ``domain_seed``: score on that
    seed's dev set instead (:func:`dev_tasks`)."""
    if split not in ("val", "test"):
        raise ValueError(f"split must be 'val' or 'test', got {split!r}")
    with open_run(run_dir, step) as run:
        settings, domain = run.settings, run.domain
        if domain_seed is None:
            tasks = list(getattr(domain, split))
        else:
            tasks = dev_tasks(settings, run.sandbox, domain, split, domain_seed)
        category_of = domain.categories or (lambda t: domain.name)
        if categories:
            unknown = sorted(set(categories) - {category_of(t) for t in tasks})
            if unknown:
                raise ValueError(f"categories {unknown} have no {split} task in this run's domain")
            tasks = [t for t in tasks if category_of(t) in set(categories)]
        if limit:
            counts: collections.Counter = collections.Counter()
            kept = []
            for t in tasks:
                if counts[category_of(t)] < limit:
                    counts[category_of(t)] += 1
                    kept.append(t)
            tasks = kept
        evaluation = L.evaluate(run.model(), run.tokenizer, tasks, run.library, run.sandbox, settings.rollout,
                                cards=run.cards, reward_config=settings.reward, seed=settings.seed)
    per = domains.per_category(domain, tasks, evaluation) or {domain.name: {"n": len(tasks), "accuracy": evaluation.accuracy}}
    return {"per_category": per, "policy": "planner", "run_dir": str(Path(run_dir)), "split": split,
            "domain_seed": settings.domain.get("seed") if domain_seed is None else int(domain_seed),
            "checkpoint_step": run.step, "accuracy": evaluation.accuracy, "n": len(tasks),
            "library_size": len(run.library), "outcomes": evaluation.outcomes(),
            "turns_passed": domains.turns_passed(tasks, evaluation),
            "composite_uses": dict(sorted(evaluation.composite_uses.items())),
            "retrieval": builders.retrieval_summary(run.cards, tasks, evaluation, run.tokenizer, settings.rollout)}


__all__ = ["OpenedRun", "dev_tasks", "evaluate_run", "open_run"]

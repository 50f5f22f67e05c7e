"""A finished run's planner, scored again on a held-out split: ``launch/evaluate_bfcl.py --policy=planner``.

The run directory holds everything needed (nothing is re-trained): the config it ran with and the
last checkpoint's parameters and library (``checkpoints/``), the tokenizer (``tokenizer/``) and the
stored demonstrations whose usage evidence the prompts' candidate sets read. The domain is rebuilt
from the run's own config, so the split is the one the run held out.
"""

from __future__ import annotations

import collections
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cocoda_jax.rl import loop as L
from cocoda_jax.runs import common as C


def evaluate_run(run_dir: str | Path, *, split: str = "test", categories: Sequence[str] | None = None,
                 limit: int = 0) -> dict[str, Any]:
    """Greedy accuracy of the run's last planner with its last library on ``split`` (``val`` or
    ``test``), per category when the domain has categories; ``categories`` keeps only those,
    ``limit`` at most that many tasks per category (0: all)."""
    run_dir = Path(run_dir)
    latest = C.latest_checkpoint(run_dir)
    if latest is None:
        raise C.ConfigError(f"{run_dir} holds no checkpoint")
    settings = C.RunSettings.parse(latest.config)  # the config the run was saved with
    if split not in ("val", "test"):
        raise ValueError(f"split must be 'val' or 'test', got {split!r}")
    with C.sandbox_for(settings) as sandbox:
        domain = C.build_domain(settings, sandbox)
        tasks = list(getattr(domain, split))
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
        library = latest.payloads["library"]
        by_id = {str(t.id): t for t in (*domain.train, *domain.val, *domain.test)}
        programs = [tuple(p) for p in latest.payloads["progress"]["demo_programs"] if p[0] in by_id]
        cards = C.prompt_cards(library, settings.retrieval, programs, {i: by_id[i].question for i, _ in programs})
        tok = C.tokenizer_for(run_dir, (), settings.model.vocab_size, settings.model.hf_checkpoint)
        mesh = C.mesh_of(settings)
        learner = C.grpo_learner(C.build_planner(settings, tok.vocab_size, mesh), settings, mesh)
        state, _ = C.restore_state(run_dir, learner, latest.step, with_ref=False)
        evaluation = L.evaluate(learner.model(state), tok, tasks, library, sandbox, settings.rollout,
                                cards=cards, reward_config=settings.reward, seed=settings.seed)
    per = C.per_category(domain, tasks, evaluation) or {domain.name: {"n": len(tasks), "accuracy": evaluation.accuracy}}
    return {"per_category": per, "policy": "planner", "run_dir": str(run_dir), "split": split,
            "checkpoint_step": latest.step, "accuracy": evaluation.accuracy, "n": len(tasks),
            "library_size": len(library)}


__all__ = ["evaluate_run"]

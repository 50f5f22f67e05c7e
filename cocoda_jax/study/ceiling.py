"""The turn-limit ceiling: the share of held-out tasks a perfect planner could solve within
``rollout.max_steps`` turns with the primitives alone, with stage 1's warm library, and with the
library a run ended with (:func:`library_ceilings`: what the rounds' composites made reachable).

Where composition must matter is where the first is low and the second high: a
task whose gold program needs more calls than the turn limit allows is unsolvable from primitives
however good the planner, and solvable once composites shorten it. This measures that bound on the
real split, with stage 1 exactly as the main job runs it (the symbolic abstractor over the training
demonstrations), and no planner at all: the gap it shows is the most the library can add, not what
a planner achieves.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cocoda_jax.coevolve.abstractor import fold_all
from cocoda_jax.coevolve.rounds import warm_library
from cocoda_jax.coevolve.traces import Trace, gold_trace
from cocoda_jax.coevolve.validate import refactor_trace
from cocoda_jax.runs import domains
from cocoda_jax.runs.settings import RunSettings


def turns(trace: Trace) -> int:
    """The turns a program takes in the action format: one per call, plus ``answer = name``."""
    return len(trace.program().strip().splitlines())


def _fit_counts(domain: Any, split: str, limit: int,
                shorteners: dict[str, Callable[[Trace], Trace]]) -> tuple[dict[str, dict[str, int]], dict[str, int]]:
    """Per category (the domain's, else its name) and overall: ``tasks``, and for each named way of
    rewriting a gold program, how many of ``split``'s tasks then fit ``limit`` turns."""
    rows: dict[str, dict[str, int]] = {}
    for task in getattr(domain, split):
        gold = gold_trace(task)
        row = rows.setdefault(str(domain.categories(task)) if domain.categories else domain.name,
                              {"tasks": 0, **{k: 0 for k in shorteners}})
        row["tasks"] += 1
        for key, shorten in shorteners.items():
            row[key] += turns(shorten(gold)) <= limit
    total = {k: sum(r[k] for r in rows.values()) for k in ("tasks", *shorteners)}
    return dict(sorted(rows.items())), total


def turn_ceilings(config: Any, sandbox: Any, split: str = "test") -> dict[str, Any]:
    """Per task depth (the domain's category) and overall: tasks, and how many fit the turn limit
    with the primitives and with the warm library; the warm library's composites, in order."""
    settings = RunSettings.of(config)
    domain = domains.build_domain(settings, sandbox)
    warm = warm_library([gold_trace(t) for t in domain.demonstrations[:settings.sft.n_demos]], domain.library, sandbox,
                        rounds=settings.warm.rounds, config=settings.coevolve.abstractor)
    composites = [c for o in warm.rounds for c in o.candidates if c.name in {t.name for t in o.result.accepted}]
    limit = settings.rollout.max_steps
    rows, total = _fit_counts(domain, split, limit, {"fit_primitives": lambda gold: gold,
                                                     "fit_warm_library": lambda gold: fold_all(gold, composites)})
    return {"split": split, "max_steps": limit, "composites": [c.name for c in composites],
            "per_category": rows, "all": total,
            "ceiling_primitives": total["fit_primitives"] / max(total["tasks"], 1),
            "ceiling_warm_library": total["fit_warm_library"] / max(total["tasks"], 1)}


def library_ceilings(config: Any, sandbox: Any, library: Any, split: str = "test") -> dict[str, Any]:
    """Per task depth (the domain's category) and overall: tasks, and how many fit the turn limit once
    their gold programs call ``library``'s composites (each use of a straight-line composite folded
    into one call, :func:`~cocoda_jax.coevolve.validate.refactor_trace`). With a run's final library
    beside the warm one, the gap between the two is what the rounds' composites put within reach; the
    run's own accuracy per category says how much of it the planner took."""
    settings = RunSettings.of(config)
    domain = domains.build_domain(settings, sandbox)
    limit = settings.rollout.max_steps
    rows, total = _fit_counts(domain, split, limit, {"fit_library": lambda gold: refactor_trace(gold, library)})
    composites = [name for name in library.topological_order() if library.is_composite(name)]
    return {"split": split, "max_steps": limit, "composites": composites, "per_category": rows,
            "all": total, "ceiling_library": total["fit_library"] / max(total["tasks"], 1)}


__all__ = ["library_ceilings", "turn_ceilings", "turns"]

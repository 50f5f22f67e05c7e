"""One abstraction round (mine, validate, insert, refactor) and stage 1: the warm library.

Stage 1 of the released algorithm (the CoCoDA paper, §A.4 of the paper digest) distils the teacher's successful trajectories
into composites before any training. With gold demonstrations as the teacher's trajectories that
needs no model: rounds of :func:`abstraction_round` over the refactored programs, each round mining
the programs the previous one rewrote, so later composites call earlier ones and depth grows. A
pattern rejected once is not proposed again. Everything is a function of its inputs (the same tasks
and library give byte-identical library JSON).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

from cocoda_jax import failpoints
from cocoda_jax.coevolve.abstractor import Abstractor, AbstractorConfig, Candidate, SymbolicAbstractor
from cocoda_jax.coevolve.traces import Trace, as_trace
from cocoda_jax.coevolve.validate import ValidationConfig, ValidationResult, validate


@dataclasses.dataclass(frozen=True)
class RoundOutcome:
    """A round's proposals and what validation made of them."""

    index: int
    candidates: tuple[Candidate, ...]
    result: ValidationResult

    def to_record(self) -> dict[str, Any]:
        """A JSON-ready summary for the run log."""
        snap = self.result.snapshot
        return {
            "round": self.index,
            "proposed": [{"name": c.name, "proposer": c.proposer, "children": list(c.children), "phi": c.phi,
                          "depth": c.depth,
                          "uses": c.score.uses, "tasks": c.score.tasks, "compression": c.score.compression}
                         for c in self.candidates],
            **self.result.to_record(),
            "library_size": len(snap),
            "max_depth": max((snap.depth(n) for n in snap.names()), default=0),
            "calls": sum(len(t.calls) for t in self.result.traces),
        }


def abstraction_round(items: Sequence[Any], snapshot: Any, sandbox: Any, abstractor: Abstractor | None = None,
                      config: ValidationConfig = ValidationConfig(), index: int = 0) -> RoundOutcome:
    """Proposes from ``items`` (traces or answered trajectories), then validates and inserts."""
    abstractor = abstractor or SymbolicAbstractor()
    traces = tuple(as_trace(t, snapshot) for t in items if isinstance(t, Trace) or t.answered)
    candidates = tuple(abstractor.propose(traces, snapshot))
    failpoints.hit("mining/proposed")
    return RoundOutcome(index, candidates, validate(candidates, traces, snapshot, sandbox, config))


@dataclasses.dataclass(frozen=True)
class WarmLibrary:
    snapshot: Any
    traces: tuple[Trace, ...]
    rounds: tuple[RoundOutcome, ...]


def warm_library(traces: Sequence[Trace], snapshot: Any, sandbox: Any, *, rounds: int = 3,
                 config: AbstractorConfig = AbstractorConfig(),
                 validation: ValidationConfig = ValidationConfig(),
                 make_abstractor: Callable[[frozenset], Abstractor] | None = None) -> WarmLibrary:
    """Up to ``rounds`` abstraction rounds over ``traces``; stops early when a round inserts nothing.
    ``make_abstractor(excluded_patterns)``: the proposer of each round (default: the symbolic one)."""
    make_abstractor = make_abstractor or (lambda excluded: SymbolicAbstractor(config, excluded))
    excluded: frozenset = frozenset()
    current = tuple(traces)
    done: list[RoundOutcome] = []
    for r in range(rounds):
        outcome = abstraction_round(current, snapshot, sandbox, make_abstractor(excluded), validation, r)
        done.append(outcome)
        failpoints.hit("warm/round")
        rejected = {rej.name for rej in outcome.result.rejections}
        excluded = excluded | {c.pattern for c in outcome.candidates if c.name in rejected}
        snapshot, current = outcome.result.snapshot, outcome.result.traces
        if not outcome.result.accepted:
            break
    return WarmLibrary(snapshot, current, tuple(done))


__all__ = ["RoundOutcome", "WarmLibrary", "abstraction_round", "warm_library"]

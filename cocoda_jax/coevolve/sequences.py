"""Composites of stateful tools: runs of calls joined by the state they share, not by dataflow.

BFCL's tools act on a backend (``cd`` then ``mkdir`` then ``mv`` on one file system) and pass no
values to one another, so the dataflow abstractor (:mod:`~cocoda_jax.coevolve.abstractor`) finds no
motif in their traces: every call is its own connected component. Here a pattern is a *contiguous*
run of calls whose intermediate values nothing outside the run reads (the last call is the output,
as before); its arguments become parameters exactly as in the dataflow form (equal external
references share one parameter, a value produced inside the run stays inside), so a
:class:`SequencePattern` is a :class:`~cocoda_jax.coevolve.abstractor.Pattern` whose body runs its
calls in trace order, and the same code generation, scoring, greedy selection and validation apply.

Two differences, both because state is not a value: a run never crosses a *barrier* tool
(``end_turn``: a composite must not hide a user turn from the planner), and a candidate carries no
L4 examples (a call of a stateful tool means nothing without the state it ran on). What stands in
for them is stronger: validation replays every rewritten program against its own task's environment
and requires the very same backend calls and values (:func:`~cocoda_jax.coevolve.validate.check_rewrites`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Iterator, Sequence
from typing import Any

from cocoda_jax.coevolve.abstractor import (
    AbstractorConfig, Candidate, Pattern, Use, apply_replacements, param_binder, propose, select_uses,
)
from cocoda_jax.coevolve.traces import Ref, Trace


@dataclasses.dataclass(frozen=True)
class SequencePattern(Pattern):
    """A run of calls in execution order (``nodes`` as in :class:`Pattern`)."""

    def rewrite(self, trace: Trace, tool: str, order: Sequence[int] | None = None) -> tuple[Trace, int]:
        uses = find_runs(trace, self)
        return apply_replacements(trace, [u.replacement(tool, order) for u in uses]), len(uses)


def canonical_run(trace: Trace, start: int, stop: int) -> tuple[SequencePattern, tuple[Ref, ...]]:
    """The pattern of calls ``start..stop-1`` and the external reference bound to each parameter."""
    arg, bindings = param_binder(lambda i: i - start if start <= i < stop else None)
    nodes = tuple((c.tool, tuple(arg(a) for a in c.args)) for c in trace.calls[start:stop])
    return SequencePattern(nodes, len(bindings)), tuple(bindings)


def runs(trace: Trace, trace_index: int, config: AbstractorConfig, barriers: Collection[str] = (),
         sizes: Collection[int] | None = None) -> Iterator[tuple[SequencePattern, Use]]:
    """Every valid run of ``trace``: ``min_nodes..max_nodes`` contiguous calls, no barrier tool, no
    member but the last read after the run or bound to ``answer``, at most ``max_inputs`` parameters."""
    consumers = trace.consumers()
    answer = trace.answer_node()
    n = len(trace.calls)
    for start in range(n):
        for stop in range(start + max(2, config.min_nodes), min(n, start + config.max_nodes) + 1):
            if sizes is not None and stop - start not in sizes:
                continue
            members = range(start, stop)
            if any(trace.calls[m].tool in barriers for m in members):
                break  # a longer run from this start contains the barrier too
            if any(m == answer or any(c >= stop for c in consumers[m]) for m in members if m != stop - 1):
                continue
            pattern, bindings = canonical_run(trace, start, stop)
            if pattern.n_params > config.max_inputs:
                continue
            yield pattern, Use(trace_index, trace.task_id, tuple(members), bindings)


def find_runs(trace: Trace, pattern: SequencePattern) -> list[Use]:
    """The non-overlapping uses of ``pattern`` in ``trace``, left to right (what rewriting replaces)."""
    cfg = AbstractorConfig(min_nodes=max(2, pattern.size), max_nodes=max(2, pattern.size),
                           max_inputs=pattern.n_params)
    return select_uses([u for p, u in runs(trace, 0, cfg) if p == pattern])


@dataclasses.dataclass(frozen=True)
class SequenceAbstractor:
    """Proposes composites of stateful tools (module docstring); ``barriers``: tools no run contains."""

    config: AbstractorConfig = AbstractorConfig()
    exclude: frozenset = frozenset()
    barriers: frozenset = frozenset()

    def mine(self, traces: Sequence[Trace], config: AbstractorConfig) -> dict[Pattern, list[Use]]:
        found: dict[Pattern, list[Use]] = {}
        for i, t in enumerate(traces):
            for pattern, use in runs(t, i, config, self.barriers):
                found.setdefault(pattern, []).append(use)
        return found

    def propose(self, trajectories: Sequence[Any], snapshot: Any) -> list[Candidate]:
        candidates = propose(trajectories, snapshot, self.config, exclude=self.exclude, mine_patterns=self.mine)
        return [dataclasses.replace(c, examples=(), observed=(), complexity=_stateful_note(c)) for c in candidates]


def _stateful_note(c: Candidate) -> str:
    return (f"{c.pattern.size} stateful tool calls in order ({c.flat} primitive calls); validated by replaying "
            f"{c.score.uses} uses in {c.score.tasks} tasks against their own environments")


def pattern_to_json(p: Pattern) -> dict:
    """A pattern of either kind as JSON (for the run's record of rejected patterns)."""
    import json
    return {"kind": "sequence" if isinstance(p, SequencePattern) else "dataflow",
            "nodes": json.loads(json.dumps(p.nodes)), "n_params": p.n_params}


def pattern_from_json(d: Any) -> Pattern:
    def tup(x):
        return tuple(tup(y) for y in x) if isinstance(x, list) else x
    if isinstance(d, list):  # the dataflow-only form of earlier checkpoints: [nodes, n_params]
        return Pattern(tup(d[0]), int(d[1]))
    cls = SequencePattern if d.get("kind") == "sequence" else Pattern
    return cls(tup(d["nodes"]), int(d["n_params"]))


__all__ = ["SequenceAbstractor", "SequencePattern", "canonical_run", "find_runs", "pattern_from_json",
           "pattern_to_json", "runs"]

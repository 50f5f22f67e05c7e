"""Validation before INSERTTOOL, and refactoring of the stored trajectories (ReGAL-style).

A candidate is committed only if, in this order:

1. its record builds (:meth:`Candidate.tool`; a broken record is a ``build`` rejection);
2. the stored programs rewritten to call it (every non-overlapping use replaced by one call) run in
   the real sandbox and give *identical* values to the originals — the answer and every name the
   rewritten program still binds, and for a stateful domain the very same environment calls (run
   against each program's own environment) — with exactly ``size - 1`` fewer top-level calls per use
   (``rewrite`` rejections: ``no_use``, ``run_failed``, ``output_mismatch``, ``calls_mismatch``);
3. its pre- and post-conditions hold and its output is reproduced on *every* observed use, not just
   the few L4 examples (``spec`` rejections, with the foundation's :class:`~cocoda_jax.library.Reason`);
4. ``snapshot.insert(tool, runner=sandbox)`` accepts it (``insert`` rejections: the typed
   :class:`~cocoda_jax.library.InsertRejected` reason).

Candidates are taken in order; each accepted one becomes part of the library and of the refactored
programs the next one is checked against. Nothing is mutated: the result holds the new snapshot,
the refactored traces and one record per rejection.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from cocoda_jax import failpoints
from cocoda_jax.coevolve.abstractor import Candidate, NotStraightLine, pattern_from_source, rewrite
from cocoda_jax.coevolve.traces import Trace, gold_trace
from cocoda_jax.library import InsertRejected, LibrarySnapshot, Tool
from cocoda_jax.library import checks
from cocoda_jax.values import values_equal

STAGES = ("build", "rewrite", "spec", "insert")


@dataclasses.dataclass(frozen=True)
class ValidationConfig:
    """``exact``: outputs must be equal with no tolerance (the composite runs the very same
    operations); else :func:`~cocoda_jax.values.values_equal`'s default tolerance."""

    exact: bool = True
    timeout_s: float | None = None

    def same(self, a: Any, b: Any) -> bool:
        if self.exact:
            return values_equal(a, b, rel_tol=0.0, abs_tol=0.0)
        return values_equal(a, b)


@dataclasses.dataclass(frozen=True)
class Rejection:
    """Why a candidate was not inserted: ``stage`` (one of :data:`STAGES`), a machine-readable
    ``reason`` and the human ``detail``."""

    name: str
    stage: str
    reason: str
    detail: str

    def to_record(self) -> dict[str, str]:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class Refactoring:
    """What an accepted composite did to the stored programs."""

    name: str
    uses: int
    traces_changed: int
    calls_before: int
    calls_after: int
    phi: int


@dataclasses.dataclass(frozen=True)
class ValidationResult:
    accepted: tuple[Tool, ...]
    snapshot: LibrarySnapshot
    traces: tuple[Trace, ...]
    rejections: tuple[Rejection, ...]
    refactorings: tuple[Refactoring, ...]

    def to_record(self) -> dict[str, Any]:
        return {"accepted": [t.name for t in self.accepted],
                "rejections": [r.to_record() for r in self.rejections],
                "refactorings": [dataclasses.asdict(r) for r in self.refactorings]}


def _values(result: Any) -> dict[str, Any]:
    return dict(result.values)


def check_rewrites(candidate: Candidate, tool: Tool, traces: Sequence[Trace], snapshot: LibrarySnapshot,
                   sandbox: Any, config: ValidationConfig) -> tuple[tuple[Trace, ...], Refactoring] | Rejection:
    """The traces rewritten to call ``tool``, checked in the sandbox (stage 2 of the module doc)."""
    rewritten: list[Trace] = []
    changed: list[tuple[int, int]] = []   # (trace index, uses)
    for i, t in enumerate(traces):
        new, n = candidate.pattern.rewrite(t, tool.name, candidate.arg_order)
        rewritten.append(new)
        if n:
            changed.append((i, n))
    if not changed:
        return Rejection(tool.name, "rewrite", "no_use", "no stored program contains its body")
    library = snapshot.sources() + (tool.source,)
    programs = [traces[i].program() for i, _ in changed] + [rewritten[i].program() for i, _ in changed]
    inputs = [traces[i].input_dict for i, _ in changed] * 2
    environments = [traces[i].environment for i, _ in changed] * 2
    extra = {"environments": environments} if any(e is not None for e in environments) else {}
    results = sandbox.run_many(programs, library, config.timeout_s, inputs=inputs, **extra)
    k = len(changed)
    uses = 0
    for (i, n), old, new in zip(changed, results[:k], results[k:]):
        where = f"task {traces[i].task_id!r}"
        if not (old.ok and new.ok):
            bad = old if not old.ok else new
            which = "original" if not old.ok else "rewritten"
            return Rejection(tool.name, "rewrite", "run_failed", f"{where}: the {which} program failed: {bad.error}")
        if not (config.same(old.value, new.value) and config.same(new.value, traces[i].answer_value)):
            return Rejection(tool.name, "rewrite", "output_mismatch",
                             f"{where}: answer {new.value!r} after rewriting, {old.value!r} before")
        if old.environment_calls != new.environment_calls:  # a stateful tool must do exactly what its body did
            return Rejection(tool.name, "rewrite", "output_mismatch",
                             f"{where}: the environment calls differ after rewriting")
        before = _values(old)
        for name, value in new.values:
            if name in before and not config.same(before[name], value):
                return Rejection(tool.name, "rewrite", "output_mismatch",
                                 f"{where}: {name} = {value!r} after rewriting, {before[name]!r} before")
        expected = len(old.calls) - n * (candidate.pattern.size - 1)
        if len(new.calls) != expected or new.calls.count(tool.name) < n:
            return Rejection(tool.name, "rewrite", "calls_mismatch",
                             f"{where}: {len(new.calls)} top-level calls after rewriting, expected {expected}")
        uses += n
    calls_before = sum(len(t.calls) for t in traces)
    calls_after = sum(len(t.calls) for t in rewritten)
    return tuple(rewritten), Refactoring(tool.name, uses, k, calls_before, calls_after, candidate.phi)


def check_specs(candidate: Candidate, tool: Tool, snapshot: LibrarySnapshot, sandbox: Any,
                config: ValidationConfig) -> Rejection | None:
    """Pre/post-conditions and the output on every observed use (stage 3 of the module doc)."""
    observed = candidate.observed or candidate.examples
    if not observed:
        return None
    try:
        full = Tool.from_source(tool.source, tool.description, pre=tool.pre, post=tool.post, examples=observed,
                                complexity=tool.complexity)
    except InsertRejected as err:
        return Rejection(tool.name, "spec", str(err.reason), err.detail)
    programs = [checks.example_program(full, args) for args, _ in full.examples]
    results = sandbox.run_many(programs, snapshot.sources() + (tool.source,), config.timeout_s)
    for index, result in enumerate(results):
        problem = checks.judge_example(full, index, result)
        if problem is not None:
            return Rejection(tool.name, "spec", str(problem.reason), problem.detail)
    return None


def validate(candidates: Sequence[Candidate], traces: Sequence[Trace], snapshot: LibrarySnapshot, sandbox: Any,
             config: ValidationConfig = ValidationConfig()) -> ValidationResult:
    """Checks and inserts ``candidates`` in order (see the module docstring)."""
    accepted: list[Tool] = []
    rejections: list[Rejection] = []
    refactorings: list[Refactoring] = []
    current = tuple(traces)
    for cand in candidates:
        failpoints.hit("validation/candidate")
        try:
            tool = cand.tool()
        except InsertRejected as err:
            rejections.append(Rejection(cand.name, "build", str(err.reason), err.detail))
            continue
        outcome = check_rewrites(cand, tool, current, snapshot, sandbox, config)
        if isinstance(outcome, Rejection):
            rejections.append(outcome)
            continue
        problem = check_specs(cand, tool, snapshot, sandbox, config)
        if problem is not None:
            rejections.append(problem)
            continue
        try:
            new_snapshot = snapshot.insert(tool, runner=sandbox, timeout_s=config.timeout_s)
        except InsertRejected as err:
            rejections.append(Rejection(tool.name, "insert", str(err.reason), err.detail))
            continue
        snapshot = new_snapshot
        current, report = outcome
        accepted.append(tool)
        refactorings.append(report)
    return ValidationResult(tuple(accepted), snapshot, current, tuple(rejections), tuple(refactorings))


# ------------------------------------------------------------------------------------------------
# Demonstrations from refactored programs
# ------------------------------------------------------------------------------------------------


def play_programs(tasks: Sequence[Any], programs: Sequence[str], snapshot: LibrarySnapshot, sandbox: Any, *,
                  cards: Any = None, timeout_s: float | None = None) -> list[Any]:
    """Each task's ``program`` played through the real episode loop (checker, sandbox,
    observations) in one lockstep batch: :func:`~cocoda_jax.rl.trajectory.gold_demonstration` for
    many tasks and any program, e.g. a refactored one that calls the new composites. ``cards``: a
    :data:`~cocoda_jax.rl.trajectory.CardSource` (default: the whole library)."""
    from cocoda_jax.rl.trajectory import ScriptedPolicy, cards_of, render_prompt, run_episodes, tool_cards

    if len(tasks) != len(programs):
        raise ValueError(f"{len(tasks)} tasks but {len(programs)} programs")
    if not tasks:
        return []
    cards = tool_cards(snapshot) if cards is None else cards
    policies = [ScriptedPolicy(render_prompt(t, cards_of(cards, t)), tuple(p.strip().splitlines()))
                for t, p in zip(tasks, programs)]

    def policy(contexts, rows):
        return [policies[r](c) for c, r in zip(contexts, rows)]

    steps = max(len(p.steps) for p in policies)
    return run_episodes(policy, list(tasks), snapshot, sandbox, max(1, steps), cards=cards, timeout_s=timeout_s,
                        with_rows=True)


def refactored_demonstrations(result: ValidationResult, tasks: Sequence[Any], sandbox: Any, *,
                              cards: Sequence[str] | None = None) -> list[Any]:
    """The refactored traces of ``result`` as verified trajectories over its new snapshot (SFT
    demonstrations that call the composites); ``tasks`` are matched to traces by id."""
    by_id = {str(t.id): t for t in tasks}
    chosen = [(by_id[tr.task_id], tr.program()) for tr in result.traces if tr.task_id in by_id]
    return play_programs([t for t, _ in chosen], [p for _, p in chosen], result.snapshot, sandbox, cards=cards)


# ------------------------------------------------------------------------------------------------
# Programs over a grown library
# ------------------------------------------------------------------------------------------------


def refactor_trace(trace: Trace, snapshot: LibrarySnapshot) -> Trace:
    """``trace`` with every use of each straight-line composite of ``snapshot`` replaced by one call
    of it, composites taken in topological order (a depth-2 composite sees its children's calls)."""
    for name in snapshot.topological_order():
        if not snapshot.is_composite(name):
            continue
        try:
            pattern, order = pattern_from_source(snapshot.tool(name).source, snapshot)
        except NotStraightLine:
            continue
        trace, _ = rewrite(trace, pattern, name, order)
    return trace


def gold_tool_sets(task: Any, snapshot: LibrarySnapshot) -> tuple[frozenset[str], ...]:
    """The tools of ``task``'s gold program and of the same program refactored over ``snapshot``:
    a candidate set that holds either lets the planner write a correct program."""
    trace = gold_trace(task)
    gold = frozenset(c.tool for c in trace.calls)
    refactored = frozenset(c.tool for c in refactor_trace(trace, snapshot).calls)
    return (gold,) if refactored == gold else (gold, refactored)


__all__ = [
    "Refactoring", "Rejection", "STAGES", "ValidationConfig", "ValidationResult", "check_rewrites", "check_specs",
    "gold_tool_sets", "play_programs", "refactor_trace", "refactored_demonstrations", "validate",
]

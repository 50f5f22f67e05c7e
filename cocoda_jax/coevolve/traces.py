"""Straight-line programs as dataflow graphs: what the abstractor mines and the validator rewrites.

A :class:`Trace` is a successful trajectory reduced to what library learning needs: the task's
input values, the tool calls in order (each argument a reference to an input name, an earlier call
or a literal), every call's executed value, and which reference is the answer. Graph facts
(producers, consumers) are derived from the calls, never stored twice. Rewriting a trace (one call
replacing a matched subgraph) returns a new trace; nothing is mutated.
"""

from __future__ import annotations

import ast
import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from cocoda_jax.errors import CocodaError
from cocoda_jax.library.checks import py_literal
from cocoda_jax.rl import actions

ANSWER = actions.ANSWER


@dataclasses.dataclass(frozen=True)
class Ref:
    """One argument: ``kind`` ``"node"`` (``value`` is the index of an earlier call), ``"var"``
    (an input name), ``"lit"`` (a literal value) or ``"list"`` (``value`` is a tuple of Refs)."""

    kind: str
    value: Any

    def key(self) -> tuple:
        """Hashable identity: equal literals of different types (1, 1.0, True) stay distinct."""
        if self.kind == "lit":
            return ("lit", type(self.value).__name__, repr(self.value))
        if self.kind == "list":
            return ("list", tuple(r.key() for r in self.value))
        return (self.kind, self.value)


@dataclasses.dataclass(frozen=True)
class Call:
    """``target = tool(*args)`` with positional arguments in the tool's parameter order."""

    target: str
    tool: str
    args: tuple[Ref, ...]


@dataclasses.dataclass(frozen=True)
class Trace:
    """A straight-line program with its executed values (see the module docstring)."""

    task_id: str
    inputs: tuple[tuple[str, Any], ...]
    calls: tuple[Call, ...]
    values: tuple[Any, ...]
    answer: Ref
    #: A stateful domain's environment spec (the task's initial state; see
    #: cocoda_jax.execution.environment): the program replays only against it. None: pure tools.
    environment: Any = dataclasses.field(default=None, compare=False)

    def __post_init__(self) -> None:
        if len(self.calls) != len(self.values):
            raise ValueError(f"trace {self.task_id!r}: {len(self.calls)} calls but {len(self.values)} values")

    @property
    def answer_value(self) -> Any:
        return value_of(self, self.answer)

    @property
    def input_dict(self) -> dict[str, Any]:
        return dict(self.inputs)

    @property
    def tools(self) -> tuple[str, ...]:
        return tuple(c.tool for c in self.calls)

    def producers(self, i: int) -> tuple[int, ...]:
        """Indices of the calls whose values call ``i`` reads (in argument order, with repeats)."""
        return tuple(node_refs(self.calls[i].args))

    def consumers(self) -> tuple[tuple[int, ...], ...]:
        """Per call, the later calls that read its value (sorted, no repeats)."""
        out: list[set[int]] = [set() for _ in self.calls]
        for j in range(len(self.calls)):
            for i in self.producers(j):
                out[i].add(j)
        return tuple(tuple(sorted(s)) for s in out)

    def answer_node(self) -> int | None:
        return self.answer.value if self.answer.kind == "node" else None

    def program(self) -> str:
        """The program text the sandbox runs (``inputs`` bound separately), ending with ``answer``."""
        lines = [f"{c.target} = {c.tool}({', '.join(ref_text(self, a) for a in c.args)})" for c in self.calls]
        if not (self.answer.kind == "node" and self.calls[self.answer.value].target == ANSWER):
            lines.append(f"{ANSWER} = {ref_text(self, self.answer)}")
        return "\n".join(lines) + "\n"


def node_refs(args: Sequence[Ref]):
    for a in args:
        if a.kind == "node":
            yield a.value
        elif a.kind == "list":
            yield from node_refs(a.value)


def ref_text(trace: Trace, ref: Ref) -> str:
    if ref.kind == "node":
        return trace.calls[ref.value].target
    if ref.kind == "var":
        return ref.value
    if ref.kind == "lit":
        return py_literal(ref.value)
    return "[" + ", ".join(ref_text(trace, r) for r in ref.value) + "]"


def value_of(trace: Trace, ref: Ref) -> Any:
    if ref.kind == "node":
        return trace.values[ref.value]
    if ref.kind == "var":
        return trace.input_dict[ref.value]
    if ref.kind == "lit":
        return ref.value
    return [value_of(trace, r) for r in ref.value]


# ------------------------------------------------------------------------------------------------
# From trajectories
# ------------------------------------------------------------------------------------------------


class TraceError(CocodaError, ValueError):
    """A trajectory that cannot be read as a straight-line program over the library."""


def parse_inputs_line(prompt: str) -> tuple[tuple[str, Any], ...]:
    """The ``Inputs: n0 = 3, n1 = 2.5`` line of a rendered prompt, as values (a fallback: the
    prompt shows floats to 6 significant digits, so pass the task's exact inputs when you have them)."""
    for line in prompt.splitlines():
        if line.startswith("Inputs: "):
            call = ast.parse("f(" + line[len("Inputs: "):] + ")", mode="eval").body
            return tuple((kw.arg, ast.literal_eval(kw.value)) for kw in call.keywords)
    return ()


def _arg_ref(arg: actions.Arg, names: Mapping[str, int]) -> Ref:
    if arg.kind == "literal":
        return Ref("lit", arg.value)
    if arg.kind == "list":
        return Ref("list", tuple(_arg_ref(i, names) for i in arg.items))
    return Ref("node", names[arg.text]) if arg.text in names else Ref("var", arg.text)


def trace_from_trajectory(trajectory: Any, snapshot: Any,
                          inputs: Sequence[tuple[str, Any]] | Mapping[str, Any] | None = None,
                          environment: Any = None) -> Trace:
    """The executed steps of an answered trajectory as a :class:`Trace`.

    Keyword arguments are put in the tool's parameter order (a trace's arguments are positional, so
    that two spellings of one call are one dataflow node). ``inputs``: the task's exact inputs
    (default: read back from the prompt).
    """
    if not trajectory.answered:
        raise TraceError(f"trajectory {trajectory.task_id!r} never bound 'answer'")
    if inputs is None:
        inputs = parse_inputs_line(trajectory.prompt)
    inputs = tuple(inputs.items()) if isinstance(inputs, Mapping) else tuple(inputs)
    names: dict[str, int] = {}
    calls: list[Call] = []
    values: list[Any] = []
    answer: Ref | None = None
    for s in trajectory.steps:
        if not s.ok or s.check.is_search:  # a search computes nothing: no node of the dataflow
            continue
        step = s.check.step
        if step.tool is None:
            answer = Ref("node", names[step.source]) if step.source in names else Ref("var", step.source)
            continue
        params = snapshot.tool(step.tool).param_names
        positional = [a for a in step.args if a.keyword is None]
        slots = dict(zip(params, positional))
        for a in step.args:
            if a.keyword is not None:
                slots[a.keyword] = a
        ordered = [slots[p] for p in params if p in slots]
        if len(ordered) != len(slots) or [p for p in params if p in slots] != list(params[:len(slots)]):
            raise TraceError(f"trajectory {trajectory.task_id!r}: {s.text!r} leaves a parameter out before a later one")
        names[step.target] = len(calls)
        calls.append(Call(step.target, step.tool, tuple(_arg_ref(a, names) for a in ordered)))
        values.append(s.outcome.value)
        if step.is_answer:
            answer = Ref("node", len(calls) - 1)
    if answer is None:
        raise TraceError(f"trajectory {trajectory.task_id!r} has no answer step")
    return Trace(str(trajectory.task_id), inputs, tuple(calls), tuple(values), answer, environment)


def trace_from_program(task_id: str, program: str, inputs: Sequence[tuple[str, Any]] | Mapping[str, Any],
                       values: Sequence[tuple[str, Any]] | Mapping[str, Any], environment: Any = None) -> Trace:
    """A trace from program text (positional calls, one per line, ``answer = name`` last) and the
    value of each target (e.g. a synthetic-math task's ``program`` and ``intermediates``)."""
    inputs = tuple(inputs.items()) if isinstance(inputs, Mapping) else tuple(inputs)
    by_target = dict(values)
    names: dict[str, int] = {}
    calls: list[Call] = []
    vals: list[Any] = []
    answer: Ref | None = None
    for line in program.strip().splitlines():
        step = actions.parse_step(line)
        if isinstance(step, actions.StepCheck):
            raise TraceError(f"{task_id}: {line!r}: {step.message}")
        if step.tool is None:
            answer = Ref("node", names[step.source]) if step.source in names else Ref("var", step.source)
            continue
        if any(a.keyword is not None for a in step.args):
            raise TraceError(f"{task_id}: {line!r}: keyword arguments need a snapshot (use trace_from_trajectory)")
        names[step.target] = len(calls)
        calls.append(Call(step.target, step.tool, tuple(_arg_ref(a, names) for a in step.args)))
        vals.append(by_target[step.target])
        if step.is_answer:
            answer = Ref("node", len(calls) - 1)
    if answer is None:
        raise TraceError(f"{task_id}: the program never binds 'answer'")
    return Trace(task_id, inputs, tuple(calls), tuple(vals), answer, environment)


def gold_trace(task: Any) -> Trace:
    """A generated task's gold program (``task.program``, its inputs and recorded intermediates, and
    the environment of a stateful task) as a trace."""
    return trace_from_program(str(task.id), task.program, task.inputs, task.intermediates,
                              getattr(task, "environment", None))


def as_trace(item: Any, snapshot: Any) -> Trace:
    """A :class:`Trace` as is, or a trajectory read into one."""
    return item if isinstance(item, Trace) else trace_from_trajectory(item, snapshot)


# ------------------------------------------------------------------------------------------------
# Rewriting
# ------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Replacement:
    """Replace calls ``nodes`` (one of which is ``sink``, the only one read outside) by one call."""

    nodes: frozenset[int]
    sink: int
    tool: str
    args: tuple[Ref, ...]


def _reindex(ref: Ref, new_index: Mapping[int, int]) -> Ref:
    if ref.kind == "node":
        return Ref("node", new_index[ref.value])
    if ref.kind == "list":
        return Ref("list", tuple(_reindex(r, new_index) for r in ref.value))
    return ref


def apply_replacements(trace: Trace, replacements: Sequence[Replacement]) -> Trace:
    """The trace with each replacement applied (they must not overlap). The new call sits where the
    sink was and keeps its target name, so every later reference and the answer are unchanged."""
    removed: set[int] = set()
    covered: set[int] = set()
    at_sink: dict[int, Replacement] = {}
    for r in replacements:
        if covered & r.nodes or r.sink not in r.nodes:
            raise ValueError("overlapping replacements, or a sink outside its own nodes")
        covered |= r.nodes
        removed |= r.nodes - {r.sink}
        at_sink[r.sink] = r
    new_index: dict[int, int] = {}
    calls: list[Call] = []
    values: list[Any] = []
    for i, c in enumerate(trace.calls):
        if i in removed:
            continue
        new_index[i] = len(calls)
        if i in at_sink:
            r = at_sink[i]
            calls.append(Call(c.target, r.tool, tuple(_reindex(a, new_index) for a in r.args)))
        else:
            calls.append(Call(c.target, c.tool, tuple(_reindex(a, new_index) for a in c.args)))
        values.append(trace.values[i])
    return Trace(trace.task_id, trace.inputs, tuple(calls), tuple(values), _reindex(trace.answer, new_index),
                 trace.environment)


__all__ = [
    "ANSWER", "Call", "Ref", "Replacement", "Trace", "TraceError", "apply_replacements", "as_trace", "gold_trace",
    "node_refs",
    "parse_inputs_line", "ref_text", "trace_from_program", "trace_from_trajectory", "value_of",
]

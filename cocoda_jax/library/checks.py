"""INSERTTOOL's checks: the static rules (they run nothing) and the behavioural checks (examples,
pre/post-conditions and duplicate behaviour, run in the sandbox).

The static rules take the library as plain mappings (a snapshot's maps, or a bulk load's dicts), so
the snapshot and the file loader share them without importing each other.

Examples and conditions are untrusted code, so they never run in this process. Each check becomes a
small straight-line Python program (text) that a *runner* executes against the library's tool
sources; the runner protocol is the one of :class:`cocoda_jax.execution.Sandbox`::

    runner.run_many(programs: Sequence[str], library: Sequence[str], timeout_s) -> list[result]

where each result has ``.ok``, ``.value`` (the program's ``answer``) and ``.error`` (with ``.kind``
and ``.message``). Argument values are written into the program as Python literals, and the
program's answer comes back through the safe value codec; results are compared with
:func:`cocoda_jax.values.values_equal`.

One example's program evaluates every pre-condition on the arguments, calls the tool, then evaluates
every post-condition on the arguments and ``result``; each evaluation is guarded, so a raising
condition is reported as such instead of hiding the others. Conditions run inside a ``lambda`` whose
parameters are the tool's parameters, so they see fresh argument values and the library's tools.
"""

from __future__ import annotations

import decimal
import fractions
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cocoda_jax.library.analysis import CodeFacts, analyse
from cocoda_jax.library.errors import InsertRejected, Reason
from cocoda_jax.library.tool import Tool
from cocoda_jax.library.typecheck import check_calls
from cocoda_jax.types import TypeSyntaxError, signature_from_ast
from cocoda_jax.values import values_equal

#: Error kinds of the runner that mean "this code may not run here" rather than "it ran and failed".
_REFUSED_KINDS = frozenset({"syntax", "forbidden"})


def py_literal(value: Any) -> str:
    """Python source text that evaluates to ``value`` (for the values the codec carries)."""
    if value is None or isinstance(value, (bool, int, str)):
        return repr(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "float('nan')"
        if math.isinf(value):
            return "float('inf')" if value > 0 else "(-float('inf'))"
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(py_literal(v) for v in value) + "]"
    if isinstance(value, tuple):
        inner = ", ".join(py_literal(v) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{py_literal(k)}: {py_literal(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (set, frozenset)):
        return "frozenset([" + ", ".join(py_literal(v) for v in value) + "])"
    if isinstance(value, fractions.Fraction):
        return f"fractions.Fraction({str(value)!r})"
    if isinstance(value, decimal.Decimal):
        return f"decimal.Decimal({str(value)!r})"
    raise TypeError(f"no Python literal for a value of type {type(value).__name__}")


def _imports_for(texts: Sequence[str]) -> str:
    needed = [m for m in ("fractions", "decimal") if any(f"{m}." in t for t in texts)]
    return "".join(f"import {m}\n" for m in needed)


def _guarded(var: str, expr: str, indent: str = "") -> str:
    return (f"{indent}try:\n{indent}    {var}.append(bool({expr}))\n"
            f"{indent}except Exception as _e:\n{indent}    {var}.append('raised ' + repr(_e))\n")


def example_program(tool: Tool, args: dict[str, Any]) -> str:
    """The program checking one example: ``answer = (pre_results, raised, result, post_results)``.

    A condition result is ``True``, ``False`` or the text ``'raised ...'``; ``raised`` is ``None`` or
    the repr of the exception the tool raised.
    """
    params = tool.param_names
    lits = [py_literal(args[p]) for p in params]
    arglist = ", ".join(lits)
    lines = [_imports_for(lits), "_pre = []\n"]
    for cond in tool.pre:
        lines.append(_guarded("_pre", f"(lambda {', '.join(params)}: ({cond}))({arglist})"))
    lines.append(f"try:\n    _result = {tool.name}({arglist})\n    _raised = None\n"
                 f"except Exception as _e:\n    _result = None\n    _raised = repr(_e)\n")
    lines.append("_post = []\n")
    if tool.post:
        lines.append("if _raised is None:\n")
        post_params = ", ".join((*params, "result"))
        post_args = ", ".join((*lits, "_result"))
        for cond in tool.post:
            lines.append(_guarded("_post", f"(lambda {post_params}: ({cond}))({post_args})", indent="    "))
    lines.append("answer = (_pre, _raised, _result, _post)\n")
    return "".join(lines)


def call_program(name: str, positional: Sequence[Any]) -> str:
    """The program ``answer = name(*positional)`` (a raise makes the run fail)."""
    lits = [py_literal(v) for v in positional]
    return f"{_imports_for(lits)}answer = {name}({', '.join(lits)})\n"


def _call_text(tool: Tool, args: dict[str, Any]) -> str:
    text = f"{tool.name}({', '.join(f'{k}={v!r}' for k, v in args.items())})"
    return text if len(text) <= 200 else text[:197] + "..."


def _error_text(result: Any) -> str:
    err = getattr(result, "error", None)
    if err is None:
        return "no result"
    kind, message = getattr(err, "kind", "error"), getattr(err, "message", str(err))
    return f"{kind}: {message}"


def _outcome_text(outcome: Any) -> str:
    return "is false" if outcome is False else str(outcome)  # 'raised ...' from the check program


def judge_example(tool: Tool, index: int, result: Any) -> InsertRejected | None:
    """The rejection (or ``None``) for example ``index`` given its run's result.

    Precedence inside one example: a violated pre-condition (the example lies outside the tool's own
    domain), then a raising or wrong call (``example_failed``), then a violated post-condition.
    """
    args, expected = tool.examples[index]
    where = f"examples[{index}] {_call_text(tool, args)}"
    if not result.ok:
        kind = getattr(result.error, "kind", None)
        reason = Reason.MALFORMED if kind in _REFUSED_KINDS else Reason.EXAMPLE_FAILED
        return InsertRejected(reason, tool.name, f"{where} did not run: {_error_text(result)}")
    answer = result.value
    if not (isinstance(answer, (tuple, list)) and len(answer) == 4):
        return InsertRejected(Reason.EXAMPLE_FAILED, tool.name, f"{where}: the check program returned {answer!r}")
    pre, raised, value, post = answer
    for j, outcome in enumerate(pre):
        if outcome is not True:
            return InsertRejected(Reason.SPEC_VIOLATED, tool.name,
                                  f"pre[{j}] {tool.pre[j]!r} {_outcome_text(outcome)} on {where}")
    if raised is not None:
        return InsertRejected(Reason.EXAMPLE_FAILED, tool.name, f"{where} raised {raised}")
    if not values_equal(value, expected):
        return InsertRejected(Reason.EXAMPLE_FAILED, tool.name,
                              f"{where} returned {value!r}, expected {expected!r}")
    for j, outcome in enumerate(post):
        if outcome is not True:
            return InsertRejected(Reason.SPEC_VIOLATED, tool.name,
                                  f"post[{j}] {tool.post[j]!r} {_outcome_text(outcome)} on {where} (result {value!r})")
    return None


@dataclass(frozen=True)
class CrossRun:
    """One tool run on another tool's example input, expecting that example's result."""

    program: str
    expected: Any


def replay(runner_tool: Tool, example_owner: Tool) -> list[CrossRun]:
    """``runner_tool`` run on every example input of ``example_owner`` (same signature up to
    parameter names, so the arguments are matched positionally)."""
    return [CrossRun(call_program(runner_tool.name, [args[p] for p in example_owner.param_names]), expected)
            for args, expected in example_owner.examples]


def same_outputs(runs: Sequence[CrossRun], results: Sequence[Any]) -> bool:
    """True when every run succeeded with the expected value (a raise or timeout is a difference)."""
    return all(r.ok and values_equal(r.value, run.expected) for run, r in zip(runs, results, strict=True))


# -- the static rules ------------------------------------------------------------------------------
def identity_checks(tool: Tool, tools: Mapping[str, Tool], ids: Mapping[str, str]) -> None:
    """INSERTTOOL's first checks: the code and the name are new to the library."""
    if tool.id in ids:
        raise InsertRejected(Reason.DUPLICATE_CODE, tool.name,
                             f"same normalised code (id {tool.id}) as tool {ids[tool.id]!r}")
    if tool.name in tools:
        raise InsertRejected(Reason.NAME_CLASH, tool.name,
                             f"a different tool named {tool.name!r} is already in the library")


def depth_check(name: str, calls: tuple[str, ...], depths: Mapping[str, int], max_depth: int) -> int:
    """The depth ``name`` would have over ``calls``; :class:`InsertRejected` above ``max_depth``."""
    depth = 1 + max(depths[c] for c in calls) if calls else 0
    if depth > max_depth:
        deepest = max(calls, key=lambda c: (depths[c], c))
        raise InsertRejected(Reason.DEPTH_EXCEEDED, name,
                             f"its depth would be {depth} (through {deepest!r} at depth {depths[deepest]}),"
                             f" above the library's bound max_depth={max_depth}")
    return depth


def static_checks(tool: Tool, facts: CodeFacts, tools: Mapping[str, Tool], ids: Mapping[str, str],
                  depths: Mapping[str, int], max_depth: int) -> tuple[tuple[str, ...], int]:
    """INSERTTOOL's checks that run nothing, against a library given as plain mappings (a snapshot's
    maps, or a bulk load's dicts): returns the tool's calls and depth, or raises
    :class:`InsertRejected` for the first failure, cheapest first (see the module docstring)."""
    name = tool.name
    identity_checks(tool, tools, ids)
    calls = facts.calls
    if name in calls or name in facts.references:
        line = next((s.node.lineno for s in facts.call_sites if s.name == name), None)
        at = f" (line {line})" if line else ""
        raise InsertRejected(Reason.CYCLE, name, f"it refers to itself{at}; recursion would close a cycle")
    unknown = [n for n in dict.fromkeys(calls + facts.references) if n not in tools]
    if unknown:
        raise InsertRejected(Reason.UNKNOWN_DEPENDENCY, name,
                             f"it uses {', '.join(map(repr, unknown))}, which "
                             f"{'is' if len(unknown) == 1 else 'are'} neither a library tool, a local "
                             f"nor a builtin")
    if facts.references:
        raise InsertRejected(Reason.MALFORMED, name,
                             f"it uses the tool(s) {', '.join(map(repr, facts.references))} as a value; a tool "
                             f"may only be called by name, so that every call edge is visible in the code")
    depth = depth_check(name, calls, depths, max_depth)
    check_calls(facts, tool.signature, tools.__getitem__)
    return calls, depth


def check_sandbox_rules(tool: Tool) -> None:
    """Refuses code the sandbox would refuse to load: one such tool would make every later run
    against the library fail, and a tool without examples is otherwise never run at insert time."""
    from cocoda_jax.execution.guard import check_source  # lazy: the execution package uses this one

    for label, text in (("source", tool.source), *((f"pre[{i}]", c) for i, c in enumerate(tool.pre)),
                        *((f"post[{i}]", c) for i, c in enumerate(tool.post))):
        violations = check_source(text, tool=label == "source")
        if violations:
            shown = "; ".join(str(v) for v in violations[:5])
            raise InsertRejected(Reason.MALFORMED, tool.name, f"the sandbox refuses its {label}: {shown}")


def validated_facts(tool: Tool) -> CodeFacts:
    """The code facts of ``tool``, after checking that the record agrees with its own source
    (a record built by hand, not by ``Tool.from_source``, could claim another name, id or signature)."""
    facts = analyse(tool.source)
    problems = []
    if facts.name != tool.name:
        problems.append(f"the source defines {facts.name!r}")
    if facts.code_id != tool.id:
        problems.append(f"the code's id is {facts.code_id}, the record says {tool.id}")
    try:
        sig = signature_from_ast(facts.function, tool.source)
    except TypeSyntaxError as err:
        raise InsertRejected(Reason.MALFORMED, tool.name, f"bad signature: {err}") from None
    if sig != tool.signature:
        problems.append(f"the annotations say {sig}, the record says {tool.signature}")
    if problems:
        raise InsertRejected(Reason.MALFORMED, tool.name,
                             "the record does not match its source: " + "; ".join(problems))
    return facts

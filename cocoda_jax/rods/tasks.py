"""Task records for RODS: JSON round trip of domain tasks (each through its domain), content keys for
duplicates, call graphs.

The call graph is read from the gold program's text (one ``x<i> = tool(args)`` per line), not from
the generator's own ``skeleton`` field, so a structure check does not trust what it checks.
"""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import json
import re
from typing import Any

from cocoda_jax.data.domain import UnknownDomainError, domain_of, domain_of_kind
from cocoda_jax.rods.errors import RodsStateError


def task_to_dict(task: Any) -> dict:
    """A JSON-ready dict of a task of a registered domain (:mod:`cocoda_jax.data.domain`): the
    domain's record plus ``"kind"``, its task kind. TypeError for a task no domain owns."""
    domain = domain_of(task)
    record = domain.task_to_dict(task)
    if "kind" in record:
        raise ValueError(f"the {domain.name} domain's task record uses the reserved key 'kind'")
    return {**record, "kind": domain.kind}


def task_from_dict(d: Any, where: str = "task") -> Any:
    """Inverse of :func:`task_to_dict` through the domain of the record's ``kind`` (``"math"``,
    ``"table"``, ...); a malformed record raises :class:`RodsStateError` at ``where``. The gold
    program must be straight-line calls (:func:`call_graph`)."""
    try:
        domain = domain_of_kind(d.get("kind") if isinstance(d, dict) else None)
    except UnknownDomainError as exc:
        raise RodsStateError(where, f"not a task record ({exc})") from None
    try:
        task = domain.task_from_dict(d)
        call_graph(task.program)
    except (TypeError, ValueError, KeyError) as exc:
        raise RodsStateError(where, f"malformed task: {exc}") from None
    return task


def _norm_question(q: str) -> str:
    return " ".join(q.lower().split())


def content_keys(task: Any) -> tuple[str, str]:
    """Two keys that make a duplicate: the normalised question, and the program with its inputs
    (the same computation under other words is still a duplicate)."""
    q = hashlib.sha256(_norm_question(task.question).encode()).hexdigest()[:20]
    p = hashlib.sha256(json.dumps([task.program, list(task.inputs)], default=str, sort_keys=True).encode()).hexdigest()[:20]
    return f"q:{q}", f"p:{p}"


@dataclasses.dataclass(frozen=True)
class CallGraph:
    """Calls of a straight-line program: ``tools[i]`` is line ``i``'s tool; ``args[i]`` its argument
    shapes (``"n"`` an input, an int an earlier line, a tuple a list literal, ``"c"`` a constant);
    ``depth`` the longest chain of dependent calls."""

    tools: tuple[str, ...]
    args: tuple[tuple, ...]
    depth: int

    @property
    def edges(self) -> tuple[tuple[int, int], ...]:
        out = set()

        def refs(a):
            if isinstance(a, tuple):
                for x in a:
                    yield from refs(x)
            elif isinstance(a, int):
                yield a

        for i, args in enumerate(self.args):
            for a in args:
                for r in refs(a):
                    out.add((r, i))
        return tuple(sorted(out))


_LINE_VAR = re.compile(r"^x(\d+)$")


def call_graph(program: str) -> CallGraph:
    """Parse a gold program into its :class:`CallGraph`; ValueError if it is not straight-line calls."""
    try:
        tree = ast.parse(program)
    except SyntaxError as exc:
        raise ValueError(f"program does not parse: {exc}") from None
    tools: list[str] = []
    args: list[tuple] = []
    names: dict[str, int] = {}

    def shape(node: ast.AST):
        if isinstance(node, ast.Name):
            if node.id in names:
                return names[node.id]
            return "n"
        if isinstance(node, ast.List):
            return tuple(shape(e) for e in node.elts)
        if isinstance(node, ast.Constant):
            return "c"
        raise ValueError(f"unsupported argument {ast.dump(node)}")

    for stmt in tree.body:
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)):
            raise ValueError(f"line {stmt.lineno}: not a single assignment")
        target = stmt.targets[0].id
        if target == "answer":
            continue
        call = stmt.value
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and not call.keywords):
            raise ValueError(f"line {stmt.lineno}: not a positional tool call")
        names[target] = len(tools)
        tools.append(call.func.id)
        args.append(tuple(shape(a) for a in call.args))
    depth_of: list[int] = []
    for a in args:
        deps = [depth_of[r] for r in _refs(a)]
        depth_of.append(1 + max(deps, default=0))
    return CallGraph(tuple(tools), tuple(args), max(depth_of, default=0))


def _refs(args) -> list[int]:
    out = []
    for a in args:
        if isinstance(a, tuple):
            out.extend(_refs(a))
        elif isinstance(a, int):
            out.append(a)
    return out

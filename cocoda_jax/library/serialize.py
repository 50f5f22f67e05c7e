"""Stable JSON for a library snapshot, and loading that re-checks everything.

Format (``schema`` ``cocoda_jax.library/1``)::

    {"max_depth": 8, "schema": "cocoda_jax.library/1",
     "tools": [{"name", "source", "signature", "description", "pre", "post", "complexity",
                "examples": [{"args": {...}, "expected": ...}], "id", "calls", "depth", "flat"}, ...]}

Tools appear in topological order (by depth, then name), one per line; keys are sorted; example
values go through :mod:`cocoda_jax.values`; the text is ASCII and ends with a newline. The same
snapshot always gives the same text.

``signature``, ``id``, ``calls``, ``depth`` and ``flat`` are derived facts, written for readers of the
file. Loading recomputes all of them from the sources and refuses a file whose stored facts disagree,
so a hand edit cannot make the file claim an edge, a depth or an id the code does not have.
"""

from __future__ import annotations

import gc
import json
from typing import Any

from cocoda_jax import values
from cocoda_jax.library.analysis import analyse
from cocoda_jax.library.errors import InsertRejected, LibraryFormatError
from cocoda_jax.library.graph import depth_and_flat, find_cycle
from cocoda_jax.library.tool import Tool

SCHEMA = "cocoda_jax.library/1"
_TOP_KEYS = {"schema", "max_depth", "tools"}
_TOOL_KEYS = {"name", "source", "signature", "description", "pre", "post", "complexity", "examples", "id",
              "calls", "depth", "flat"}


def snapshot_to_json(snap) -> str:
    tools = []
    for name in snap.topological_order():
        tool = snap.tool(name)
        tools.append({
            "name": name, "source": tool.source, "signature": str(tool.signature),
            "description": tool.description, "pre": list(tool.pre), "post": list(tool.post),
            "complexity": tool.complexity,
            "examples": [{"args": values.encode(args), "expected": values.encode(expected)}
                         for args, expected in tool.examples],
            "id": tool.id, "calls": list(snap.children(name)), "depth": snap.depth(name), "flat": snap.flat(name),
        })
    # one tool per line: diffs between rounds show whole tools, and the C encoder stays in use
    lines = [json.dumps(entry, sort_keys=True, ensure_ascii=True, allow_nan=False) for entry in tools]
    body = "[\n" + ",\n".join(lines) + "\n]" if lines else "[]"
    return f'{{"max_depth": {snap.max_depth}, "schema": {json.dumps(SCHEMA)}, "tools": {body}}}\n'



def _need(cond: bool, where: str, detail: str) -> None:
    if not cond:
        raise LibraryFormatError(where, detail)


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _keys(obj: Any, expected: set[str], where: str) -> None:
    _need(isinstance(obj, dict), where, f"expected an object, got {type(obj).__name__}")
    missing, extra = sorted(expected - obj.keys()), sorted(obj.keys() - expected)
    _need(not missing, where, f"missing key(s) {missing}")
    _need(not extra, where, f"unknown key(s) {extra}")


def _tool_from_entry(entry: Any, i: int) -> tuple[Tool, str]:
    where = f"tools[{i}]"
    _need(isinstance(entry, dict), where, f"expected an object, got {type(entry).__name__}")
    name = entry.get("name")
    _need(isinstance(name, str), where, "'name' must be a string")
    where = f"tools[{i}] {name!r}"
    _keys(entry, _TOOL_KEYS, where)
    for key in ("source", "signature", "description", "id"):
        _need(isinstance(entry[key], str), where, f"{key!r} must be a string")
    _need(entry["complexity"] is None or isinstance(entry["complexity"], str), where,
          "'complexity' must be a string or null")
    for key in ("pre", "post", "calls"):
        _need(isinstance(entry[key], list) and all(isinstance(x, str) for x in entry[key]), where,
              f"{key!r} must be a list of strings")
    _need(isinstance(entry["examples"], list), where, "'examples' must be a list")
    examples = []
    for j, ex in enumerate(entry["examples"]):
        _keys(ex, {"args", "expected"}, f"{where} examples[{j}]")
        args = values.decode(ex["args"])
        _need(isinstance(args, dict), f"{where} examples[{j}]", "'args' must be an object of parameter values")
        examples.append((args, values.decode(ex["expected"])))
    try:
        tool = Tool.from_source(entry["source"], entry["description"], pre=entry["pre"], post=entry["post"],
                                examples=examples, complexity=entry["complexity"])
    except InsertRejected as err:
        raise LibraryFormatError(where, err.detail) from None
    _need(tool.name == name, where, f"the source defines a function named {tool.name!r}")
    _need(tool.id == entry["id"], where, f"stored id {entry['id']} does not match the code's id {tool.id}")
    _need(str(tool.signature) == entry["signature"], where,
          f"stored signature {entry['signature']!r} does not match the annotations {str(tool.signature)!r}")
    return tool, where


def snapshot_from_json(text: str | bytes, runner: Any = None, verify_examples: bool = False,
                       timeout_s: float | None = None):
    """Parses and re-checks a library; :class:`LibraryFormatError` names the first problem.

    Every tool is rebuilt from its source and re-inserted through INSERTTOOL's static checks (ids,
    edges from code, known dependencies, acyclicity, depth bound, call types, duplicates); with
    ``verify_examples`` its examples, specs and duplicate behaviour are re-run through ``runner``
    too. Tools may appear in any order; a cycle is reported as a path.

    The cyclic garbage collector is paused while loading: the load allocates millions of
    long-lived objects (records, ASTs under analysis), and the collector's repeated full passes
    over them made a 25,600-tool file take twice as long.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _load(text, runner, verify_examples, timeout_s)
    finally:
        if was_enabled:
            gc.enable()


def _load(text: str | bytes, runner: Any, verify_examples: bool, timeout_s: float | None):
    from cocoda_jax.library.snapshot import LibrarySnapshot  # the snapshot module imports this one lazily

    if isinstance(text, (bytes, bytearray)):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError as err:
            raise LibraryFormatError("file", f"not UTF-8 text (byte {err.start})") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as err:
        raise LibraryFormatError("file", f"not valid JSON at line {err.lineno}, column {err.colno}: {err.msg}") from None
    _keys(doc, _TOP_KEYS, "top level")
    _need(doc["schema"] == SCHEMA, "schema", f"expected {SCHEMA!r}, got {doc['schema']!r}")
    _need(_is_int(doc["max_depth"]) and doc["max_depth"] >= 0, "max_depth",
          f"must be an integer >= 0, got {doc['max_depth']!r}")
    _need(isinstance(doc["tools"], list), "tools", "must be a list")

    tools: dict[str, tuple[Tool, str, dict]] = {}
    children: dict[str, tuple[str, ...]] = {}
    for i, entry in enumerate(doc["tools"]):
        tool, where = _tool_from_entry(entry, i)
        _need(tool.name not in tools, where, f"a second tool named {tool.name!r} (first at {tools.get(tool.name, ('', ''))[1]})")
        derived = analyse(tool.source).calls
        _need(entry["calls"] == list(derived), where,
              f"stored calls {entry['calls']} differ from the calls in the code {list(derived)}")
        tools[tool.name] = (tool, where, entry)
        children[tool.name] = derived

    for name, calls in children.items():
        unknown = [c for c in dict.fromkeys(calls) if c not in children]
        _need(not unknown, tools[name][1], f"calls {unknown}, which the file does not define")
    cycle = find_cycle(children)
    _need(cycle is None, "tools", f"the calls form a cycle: {' -> '.join(cycle or ())}")
    depth, flat = depth_and_flat(children)

    snap = LibrarySnapshot.empty(max_depth=doc["max_depth"])
    for name in sorted(tools, key=lambda n: (depth[n], n)):
        tool, where, entry = tools[name]
        try:
            snap = snap._insert(tool, runner=runner, timeout_s=timeout_s, run_checks=verify_examples,
                                update_index=False)
        except InsertRejected as err:
            raise LibraryFormatError(where, f"{err.reason}: {err.detail}") from None
        for key, value in (("depth", depth[name]), ("flat", flat[name])):
            _need(_is_int(entry[key]) and entry[key] == value, where,
                  f"stored {key} {entry[key]!r} differs from {value} computed from the code")
    return snap._with_rebuilt_index()

"""Stable JSON for a library snapshot, and loading that re-checks everything the file could lie about.

Format (``schema`` ``cocoda_jax.library/2``)::

    {"max_depth": 8, "schema": "cocoda_jax.library/2",
     "tools": [{"name", "source", "signature", "description", "pre", "post", "complexity",
                "examples": [{"args": {...}, "expected": ...}], "id", "calls", "depth", "flat",
                "digest"}, ...]}

Tools appear in topological order (by depth, then name), one per line; keys are sorted; example
values go through :mod:`cocoda_jax.values`; the text is ASCII and ends with a newline. The same
snapshot always gives the same text.

``signature``, ``id``, ``calls``, ``depth`` and ``flat`` are derived facts, written for readers of the
file. ``digest`` is the sha256 of the tool's entry without it (its canonical JSON line): the writer
derived every fact of the entry from the code when the tool entered the library, and the digest says
the entry is still byte for byte what that writer wrote.

Loading trusts nothing it cannot check cheaply:

* *Structure*, for every tool: keys and value types, unique names and code ids, calls to known tools,
  no cycle, the depth bound, and stored depth and flat size equal to what the stored calls give.
* *What the code says* (name, id, signature and calls from the source; INSERTTOOL's static checks:
  the sandbox's rules, call types, conditions, examples binding the parameters): re-derived from
  the source for every tool whose digest is missing (a ``/1`` file) or does not match (a hand edit,
  a corrupt byte), and for all tools with ``rederive=True``. A tool whose digest matches is taken
  as written: parsing 100,000 sources is what made a load take minutes.

So a hand edit cannot make the file claim an edge, a depth or an id the code does not have unless
the editor also recomputes the digest on purpose; the digest is a checksum, not a signature. Load
files from elsewhere with ``rederive=True`` (``verify_examples=True`` implies it and also re-runs
examples, specs and duplicate behaviour in the sandbox). Files in the older ``/1`` format (no
digests) load with every fact re-derived.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import hashlib
import json
from typing import Any, NamedTuple

from cocoda_jax import values
from cocoda_jax.library import checks
from cocoda_jax.library.analysis import CodeFacts, analyse
from cocoda_jax.library.errors import InsertRejected, LibraryFormatError
from cocoda_jax.library.graph import depth_and_flat, find_cycle
from cocoda_jax.library.tool import Tool
from cocoda_jax.types import Signature, TypeSyntaxError, parse_signature

SCHEMA = "cocoda_jax.library/2"
SCHEMA_V1 = "cocoda_jax.library/1"  # no digests: still loads, every fact re-derived
_TOP_KEYS = {"schema", "max_depth", "tools"}
_V1_TOOL_KEYS = {"name", "source", "signature", "description", "pre", "post", "complexity", "examples", "id",
                 "calls", "depth", "flat"}
_TOOL_KEYS = {SCHEMA_V1: _V1_TOOL_KEYS, SCHEMA: _V1_TOOL_KEYS | {"digest"}}


def _canonical_line(entry: dict) -> str:
    return json.dumps(entry, sort_keys=True, ensure_ascii=True, allow_nan=False)


def entry_digest(entry: dict) -> str:
    """sha256 (hex) of a tool entry's canonical JSON line without its ``digest`` key."""
    body = {k: v for k, v in entry.items() if k != "digest"}
    return hashlib.sha256(_canonical_line(body).encode("ascii")).hexdigest()


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
    for entry in tools:
        entry["digest"] = entry_digest(entry)
    # one tool per line: diffs between rounds show whole tools, and the C encoder stays in use
    lines = [_canonical_line(entry) for entry in tools]
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


def _checked_entry(entry: Any, i: int, keys: set[str]) -> str:
    """Checks an entry's keys and value types; returns its place for error messages."""
    where = f"tools[{i}]"
    _need(isinstance(entry, dict), where, f"expected an object, got {type(entry).__name__}")
    name = entry.get("name")
    _need(isinstance(name, str), where, "'name' must be a string")
    where = f"tools[{i}] {name!r}"
    _keys(entry, keys, where)
    for key in ("source", "signature", "description", "id") + (("digest",) if "digest" in keys else ()):
        _need(isinstance(entry[key], str), where, f"{key!r} must be a string")
    _need(entry["complexity"] is None or isinstance(entry["complexity"], str), where,
          "'complexity' must be a string or null")
    for key in ("pre", "post", "calls"):
        _need(isinstance(entry[key], list) and all(isinstance(x, str) for x in entry[key]), where,
              f"{key!r} must be a list of strings")
    _need(isinstance(entry["examples"], list), where, "'examples' must be a list")
    return where


def _examples(entry: dict, where: str) -> list[tuple[dict, Any]]:
    examples = []
    for j, ex in enumerate(entry["examples"]):
        _keys(ex, {"args", "expected"}, f"{where} examples[{j}]")
        args = values.decode(ex["args"])
        _need(isinstance(args, dict), f"{where} examples[{j}]", "'args' must be an object of parameter values")
        examples.append((args, values.decode(ex["expected"])))
    return examples


def _derived_tool(entry: dict, where: str) -> tuple[Tool, CodeFacts]:
    """The tool rebuilt from its source, with the stored facts compared to what the code says."""
    try:
        tool = Tool.from_source(entry["source"], entry["description"], pre=entry["pre"], post=entry["post"],
                                examples=_examples(entry, where), complexity=entry["complexity"])
    except InsertRejected as err:
        raise LibraryFormatError(where, err.detail) from None
    _need(tool.name == entry["name"], where, f"the source defines a function named {tool.name!r}")
    _need(tool.id == entry["id"], where, f"stored id {entry['id']} does not match the code's id {tool.id}")
    _need(str(tool.signature) == entry["signature"], where,
          f"stored signature {entry['signature']!r} does not match the annotations {str(tool.signature)!r}")
    facts = analyse(tool.source)
    _need(entry["calls"] == list(facts.calls), where,
          f"stored calls {entry['calls']} differ from the calls in the code {list(facts.calls)}")
    return tool, facts


@functools.lru_cache(maxsize=65536)
def _signature(text: str) -> Signature:
    return parse_signature(text)  # signatures repeat across a library; Signature is immutable


def _vouched_tool(entry: dict, where: str) -> Tool:
    """The tool as written: its digest vouches that the writer derived these facts from this code."""
    try:
        sig = _signature(entry["signature"])
    except TypeSyntaxError as err:  # a digest over a bad signature: the writer was not this code
        raise LibraryFormatError(where, f"bad signature: {err}") from None
    return Tool(name=entry["name"], source=entry["source"], signature=sig, description=entry["description"],
                pre=tuple(entry["pre"]), post=tuple(entry["post"]), examples=tuple(_examples(entry, where)),
                complexity=entry["complexity"], id=entry["id"])


@contextlib.contextmanager
def collector_paused():
    """Pauses the cyclic garbage collector while loading: a load allocates millions of long-lived
    objects (records, ASTs under analysis), and the collector's repeated full passes over them made
    a 25,600-tool file take twice as long."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


class _Entry(NamedTuple):
    tool: Tool
    where: str
    stored: dict
    facts: CodeFacts | None  # None: vouched by its digest, not re-derived


class LoadedLibrary(NamedTuple):
    """A library file read and structurally checked, not yet a snapshot: ``order`` is the insert
    order (by depth, then name); ``children``, ``depth`` and ``flat`` come from the stored calls."""
    max_depth: int
    order: list[str]
    entries: dict[str, _Entry]
    children: dict[str, tuple[str, ...]]
    depth: dict[str, int]
    flat: dict[str, int]


def read_library(text: str | bytes, *, rederive: bool) -> LoadedLibrary:
    """Parses a library file and checks its structure (keys, value types, unique names, calls to
    known tools, no cycle); a tool whose digest does not vouch for its entry (every tool, with
    ``rederive``) has its facts re-derived from its source."""
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
    _need(doc["schema"] in _TOOL_KEYS, "schema", f"expected {SCHEMA!r} (or {SCHEMA_V1!r}), got {doc['schema']!r}")
    max_depth = doc["max_depth"]
    _need(_is_int(max_depth) and max_depth >= 0, "max_depth", f"must be an integer >= 0, got {max_depth!r}")
    _need(isinstance(doc["tools"], list), "tools", "must be a list")

    keys = _TOOL_KEYS[doc["schema"]]
    entries: dict[str, _Entry] = {}
    children: dict[str, tuple[str, ...]] = {}
    for i, stored in enumerate(doc["tools"]):
        where = _checked_entry(stored, i, keys)
        name = stored["name"]
        _need(name not in entries, where, f"a second tool named {name!r} (first at {entries[name].where if name in entries else ''})")
        if not rederive and "digest" in stored and stored["digest"] == entry_digest(stored):
            entries[name] = _Entry(_vouched_tool(stored, where), where, stored, None)
            children[name] = tuple(stored["calls"])
        else:
            tool, facts = _derived_tool(stored, where)
            entries[name] = _Entry(tool, where, stored, facts)
            children[name] = facts.calls

    for name, calls in children.items():
        unknown = [c for c in dict.fromkeys(calls) if c not in children]
        _need(not unknown, entries[name].where, f"calls {unknown}, which the file does not define")
    cycle = find_cycle(children)
    _need(cycle is None, "tools", f"the calls form a cycle: {' -> '.join(cycle or ())}")
    depth, flat = depth_and_flat(children)
    order = sorted(entries, key=lambda n: (depth[n], n))

    return LoadedLibrary(max_depth, order, entries, children, depth, flat)


def check_stored_facts(loaded: LoadedLibrary, name: str) -> None:
    """The entry's stored depth and flat size equal what its stored calls give."""
    e = loaded.entries[name]
    for key, value in (("depth", loaded.depth[name]), ("flat", loaded.flat[name])):
        _need(_is_int(e.stored[key]) and e.stored[key] == value, e.where,
              f"stored {key} {e.stored[key]!r} differs from {value} computed from the code")


def statically_checked(loaded: LoadedLibrary):
    """INSERTTOOL's static checks over the file, every tool after the tools it calls, as INSERTTOOL
    saw them; returns a snapshot's tables ``(tools, children, depth, flat)``."""
    tools: dict[str, Tool] = {}
    ids: dict[str, str] = {}
    for name in loaded.order:
        e = loaded.entries[name]
        try:
            if e.facts is None:
                checks.identity_checks(e.tool, tools, ids)
                checks.depth_check(name, loaded.children[name], loaded.depth, loaded.max_depth)
            else:
                checks.check_sandbox_rules(e.tool)
                checks.static_checks(e.tool, e.facts, tools, ids, loaded.depth, loaded.max_depth)
        except InsertRejected as err:
            raise LibraryFormatError(e.where, f"{err.reason}: {err.detail}") from None
        check_stored_facts(loaded, name)
        tools[name] = e.tool
        ids[e.tool.id] = name
    return tools, loaded.children, loaded.depth, loaded.flat

"""BFCL function docs as library Tools: names, L1 types, L2 descriptions, L3 pre-conditions, bodies.

The Berkeley Function Calling Leaderboard (``bfcl-eval``, installed without its dependencies; only
its ``data/`` directory and one constants module are read) describes every function by a JSON doc
``{"name", "description", "parameters": {"type": "dict", "properties", "required"}, ["response"]}``.
This module turns such a doc into a :class:`~cocoda_jax.library.Tool` by generating Python source
whose annotations carry the L1 signature (``Tool.from_source`` reads them)::

    tool = tool_from_doc(doc)                                  # documentation-only body
    tool = tool_from_doc(doc, body="environment", class_name="GorillaFileSystem")
    lib = library_from_docs(docs)                              # BfclLibrary; lib.snapshot is a LibrarySnapshot
    lib = multi_turn_library(MULTI_TURN_CLASSES)               # environment-bodied tools of the 8 classes
    lib.names.bfcl(tool_name), lib.tool_for(doc)

**Names.** :func:`tool_name` maps a BFCL name to a tool name: ``.`` -> ``_`` (as BFCL's own
OpenAI-style handlers do), accents dropped (NFKD), every other character outside ``[A-Za-z0-9_]``
-> ``_``, a leading digit or underscore gets the prefix ``f_``/``f``, and a name that is a Python
keyword or builtin (``sum``, ``help``) or the sandbox's ``environment_call`` gets a trailing
``_``. Different BFCL names can map to the same tool name (``a.b`` and ``a_b``), and one BFCL name
can have several distinct docs (``get_current_weather`` has 33 in the single-turn files): a
:class:`NameMap` over a pool resolves such collisions deterministically -- the first entry of each
base name (in pool order) keeps it, later ones get the smallest free ``_2``, ``_3``, ... -- and
maps each tool name back to its BFCL name. :func:`library_from_docs` sorts its pool by
``(BFCL name, class, canonical JSON)`` first, so the result does not depend on the input order.
Parameter names follow the same rule (plus: a name the sandbox's guard refuses to read in a
pre-condition -- ``id``, ``input``, ``property``, ``dir``, ``credits`` ... -- gets a trailing ``_``);
:attr:`BfclLibrary.params` maps them back.

**Types** (:func:`schema_type`; Java and JavaScript names are BFCL's, from its type tables):

=======================================================  ===================================================
BFCL / JSON-schema ``type``                              L1 type
=======================================================  ===================================================
``integer`` ``int`` ``long`` ``short`` ``byte``          ``int``
``Bigint``
``float`` ``number`` ``double``                          ``float``
``string`` ``String`` ``char``                           ``str``
``boolean`` ``bool`` ``Boolean``                         ``bool``
``array`` ``list`` ``Array`` ``ArrayList`` ``Queue``     ``list[T]`` with ``T`` from ``items``; ``list[Any]``
``Stack`` ``Set``                                        without ``items`` (no set type in L1: ``Set`` is a list)
``tuple``                                                ``list[T]`` (BFCL's AST checker takes a tuple
                                                         parameter's value as a list)
``dict`` ``object`` ``HashMap`` ``Hashtable``            ``dict[str, Any]`` (L1 has no record types; nested
                                                         ``properties`` stay in the description);
                                                         ``dict[str, T]`` with ``additionalProperties: T``
``any`` ``Any``                                          ``Any``
``null``                                                 ``None``
``[T, "null"]`` (a JSON-schema type list)                ``Optional[T]``
anything else, or no ``type``                            ``Any``, with the reason recorded in the notes
=======================================================  ===================================================

A parameter whose own doc contradicts its declared scalar type -- an ``enum`` or ``default`` that
is not of that type (the live categories' ``"dontcare"`` in a boolean or integer enum, an integer
default ``"5 years"``) -- is typed ``Any``, with the reason in the notes; values that are merely
spelled as strings (``"false"``, ``"3"``, ``"0.3"``, ``"None"``) are converted to the type first.

**Parameters.** Required parameters come first, then the optional ones, each group in the doc's
property order (Python puts parameters without defaults first). An optional parameter gets the
doc's ``default`` when it has one (converted as above), else ``None`` with the type
``Optional[T]`` (``Any`` stays ``Any``). A ``required`` entry naming no property is a
:class:`BfclDocError`.

**Description (L2)**: the doc's description (a multi-turn doc's ``"This tool belongs to ...
Tool description: X"`` is reordered to put ``X`` first, so the one-line record says what the tool
does), then ``Parameters:`` with each parameter's first sentence (at most
:data:`PARAM_DESC_MAX_CHARS` characters each, :data:`PARAMS_MAX_CHARS` in all; the rest is cut
with ``...``).

**Pre-conditions (L3)**: Python boolean expressions over the parameters, like the other tools'
``pre``: ``x is not None`` per required parameter; ``x in ('a', 'b')`` per enum (an optional
parameter's default is allowed too); ``all(e in (...) for e in xs)`` for an array whose items (or
whose own ``enum``) are enumerated.

**Bodies.** ``body="doc"`` (default): the function raises ``NotImplementedError`` saying the tool
is a documentation-only record (single-turn BFCL functions have no implementation).
``body="environment"``: the function body is exactly
``return environment_call('<Class>', '<method>', <kw>=<param>, ...)`` (keywords are the BFCL
parameter names; one that is not an identifier is passed through ``**{...}``), a call to the name
``environment_call`` the sandbox provides at run time (its environment plugin; ``kind`` is the
class). Such tools pass the sandbox's static guard, and INSERTTOOL takes them
(``environment_call`` is among the library's ``BUILTIN_NAMES``).

**Result type**: from the doc's ``response`` schema when present (every multi-turn doc has one:
``dict[str, Any]``), else ``Any``.

**Docs that do not convert**: none. Every doc of the 13 single-turn category files with a
``function`` list (8,726 docs, 3,258 distinct) and every multi-turn doc (12 files, 162 docs)
converts (``tests/data/test_data_bfcl_tools.py`` checks it against :data:`KNOWN_FAILURES`, which is
empty). A doc that cannot be converted raises :class:`BfclDocError` naming it; nothing is dropped.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import json
import keyword
import re
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from cocoda_jax.errors import CocodaError
from cocoda_jax.library import DEFAULT_MAX_DEPTH, BUILTIN_NAMES, InsertRejected, LibrarySnapshot, Tool
from third_party.benchmarks import bfcl as loader
from cocoda_jax.types import (
    ANY, BOOL, FLOAT, INT, NONE, STR, TAnyType, TCon, Type, dict_of, list_of, optional,
)

#: The multi-turn classes BFCL can execute (its ``executable_backend_config``); memory and web
#: search share the pipeline but are not part of the multi-turn suite.
MULTI_TURN_CLASSES = loader.MULTI_TURN_CLASSES

#: Single-turn category files that carry a ``function`` list of docs.
SINGLE_TURN_CATEGORIES = loader.DOC_CATEGORIES

#: Docs known not to convert, ``(file, BFCL name) -> reason``. Empty: every doc converts.
KNOWN_FAILURES: Mapping[tuple[str, str], str] = {}

BODIES = ("doc", "environment")
ENVIRONMENT_CALL = "environment_call"
PARAM_DESC_MAX_CHARS = 90
PARAMS_MAX_CHARS = 400


class BfclError(CocodaError, ValueError):
    """Base of this module's errors."""


class BfclDocError(BfclError):
    """A BFCL doc that cannot be converted; ``doc_name`` and ``where`` (file/entry, when known) name it."""

    def __init__(self, doc_name: str | None, reason: str, where: str | None = None):
        self.doc_name, self.reason, self.where = doc_name, reason, where
        at = f" (from {where})" if where else ""
        super().__init__(f"BFCL doc {doc_name!r}{at}: {reason}")


# ---------------------------------------------------------------------------------------------
# Names

_NON_WORD = re.compile(r"[^A-Za-z0-9_]")
_RESERVED = frozenset({ENVIRONMENT_CALL, "Any", "Optional"})  # called by or imported into the generated source
_RESERVED_PARAMS = frozenset({ENVIRONMENT_CALL, "result", "all"})  # "all" is called by the array pre-conditions


def _ascii_word(text: str) -> str:
    decomposed = unicodedata.normalize("NFKD", text)
    plain = "".join(ch for ch in decomposed if not unicodedata.combining(ch))
    return _NON_WORD.sub("_", plain.replace(".", "_"))


def tool_name(bfcl_name: str) -> str:
    """The tool name of a BFCL function name (see the module docstring); not unique on its own."""
    if not isinstance(bfcl_name, str):
        raise TypeError(f"tool_name expects str, got {type(bfcl_name).__name__}")
    name = _ascii_word(bfcl_name)
    if not name:
        return "f"
    if name[0].isdigit():
        name = "f_" + name
    elif name[0] == "_":
        name = "f" + name
    if keyword.iskeyword(name) or name in BUILTIN_NAMES or name in _RESERVED:
        name += "_"
    return name


def _param_identifier(bfcl_param: str) -> str:
    from cocoda_jax.execution.guard import FORBIDDEN_BUILTINS

    name = _ascii_word(bfcl_param) or "arg"
    if name[0].isdigit():
        name = "p_" + name
    elif name.startswith("__"):
        name = "p" + name
    if keyword.iskeyword(name) or name in FORBIDDEN_BUILTINS or name in _RESERVED_PARAMS:
        name += "_"
    return name


def _resolve(bases: Sequence[str]) -> tuple[str, ...]:
    """Unique names for ``bases`` (in order): the first of each base keeps it, later ones get the
    smallest free ``_2``, ``_3`` ...; every plain base is reserved before any suffix is handed out."""
    used = set(bases)
    out: list[str | None] = [None] * len(bases)
    first: set[str] = set()
    for i, b in enumerate(bases):
        if b not in first:
            first.add(b)
            out[i] = b
    for i, b in enumerate(bases):
        if out[i] is None:
            n = 2
            while f"{b}_{n}" in used:
                n += 1
            out[i] = f"{b}_{n}"
            used.add(out[i])
    return tuple(out)  # type: ignore[arg-type]


@dataclasses.dataclass(frozen=True)
class NameMap:
    """Tool names for a pool of BFCL names (one per pool entry, repeats allowed) and back.

    ``tool_names[i]`` is the unique tool name of entry ``i`` (``bfcl_names[i]``)."""

    bfcl_names: tuple[str, ...]
    tool_names: tuple[str, ...]

    @classmethod
    def build(cls, bfcl_names: Iterable[str]) -> "NameMap":
        names = tuple(bfcl_names)
        return cls(names, _resolve([tool_name(n) for n in names]))

    @functools.cached_property
    def _to_bfcl(self) -> dict[str, str]:
        return dict(zip(self.tool_names, self.bfcl_names))

    @functools.cached_property
    def _to_tools(self) -> dict[str, tuple[str, ...]]:
        out: dict[str, list[str]] = {}
        for b, t in zip(self.bfcl_names, self.tool_names):
            out.setdefault(b, []).append(t)
        return {b: tuple(ts) for b, ts in out.items()}

    def bfcl(self, tool: str) -> str:
        """The BFCL name of a tool name (the inverse mapping); ``KeyError`` when not in the pool."""
        return self._to_bfcl[tool]

    def tools(self, bfcl_name: str) -> tuple[str, ...]:
        """Every tool name of ``bfcl_name`` in the pool (several when it has several docs)."""
        return self._to_tools.get(bfcl_name, ())

    def tool(self, bfcl_name: str) -> str:
        """The one tool name of ``bfcl_name``; ``KeyError`` when absent or ambiguous."""
        found = self.tools(bfcl_name)
        if len(found) != 1:
            raise KeyError(f"BFCL name {bfcl_name!r} has {len(found)} tools in this pool: {list(found)}")
        return found[0]

    def as_dict(self) -> dict[str, str]:
        """tool name -> BFCL name."""
        return dict(self._to_bfcl)

    def collisions(self) -> dict[str, tuple[str, ...]]:
        """Base tool name -> the tool names it was resolved to, where more than one entry shared it."""
        out: dict[str, list[str]] = {}
        for b, t in zip(self.bfcl_names, self.tool_names):
            out.setdefault(tool_name(b), []).append(t)
        return {k: tuple(v) for k, v in out.items() if len(v) > 1}


# ---------------------------------------------------------------------------------------------
# Types

_SCALARS: Mapping[str, TCon] = {
    **dict.fromkeys(("integer", "int", "long", "short", "byte", "Bigint"), INT),
    **dict.fromkeys(("float", "number", "double"), FLOAT),
    **dict.fromkeys(("string", "String", "char"), STR),
    **dict.fromkeys(("boolean", "bool", "Boolean"), BOOL),
}
_LISTS = frozenset({"array", "list", "Array", "ArrayList", "Queue", "Stack", "Set", "tuple"})
_DICTS = frozenset({"dict", "object", "HashMap", "Hashtable"})
_ANYS = frozenset({"any", "Any"})


def schema_type(schema: Any, notes: list[str] | None = None, where: str = "") -> Type:
    """The L1 type of a BFCL/JSON-schema fragment (table in the module docstring). Every choice
    that loses information (unknown type -> ``Any``) appends a reason to ``notes``."""
    def note(msg: str) -> None:
        if notes is not None:
            notes.append(f"{where or 'schema'}: {msg}")

    if not isinstance(schema, Mapping):
        note(f"schema is a {type(schema).__name__}, not an object; mapped to Any")
        return ANY
    t = schema.get("type")
    if isinstance(t, list):
        others = [x for x in t if x != "null"]
        if len(others) == 1:
            inner = schema_type({**schema, "type": others[0]}, notes, where)
            return inner if len(others) == len(t) or isinstance(inner, TAnyType) else optional(inner)
        note(f"union type {t!r} has no L1 form; mapped to Any")
        return ANY
    if not isinstance(t, str) or not t:
        note(f"no type given ({t!r}); mapped to Any")
        return ANY
    if t in _SCALARS:
        return _SCALARS[t]
    if t in _LISTS:
        items = schema.get("items")
        if items is None:
            return list_of(ANY)
        return list_of(schema_type(items, notes, f"{where}[]" if where else "[]"))
    if t in _DICTS:
        extra = schema.get("additionalProperties")
        if isinstance(extra, Mapping):
            return dict_of(STR, schema_type(extra, notes, f"{where}{{}}"))
        return dict_of(STR, ANY)
    if t in _ANYS:
        return ANY
    if t == "null":
        return NONE
    note(f"unknown BFCL type {t!r}; mapped to Any")
    return ANY


_TRUE, _FALSE = frozenset({"true"}), frozenset({"false"})
_INT_TEXT = re.compile(r"[+-]?\d+\Z")
_FLOAT_TEXT = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\Z")
_MISSING = object()


def _fits(value: Any, t: Type) -> bool:
    """Whether a JSON value is of the (outer) type ``t``; ``Any`` and containers' items are not inspected."""
    if value is None:
        return isinstance(t, TCon) and t.name in ("Optional", "None")
    if isinstance(t, TCon) and t.name == "Optional":
        return _fits(value, t.args[0])
    if not isinstance(t, TCon):
        return True
    if t == BOOL:
        return isinstance(value, bool)
    if t == INT:
        return isinstance(value, int) and not isinstance(value, bool)
    if t == FLOAT:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if t == STR:
        return isinstance(value, str)
    if t.name == "list":
        return isinstance(value, list)
    if t.name == "dict":
        return isinstance(value, dict)
    return True


def _convert(value: Any, t: Type) -> Any:
    """``value`` as a value of ``t`` when it is one or is one spelled as a string; else _MISSING."""
    if isinstance(value, str) and value.strip() in ("None", "null"):
        return None  # BFCL writes a None default as text even for str parameters (the backends' is None)
    if value is None or _fits(value, t):
        return value  # a None default makes the type Optional (plan_params)
    if isinstance(value, str) and isinstance(t, TCon):
        s = value.strip()
        if t == BOOL and s.lower() in _TRUE | _FALSE:
            return s.lower() in _TRUE
        if t == INT and _INT_TEXT.match(s):
            return int(s)
        if t == FLOAT and _FLOAT_TEXT.match(s):
            return float(s)
    return _MISSING


# ---------------------------------------------------------------------------------------------
# One doc

@dataclasses.dataclass(frozen=True)
class ParamPlan:
    """How one BFCL parameter becomes a Python parameter."""

    bfcl: str
    name: str
    type: Type
    required: bool
    default: Any          # ignored when required
    enum: tuple | None    # allowed values of the parameter itself
    item_enum: tuple | None  # allowed values of each item (arrays)
    description: str


@dataclasses.dataclass(frozen=True)
class Converted:
    """A converted doc: the tool, its parameter names back to BFCL's, and the mapping notes."""

    tool: Tool
    params: Mapping[str, str]   # python parameter name -> BFCL parameter name
    notes: tuple[str, ...]


def _first_sentence(text: str, limit: int) -> str:
    text = " ".join(str(text).split())
    m = re.search(r"(?<=[.!?])\s", text)
    if m:
        text = text[:m.start()]
    if len(text) > limit:
        text = text[:limit - 3].rstrip() + "..."
    return text


def _description(doc: Mapping[str, Any], plans: Sequence[ParamPlan]) -> str:
    desc = " ".join(str(doc.get("description") or "").split())
    head, sep, tail = desc.partition(" Tool description: ")
    if sep and head.startswith("This tool belongs to"):
        desc = f"{tail.strip()} ({head.strip()})"
    parts: list[str] = []
    used = 0
    for p in plans:
        text = _first_sentence(p.description, PARAM_DESC_MAX_CHARS).rstrip(".") if p.description else ""
        item = f"{p.name}: {text}" if text else p.name
        if used + len(item) > PARAMS_MAX_CHARS:
            parts.append("...")
            break
        parts.append(item)
        used += len(item) + 2
    if parts:
        desc = (desc + " " if desc else "") + "Parameters: " + "; ".join(parts)
        if desc[-1] not in ".!?":
            desc += "."
    return desc


def _enum_values(raw: Any, t: Type, notes: list[str], where: str) -> tuple[tuple | None, Type]:
    """(allowed values, type): the values converted to ``t``, or the type widened to Any."""
    if not isinstance(raw, list) or not raw:
        return None, t
    converted = [_convert(v, t) for v in raw]
    if all(v is not _MISSING for v in converted):
        if converted != raw:
            notes.append(f"{where}: enum values {raw!r} spelled as strings; converted to {t}")
        return tuple(converted), t
    if isinstance(t, TAnyType):
        return tuple(raw), t
    bad = [v for v, c in zip(raw, converted) if c is _MISSING]
    notes.append(f"{where}: declared {t} but the enum holds {bad!r}; typed Any")
    return tuple(raw), ANY


def plan_params(doc: Mapping[str, Any], notes: list[str] | None = None) -> tuple[ParamPlan, ...]:
    """The Python parameters of a doc, in signature order (required first)."""
    notes = notes if notes is not None else []
    name = doc.get("name")
    params = doc.get("parameters", {})
    if params is None:
        params = {}
    if not isinstance(params, Mapping):
        raise BfclDocError(name, f"'parameters' must be an object, got {type(params).__name__}")
    props = params.get("properties") or {}
    if not isinstance(props, Mapping):
        raise BfclDocError(name, f"'parameters.properties' must be an object, got {type(props).__name__}")
    required = params.get("required") or []
    if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        raise BfclDocError(name, f"'parameters.required' must be a list of names, got {required!r}")
    unknown = [r for r in required if r not in props]
    if unknown:
        raise BfclDocError(name, f"required parameter(s) {unknown} are not among the properties {list(props)}")
    order = [p for p in props if p in required] + [p for p in props if p not in required]
    py_names = _resolve([_param_identifier(p) for p in order])
    plans = []
    for bfcl, py in zip(order, py_names):
        schema = props[bfcl]
        where = f"parameter {bfcl!r}"
        if not isinstance(schema, Mapping):
            raise BfclDocError(name, f"{where}: the schema must be an object, got {type(schema).__name__}")
        t = schema_type(schema, notes, where)
        is_required = bfcl in required
        raw_enum = schema.get("enum")
        enum = item_enum = None
        if isinstance(t, TCon) and t.name == "list":
            items = schema.get("items")
            if isinstance(raw_enum, list) and raw_enum and not all(isinstance(v, list) for v in raw_enum):
                item_enum, item_t = _enum_values(raw_enum, t.args[0], notes, where)  # an array's enum lists item values
                t = list_of(item_t)
            else:
                enum, t = _enum_values(raw_enum, t, notes, where)
            if item_enum is None and isinstance(items, Mapping):
                item_enum, item_t = _enum_values(items.get("enum"), t.args[0], notes, where + " items")
                t = list_of(item_t)
        else:
            enum, t = _enum_values(raw_enum, t, notes, where)
        default: Any = None
        if not is_required:
            if "default" in schema:
                default = _convert(schema["default"], t)
                if default is _MISSING:
                    notes.append(f"{where}: declared {t} but the default is {schema['default']!r}; typed Any")
                    t, default = ANY, schema["default"]
                elif default != schema["default"] or type(default) is not type(schema["default"]):
                    notes.append(f"{where}: default {schema['default']!r} converted to {default!r}")
            if default is None and not isinstance(t, TAnyType) and not (isinstance(t, TCon) and t.name == "Optional"):
                t = optional(t)
            if enum is not None and default not in enum:
                enum = enum + (default,)
        plans.append(ParamPlan(bfcl, py, t, is_required, default, enum, item_enum,
                               str(schema.get("description") or "")))
    if any(p.name != p.bfcl for p in plans):
        renamed = {p.bfcl: p.name for p in plans if p.name != p.bfcl}
        notes.append(f"parameters renamed: {renamed}")
    return tuple(plans)


def _literal(value: Any) -> str:
    text = repr(value)
    try:
        ok = ast.literal_eval(text) == value
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        ok = False
    if not ok:
        raise BfclError(f"value {value!r} has no Python literal")
    return text


def _pre(plans: Sequence[ParamPlan]) -> list[str]:
    out = []
    for p in plans:
        if p.required:
            out.append(f"{p.name} is not None")
    for p in plans:
        if p.enum is not None:
            out.append(f"{p.name} in {_literal(p.enum)}")
        if p.item_enum is not None:
            allowed = _literal(p.item_enum)
            check = f"all(e in {allowed} for e in {p.name})"
            if not p.required and p.default is None:
                check = f"{p.name} is None or {check}"
            out.append(check)
    return out


def _uses(t: Type, name: str) -> bool:
    if isinstance(t, TAnyType):
        return name == "Any"
    return isinstance(t, TCon) and (t.name == name or any(_uses(a, name) for a in t.args))


def _source(name: str, bfcl_name: str, plans: Sequence[ParamPlan], result: Type, body: str,
            class_name: str | None) -> str:
    types = [p.type for p in plans] + [result]
    imports = [n for n in ("Any", "Optional") if any(_uses(t, n) for t in types)]
    header = f"from typing import {', '.join(imports)}\n\n\n" if imports else ""
    args = []
    for p in plans:
        arg = f"{p.name}: {p.type}"
        if not p.required:
            arg += f" = {_literal(p.default)}"
        args.append(arg)
    if body == "doc":
        message = (f"{name!r} (BFCL function {bfcl_name!r}) is a documentation-only record: "
                   f"single-turn BFCL functions have no implementation")
        line = f"raise NotImplementedError({message!r})"
    else:
        kws = [f"{p.bfcl}={p.name}" for p in plans if p.bfcl.isidentifier() and p.bfcl.isascii()
               and not keyword.iskeyword(p.bfcl) and not p.bfcl.startswith("__")]
        odd = {p.bfcl: p.name for p in plans if f"{p.bfcl}={p.name}" not in kws}
        if odd:
            kws.append("**{" + ", ".join(f"{k!r}: {v}" for k, v in odd.items()) + "}")
        line = f"return {ENVIRONMENT_CALL}({', '.join([repr(class_name), repr(bfcl_name), *kws])})"
    return f"{header}def {name}({', '.join(args)}) -> {result}:\n    {line}\n"


def convert_doc(doc: Mapping[str, Any], body: str = "doc", *, name: str | None = None,
                class_name: str | None = None, where: str | None = None) -> Converted:
    """Converts one doc (see the module docstring); ``name`` overrides :func:`tool_name` (a pool's
    :class:`NameMap` passes the resolved name). Raises :class:`BfclDocError` naming the doc."""
    if not isinstance(doc, Mapping):
        raise BfclDocError(None, f"a doc must be an object, got {type(doc).__name__}", where)
    bfcl_name = doc.get("name")
    if not isinstance(bfcl_name, str) or not bfcl_name:
        raise BfclDocError(None, f"the doc has no name (keys {sorted(doc)})", where)
    if body not in BODIES:
        raise ValueError(f"body must be one of {BODIES}, got {body!r}")
    if body == "environment" and not (isinstance(class_name, str) and class_name.isidentifier()):
        raise BfclDocError(bfcl_name, f"an environment body needs the class name, got {class_name!r}", where)
    description = doc.get("description", "")
    if description is not None and not isinstance(description, str):
        raise BfclDocError(bfcl_name, f"'description' must be a string, got {type(description).__name__}", where)
    notes: list[str] = []
    try:
        plans = plan_params(doc, notes)
        result = schema_type(doc["response"], notes, "response") if "response" in doc else ANY
        pre = _pre(plans)
        source = _source(name or tool_name(bfcl_name), bfcl_name, plans, result, body, class_name)
        tool = Tool.from_source(source, _description(doc, plans), pre=pre)
    except BfclDocError as err:
        if err.where is None and where is not None:
            raise BfclDocError(err.doc_name, err.reason, where) from None
        raise
    except (BfclError, InsertRejected) as err:
        raise BfclDocError(bfcl_name, str(err), where) from None
    return Converted(tool, {p.name: p.bfcl for p in plans}, tuple(notes))


def tool_from_doc(doc: Mapping[str, Any], body: str = "doc", *, name: str | None = None,
                  class_name: str | None = None) -> Tool:
    """The Tool of one BFCL doc (:func:`convert_doc` without the notes)."""
    return convert_doc(doc, body, name=name, class_name=class_name).tool


# ---------------------------------------------------------------------------------------------
# Pools and libraries

def doc_key(doc: Mapping[str, Any]) -> str:
    """The canonical JSON of a doc: two docs are the same doc when their keys are equal."""
    return json.dumps(doc, sort_keys=True, ensure_ascii=True)


@dataclasses.dataclass(frozen=True)
class BfclLibrary:
    """Distinct docs as tools, in deterministic order (sorted by BFCL name, class, canonical JSON).

    ``tools[i]`` comes from ``docs[i]`` (of ``classes[i]``, for multi-turn docs); ``params[i]``
    maps its Python parameter names to BFCL's; ``notes[i]`` are its type-mapping notes."""

    tools: tuple[Tool, ...]
    docs: tuple[Mapping[str, Any], ...]
    classes: tuple[str | None, ...]
    params: tuple[Mapping[str, str], ...]
    notes: tuple[tuple[str, ...], ...]
    names: NameMap
    body: str
    max_depth: int = DEFAULT_MAX_DEPTH

    def __len__(self) -> int:
        return len(self.tools)

    @functools.cached_property
    def _by_key(self) -> dict[tuple[str, str | None], str]:
        return {(doc_key(d), c): t.name for d, c, t in zip(self.docs, self.classes, self.tools)}

    @functools.cached_property
    def _by_name(self) -> dict[str, int]:
        return {t.name: i for i, t in enumerate(self.tools)}

    def tool_for(self, doc: Mapping[str, Any], class_name: str | None = None) -> str:
        """The tool name of ``doc`` (of ``class_name``) in this library; ``KeyError`` when absent."""
        return self._by_key[(doc_key(doc), class_name)]

    def tool(self, name: str) -> Tool:
        return self.tools[self._by_name[name]]

    def bfcl_params(self, name: str) -> Mapping[str, str]:
        """Python parameter name -> BFCL parameter name of tool ``name``."""
        return self.params[self._by_name[name]]

    @functools.cached_property
    def snapshot(self) -> LibrarySnapshot:
        """The tools inserted through INSERTTOOL (no examples, so no sandbox run is needed;
        ``environment_call`` is one of the sandbox builtins the library's analysis knows)."""
        snap = LibrarySnapshot.empty(max_depth=self.max_depth)
        for t in self.tools:
            snap = snap.insert(t)
        return snap


def _class_lookup(class_of: Any) -> Callable[[Mapping[str, Any]], str | None]:
    if class_of is None:
        return lambda doc: None
    if isinstance(class_of, str):
        return lambda doc: class_of
    if isinstance(class_of, Mapping):
        return lambda doc: class_of[doc["name"]]
    if callable(class_of):
        return class_of
    raise TypeError(f"class_of must be None, a str, a mapping name -> class or a callable, "
                    f"got {type(class_of).__name__}")


def _build(entries: Iterable[tuple[Mapping[str, Any], str | None, str | None]], body: str,
           max_depth: int) -> BfclLibrary:
    seen: dict[tuple[str, str | None], tuple[Mapping[str, Any], str | None, str | None]] = {}
    for doc, cls, where in entries:
        if not isinstance(doc, Mapping) or not isinstance(doc.get("name"), str):
            raise BfclDocError(doc.get("name") if isinstance(doc, Mapping) else None, "not a named doc object", where)
        seen.setdefault((doc_key(doc), cls), (doc, cls, where))
    ordered = sorted(seen.items(), key=lambda kv: (kv[1][0]["name"], kv[0][1] or "", kv[0][0]))
    names = NameMap.build(doc["name"] for _, (doc, _, _) in ordered)
    converted = [convert_doc(doc, body, name=n, class_name=cls, where=where)
                 for (_, (doc, cls, where)), n in zip(ordered, names.tool_names)]
    return BfclLibrary(tuple(c.tool for c in converted), tuple(doc for _, (doc, _, _) in ordered),
                       tuple(cls for _, (_, cls, _) in ordered), tuple(c.params for c in converted),
                       tuple(c.notes for c in converted), names, body, max_depth)


def library_from_docs(docs: Iterable[Mapping[str, Any]], body: str = "doc", class_of: Any = None, *,
                      max_depth: int = DEFAULT_MAX_DEPTH) -> BfclLibrary:
    """The distinct docs as tools (:class:`BfclLibrary`; ``.snapshot`` for a LibrarySnapshot).

    ``class_of``: the class of each doc, needed for ``body="environment"``: one class name for all,
    a mapping BFCL name -> class, or a callable doc -> class. Any doc that does not convert raises
    :class:`BfclDocError`; none is dropped."""
    if body not in BODIES:
        raise ValueError(f"body must be one of {BODIES}, got {body!r}")
    lookup = _class_lookup(class_of)
    return _build(((d, lookup(d), None) for d in docs), body, max_depth)


# ---------------------------------------------------------------------------------------------
# BFCL's data files (read by the loader, third_party.benchmarks.bfcl)

def category_docs(category: str) -> tuple[tuple[dict, str], ...]:
    """``(doc, where)`` for every doc of every entry of a single-turn category (repeats kept)."""
    return loader.function_docs(category)


def multi_turn_docs(class_name: str) -> tuple[dict, ...]:
    """The docs of one multi-turn class."""
    return loader.multi_turn_docs(class_name)


def func_doc_files() -> Mapping[str, str]:
    """Multi-turn class -> its doc file (the loader's copy of the package's mapping)."""
    return dict(loader.MULTI_TURN_FUNC_DOC_FILES)


def multi_turn_library(classes: Iterable[str] = MULTI_TURN_CLASSES, body: str = "environment", *,
                       max_depth: int = DEFAULT_MAX_DEPTH) -> BfclLibrary:
    """The docs of ``classes`` as tools (environment bodies by default). A method name shared by
    two classes gives two tools (the second with a suffix; :attr:`BfclLibrary.classes` tells them apart)."""
    entries = [(doc, cls, f"{func_doc_files()[cls]} ({cls})") for cls in dict.fromkeys(classes)
               for doc in multi_turn_docs(cls)]
    return _build(entries, body, max_depth)


__all__ = [
    "BODIES", "BfclDocError", "BfclError", "BfclLibrary", "Converted", "ENVIRONMENT_CALL", "KNOWN_FAILURES",
    "MULTI_TURN_CLASSES", "NameMap", "ParamPlan", "SINGLE_TURN_CATEGORIES", "category_docs",
    "convert_doc", "doc_key", "func_doc_files", "library_from_docs", "multi_turn_docs", "multi_turn_library",
    "plan_params", "schema_type", "tool_from_doc", "tool_name",
]

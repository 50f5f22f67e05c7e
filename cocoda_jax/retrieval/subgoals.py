"""Typed subgoals: what one retrieval asks for, from the query text or from a planner's JSON.

A :class:`Subgoal` is ``(description, input types, output type)`` plus, when the query supplies
them, the argument *values* (aligned with the input types): L3 evaluates pre-conditions on them and
L4 compares them with worked examples.

Three sources:

* :func:`extract_subgoal` — deterministic, from the query text and the task's answer type: numbers,
  percentages, bracketed lists, quoted strings, ISO dates and inline JSON tables become typed inputs
  in the order they appear; the answer type (a type string or a Type) is the output.
* :func:`clause_subgoals` — the same, one subgoal per sentence (a step of a multi-step question).
* :func:`subgoals_from_json` — the interface through which a planner LM emits subgoals::

      {"subgoals": [{"description": "...", "input_types": ["float", "list[float]"],
                     "output_type": "float", "values": [2.5, [1, 2]]}]}

  (``values`` optional; ``expect`` optional: expressions over ``result`` the answer must satisfy,
  checked on the tool's actual result when the cascade executes candidates). Bad input raises :class:`SubgoalFormatError` naming the field.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import re
from typing import Any, Sequence

from cocoda_jax.errors import CocodaError
from cocoda_jax.types import FLOAT, Param, Signature, Type, TypeSyntaxError, list_of, parse_type, type_of_value


class SubgoalFormatError(CocodaError, ValueError):
    """A planner's subgoal JSON is malformed; ``where`` names the field."""

    def __init__(self, where: str, detail: str):
        super().__init__(f"subgoal JSON, {where}: {detail}")
        self.where, self.detail = where, detail


@dataclasses.dataclass(frozen=True)
class Subgoal:
    description: str
    inputs: tuple[Type, ...]
    output: Type
    values: tuple[Any, ...] | None = None  # aligned with ``inputs`` when the query supplies them
    expect: tuple[str, ...] = ()           # Python expressions over ``result`` the answer must satisfy

    def __post_init__(self):
        if self.values is not None and len(self.values) != len(self.inputs):
            raise ValueError(f"Subgoal: {len(self.values)} values for {len(self.inputs)} input types")
        for i, e in enumerate(self.expect):
            try:
                ast.parse(e, mode="eval")
            except SyntaxError as err:
                raise ValueError(f"Subgoal.expect[{i}] is not a Python expression: {e!r} ({err.msg})") from None

    @property
    def signature(self) -> Signature:
        """The query signature L1 matches against: unnamed inputs, the output as result."""
        return Signature(tuple(Param("", t) for t in self.inputs), self.output)

    def to_json(self) -> dict:
        d = {"description": self.description, "input_types": [str(t) for t in self.inputs],
             "output_type": str(self.output)}
        if self.values is not None:
            d["values"] = [_jsonable(v) for v in self.values]
        if self.expect:
            d["expect"] = list(self.expect)
        return d


def _jsonable(v: Any) -> Any:
    return list(v) if isinstance(v, tuple) else v


_TOKEN = re.compile(
    r"(?P<table>\{\s*\"rows\"\s*:\s*\[.*?\]\s*\})"
    r"|(?P<list>\[[^\[\]]*\])"
    r"|(?P<date>\b\d{4}-\d{2}-\d{2}\b)"
    r"|(?P<quoted>\"[^\"]*\"|'[^']*')"
    r"|(?P<num>(?<![\w.])-?\d+(?:\.\d+)?%?)", re.S)


def _value_type(v: Any) -> Type:
    """A query value's type: an inline table is a ``Table``; a list of numbers is ``list[float]``
    (the widest numeric list, so int-only lists still meet float-list tools without a coercion)."""
    if isinstance(v, dict):
        return parse_type("Table")
    if isinstance(v, list) and not (v and all(isinstance(x, str) for x in v)):
        return list_of(FLOAT)
    return type_of_value(v)


def extract_values(text: str) -> list[Any]:
    """Values the query text supplies, in order of appearance (see the module docstring)."""
    out: list[Any] = []
    for m in _TOKEN.finditer(text):
        kind = m.lastgroup
        tok = m.group(kind)
        if kind == "table":
            try:
                out.append(json.loads(tok))
            except json.JSONDecodeError:
                continue
        elif kind == "list":
            try:
                items = json.loads(tok.replace("'", '"'))
            except json.JSONDecodeError:
                continue
            if all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in items):
                out.append([float(x) for x in items])
            elif all(isinstance(x, str) for x in items):
                out.append(list(items))
        elif kind in ("date",):
            out.append(tok)
        elif kind == "quoted":
            out.append(tok[1:-1])
        else:
            if tok.endswith("%"):
                out.append(float(tok[:-1]))
            elif "." in tok:
                out.append(float(tok))
            else:
                out.append(int(tok))
    return out


def extract_subgoal(query: str, answer_type: str | Type) -> Subgoal:
    """The deterministic subgoal of ``query``: its values as typed inputs, ``answer_type`` as output."""
    output = parse_type(answer_type) if isinstance(answer_type, str) else answer_type
    vals = extract_values(query)
    return Subgoal(query.strip(), tuple(_value_type(v) for v in vals), output, tuple(vals))


#: A sentence boundary: end punctuation, white space, then a capital ("$3.15" and "2.5 km" do not split).
_SENTENCE = re.compile(r"(?<=[.?!])\s+(?=[A-Z])")


def clause_subgoals(query: str, answer_type: str | Type) -> tuple[Subgoal, ...]:
    """The deterministic decomposition of ``query`` into one subgoal per step it describes: a subgoal
    per sentence, each with the values that sentence states (a trailing question joins the sentence
    before it: it names the result, not a step); the last one has ``answer_type`` as output, the
    others ``Any`` (an intermediate value). Why: one retrieval for a whole multi-step question ranks
    every tool against all of its words, so the step with the more distinctive words takes the slots
    and another step's tool falls out; one retrieval per step gives each step its own ranking
    (merged by :func:`~.cascade.retrieve_many`). A query whose sentences would not keep its values
    as they are (a quote or a list holding a sentence end) stays one subgoal: ``extract_subgoal``."""
    whole = extract_subgoal(query, answer_type)
    parts = [p.strip() for p in _SENTENCE.split(query.strip()) if p.strip()]
    if len(parts) > 1 and parts[-1].endswith("?"):
        parts = parts[:-2] + [f"{parts[-2]} {parts[-1]}"]
    if len(parts) < 2:
        return (whole,)
    subgoals = tuple(extract_subgoal(p, answer_type if i == len(parts) - 1 else "Any") for i, p in enumerate(parts))
    if [v for s in subgoals for v in s.values] != list(whole.values):
        return (whole,)
    return subgoals


def subgoals_from_json(text: str | dict) -> tuple[Subgoal, ...]:
    """Parses a planner's subgoal JSON (see the module docstring)."""
    if isinstance(text, str):
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as err:
            raise SubgoalFormatError("text", f"not valid JSON at line {err.lineno}, column {err.colno}: {err.msg}") from None
    else:
        doc = text
    if not isinstance(doc, dict) or not isinstance(doc.get("subgoals"), list):
        raise SubgoalFormatError("top level", "expected an object with a list 'subgoals'")
    out = []
    for i, item in enumerate(doc["subgoals"]):
        where = f"subgoals[{i}]"
        if not isinstance(item, dict):
            raise SubgoalFormatError(where, f"expected an object, got {type(item).__name__}")
        unknown = set(item) - {"description", "input_types", "output_type", "values", "expect"}
        if unknown:
            raise SubgoalFormatError(where, f"unknown key(s) {sorted(unknown)}")
        desc = item.get("description")
        if not isinstance(desc, str) or not desc.strip():
            raise SubgoalFormatError(f"{where}.description", "must be a non-empty string")
        ins = item.get("input_types", [])
        if not isinstance(ins, list) or not all(isinstance(t, str) for t in ins):
            raise SubgoalFormatError(f"{where}.input_types", "must be a list of type strings")
        if not isinstance(item.get("output_type"), str):
            raise SubgoalFormatError(f"{where}.output_type", "must be a type string")
        try:
            inputs = tuple(parse_type(t) for t in ins)
        except TypeSyntaxError as err:
            raise SubgoalFormatError(f"{where}.input_types", str(err)) from None
        try:
            output = parse_type(item["output_type"])
        except TypeSyntaxError as err:
            raise SubgoalFormatError(f"{where}.output_type", str(err)) from None
        vals = item.get("values")
        if vals is not None:
            if not isinstance(vals, list) or len(vals) != len(inputs):
                raise SubgoalFormatError(f"{where}.values", f"must be a list of {len(inputs)} values")
            vals = tuple(vals)
        expect = item.get("expect", [])
        if not isinstance(expect, list) or not all(isinstance(e, str) and e.strip() for e in expect):
            raise SubgoalFormatError(f"{where}.expect", "must be a list of non-empty expression strings")
        try:
            out.append(Subgoal(desc.strip(), inputs, output, vals, tuple(e.strip() for e in expect)))
        except ValueError as err:
            raise SubgoalFormatError(f"{where}.expect", str(err)) from None
    return tuple(out)


def subgoals_to_json(subgoals: Sequence[Subgoal]) -> str:
    return json.dumps({"subgoals": [s.to_json() for s in subgoals]}, sort_keys=True)

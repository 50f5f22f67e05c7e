"""What a question's values say about the tools it needs: typed evidence for L1, literals for L2.

A question states values in text: ``450``, ``9.8``, ``'ticket_001'``, ``[1, 2, 3]``, ``report.txt``,
``in Celsius``. :func:`question_evidence` turns the subgoal's values into
:class:`~cocoda_jax.types.Evidence` for the optional-aware L1 (:func:`~cocoda_jax.types.fit`):

* each value is a *union* of readings, the literal reading first: an integer may also be an id
  written as a string, a number list may also be a list of strings (``STR_READING`` extra);
* file names (``notes.txt``, ``data/report.csv``) the extractor does not quote become ``str``
  arguments, after the values;
* number words (``three bottles``) are numbers too;
* the question's words can always supply ``str``, ``bool`` and ``list[str]`` parameters (a city, a
  preference, "apples, rice and water"), at :attr:`~cocoda_jax.types.EvidenceCosts.inferred`;
  numbers, number lists and tables must be stated.

:func:`enum_literals` reads a tool's enumerated parameter values from its pre-conditions
(``unit in ('celsius', 'fahrenheit')``, as the BFCL converter writes them);
:func:`literal_hits` counts those a question names: a zero-token, LM-free score term for L2.
"""

from __future__ import annotations

import ast
import functools
import re
from typing import Any

from cocoda_jax.retrieval.subgoals import Subgoal
from cocoda_jax.types import (
    BOOL, FLOAT, INT, STR, Arg, Evidence, TCon, Type, dict_of, list_of, parse_type,
)
from cocoda_jax.types import ANY as _ANY

STR_READING = 0.3
INT_LIST_READING = 0.0
_FILE = re.compile(r"(?<![\w./-])((?:[\w-]+/)*[\w-]+\.(?:txt|csv|json|pdf|py|md|docx?|xlsx?|png|jpe?g|log|html?|xml|"
                   r"yaml|yml|zip|tar|gz|mp3|mp4|wav|sh|cfg|ini|tsv|sql|js|java|c|cpp))\b", re.I)
_TABLE = parse_type("Table")


def file_names(text: str) -> list[str]:
    """Unquoted file names in ``text``, in order (quoted ones are already values)."""
    unquoted = re.sub(r"\"[^\"]*\"|'[^']*'", " ", text)
    return [m.group(1) for m in _FILE.finditer(unquoted)]


def value_readings(value: Any, declared: Type) -> Arg:
    """The readings of one stated value (see the module docstring); ``declared`` is the subgoal's type."""
    if isinstance(value, bool):
        return Arg((BOOL,))
    if isinstance(value, int):
        return Arg((INT, STR), (0.0, STR_READING))
    if isinstance(value, float):
        return Arg((FLOAT, STR), (0.0, STR_READING)) if value != int(value) else \
            Arg((FLOAT, INT, STR), (0.0, 0.0, STR_READING))
    if isinstance(value, list):
        if value and all(isinstance(x, str) for x in value):
            return Arg((list_of(STR),))
        if all(isinstance(x, (int, float)) and float(x).is_integer() for x in value):
            return Arg((list_of(FLOAT), list_of(INT), list_of(STR)), (0.0, INT_LIST_READING, STR_READING))
        return Arg((list_of(FLOAT), list_of(STR)), (0.0, STR_READING))
    if isinstance(value, dict):
        return Arg((_TABLE, dict_of(STR, _ANY)), (0.0, 0.0))
    return Arg((declared,))


FREE = (STR, BOOL, list_of(STR))
_NUMBER_WORDS = re.compile(r"\b(two|three|four|five|six|seven|eight|nine|ten|twelve|twenty|hundred|thousand|dozen)\b",
                           re.I)


def question_evidence(subgoal: Subgoal, free: tuple[Type, ...] = FREE) -> Evidence:
    """The L1 evidence of a subgoal: its values' readings (or its declared input types when it has
    no values), then the unquoted file names and number words of its text; ``free`` types come from
    the words (a city, a flag, an enumeration "apples, rice and water"). A question quoted whole
    (``"Can you ... 5 meters"``) is read inside its quotes, not as one string value."""
    values, inputs = subgoal.values, subgoal.inputs
    text = subgoal.description.strip()
    if values is not None and len(values) == 1 and isinstance(values[0], str) and len(values[0]) > 0.5 * len(text):
        from cocoda_jax.retrieval.subgoals import extract_subgoal
        inner = extract_subgoal(values[0], subgoal.output)
        values, inputs = inner.values, inner.inputs
    if values is None:
        args = [Arg((t,)) for t in inputs]
    else:
        args = [value_readings(v, t) for v, t in zip(values, inputs)]
    args += [Arg((STR,)) for _ in file_names(text)]
    args += [Arg((INT, FLOAT), (0.0, 0.0)) for _ in _NUMBER_WORDS.finditer(text)]
    return Evidence(tuple(args), tuple(free), subgoal.output)


@functools.lru_cache(maxsize=1 << 14)
def _literals_of(conditions: tuple[str, ...]) -> frozenset[str]:
    out: set[str] = set()
    for cond in conditions:
        try:
            tree = ast.parse(cond, mode="eval")
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Compare) and any(isinstance(op, ast.In) for op in node.ops):
                for comp in node.comparators:
                    if isinstance(comp, (ast.Tuple, ast.List, ast.Set)):
                        for elt in comp.elts:
                            if isinstance(elt, ast.Constant) and isinstance(elt.value, str) and elt.value.strip():
                                out.add(elt.value.strip().lower())
    return frozenset(out)


def enum_literals(tool: Any) -> frozenset[str]:
    """The string values a tool's pre-conditions enumerate (lower-cased)."""
    return _literals_of(tuple(tool.pre))


def literal_hits(literals: frozenset[str], text: str) -> int:
    """How many of ``literals`` the text names as whole words (case-insensitive); one-letter and
    purely numeric literals are ignored (they match by accident)."""
    low = f" {text.lower()} "
    hits = 0
    for lit in literals:
        if len(lit) < 2 or lit.replace(".", "").isdigit():
            continue
        if re.search(rf"(?<![a-z0-9]){re.escape(lit)}(?![a-z0-9])", low):
            hits += 1
    return hits


#: The written shapes of stated values, in the order :func:`value_shapes` reports them: a pattern per shape.
_SHAPES = (
    ("colon_pair", re.compile(r"(?<![\d.])\d+\s*:\s*\d+(?!\.?\d)")),  # 7:6, a ratio (or a time)
    ("slash_pair", re.compile(r"(?<![\d./])\d+\s*/\s*\d+(?!\.?\d|/)")),  # 3/4
    ("percent", re.compile(r"\d\s*%")),
    ("currency", re.compile(r"[$\u20ac\u00a3]\s*\d")),
    ("decimal", re.compile(r"(?<![\d.])\d+\.\d+(?!\.?\d)")),
    ("file", _FILE),
    ("list", re.compile(r"\[[^\]]*\d[^\]]*\]")),
)
_NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?!\w|\.\d)")
MAX_COUNTED_NUMBERS = 6


def value_shapes(text: str) -> list[str]:
    """How a text writes its values, as words a ranker can weigh: each written shape it uses
    (``colon_pair`` for ``7:6``, ``percent``, ``currency``, ``decimal``, ...) once, then
    ``numbers_N``, how many numbers it states (at most :data:`MAX_COUNTED_NUMBERS`). Why: word
    rankers drop digits and symbols, so a held-out phrasing ("parted with proportions 7:6") loses
    the one cue that does not depend on the wording."""
    shapes = [name for name, pattern in _SHAPES if pattern.search(text)]
    return shapes + [f"numbers_{min(len(_NUMBER.findall(text)), MAX_COUNTED_NUMBERS)}"]


__all__ = ["FREE", "MAX_COUNTED_NUMBERS", "STR_READING", "enum_literals", "file_names", "literal_hits",
           "question_evidence", "value_readings", "value_shapes"]

r"""The second embedded domain: questions over generated tables with typed columns.

    from cocoda_jax.data import tables
    lib = tables.primitive_library()                 # 22 table primitives, a LibrarySnapshot
    task = tables.generate(100, seed=0, split="train")[0]
    task.question, task.table, task.program, task.answer

**The Table value.** A table is a plain dict ``{"columns": [str, ...], "types": ["str" | "int" |
"float", ...], "rows": [[cell, ...], ...]}`` (cells in column order). It is made only of what the
value codec (:mod:`cocoda_jax.values`) carries as plain JSON — a dict with string keys, lists, str,
int and finite float — so it crosses the sandbox boundary both ways unchanged, with no codec change.
``Table`` in a tool signature is the type system's domain type of that name. :func:`make_table`
checks and builds one; :func:`table_to_text` renders it for a prompt.

**Tasks.** A task binds its table to the variable ``table`` (the only input; the constants of the
question — column names, cell values, thresholds — appear as literals in the program, as they are
written in the question). A *family* (:data:`FAMILIES`) is a question pattern with its program:
count rows that match, sum or average a column over a filter, the group with the largest total, a
lookup, a difference of two lookups, a share of a total, ... Each task has the same fields as the
synthetic math tasks: question, gold program (one primitive call per line, ending ``answer = x<k>``),
gold answer, gold intermediate values, skeleton, difficulty (number of calls) and answer type.

**Splits.** Deterministic per ``(seed, split, index)``. Validation and test use held-out phrasings
(the last template of each family), held-out entity vocabularies (names, cities, products) and
larger tables; (family, schema) combinations are assigned to splits by a stable hash, and the
training split never contains a combination held out for validation or test.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import random
import zlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from cocoda_jax.errors import CocodaError
from cocoda_jax.data.domain import (DomainBase, DomainConfigError, DomainSplits, dataclass_from_dict, pairs,
                                    register_domain, tuplify)
from cocoda_jax.data.task import GoldProgramTask
from cocoda_jax.library import LibrarySnapshot

VERSION = 1
SPLITS = ("train", "validation", "test")
COLUMN_TYPES = ("str", "int", "float")

# =================================================================================================
# The Table value
# =================================================================================================


class TableError(CocodaError, ValueError):
    """A value that is not a well-formed table; the message says what is wrong and where."""


def make_table(columns: Sequence[str], rows: Sequence[Sequence[Any]], types: Sequence[str] | None = None) -> dict:
    """A checked Table value; ``types`` are inferred from the cells when not given."""
    columns = [str(c) for c in columns]
    if len(set(columns)) != len(columns):
        raise TableError(f"duplicate column names in {columns}")
    rows = [list(r) for r in rows]
    for i, row in enumerate(rows):
        if len(row) != len(columns):
            raise TableError(f"row {i} has {len(row)} cells, expected {len(columns)} ({columns})")
    if types is None:
        types = [_infer_type([r[j] for r in rows]) for j in range(len(columns))]
    table = {"columns": columns, "types": list(types), "rows": rows}
    check_table(table)
    return table


def _infer_type(cells: Sequence[Any]) -> str:
    if cells and all(isinstance(c, int) and not isinstance(c, bool) for c in cells):
        return "int"
    if cells and all(isinstance(c, (int, float)) and not isinstance(c, bool) for c in cells):
        return "float"
    return "str"


def check_table(value: Any) -> None:
    """Raises :class:`TableError` unless ``value`` is a well-formed Table."""
    if not isinstance(value, dict) or set(value) != {"columns", "types", "rows"}:
        raise TableError("a table is a dict with exactly the keys 'columns', 'types' and 'rows'")
    columns, types, rows = value["columns"], value["types"], value["rows"]
    if not isinstance(columns, list) or not all(isinstance(c, str) for c in columns):
        raise TableError("'columns' must be a list of str")
    if not isinstance(types, list) or len(types) != len(columns) or not all(t in COLUMN_TYPES for t in types):
        raise TableError(f"'types' must list one of {COLUMN_TYPES} per column")
    if not isinstance(rows, list):
        raise TableError("'rows' must be a list of lists")
    for i, row in enumerate(rows):
        if not isinstance(row, list) or len(row) != len(columns):
            raise TableError(f"row {i} must be a list of {len(columns)} cells")
        for j, (cell, kind) in enumerate(zip(row, types)):
            ok = (isinstance(cell, str) if kind == "str" else
                  isinstance(cell, int) and not isinstance(cell, bool) if kind == "int" else
                  isinstance(cell, (int, float)) and not isinstance(cell, bool) and math.isfinite(cell))
            if not ok:
                raise TableError(f"row {i}, column {columns[j]!r}: {cell!r} is not a {kind}")


def table_to_text(table: Mapping[str, Any]) -> str:
    """A pipe-separated rendering for prompts (header, then one line per row)."""
    def cell(v: Any) -> str:
        return f"{v:g}" if isinstance(v, float) else str(v)

    lines = [" | ".join(table["columns"])]
    lines += [" | ".join(cell(v) for v in row) for row in table["rows"]]
    return "\n".join(lines)


# =================================================================================================
# Primitives
# =================================================================================================

_T = {"columns": ["name", "team", "score"], "types": ["str", "str", "int"],
      "rows": [["Ann", "red", 5], ["Bob", "blue", 3], ["Cy", "red", 4]]}
_T_RED = {"columns": ["name", "team", "score"], "types": ["str", "str", "int"],
          "rows": [["Ann", "red", 5], ["Cy", "red", 4]]}
_T_HI = {"columns": ["name", "team", "score"], "types": ["str", "str", "int"], "rows": [["Ann", "red", 5]]}
_T_LO = {"columns": ["name", "team", "score"], "types": ["str", "str", "int"], "rows": [["Bob", "blue", 3]]}
_T_SORTED = {"columns": ["name", "team", "score"], "types": ["str", "str", "int"],
             "rows": [["Ann", "red", 5], ["Cy", "red", 4], ["Bob", "blue", 3]]}
_T_ASC = {"columns": ["name", "team", "score"], "types": ["str", "str", "int"],
          "rows": [["Bob", "blue", 3], ["Cy", "red", 4], ["Ann", "red", 5]]}

PRIMITIVES: tuple[tuple, ...] = (
    ("def select_column(table: Table, column: str) -> list[Any]:\n"
     "    j = table['columns'].index(column)\n"
     "    return [row[j] for row in table['rows']]\n",
     "The values of one column of a table, top to bottom.", ("column in table['columns']",),
     ("len(result) == len(table['rows'])",),
     [({"table": _T, "column": "score"}, [5, 3, 4]), ({"table": _T, "column": "name"}, ["Ann", "Bob", "Cy"])]),
    ("def filter_equals(table: Table, column: str, value: Any) -> Table:\n"
     "    j = table['columns'].index(column)\n"
     "    rows = [row for row in table['rows'] if row[j] == value]\n"
     "    return {'columns': table['columns'], 'types': table['types'], 'rows': rows}\n",
     "The rows of a table whose cell in column equals value.", ("column in table['columns']",),
     ("len(result['rows']) <= len(table['rows'])",),
     [({"table": _T, "column": "team", "value": "red"}, _T_RED)]),
    ("def filter_greater(table: Table, column: str, value: float) -> Table:\n"
     "    j = table['columns'].index(column)\n"
     "    rows = [row for row in table['rows'] if row[j] > value]\n"
     "    return {'columns': table['columns'], 'types': table['types'], 'rows': rows}\n",
     "The rows of a table whose (numeric) cell in column is greater than value.",
     ("column in table['columns']",), ("len(result['rows']) <= len(table['rows'])",),
     [({"table": _T, "column": "score", "value": 4}, _T_HI)]),
    ("def filter_less(table: Table, column: str, value: float) -> Table:\n"
     "    j = table['columns'].index(column)\n"
     "    rows = [row for row in table['rows'] if row[j] < value]\n"
     "    return {'columns': table['columns'], 'types': table['types'], 'rows': rows}\n",
     "The rows of a table whose (numeric) cell in column is less than value.",
     ("column in table['columns']",), ("len(result['rows']) <= len(table['rows'])",),
     [({"table": _T, "column": "score", "value": 4}, _T_LO)]),
    ("def sort_rows(table: Table, column: str, descending: bool) -> Table:\n"
     "    j = table['columns'].index(column)\n"
     "    rows = sorted(table['rows'], key=lambda row: row[j], reverse=descending)\n"
     "    return {'columns': table['columns'], 'types': table['types'], 'rows': rows}\n",
     "The table with its rows sorted by one column (largest first when descending).",
     ("column in table['columns']",), ("len(result['rows']) == len(table['rows'])",),
     [({"table": _T, "column": "score", "descending": True}, _T_SORTED),
      ({"table": _T, "column": "score", "descending": False}, _T_ASC)]),
    ("def first_value(table: Table, column: str) -> Any:\n"
     "    j = table['columns'].index(column)\n"
     "    return table['rows'][0][j]\n",
     "The cell of column in the first row of a table.", ("len(table['rows']) > 0",), (),
     [({"table": _T, "column": "name"}, "Ann")]),
    ("def lookup(table: Table, key_column: str, key: Any, column: str) -> Any:\n"
     "    k = table['columns'].index(key_column)\n"
     "    j = table['columns'].index(column)\n"
     "    for row in table['rows']:\n"
     "        if row[k] == key:\n"
     "            return row[j]\n"
     "    raise KeyError(key)\n",
     "The cell of column in the first row whose key_column equals key.",
     ("key_column in table['columns']", "column in table['columns']"), (),
     [({"table": _T, "key_column": "name", "key": "Bob", "column": "score"}, 3)]),
    ("def count_rows(table: Table) -> int:\n    return len(table['rows'])\n",
     "How many rows a table has.", (), ("result >= 0",), [({"table": _T}, 3), ({"table": _T_HI}, 1)]),
    ("def group_sum(table: Table, key_column: str, value_column: str) -> dict[str, float]:\n"
     "    k = table['columns'].index(key_column)\n"
     "    j = table['columns'].index(value_column)\n"
     "    out = {}\n"
     "    for row in table['rows']:\n"
     "        out[row[k]] = out.get(row[k], 0) + row[j]\n"
     "    return out\n",
     "The total of value_column for each distinct value of key_column.", (), (),
     [({"table": _T, "key_column": "team", "value_column": "score"}, {"red": 9, "blue": 3})]),
    ("def group_count(table: Table, key_column: str) -> dict[str, int]:\n"
     "    k = table['columns'].index(key_column)\n"
     "    out = {}\n"
     "    for row in table['rows']:\n"
     "        out[row[k]] = out.get(row[k], 0) + 1\n"
     "    return out\n",
     "How many rows there are for each distinct value of key_column.", (), (),
     [({"table": _T, "key_column": "team"}, {"red": 2, "blue": 1})]),
    ("def group_mean(table: Table, key_column: str, value_column: str) -> dict[str, float]:\n"
     "    k = table['columns'].index(key_column)\n"
     "    j = table['columns'].index(value_column)\n"
     "    sums, counts = {}, {}\n"
     "    for row in table['rows']:\n"
     "        sums[row[k]] = sums.get(row[k], 0) + row[j]\n"
     "        counts[row[k]] = counts.get(row[k], 0) + 1\n"
     "    return {key: sums[key] / counts[key] for key in sums}\n",
     "The average of value_column for each distinct value of key_column.", (), (),
     [({"table": _T, "key_column": "team", "value_column": "score"}, {"red": 4.5, "blue": 3.0})]),
    ("def argmax_key(d: dict[str, float]) -> str:\n"
     "    best = None\n"
     "    for key in d:\n"
     "        if best is None or d[key] > d[best]:\n"
     "            best = key\n"
     "    return best\n",
     "The key with the largest value (the first such key on ties).", ("len(d) > 0",), ("result in d",),
     [({"d": {"red": 9, "blue": 3}}, "red")]),
    ("def argmin_key(d: dict[str, float]) -> str:\n"
     "    best = None\n"
     "    for key in d:\n"
     "        if best is None or d[key] < d[best]:\n"
     "            best = key\n"
     "    return best\n",
     "The key with the smallest value (the first such key on ties).", ("len(d) > 0",), ("result in d",),
     [({"d": {"red": 9, "blue": 3}}, "blue")]),
    ("def dict_get(d: dict[str, float], key: str) -> float:\n    return d[key]\n",
     "The value stored under key.", ("key in d",), (), [({"d": {"red": 9, "blue": 3}, "key": "blue"}, 3)]),
    ("def sum_values(xs: list[float]) -> float:\n    return sum(xs)\n",
     "The sum of a list of numbers.", (), (), [({"xs": [5, 3, 4]}, 12), ({"xs": []}, 0)]),
    ("def mean_values(xs: list[float]) -> float:\n    return sum(xs) / len(xs)\n",
     "The average of a list of numbers.", ("len(xs) > 0",), ("min(xs) <= result <= max(xs)",),
     [({"xs": [5, 3, 4]}, 4.0)]),
    ("def max_values(xs: list[float]) -> float:\n    return max(xs)\n",
     "The largest of a list of numbers.", ("len(xs) > 0",), ("result in xs",), [({"xs": [5, 3, 4]}, 5)]),
    ("def min_values(xs: list[float]) -> float:\n    return min(xs)\n",
     "The smallest of a list of numbers.", ("len(xs) > 0",), ("result in xs",), [({"xs": [5, 3, 4]}, 3)]),
    ("def count_distinct(xs: list[Any]) -> int:\n    return len(set(xs))\n",
     "How many different values a list holds.", (), ("0 <= result <= len(xs)",),
     [({"xs": ["red", "blue", "red"]}, 2)]),
    ("def subtract_values(a: float, b: float) -> float:\n    return a - b\n",
     "a minus b.", (), (), [({"a": 5, "b": 3}, 2), ({"a": 3, "b": 5}, -2)]),
    ("def divide_values(a: float, b: float) -> float:\n    return a / b\n",
     "a divided by b (a share or a rate).", ("b != 0",), (), [({"a": 3, "b": 12}, 0.25)]),
    ("def round_value(x: float, digits: int) -> float:\n    return round(x, digits)\n",
     "x rounded to a number of decimal digits.", ("digits >= 0",), (), [({"x": 0.256, "digits": 2}, 0.26)]),
)


@functools.cache
def local_functions() -> dict[str, Any]:
    """The primitives as callables of this process (our own, trusted sources)."""
    namespace: dict[str, Any] = {}
    for source, *_ in PRIMITIVES:
        exec(compile(source, "<table primitive>", "exec"), namespace)  # noqa: S102 - trusted, fixed text
    return {k: v for k, v in namespace.items() if not k.startswith("__")}


def primitive_library(runner: Any = None) -> LibrarySnapshot:
    """The table domain's starting library, every primitive through INSERTTOOL (checks run by
    ``runner``; ``None``: the default sandbox). Later calls return the same verified value."""
    from cocoda_jax.data.library_build import verified_library
    return verified_library("tables", PRIMITIVES, runner=runner)


# =================================================================================================
# Schemas and table generation
# =================================================================================================


@dataclasses.dataclass(frozen=True)
class Schema:
    """A kind of table: a unique key column, categorical columns and numeric columns."""

    name: str
    entity: str                         # what a row is, plural ("employees")
    key: str                            # the unique str column
    categorical: tuple[str, ...]
    numeric: tuple[tuple[str, str, float, float, float], ...]  # (column, type, lo, hi, step)
    vocab: Callable[[str], dict[str, tuple[str, ...]]]        # split -> column -> values


def _vocab(train: dict, heldout: dict) -> Callable[[str], dict]:
    return lambda split: train if split == "train" else heldout


SCHEMAS: tuple[Schema, ...] = (
    Schema("employees", "employees", "name", ("department", "city"),
           (("age", "int", 22, 64, 1), ("salary", "int", 30000, 120000, 500)),
           _vocab({"name": ("Ava", "Ben", "Chloe", "Dev", "Emma", "Felix", "Grace", "Hugo", "Ines", "Jack", "Kira",
                            "Liam", "Mona", "Ned", "Omar", "Pia", "Raj", "Sofia", "Tom", "Uma"),
                   "department": ("Sales", "Engineering", "Support", "Finance"),
                   "city": ("Lyon", "Porto", "Oslo", "Turin")},
                  {"name": ("Maya", "Nico", "Olga", "Pavel", "Quinn", "Rosa", "Sami", "Tara", "Ugo", "Vera", "Wim",
                            "Xena", "Yuri", "Zoe", "Abel", "Bea", "Cato", "Dina", "Eli", "Fay"),
                   "department": ("Legal", "Research", "Design", "Operations"),
                   "city": ("Ghent", "Bergen", "Malmo", "Graz")})),
    Schema("stores", "stores", "store", ("region", "format"),
           (("revenue", "float", 10.0, 500.0, 0.5), ("staff", "int", 3, 60, 1)),
           _vocab({"store": ("Northgate", "Riverside", "Hilltop", "Old Town", "Lakeside", "Market Hall", "Station",
                             "Harbour", "Parkway", "Westfield", "Eastside", "Midtown", "Seaview", "Brookside"),
                   "region": ("North", "South", "East", "West"), "format": ("mall", "street", "outlet")},
                  {"store": ("Cedar Row", "Elm Court", "Fox Lane", "Granary", "Ivy Square", "Juniper", "Kings Cross",
                             "Larch Yard", "Mill Bank", "Nettle Way", "Oak Gate", "Pine Walk", "Quarry", "Rose Hill"),
                   "region": ("Central", "Coast", "Valley", "Highlands"), "format": ("kiosk", "depot", "flagship")})),
    Schema("athletes", "athletes", "athlete", ("country", "sport"),
           (("gold", "int", 0, 9, 1), ("points", "float", 5.0, 99.5, 0.5)),
           _vocab({"athlete": ("Ada Moss", "Bo Lind", "Cara Voss", "Dan Roe", "Eve Hart", "Finn Lake", "Gia Reed",
                               "Hal Stone", "Ida Frost", "Jon Marsh", "Kim Vale", "Lou Park", "Max Cole", "Nia Ford"),
                   "country": ("Norway", "Kenya", "Chile", "Japan"), "sport": ("rowing", "cycling", "judo")},
                  {"athlete": ("Oli Brandt", "Pam Ruiz", "Quin Adler", "Rhea Sato", "Sol Berg", "Tia Okafor",
                               "Uli Kent", "Val Moreau", "Wes Ito", "Xia Lund", "Yan Petrov", "Zara Quist",
                               "Axel Dunn", "Bria Holt"),
                   "country": ("Peru", "Ghana", "Austria", "Canada"), "sport": ("fencing", "archery", "sailing")})),
)
SCHEMA_BY_NAME = {s.name: s for s in SCHEMAS}


def _rows_range(split: str) -> tuple[int, int]:
    return {"train": (5, 10), "validation": (11, 13), "test": (11, 14)}[split]


def generate_table(rng: random.Random, schema: Schema, split: str) -> dict:
    """A random table of ``schema`` (held-out vocabularies and sizes outside the training split)."""
    vocab = schema.vocab(split)
    n = rng.randint(*_rows_range(split))
    keys = rng.sample(vocab[schema.key], n)
    columns = [schema.key, *schema.categorical, *(c for c, *_ in schema.numeric)]
    types = ["str"] * (1 + len(schema.categorical)) + [t for _, t, *_ in schema.numeric]
    rows = []
    for key in keys:
        row = [key] + [rng.choice(vocab[c]) for c in schema.categorical]
        for _, kind, lo, hi, step in schema.numeric:
            v = round(rng.randint(round(lo / step), round(hi / step)) * step, 6)
            row.append(int(v) if kind == "int" else float(v))
        rows.append(row)
    return make_table(columns, rows, types)


# =================================================================================================
# Task families
# =================================================================================================


@dataclasses.dataclass(frozen=True)
class TableTask(GoldProgramTask):
    """One table question with its latent program (fields as :class:`synthetic_math.MathTask`;
    ``inputs`` binds ``table``; ``motifs`` is ``(family,)``)."""

    id: str
    split: str
    schema: str
    question: str
    table: dict = dataclasses.field(hash=False)
    program: str
    answer: Any
    answer_type: str
    intermediates: tuple[tuple[str, Any], ...] = dataclasses.field(hash=False)
    skeleton: tuple
    difficulty: int
    motifs: tuple[str, ...]

    @property
    def inputs(self) -> tuple[tuple[str, Any], ...]:
        return (("table", self.table),)



class _Reject(Exception):
    pass


class _Prog:
    def __init__(self, table: dict):
        self.fns = local_functions()
        self.vals: dict[str, Any] = {"table": table}
        self.lines: list[str] = []
        self.shapes: list[tuple] = []

    def call(self, fn: str, *args: Any) -> str:
        """``args``: a variable name given as ``Var(name)`` or a literal."""
        values = [self.vals[a.name] if isinstance(a, Var) else a for a in args]
        try:
            result = self.fns[fn](*values)
        except (KeyError, ValueError, ZeroDivisionError, IndexError, TypeError) as exc:
            raise _Reject(f"{fn}: {exc!r}") from None
        name = f"x{len(self.lines)}"
        self.lines.append(f"{name} = {fn}({', '.join(a.name if isinstance(a, Var) else repr(a) for a in args)})")
        self.shapes.append((fn, tuple(_shape(a) for a in args)))
        self.vals[name] = result
        return name


@dataclasses.dataclass(frozen=True)
class Var:
    name: str


def _shape(a: Any) -> Any:
    if isinstance(a, Var):
        return "table" if a.name == "table" else int(a.name[1:])
    return "c"


def _unique_max(d: Mapping[str, float], largest: bool = True) -> None:
    vals = sorted(d.values(), reverse=largest)
    if len(vals) < 2 or vals[0] == vals[1]:
        raise _Reject("tie")


# Each family: (name, templates (2 training, 1 held out), builder(rng, schema, table, prog) -> (words, answer var)).
def _f_count_equals(rng, s, t, p):
    col = rng.choice(s.categorical)
    val = rng.choice(p.fns["select_column"](t, col))
    x0 = p.call("filter_equals", Var("table"), col, val)
    return {"col": col, "val": val}, p.call("count_rows", Var(x0))


def _f_sum_where(rng, s, t, p):
    col = rng.choice(s.categorical)
    num = rng.choice(s.numeric)[0]
    val = rng.choice(p.fns["select_column"](t, col))
    x0 = p.call("filter_equals", Var("table"), col, val)
    x1 = p.call("select_column", Var(x0), num)
    return {"col": col, "val": val, "num": num}, p.call("sum_values", Var(x1))


def _f_mean_above(rng, s, t, p):
    num, num2 = rng.sample([c for c, *_ in s.numeric], 2)
    values = sorted(p.fns["select_column"](t, num2))
    threshold = values[rng.randint(0, len(values) - 2)]
    x0 = p.call("filter_greater", Var("table"), num2, threshold)
    x1 = p.call("select_column", Var(x0), num)
    x2 = p.call("mean_values", Var(x1))
    return {"num": num, "num2": num2, "thr": threshold}, p.call("round_value", Var(x2), 2)


def _f_top_group(rng, s, t, p):
    col = rng.choice(s.categorical)
    num = rng.choice(s.numeric)[0]
    x0 = p.call("group_sum", Var("table"), col, num)
    _unique_max(p.vals[x0])
    return {"col": col, "num": num}, p.call("argmax_key", Var(x0))


def _f_rarest_group(rng, s, t, p):
    col = rng.choice(s.categorical)
    x0 = p.call("group_count", Var("table"), col)
    _unique_max(p.vals[x0], largest=False)
    return {"col": col}, p.call("argmin_key", Var(x0))


def _f_lookup(rng, s, t, p):
    key = rng.choice(p.fns["select_column"](t, s.key))
    col = rng.choice([*s.categorical, *(c for c, *_ in s.numeric)])
    return {"key": key, "col": col}, p.call("lookup", Var("table"), s.key, key, col)


def _f_best_row(rng, s, t, p):
    num = rng.choice(s.numeric)[0]
    desc = rng.random() < 0.5
    values = sorted(p.fns["select_column"](t, num), reverse=desc)
    if values[0] == values[1]:
        raise _Reject("a tie for the first place")
    x0 = p.call("sort_rows", Var("table"), num, desc)
    return {"num": num, "most": "highest" if desc else "lowest"}, p.call("first_value", Var(x0), s.key)


def _f_lookup_diff(rng, s, t, p):
    a, b = rng.sample(p.fns["select_column"](t, s.key), 2)
    num = rng.choice(s.numeric)[0]
    x0 = p.call("lookup", Var("table"), s.key, a, num)
    x1 = p.call("lookup", Var("table"), s.key, b, num)
    return {"a": a, "b": b, "num": num}, p.call("subtract_values", Var(x0), Var(x1))


def _f_distinct_above(rng, s, t, p):
    col = rng.choice(s.categorical)
    num = rng.choice(s.numeric)[0]
    values = sorted(p.fns["select_column"](t, num))
    threshold = values[rng.randint(0, len(values) - 2)]
    x0 = p.call("filter_greater", Var("table"), num, threshold)
    x1 = p.call("select_column", Var(x0), col)
    return {"col": col, "num": num, "thr": threshold}, p.call("count_distinct", Var(x1))


def _f_share(rng, s, t, p):
    col = rng.choice(s.categorical)
    num = rng.choice(s.numeric)[0]
    val = rng.choice(p.fns["select_column"](t, col))
    x0 = p.call("group_sum", Var("table"), col, num)
    x1 = p.call("dict_get", Var(x0), val)
    x2 = p.call("select_column", Var("table"), num)
    x3 = p.call("sum_values", Var(x2))
    if p.vals[x3] == 0:
        raise _Reject("zero total")
    x4 = p.call("divide_values", Var(x1), Var(x3))
    return {"col": col, "val": val, "num": num}, p.call("round_value", Var(x4), 2)


def _f_range_where(rng, s, t, p):
    col = rng.choice(s.categorical)
    num = rng.choice(s.numeric)[0]
    val = rng.choice(p.fns["select_column"](t, col))
    x0 = p.call("filter_equals", Var("table"), col, val)
    x1 = p.call("select_column", Var(x0), num)
    x2 = p.call("max_values", Var(x1))
    x3 = p.call("min_values", Var(x1))
    return {"col": col, "val": val, "num": num}, p.call("subtract_values", Var(x2), Var(x3))


FAMILIES: dict[str, tuple[tuple[str, str, str], Callable]] = {
    "count_equals": (("How many {entity} have {col} {val}?",
                      "Count the {entity} whose {col} is {val}.",
                      "What is the number of {entity} listed with {col} equal to {val}?"), _f_count_equals),
    "sum_where": (("What is the total {num} of the {entity} whose {col} is {val}?",
                   "Add up the {num} of all {entity} with {col} {val}.",
                   "Summed over {entity} having {col} {val}, what is the {num}?"), _f_sum_where),
    "mean_above": (("What is the average {num} of the {entity} with {num2} above {thr}, rounded to 2 decimals?",
                    "Among {entity} whose {num2} is greater than {thr}, what is the mean {num} (2 decimals)?",
                    "For {entity} exceeding {thr} in {num2}, give the mean {num} to 2 decimal places."), _f_mean_above),
    "top_group": (("Which {col} has the largest total {num}?", "For which {col} is the sum of {num} highest?",
                   "Grouping by {col}, which group's {num} adds up to the most?"), _f_top_group),
    "rarest_group": (("Which {col} appears in the fewest rows?", "Which {col} is the least common?",
                      "Name the {col} with the smallest number of {entity}."), _f_rarest_group),
    "lookup": (("What is the {col} of {key}?", "Look up the {col} for {key}.",
                "Which value does {key} have in the {col} column?"), _f_lookup),
    "best_row": (("Which of the {entity} has the {most} {num}?", "Who has the {most} {num}?",
                  "Name the entry among the {entity} with the {most} {num}."), _f_best_row),
    "lookup_diff": (("How much higher is the {num} of {a} than that of {b}?",
                     "What is the {num} of {a} minus the {num} of {b}?",
                     "By how much does {a}'s {num} exceed {b}'s?"), _f_lookup_diff),
    "distinct_above": (("How many different {col} values are there among {entity} with {num} above {thr}?",
                        "Count the distinct {col} entries of {entity} whose {num} exceeds {thr}.",
                        "Among {entity} beyond {thr} in {num}, how many unique {col} values occur?"), _f_distinct_above),
    "share": (("What fraction of the total {num} comes from {entity} with {col} {val}, rounded to 2 decimals?",
               "What share of all {num} belongs to {col} {val} (2 decimals)?",
               "Give, to 2 decimal places, the portion of overall {num} contributed by {col} {val}."), _f_share),
    "range_where": (("What is the gap between the highest and lowest {num} among {entity} with {col} {val}?",
                     "For {col} {val}, what is the largest {num} minus the smallest?",
                     "Within {col} {val}, how wide is the spread of {num}?"), _f_range_where),
}


def combo_split(family: str, schema: str) -> str:
    """The split a (family, schema) combination is held out for, or ``train`` (stable hash)."""
    h = zlib.crc32(f"{family}@{schema}".encode()) % 8
    return "test" if h == 0 else "validation" if h == 1 else "train"


def _allowed(family: str, schema: str, split: str) -> bool:
    cls = combo_split(family, schema)
    return cls == "train" if split == "train" else cls in ("train", split)


def _fmt(v: Any) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def make_task(seed: int, split: str, index: int) -> TableTask:
    """Task ``index`` of ``split`` for ``seed`` (what :func:`generate` returns at that position)."""
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; expected one of {SPLITS}")
    rng = random.Random(f"cocoda-tables/v{VERSION}/{seed}/{split}/{index}")
    combos = [(f, s) for f in FAMILIES for s in SCHEMAS if _allowed(f, s.name, split)]
    for _ in range(200):
        family, schema = rng.choice(combos)
        table = generate_table(rng, schema, split)
        prog = _Prog(table)
        templates, build = FAMILIES[family]
        try:
            words, out = build(rng, schema, table, prog)
        except _Reject:
            continue
        template = templates[rng.randint(0, 1)] if split == "train" else templates[2]
        question = template.format(entity=schema.entity, **{k: _fmt(v) for k, v in words.items()})
        answer = prog.vals[out]
        return TableTask(
            id=f"table-{split}-{seed}-{index}", split=split, schema=schema.name, question=question, table=table,
            program="\n".join(prog.lines + [f"answer = {out}"]) + "\n", answer=answer,
            answer_type="str" if isinstance(answer, str) else "int" if isinstance(answer, int) else "float",
            intermediates=tuple((f"x{i}", prog.vals[f"x{i}"]) for i in range(len(prog.lines))),
            skeleton=tuple(prog.shapes), difficulty=len(prog.lines), motifs=(family,))
    raise RuntimeError(f"no valid table task for seed={seed} split={split} index={index}")


def generate(n: int, seed: int = 0, split: str = "train", *, start: int = 0) -> list[TableTask]:
    """``n`` tasks of ``split``: task ``i`` is :func:`make_task` ``(seed, split, start + i)``."""
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; expected one of {SPLITS}")
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    return [make_task(seed, split, start + i) for i in range(n)]


# =================================================================================================
# The domain (cocoda_jax.data.domain)
# =================================================================================================


class Tables(DomainBase):
    """The table domain: splits from :func:`generate`, variants from the table generator (RODS keeps
    a draw with the parent's skeleton: its query family; schema, table, entities and wording are new).
    The stated numbers are the numeric constants of the gold program (the input is a table).

    Config keys (``config.domain``): ``seed``, ``n_train``, ``n_val``, ``n_test`` and ``heldout``
    (``"instances"``: unseen training-split instances; ``"wording"``: the held-out splits)."""

    name, kind, task_type = "tables", "table", TableTask

    def build(self, section: Any, sandbox: Any) -> DomainSplits:
        heldout, seed = section["heldout"], section["seed"]
        if heldout not in ("instances", "wording"):
            raise DomainConfigError(f"config.domain.heldout must be 'instances' or 'wording', got {heldout!r}")
        train = generate(section["n_train"], seed=seed, split="train")
        if heldout == "instances":
            val = generate(section["n_val"], seed=seed, split="train", start=1_000_000)
            test = generate(section["n_test"], seed=seed, split="train", start=2_000_000)
        else:
            val = generate(section["n_val"], seed=seed, split="validation")
            test = generate(section["n_test"], seed=seed, split="test")
        return DomainSplits(tuple(train), tuple(val), tuple(test), primitive_library(sandbox))

    def propose_variant(self, parent: TableTask, stream_seed: int, draw: int) -> TableTask:
        return make_task(stream_seed, parent.split, draw)

    def task_from_dict(self, d: Mapping[str, Any]) -> TableTask:
        return dataclass_from_dict(TableTask, d, {"skeleton": tuplify, "motifs": tuple, "intermediates": pairs})


register_domain("tables", Tables)

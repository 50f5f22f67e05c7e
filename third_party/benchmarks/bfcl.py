r"""The Berkeley Function Calling Leaderboard (BFCL v4) in its official file format, read from the
installed ``bfcl-eval`` package's data directory (or any directory with the same layout).

Nothing is downloaded and no heavy module of the package is imported: the data directory is found with
``importlib.util.find_spec("bfcl_eval")``. The layout is

* ``BFCL_v4_<category>.json`` — JSON lines, one test entry each: ``id``, ``question`` (a list of turns,
  each a list of ``{"role", "content"}`` messages) and, for the single-turn categories, ``function`` (the
  function docs offered to the model). Multi-turn entries instead name their ``involved_classes`` and
  carry ``initial_config``, ``path`` and optionally ``excluded_function`` / ``missed_function``.
* ``possible_answer/BFCL_v4_<category>.json`` — JSON lines ``{"id", "ground_truth"}``. Single-turn: a
  list of ``{func_name: {param: [allowed values]}}`` (``""`` among the allowed values marks an optional
  parameter). Multi-turn: a list of turns, each a list of call strings such as ``"cd(folder='temp')"``.
* ``multi_turn_func_doc/<file>.json`` — JSON lines, the function docs of one backend class.

Every reader checks its input and raises :class:`~third_party.benchmarks.common.BenchmarkFormatError`
naming the file, the line and the field; a missing file raises ``FileNotFoundError``.

The dict-valued fields of :class:`BfclEntry` (function docs, ground-truth answers, ``initial_config``)
are plain dicts so that they can be handed to the package's checker and to JSON as they are; treat them
as read-only (entries are frozen, their tuples immutable).
"""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import importlib.util
import json
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from third_party.benchmarks.common import BenchmarkFormatError, field, read_jsonl, require_file

VERSION_PREFIX = "BFCL_v4"

SINGLE_TURN = ("simple_python", "multiple", "parallel", "parallel_multiple", "live_simple", "live_multiple")
MULTI_TURN = ("multi_turn_base", "multi_turn_miss_func", "multi_turn_miss_param", "multi_turn_long_context")
#: The categories this module loads and scores by BFCL's rules (Python AST checks and multi-turn execution).
SUPPORTED = SINGLE_TURN + MULTI_TURN

#: Single-turn categories without ground truth: the model must call no function at all. They load (with an
#: empty ``ground_truth``) and score (valid iff no call), but stay out of :data:`SUPPORTED`, whose
#: categories all have answers to replay.
IRRELEVANCE = ("irrelevance", "live_irrelevance")

#: The categories this module does not load, and why.
UNSUPPORTED = {
    "memory": "needs the package's memory backends (extra dependencies, and vector memory needs an embedding "
              "model) and a pre-requisite conversation phase; not available here",
    "web_search": "needs live web search through an external search service; no network here",
    "format_sensitivity": "re-renders the single-turn entries under many prompt formats; scoring it needs the "
                          "package's model handlers to decode each format",
    "live_relevance": "has no ground truth: any successfully decoded call counts as correct, so there is "
                      "nothing to check but the decoder of a given model's output format",
    "live_parallel": "not in this project's category set (its 16 entries would load and score like "
                     "'parallel'); add it to SUPPORTED to use it",
    "live_parallel_multiple": "not in this project's category set (its 24 entries would load and score like "
                              "'parallel_multiple'); add it to SUPPORTED to use it",
    "simple_java": "Java calls: its checker converts Java-typed strings (type converters not reimplemented here)",
    "simple_javascript": "JavaScript calls: its checker converts JS-typed strings (type converters not "
                         "reimplemented here)",
}

#: Backend class -> its function-doc file under ``multi_turn_func_doc/`` (the package's
#: ``bfcl_eval.constants.executable_backend_config.MULTI_TURN_FUNC_DOC_FILE_MAPPING``; a test checks equality).
MULTI_TURN_FUNC_DOC_FILES = {
    "GorillaFileSystem": "gorilla_file_system.json",
    "MathAPI": "math_api.json",
    "MessageAPI": "message_api.json",
    "TwitterAPI": "posting_api.json",
    "TicketAPI": "ticket_api.json",
    "TradingBot": "trading_bot.json",
    "TravelAPI": "travel_booking.json",
    "VehicleControlAPI": "vehicle_control.json",
    "WebSearchAPI": "web_search.json",
    "MemoryAPI_kv": "memory_kv.json",
    "MemoryAPI_vector": "memory_vector.json",
    "MemoryAPI_rec_sum": "memory_rec_sum.json",
}
#: The backend classes of the multi-turn categories (the others serve web search and memory).
MULTI_TURN_CLASSES = ("GorillaFileSystem", "MathAPI", "MessageAPI", "TwitterAPI", "TicketAPI", "TradingBot",
                      "TravelAPI", "VehicleControlAPI")

#: The parameter types of the Python single-turn docs (the keys of the package's ``PYTHON_TYPE_MAPPING``).
PYTHON_PARAM_TYPES = ("string", "integer", "float", "boolean", "array", "tuple", "dict", "any")


@dataclasses.dataclass(frozen=True)
class BfclEntry:
    """One BFCL test entry with its ground truth.

    ``turns[t]`` are the user messages of turn ``t`` (a multi-turn entry of ``multi_turn_miss_func`` has
    an empty turn: the one where the withheld functions are revealed and the model must go on);
    ``messages[t]`` are all ``(role, content)`` pairs of that turn (a few live entries open with a
    ``system`` message).

    ``functions`` are the docs offered from the first turn. For multi-turn entries they are the docs of
    ``involved_classes`` (in that order, as the package builds them) minus ``excluded_function`` and minus
    the functions of ``missed_function``, which are withheld: ``missed_function[t]`` names those revealed
    at turn ``t`` (their docs are ``withheld_functions``; :meth:`functions_at_turn` gives the docs
    available at a turn). Note that the package itself (``bfcl-eval`` 2026.3.23) keeps the excluded
    functions in the prompt; they are removed here as the dataset field says.

    ``ground_truth``: single-turn — a tuple of ``{func_name: {param: [allowed values]}}`` (one per
    expected call); irrelevance — ``()``; multi-turn — a tuple of turns, each a tuple of call strings
    (an empty turn is one where the model cannot, or must not, act).
    """

    id: str
    category: str
    turns: tuple[tuple[str, ...], ...]
    functions: tuple[dict, ...] = dataclasses.field(hash=False)
    ground_truth: tuple = dataclasses.field(hash=False)
    messages: tuple[tuple[tuple[str, str], ...], ...] = ()
    initial_config: dict = dataclasses.field(default_factory=dict, hash=False)
    involved_classes: tuple[str, ...] = ()
    excluded_function: tuple[str, ...] = ()
    missed_function: Mapping[int, tuple[str, ...]] = dataclasses.field(default_factory=dict, hash=False)
    withheld_functions: tuple[dict, ...] = dataclasses.field(default=(), hash=False)
    path: tuple[str, ...] = ()

    @property
    def multi_turn(self) -> bool:
        return self.category in MULTI_TURN

    @property
    def base_index(self) -> int | None:
        """``N`` of a multi-turn id ``multi_turn_<kind>_N``: the same scenario in all four multi-turn
        categories (``None`` for single-turn entries)."""
        return int(self.id.rsplit("_", 1)[1]) if self.multi_turn else None

    def functions_at_turn(self, turn: int) -> tuple[dict, ...]:
        """The docs available at ``turn``: :attr:`functions` plus those of ``missed_function`` revealed at
        or before ``turn`` (the package appends them when it reaches their turn and keeps them)."""
        revealed = {name for t, names in self.missed_function.items() if t <= turn for name in names}
        return self.functions + tuple(d for d in self.withheld_functions if d["name"] in revealed)


# =================================================================================================
# Locating and reading the files
# =================================================================================================


def default_data_dir() -> str:
    """``bfcl_eval/data`` of the installed package (found without importing it)."""
    spec = importlib.util.find_spec("bfcl_eval")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("BFCL: the 'bfcl_eval' package (pip 'bfcl-eval') is not installed; "
                                "pass data_dir= to read a copy of its data directory")
    return os.path.join(list(spec.submodule_search_locations)[0], "data")


def _check_category(category: str) -> None:
    if category in SUPPORTED or category in IRRELEVANCE:
        return
    why = f" ({UNSUPPORTED[category]})" if category in UNSUPPORTED else " (unknown category)"
    raise ValueError(f"BFCL category {category!r} is not supported{why}; supported: {', '.join(SUPPORTED)}; "
                     f"without ground truth: {', '.join(IRRELEVANCE)}")


def load_category(category: str, data_dir: os.PathLike | str | None = None) -> tuple[BfclEntry, ...]:
    """All entries of one category, in file order, each joined with its ground truth by id."""
    _check_category(category)
    data_dir = os.fspath(data_dir) if data_dir is not None else default_data_dir()
    q_path = os.path.join(data_dir, f"{VERSION_PREFIX}_{category}.json")
    records = _records(q_path, f"BFCL {category} questions")
    if category in IRRELEVANCE:
        return tuple(_single_turn_entry(obj, category, q_path, line, None, None) for line, obj in records)

    a_path = os.path.join(data_dir, "possible_answer", f"{VERSION_PREFIX}_{category}.json")
    answers: dict[str, tuple[int, Any]] = {}
    for line, obj in _records(a_path, f"BFCL {category} ground truth"):
        ident = field(obj, "id", str, a_path, line)
        field(obj, "ground_truth", list, a_path, line)
        answers[ident] = (line, obj["ground_truth"])
    unmatched = {ident for ident in answers} - {field(obj, "id", str, q_path, line) for line, obj in records}
    if unmatched:
        ident = min(unmatched, key=lambda i: answers[i][0])
        raise BenchmarkFormatError(a_path, f"ground truth for id {ident!r}, which has no question in {q_path}",
                                   line=answers[ident][0], field="id")
    docs = _multi_turn_docs(data_dir) if category in MULTI_TURN else None
    out = []
    for line, obj in records:
        ident = obj["id"]
        if ident not in answers:
            raise BenchmarkFormatError(q_path, f"id {ident!r} has no ground truth in {a_path}", line=line, field="id")
        a_line, gt = answers[ident]
        if category in MULTI_TURN:
            out.append(_multi_turn_entry(obj, category, q_path, line, gt, a_path, a_line, docs))
        else:
            out.append(_single_turn_entry(obj, category, q_path, line, gt, (a_path, a_line)))
    return tuple(out)


def _records(path: str, what: str) -> list[tuple[int, dict]]:
    """The file's records, ids checked to be unique."""
    records = list(read_jsonl(require_file(path, what), what))
    seen: dict[str, int] = {}
    for line, obj in records:
        ident = field(obj, "id", str, path, line)
        if ident in seen:
            raise BenchmarkFormatError(path, f"duplicate id {ident!r} (first on line {seen[ident]})", line=line,
                                       field="id")
        seen[ident] = line
    return records


def _turns(obj: dict, path: str, line: int) -> tuple[tuple, tuple]:
    question = field(obj, "question", list, path, line)
    turns, messages = [], []
    for t, turn in enumerate(question):
        if not isinstance(turn, list):
            raise BenchmarkFormatError(path, f"field 'question[{t}]' must be a list of messages, got "
                                       f"{type(turn).__name__}", line=line, field="question")
        pairs = []
        for m, message in enumerate(turn):
            where = f"question[{t}][{m}]."
            if not isinstance(message, dict):
                raise BenchmarkFormatError(path, f"field '{where[:-1]}' must be a message object", line=line,
                                           field="question")
            pairs.append((field(message, "role", str, path, line, where=where),
                          field(message, "content", str, path, line, where=where)))
        messages.append(tuple(pairs))
        turns.append(tuple(content for role, content in pairs if role == "user"))
    return tuple(turns), tuple(messages)


def _check_doc(doc: Any, path: str, line: int, where: str, *, typed: bool) -> dict:
    """A function doc: ``name``, ``parameters.properties`` and ``parameters.required``; with ``typed``, every
    property has one of the Python types the AST checker knows (arrays and tuples with ``items.type``)."""
    if not isinstance(doc, dict):
        raise BenchmarkFormatError(path, f"field '{where}' must be a function doc object", line=line, field=where)
    field(doc, "name", str, path, line, where=f"{where}.")
    params = field(doc, "parameters", dict, path, line, where=f"{where}.")
    props = field(params, "properties", dict, path, line, where=f"{where}.parameters.")
    required = field(params, "required", list, path, line, where=f"{where}.parameters.")
    if not all(isinstance(r, str) for r in required):
        raise BenchmarkFormatError(path, f"field '{where}.parameters.required' must list names", line=line,
                                   field=f"{where}.parameters.required")
    if typed:
        for name, spec in props.items():
            label = f"{where}.parameters.properties.{name}."
            kind = field(spec, "type", str, path, line, where=label)
            if kind not in PYTHON_PARAM_TYPES:
                raise BenchmarkFormatError(path, f"field '{label}type' is {kind!r}, not one of {PYTHON_PARAM_TYPES}",
                                           line=line, field=f"{label}type")
            if kind in ("array", "tuple"):
                items = field(spec, "items", dict, path, line, where=label)
                item_kind = field(items, "type", str, path, line, where=f"{label}items.")
                if item_kind not in PYTHON_PARAM_TYPES:
                    raise BenchmarkFormatError(path, f"field '{label}items.type' is {item_kind!r}", line=line,
                                               field=f"{label}items.type")
    return doc


def _single_turn_entry(obj: dict, category: str, path: str, line: int, gt: list | None,
                       gt_where: tuple[str, int] | None) -> BfclEntry:
    turns, messages = _turns(obj, path, line)
    functions = field(obj, "function", list, path, line)
    docs = tuple(_check_doc(d, path, line, f"function[{i}]", typed=True) for i, d in enumerate(functions))
    if gt is None:
        return BfclEntry(obj["id"], category, turns, docs, (), messages)
    a_path, a_line = gt_where
    names = {d["name"] for d in docs}
    for i, answer in enumerate(gt):
        label = f"ground_truth[{i}]"
        if not (isinstance(answer, dict) and len(answer) == 1):
            raise BenchmarkFormatError(a_path, f"field '{label}' must be {{func_name: {{param: [values]}}}}",
                                       line=a_line, field=label)
        (name, params), = answer.items()
        if not isinstance(params, dict) or not all(isinstance(v, list) for v in params.values()):
            raise BenchmarkFormatError(a_path, f"field '{label}.{name}' must map each parameter to a list of "
                                       f"allowed values", line=a_line, field=f"{label}.{name}")
        if name not in names:
            raise BenchmarkFormatError(a_path, f"field '{label}' names {name!r}, which is not among the entry's "
                                       f"functions {sorted(names)}", line=a_line, field=label)
    if not gt:
        raise BenchmarkFormatError(a_path, "field 'ground_truth' is empty", line=a_line, field="ground_truth")
    return BfclEntry(obj["id"], category, turns, docs, tuple(gt), messages)


def _multi_turn_docs(data_dir: str) -> dict[str, tuple[dict, ...]]:
    return {cls: multi_turn_docs(cls, data_dir) for cls in MULTI_TURN_CLASSES}


def multi_turn_docs(class_name: str, data_dir: os.PathLike | str | None = None) -> tuple[dict, ...]:
    """The function docs of one backend class (``multi_turn_func_doc/<file>.json``; any of the twelve,
    memory and web search included: reading docs needs no service)."""
    if class_name not in MULTI_TURN_FUNC_DOC_FILES:
        raise KeyError(f"unknown BFCL class {class_name!r}; known: {sorted(MULTI_TURN_FUNC_DOC_FILES)}")
    data_dir = os.fspath(data_dir) if data_dir is not None else default_data_dir()
    path = os.path.join(data_dir, "multi_turn_func_doc", MULTI_TURN_FUNC_DOC_FILES[class_name])
    return tuple(_check_doc(doc, path, line, "doc", typed=False)
                 for line, doc in read_jsonl(path, f"BFCL {class_name} function docs"))


#: Every question file whose entries carry a ``function`` list of docs (scored or not here).
DOC_CATEGORIES = ("simple_python", "simple_java", "simple_javascript", "multiple", "parallel", "parallel_multiple",
                  "irrelevance", "live_simple", "live_multiple", "live_parallel", "live_parallel_multiple",
                  "live_irrelevance", "live_relevance")


def function_docs(category: str, data_dir: os.PathLike | str | None = None) -> tuple[tuple[dict, str], ...]:
    """``(doc, "file#id")`` for every doc of every entry of a question file with docs (repeats kept),
    also for categories this project does not score (their docs are still tools)."""
    if category not in DOC_CATEGORIES:
        raise ValueError(f"BFCL category {category!r} has no function docs; those that do: {DOC_CATEGORIES}")
    data_dir = os.fspath(data_dir) if data_dir is not None else default_data_dir()
    path = os.path.join(data_dir, f"{VERSION_PREFIX}_{category}.json")
    out = []
    for line, obj in _records(path, f"BFCL {category} questions"):
        for doc in field(obj, "function", list, path, line):
            out.append((_check_doc(doc, path, line, "function", typed=False), f"{os.path.basename(path)}#{obj['id']}"))
    return tuple(out)


def _string_list(obj: Mapping, name: str, path: str, line: int, *, where: str = "") -> tuple[str, ...]:
    values = field(obj, name, list, path, line, where=where)
    if not all(isinstance(v, str) for v in values):
        raise BenchmarkFormatError(path, f"field '{where}{name}' must be a list of strings", line=line,
                                   field=f"{where}{name}")
    return tuple(values)


def _multi_turn_entry(obj: dict, category: str, path: str, line: int, gt: list, a_path: str, a_line: int,
                      docs: dict[str, tuple[dict, ...]]) -> BfclEntry:
    turns, messages = _turns(obj, path, line)
    classes = _string_list(obj, "involved_classes", path, line)
    for cls in classes:
        if cls not in docs:
            raise BenchmarkFormatError(path, f"field 'involved_classes' names {cls!r}, not one of "
                                       f"{MULTI_TURN_CLASSES}", line=line, field="involved_classes")
    initial_config = field(obj, "initial_config", dict, path, line)
    trail = _string_list(obj, "path", path, line)
    excluded = _string_list(obj, "excluded_function", path, line) if "excluded_function" in obj else ()
    all_docs = [d for cls in classes for d in docs[cls]]
    names = {d["name"] for d in all_docs}
    for name in excluded:
        if name not in names:
            raise BenchmarkFormatError(path, f"field 'excluded_function' names {name!r}, which no involved class "
                                       f"has", line=line, field="excluded_function")
    missed: dict[int, tuple[str, ...]] = {}
    if "missed_function" in obj:
        raw = field(obj, "missed_function", dict, path, line)
        for key in raw:
            if not (key.isdigit() and int(key) < len(turns)):
                raise BenchmarkFormatError(path, f"field 'missed_function' has key {key!r}, not a turn index "
                                           f"below {len(turns)}", line=line, field="missed_function")
            missed[int(key)] = _string_list(raw, key, path, line, where="missed_function.")
            for name in missed[int(key)]:
                if name not in names:
                    raise BenchmarkFormatError(path, f"field 'missed_function.{key}' names {name!r}, which no "
                                               f"involved class has", line=line, field=f"missed_function.{key}")
    withheld_names = {n for names_ in missed.values() for n in names_}
    functions = tuple(d for d in all_docs if d["name"] not in excluded and d["name"] not in withheld_names)
    withheld = tuple(d for d in all_docs if d["name"] in withheld_names)

    if len(gt) != len(turns):
        raise BenchmarkFormatError(a_path, f"field 'ground_truth' has {len(gt)} turns, the question {len(turns)}",
                                   line=a_line, field="ground_truth")
    gt_turns = []
    for t, calls in enumerate(gt):
        if not isinstance(calls, list) or not all(isinstance(c, str) for c in calls):
            raise BenchmarkFormatError(a_path, f"field 'ground_truth[{t}]' must be a list of call strings",
                                       line=a_line, field="ground_truth")
        for call in calls:
            try:
                parse_call(call)
            except ValueError as exc:
                raise BenchmarkFormatError(a_path, f"field 'ground_truth[{t}]': {exc}", line=a_line,
                                           field="ground_truth") from None
        gt_turns.append(tuple(calls))
    return BfclEntry(obj["id"], category, turns, functions, tuple(gt_turns), messages, initial_config, classes,
                     excluded, missed, withheld, trail)


# =================================================================================================
# The function pool and the multi-turn split
# =================================================================================================


def function_pool(data_dir: os.PathLike | str | None = None) -> tuple[dict, ...]:
    """Every distinct function doc of the supported single-turn categories and of the multi-turn backend
    classes, in first-seen order (categories in :data:`SINGLE_TURN` order, then the classes). Docs are
    distinct when their canonical JSON (sorted keys) differs: docs sharing a name but not a description or
    a parameter are kept apart."""
    data_dir = os.fspath(data_dir) if data_dir is not None else default_data_dir()
    pool: dict[str, dict] = {}
    for category in SINGLE_TURN:
        for entry in load_category(category, data_dir):
            for doc in entry.functions:
                pool.setdefault(json.dumps(doc, sort_keys=True), doc)
    for docs in _multi_turn_docs(data_dir).values():
        for doc in docs:
            pool.setdefault(json.dumps(doc, sort_keys=True), doc)
    return tuple(pool.values())


def split_multi_turn(entries: Iterable[BfclEntry], seed: int = 0,
                     fractions: Sequence[float] = (0.6, 0.2, 0.2)
                     ) -> tuple[tuple[BfclEntry, ...], tuple[BfclEntry, ...], tuple[BfclEntry, ...]]:
    """``(train, val, test)`` of multi-turn entries, by base scenario.

    The four multi-turn categories are variants of the same 200 scenarios: ``multi_turn_base_N``,
    ``multi_turn_miss_func_N``, ``multi_turn_miss_param_N`` and ``multi_turn_long_context_N`` share the
    initial state, the classes and most of the questions. Splitting by id would put variants of one scenario
    on both sides (leakage), so the unit is the base index ``N``: it goes to the split whose cumulative
    fraction interval holds ``u = sha256(f"{seed}:{N}")`` read as a number in [0, 1). Each entry's split
    depends only on ``(seed, N, fractions)`` — not on which other entries are passed — so a scenario lands
    in the same split whether one category or all four are split, and every run agrees. The sizes follow
    ``fractions`` in expectation (about 120/40/40 of the 200 scenarios at the default). Order within each
    split is the input order.
    """
    fractions = tuple(float(f) for f in fractions)
    if len(fractions) != 3 or any(f < 0 or not math.isfinite(f) for f in fractions) or abs(sum(fractions) - 1) > 1e-9:
        raise ValueError(f"fractions must be three non-negative numbers summing to 1, got {fractions}")
    bounds = (fractions[0], fractions[0] + fractions[1])
    parts: tuple[list, list, list] = ([], [], [])
    for entry in entries:
        if not entry.multi_turn:
            raise ValueError(f"split_multi_turn: {entry.id!r} is not a multi-turn entry")
        digest = hashlib.sha256(f"{seed}:{entry.base_index}".encode()).digest()
        u = int.from_bytes(digest[:8], "big") / 2.0 ** 64
        parts[0 if u < bounds[0] else 1 if u < bounds[1] else 2].append(entry)
    return tuple(parts[0]), tuple(parts[1]), tuple(parts[2])


# =================================================================================================
# Call strings
# =================================================================================================


def _dotted_name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        head = _dotted_name(node.value)
        return None if head is None else f"{head}.{node.attr}"
    return None


def parse_call(text: str) -> tuple[str, tuple, dict[str, Any]]:
    """``(name, args, kwargs)`` of one call string such as ``"mv(source='a', destination='b')"`` or
    ``"sort('final_report.pdf')"`` (positional arguments, as the ground truth sometimes has them, are kept
    as the tuple ``args``). The name may be dotted (``math.factorial``); every argument must be a Python
    literal. Raises ``ValueError`` otherwise."""
    if not isinstance(text, str):
        raise ValueError(f"a call string is expected, got {type(text).__name__}")
    try:
        node = ast.parse(text.strip(), mode="eval").body
    except SyntaxError as exc:
        raise ValueError(f"{text!r} is not a Python expression ({exc.msg})") from None
    name = _dotted_name(node.func) if isinstance(node, ast.Call) else None
    if name is None:
        raise ValueError(f"{text!r} is not a call of a (dotted) name")
    try:
        args = tuple(ast.literal_eval(a) for a in node.args)
        kwargs = {}
        for kw in node.keywords:
            if kw.arg is None:
                raise ValueError("**kwargs")
            if kw.arg in kwargs:
                raise ValueError(f"repeated keyword {kw.arg!r}")
            kwargs[kw.arg] = ast.literal_eval(kw.value)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError) as exc:
        raise ValueError(f"{text!r}: arguments must be Python literals ({exc})") from None
    return name, args, kwargs


def format_call(name: str, args: Sequence = (), kwargs: Mapping[str, Any] | None = None) -> str:
    """The call string of ``name(*args, **kwargs)`` with ``repr`` literals (the inverse of :func:`parse_call`)."""
    parts = [repr(a) for a in args] + [f"{k}={v!r}" for k, v in (kwargs or {}).items()]
    return f"{name}({', '.join(parts)})"

r"""Readers of the paper's benchmarks in their official file formats, from local paths.

Nothing is downloaded: the user provides the files. Every reader checks its input and raises
:class:`~third_party.benchmarks.common.BenchmarkFormatError` naming the file, the line (where the
format has lines) and the missing or malformed field; a missing path raises ``FileNotFoundError``.

* GSM8K — JSON lines with ``question`` and ``answer`` (the worked solution ending ``#### <number>``).
* MATH — the release's directory tree (``<split>/<type>/<n>.json``, one problem per file), a single
  problem file, a JSON list of problems, or JSON lines; fields ``problem``, ``solution`` (with a
  ``\boxed{}`` answer), ``level`` (``"Level 3"``) and ``type``.
* WikiTableQuestions — a question file (``data/*.tsv``: tab-separated ``id``, ``utterance``,
  ``context``, ``targetValue``) and the tables it names (``csv/<n>-csv/<m>.csv`` under the dataset
  root), read into the Table value of :mod:`cocoda_jax.data.tables`.
* FinQA — a JSON list of examples with ``pre_text``, ``table``, ``post_text`` and ``qa`` (``question``,
  ``program``, ``answer``; ``exe_ans`` when present).
* MBPP — JSON lines with ``task_id``, ``text``, ``code``, ``test_list`` (``test_setup_code`` and
  ``challenge_test_list`` when present).

Users who prepared ``gsm8k`` or ``wiki_table_questions`` with TensorFlow Datasets (ArrayRecord
format) can read them with :func:`third_party.benchmarks.tfds_readers.load_tfds`.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import os
import re
from typing import Any

from cocoda_jax.data import tables as _tables
from cocoda_jax.data.verifiers import extract_boxed, gsm8k_gold
from third_party.benchmarks.common import BenchmarkFormatError, field, read_json, read_jsonl, require_file

# =================================================================================================
# GSM8K
# =================================================================================================


@dataclasses.dataclass(frozen=True)
class GSM8KProblem:
    id: str
    question: str
    solution: str
    answer: float


def load_gsm8k(path: os.PathLike | str) -> list[GSM8KProblem]:
    """GSM8K problems from a ``.jsonl`` file (``train.jsonl`` / ``test.jsonl`` of the release)."""
    out = []
    for line, obj in read_jsonl(path, "GSM8K"):
        question = field(obj, "question", str, str(path), line)
        solution = field(obj, "answer", str, str(path), line)
        try:
            answer = gsm8k_gold(solution)
        except ValueError as exc:
            raise BenchmarkFormatError(path, f"field 'answer': {exc}", line=line, field="answer") from None
        out.append(GSM8KProblem(f"gsm8k-{line}", question, solution, answer))
    return out


# =================================================================================================
# MATH
# =================================================================================================


@dataclasses.dataclass(frozen=True)
class MATHProblem:
    id: str
    problem: str
    solution: str
    answer: str          # the content of the solution's last \boxed{}
    level: int | None    # 1..5, None for "Level ?"
    type: str


def load_math(path: os.PathLike | str) -> list[MATHProblem]:
    """MATH problems from a directory tree of ``.json`` files, one ``.json`` file (a problem or a
    list of problems) or a ``.jsonl`` file. Problems come in sorted path order."""
    path = os.fspath(path)
    if os.path.isdir(path):
        files = sorted(os.path.join(root, name) for root, _, names in os.walk(path) for name in names
                       if name.endswith(".json"))
        if not files:
            raise BenchmarkFormatError(path, "no .json problem files under this directory")
        out = []
        for file in files:
            obj = read_json(file, "MATH")
            out.append(_math_problem(obj, file, None, os.path.relpath(file, path)))
        return out
    require_file(path, "MATH")
    if path.endswith(".jsonl"):
        return [_math_problem(obj, path, line, f"line-{line}") for line, obj in read_jsonl(path, "MATH")]
    data = read_json(path, "MATH")
    if isinstance(data, list):
        return [_math_problem(obj, path, None, f"item-{i}", where=f"[{i}].") for i, obj in enumerate(data)]
    return [_math_problem(data, path, None, os.path.basename(path))]


_LEVEL = re.compile(r"^Level (\d|\?)$")


def _math_problem(obj: Any, path: str, line: int | None, ident: str, where: str = "") -> MATHProblem:
    if not isinstance(obj, dict):
        raise BenchmarkFormatError(path, f"{where or 'the file'} must be a JSON object, got {type(obj).__name__}", line=line)
    problem = field(obj, "problem", str, path, line, where=where)
    solution = field(obj, "solution", str, path, line, where=where)
    level_text = field(obj, "level", str, path, line, where=where)
    kind = field(obj, "type", str, path, line, where=where)
    m = _LEVEL.match(level_text.strip())
    if not m:
        raise BenchmarkFormatError(path, f"field '{where}level' must look like 'Level 3', got {level_text!r}",
                                   line=line, field=f"{where}level")
    answer = extract_boxed(solution)
    if answer is None:
        raise BenchmarkFormatError(path, f"field '{where}solution' has no \\boxed{{...}} answer", line=line,
                                   field=f"{where}solution")
    return MATHProblem(f"math-{ident}", problem, solution, answer,
                       None if m.group(1) == "?" else int(m.group(1)), kind)


# =================================================================================================
# WikiTableQuestions
# =================================================================================================


@dataclasses.dataclass(frozen=True)
class WTQExample:
    id: str
    question: str
    context: str                     # the table's path relative to the dataset root
    table: dict = dataclasses.field(hash=False)
    answers: tuple[str, ...] = ()    # the target denotation (a list of values)


_TSV_FIELDS = ("id", "utterance", "context", "targetValue")


def _unescape_tsv(text: str) -> str:
    r"""The WTQ TSV escapes: ``\n`` newline, ``\p`` pipe, ``\\`` backslash."""
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "p": "|", "\\": "\\"}.get(m.group(1), m.group(0)), text)


def load_wtq(tsv_path: os.PathLike | str, root: os.PathLike | str | None = None) -> list[WTQExample]:
    """WikiTableQuestions examples of one question file; ``root`` is the dataset directory the
    ``context`` paths are relative to (default: the parent of the question file's directory, as in
    the release's ``data/`` and ``csv/`` layout). Each table is read once."""
    tsv_path = require_file(tsv_path, "WikiTableQuestions questions")
    root = os.fspath(root) if root is not None else os.path.dirname(os.path.dirname(os.path.abspath(tsv_path)))
    with open(tsv_path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    if not lines or not lines[0].strip():
        raise BenchmarkFormatError(tsv_path, "empty file: expected a header line", line=1)
    header = lines[0].rstrip("\r").split("\t")
    missing = [c for c in _TSV_FIELDS if c not in header]
    if missing:
        raise BenchmarkFormatError(tsv_path, f"the header lacks the column(s) {missing} (has {header})", line=1,
                                   field=missing[0])
    col = {name: header.index(name) for name in _TSV_FIELDS}
    cache: dict[str, dict] = {}
    out = []
    for number, raw in enumerate(lines[1:], 2):
        raw = raw.rstrip("\r")
        if not raw.strip():
            continue
        cells = raw.split("\t")
        if len(cells) != len(header):
            raise BenchmarkFormatError(tsv_path, f"{len(cells)} tab-separated fields, expected {len(header)}",
                                       line=number)
        context = cells[col["context"]]
        if context not in cache:
            table_path = os.path.join(root, context)
            if not os.path.isfile(table_path):
                raise BenchmarkFormatError(tsv_path, f"the table {context!r} does not exist under {root!r}",
                                           line=number, field="context")
            cache[context] = load_wtq_table(table_path)
        target = cells[col["targetValue"]]
        out.append(WTQExample(cells[col["id"]], _unescape_tsv(cells[col["utterance"]]), context, cache[context],
                              tuple(_unescape_tsv(v) for v in target.split("|"))))
    return out


_INT = re.compile(r"^-?\d+$")
_FLOAT = re.compile(r"^-?\d*\.\d+$|^-?\d+\.\d*$")


def load_wtq_table(path: os.PathLike | str) -> dict:
    """A WikiTableQuestions ``.csv`` table (header row first; ``"`` quotes, ``\\`` escapes) as a
    Table value; a column whose cells are all integers (or all numbers) gets type int (or float)."""
    path = require_file(path, "WikiTableQuestions table")
    with open(path, encoding="utf-8", newline="") as f:
        text = f.read()
    try:
        rows = list(csv.reader(io.StringIO(text), delimiter=",", quotechar='"', escapechar="\\", strict=True))
    except csv.Error as exc:
        raise BenchmarkFormatError(path, f"malformed CSV: {exc}") from None
    if not rows:
        raise BenchmarkFormatError(path, "empty table: expected a header row", line=1)
    header = [h.strip() for h in rows[0]]
    seen: dict[str, int] = {}
    columns = []
    for h in header:  # WTQ headers repeat now and then; keep them apart
        seen[h] = seen.get(h, 0) + 1
        columns.append(h if seen[h] == 1 else f"{h}_{seen[h]}")
    body = rows[1:]
    for i, row in enumerate(body, 2):
        if len(row) != len(columns):
            raise BenchmarkFormatError(path, f"{len(row)} cells, expected {len(columns)}", line=i)
    types, converted = [], [list(r) for r in body]
    for j in range(len(columns)):
        cells = [r[j].strip() for r in body]
        if cells and all(_INT.match(c) for c in cells):
            kind, conv = "int", int
        elif cells and all(_INT.match(c) or _FLOAT.match(c) for c in cells):
            kind, conv = "float", float
        else:
            kind, conv = "str", str
        types.append(kind)
        for r, c in zip(converted, cells if kind != "str" else [r[j] for r in body]):
            r[j] = conv(c)
    return _tables.make_table(columns, converted, types)


# =================================================================================================
# FinQA
# =================================================================================================


@dataclasses.dataclass(frozen=True)
class FinQAExample:
    id: str
    question: str
    pre_text: tuple[str, ...]
    table: tuple[tuple[str, ...], ...]
    post_text: tuple[str, ...]
    program: str
    answer: str
    exe_ans: float | str | None


def load_finqa(path: os.PathLike | str) -> list[FinQAExample]:
    """FinQA examples from the release's ``train.json`` / ``dev.json`` / ``test.json`` (a JSON list)."""
    path = require_file(path, "FinQA")
    data = read_json(path, "FinQA")
    if not isinstance(data, list):
        raise BenchmarkFormatError(path, f"expected a JSON list of examples, got {type(data).__name__}")
    out = []
    for i, obj in enumerate(data):
        where = f"[{i}]."
        if not isinstance(obj, dict):
            raise BenchmarkFormatError(path, f"example [{i}] must be a JSON object", field=f"[{i}]")
        pre = field(obj, "pre_text", list, path, None, where=where)
        post = field(obj, "post_text", list, path, None, where=where)
        table = field(obj, "table", list, path, None, where=where)
        for name, texts in (("pre_text", pre), ("post_text", post)):
            if not all(isinstance(t, str) for t in texts):
                raise BenchmarkFormatError(path, f"field '{where}{name}' must be a list of str", field=f"{where}{name}")
        if not all(isinstance(r, list) and all(isinstance(c, str) for c in r) for r in table):
            raise BenchmarkFormatError(path, f"field '{where}table' must be a list of rows of str", field=f"{where}table")
        qa = field(obj, "qa", dict, path, None, where=where)
        question = field(qa, "question", str, path, None, where=f"{where}qa.")
        program = field(qa, "program", str, path, None, where=f"{where}qa.")
        answer = field(qa, "answer", (str, int, float), path, None, where=f"{where}qa.")
        exe = qa.get("exe_ans")
        out.append(FinQAExample(str(obj.get("id", f"finqa-{i}")), question, tuple(pre),
                                tuple(tuple(r) for r in table), tuple(post), program, str(answer), exe))
    return out


# =================================================================================================
# MBPP
# =================================================================================================


@dataclasses.dataclass(frozen=True)
class MBPPProblem:
    task_id: int
    text: str
    code: str
    test_list: tuple[str, ...]
    test_setup_code: str = ""
    challenge_test_list: tuple[str, ...] = ()


def load_mbpp(path: os.PathLike | str) -> list[MBPPProblem]:
    """MBPP problems from the release's ``mbpp.jsonl`` (or the sanitized JSON lines with ``prompt``
    in place of ``text``)."""
    out = []
    for line, obj in read_jsonl(path, "MBPP"):
        text_key = "text" if "text" in obj or "prompt" not in obj else "prompt"
        text = field(obj, text_key, str, str(path), line)
        code = field(obj, "code", str, str(path), line)
        tests = field(obj, "test_list", list, str(path), line)
        if not tests or not all(isinstance(t, str) for t in tests):
            raise BenchmarkFormatError(path, "field 'test_list' must be a non-empty list of str", line=line,
                                       field="test_list")
        task_id = field(obj, "task_id", int, str(path), line)
        setup = obj.get("test_setup_code", "") or ""
        challenge = obj.get("challenge_test_list", []) or []
        if not isinstance(setup, str):
            raise BenchmarkFormatError(path, "field 'test_setup_code' must be str", line=line, field="test_setup_code")
        if not isinstance(challenge, list) or not all(isinstance(t, str) for t in challenge):
            raise BenchmarkFormatError(path, "field 'challenge_test_list' must be a list of str", line=line,
                                       field="challenge_test_list")
        out.append(MBPPProblem(task_id, text, code, tuple(tests), setup, tuple(challenge)))
    return out

"""GSM8K and WikiTableQuestions through TensorFlow Datasets, when the user's data directory has them
prepared (``tfds build gsm8k --data_dir=... --file_format=array_record`` or the Python equivalent).

Prepared data is read with ``tfds.builder_from_directory(...).as_data_source(split)``, which needs
neither TensorFlow nor the network — only the ArrayRecord file format. Data prepared as TFRecord
(TFDS's default) can only be read with TensorFlow, which this project does not install; that case
gets an error that says how to re-prepare. Records come back as the same types as the file readers
(:class:`GSM8KProblem`, :class:`WTQExample`).
"""

from __future__ import annotations

import os
import re
from typing import Any

from cocoda_jax.data import tables as _tables
from cocoda_jax.data.verifiers import gsm8k_gold
from third_party.benchmarks.common import BenchmarkFormatError
from third_party.benchmarks.loaders import GSM8KProblem, WTQExample

SUPPORTED = ("gsm8k", "wiki_table_questions")


def prepared_dir(data_dir: os.PathLike | str, name: str) -> str:
    """``<data_dir>/<name>/<newest version>``, the directory TFDS prepared ``name`` into."""
    base = os.path.join(os.fspath(data_dir), name)
    versions = sorted((d for d in (os.listdir(base) if os.path.isdir(base) else ())
                       if re.fullmatch(r"\d+\.\d+\.\d+", d) and os.path.isfile(os.path.join(base, d, "dataset_info.json"))),
                      key=lambda v: tuple(int(x) for x in v.split(".")))
    if not versions:
        raise FileNotFoundError(f"no prepared TFDS dataset {name!r} under {os.fspath(data_dir)!r} "
                                f"(expected {base}/<version>/dataset_info.json)")
    return os.path.join(base, versions[-1])


def load_tfds(name: str, data_dir: os.PathLike | str, split: str) -> list[Any]:
    """The examples of ``split`` of the prepared TFDS dataset ``name`` (one of :data:`SUPPORTED`)."""
    if name not in SUPPORTED:
        raise ValueError(f"unsupported TFDS dataset {name!r}; supported: {SUPPORTED}")
    import tensorflow_datasets as tfds

    directory = prepared_dir(data_dir, name)
    builder = tfds.builder_from_directory(directory)
    if split not in builder.info.splits:
        raise BenchmarkFormatError(directory, f"no split {split!r}; prepared splits: {sorted(builder.info.splits)}")
    fmt = getattr(builder.info, "file_format", None)
    file_format = str(getattr(fmt, "value", fmt) or "")
    if file_format != "array_record":
        raise BenchmarkFormatError(directory, f"prepared as {file_format or 'tfrecord'}, which only TensorFlow can "
                                              f"read; prepare it again with file_format='array_record'")
    source = builder.as_data_source(split=split)
    convert = _gsm8k if name == "gsm8k" else _wtq
    return [convert(directory, split, i, source[i]) for i in range(len(source))]


def _text(value: Any) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def _gsm8k(directory: str, split: str, i: int, record: dict) -> GSM8KProblem:
    solution = _text(record["answer"])
    try:
        answer = gsm8k_gold(solution)
    except ValueError as exc:
        raise BenchmarkFormatError(directory, f"{split}[{i}]: field 'answer': {exc}", field="answer") from None
    return GSM8KProblem(f"gsm8k-{split}-{i}", _text(record["question"]), solution, answer)


def _wtq(directory: str, split: str, i: int, record: dict) -> WTQExample:
    cells = record["input_text"]["table"]
    headers = [_text(h) for h in cells["column_header"]]
    numbers = [int(n) for n in cells["row_number"]]
    contents = [_text(c) for c in cells["content"]]
    columns = list(dict.fromkeys(headers))
    rows: dict[int, dict[str, str]] = {}
    for h, n, c in zip(headers, numbers, contents):
        rows.setdefault(n, {})[h] = c
    table = _tables.make_table(columns, [[rows[n].get(c, "") for c in columns] for n in sorted(rows)],
                               ["str"] * len(columns))
    target = _text(record["target_text"])
    return WTQExample(f"wtq-{split}-{i}", _text(record["input_text"]["context"]), "", table,
                      tuple(target.split("|")))

"""What the benchmark loaders share: the typed format error and checked JSON / JSON-lines reading."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from typing import Any

from cocoda_jax.errors import CocodaError


class BenchmarkFormatError(CocodaError, ValueError):
    """A benchmark file that does not have the expected format.

    ``path``, ``line`` (1-based, or None when the whole file is concerned) and ``field`` (the missing
    or malformed field, or None) say exactly where; the message repeats them.
    """

    def __init__(self, path: os.PathLike | str, message: str, *, line: int | None = None, field: str | None = None):
        self.path, self.line, self.field = str(path), line, field
        where = f"{path}:{line}" if line is not None else str(path)
        super().__init__(f"{where}: {message}")


def require_file(path: os.PathLike | str, what: str) -> str:
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"{what}: no such file {path!r}")
    if os.path.isdir(path):
        raise BenchmarkFormatError(path, f"{what}: expected a file, got a directory")
    return path


def read_jsonl(path: os.PathLike | str, what: str) -> Iterator[tuple[int, dict]]:
    """``(line_number, object)`` for every non-blank line; each line must be a JSON object."""
    path = require_file(path, what)
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise BenchmarkFormatError(path, f"not valid JSON ({exc.msg} at column {exc.colno})", line=number) from None
            if not isinstance(obj, dict):
                raise BenchmarkFormatError(path, f"each line must be a JSON object, got {type(obj).__name__}", line=number)
            yield number, obj


def read_json(path: os.PathLike | str, what: str) -> Any:
    path = require_file(path, what)
    with open(path, encoding="utf-8") as f:
        text = f.read()
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise BenchmarkFormatError(path, f"not valid JSON ({exc.msg} at column {exc.colno})", line=exc.lineno) from None


def field(obj: Mapping, name: str, kind: type | tuple[type, ...], path: str, line: int | None,
          *, where: str = "") -> Any:
    """``obj[name]``, checked to exist and to be of ``kind`` (errors name the field and place)."""
    label = f"{where}{name}"
    if not isinstance(obj, Mapping) or name not in obj:
        raise BenchmarkFormatError(path, f"missing field {label!r}", line=line, field=label)
    value = obj[name]
    if not isinstance(value, kind) or isinstance(value, bool) and bool not in _as_tuple(kind):
        names = " or ".join(k.__name__ for k in _as_tuple(kind))
        raise BenchmarkFormatError(path, f"field {label!r} must be {names}, got {type(value).__name__}",
                                   line=line, field=label)
    return value


def _as_tuple(kind: type | tuple[type, ...]) -> tuple[type, ...]:
    return kind if isinstance(kind, tuple) else (kind,)

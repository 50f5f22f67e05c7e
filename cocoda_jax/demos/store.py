"""Stage 0's file: one JSON line per training task that was tried, with where its program came from.

A record is written (and flushed to disk) as soon as a task is decided, so an interrupted collection
resumes where it stopped: tasks already in the file are never asked again. A last line cut short by
a crash is dropped on reading (that task is simply asked again); any other malformed line is a
:class:`DemoStoreError` naming the file and line, and nothing is overwritten.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterable, Mapping
from typing import Any

from cocoda_jax.errors import CocodaError
from cocoda_jax import storage
from cocoda_jax import values as codec

FORMAT = "cocoda_jax.demos/1"


class DemoStoreError(CocodaError, ValueError):
    """A demonstrations file that cannot be read back (the message names the file and line)."""


@dataclasses.dataclass(frozen=True)
class DemoRecord:
    """What stage 0 decided for one task.

    ``solved``: some sample's program ran in the sandbox and the benchmark's verifier accepted its
    answer. Then ``program`` holds the steps that ran (one action per line), ``intermediates`` the
    value of each call step, ``answer`` the value bound to ``answer`` and ``sample`` which sample it
    was. ``samples``: how many were asked; ``failures``: why the others failed (kind -> count).
    ``provenance``: the source (``"teacher"``/``"student"``), endpoint, model, seed, time.
    """

    task_id: str
    solved: bool
    samples: int
    program: str = ""
    intermediates: tuple[tuple[str, Any], ...] = ()
    answer: Any = None
    sample: int | None = None
    failures: tuple[tuple[str, int], ...] = ()
    provenance: tuple[tuple[str, Any], ...] = ()

    def to_json(self) -> str:
        d = {"format": FORMAT, "task_id": self.task_id, "solved": self.solved, "samples": self.samples,
             "program": self.program, "intermediates": [[n, codec.encode(v)] for n, v in self.intermediates],
             "answer": codec.encode(self.answer), "sample": self.sample, "failures": dict(self.failures),
             "provenance": dict(self.provenance)}
        return json.dumps(d, sort_keys=True)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> DemoRecord:
        if d.get("format") != FORMAT:
            raise ValueError(f"format {d.get('format')!r}, expected {FORMAT!r}")
        task_id, solved, samples, program = d["task_id"], d["solved"], d["samples"], d["program"]
        if not (isinstance(task_id, str) and isinstance(solved, bool) and isinstance(samples, int)
                and isinstance(program, str)):
            raise TypeError("task_id, solved, samples, program must be str, bool, int, str")
        if solved and not program.strip():
            raise ValueError("a solved record without a program")
        inter = tuple((str(n), codec.decode(v)) for n, v in d["intermediates"])
        return cls(task_id, solved, samples, program, inter, codec.decode(d["answer"]), d.get("sample"),
                   tuple(sorted(dict(d.get("failures", {})).items())), tuple(sorted(dict(d.get("provenance", {})).items())))


def read_records(path: str | os.PathLike) -> dict[str, DemoRecord]:
    """The records of ``path`` by task id (empty when the file does not exist; a later line for the
    same task wins)."""
    path = storage.path_of(path)
    if not path.exists():
        return {}
    lines = path.read_text(encoding="utf-8").split("\n")
    out: dict[str, DemoRecord] = {}
    last = max((i for i, line in enumerate(lines) if line.strip()), default=-1)
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            record = DemoRecord.from_dict(json.loads(line))
        except (ValueError, TypeError, KeyError, AttributeError) as e:
            if i == last and not lines[i].endswith("}"):
                break  # cut short by a crash while writing: that task is asked again
            raise DemoStoreError(f"{path}:{i + 1}: not a demonstration record ({type(e).__name__}: {e})") from None
        out[record.task_id] = record
    return out


class DemoStore:
    """Appends records to one JSONL file; :attr:`records` holds what is in it (read once on open)."""

    def __init__(self, path: str | os.PathLike):
        self.path = storage.path_of(path)
        self.records = read_records(self.path)
        self._trim_cut_line()

    def _trim_cut_line(self) -> None:
        """Drops a crash-cut last line so the next record starts on a line of its own."""
        if not self.path.exists():
            return
        text = self.path.read_text(encoding="utf-8")
        keep = "".join(line + "\n" for line in text.split("\n") if line.strip()
                       and _parses(line))
        if keep != text:
            storage.write_atomic(self.path, keep)

    def append(self, records: Iterable[DemoRecord]) -> None:
        """Appends ``records`` (fsynced). In a bucket, which has no append, the file is uploaded
        again whole with them (one upload: readers see it with or without them)."""
        records = list(records)
        if not records:
            return
        if storage.is_remote(self.path):
            old = self.path.read_bytes() if self.path.exists() else b""
            storage.write_atomic(self.path, old + "".join(r.to_json() + "\n" for r in records).encode("utf-8"))
            for r in records:
                self.records[r.task_id] = r
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a", encoding="utf-8") as f:
            for r in records:
                f.write(r.to_json() + "\n")
            f.flush()
            os.fsync(f.fileno())
        for r in records:
            self.records[r.task_id] = r


def _parses(line: str) -> bool:
    try:
        json.loads(line)
        return True
    except ValueError:
        return False


__all__ = ["DemoRecord", "DemoStore", "DemoStoreError", "FORMAT", "read_records"]

"""Metrics per step: one JSON line per ``write`` in ``metrics.jsonl`` and TensorBoard scalars.

Why both: JSONL is what tests, the deterministic-replay check and the plots read (exact values, no
wall times, so a resumed run's file equals the uninterrupted run's); TensorBoard is what people look
at while a run goes. Each line is written with one ``write`` of complete bytes on a file opened for
appending, then flushed (and fsynced on request), so a crash leaves at worst a torn last line; that
line is dropped when the file is reopened. Reopening with ``resume_step=r`` (the step of the
checkpoint being resumed) drops every line with ``step > r`` (atomically, by rewriting to a temporary
file and renaming it) and tells TensorBoard to purge its events after ``r``, so no step is ever
written twice. Steps never go backwards, and a key is written at most once per step.

In a bucket (``gs://...``) both files are written in a local copy of ``logdir``
(:class:`cocoda_jax.storage.Mirror`) and each changed file is uploaded whole after every ``write``:
an object store has no append, a whole-object upload is what a reader sees complete or not at all,
and the remote copy never lags the checkpoint a resume starts from. TensorBoard's remote writers in
tensorboardX are per store (their own clients and credentials) and would bypass ``etils.epath``;
a synced local event file keeps one path abstraction and is what TensorBoard reads from the bucket.
"""

from __future__ import annotations

import json
import math
import numbers
import os
import pathlib
import struct
from collections.abc import Iterator, Mapping
from typing import Any

from cocoda_jax import storage
from cocoda_jax.errors import CocodaError

JSONL_NAME = "metrics.jsonl"
TB_DIR = "tb"


class MetricsError(CocodaError, ValueError):
    """A bad write (a step going back, a repeated key, a value that is not a real number)."""


class MetricsFormatError(CocodaError, ValueError):
    """A metrics file that is not what this module writes; names the path and the 1-based line."""

    def __init__(self, path: os.PathLike | str, line: int, detail: str):
        self.path, self.line, self.detail = str(path), line, detail
        super().__init__(f"{path}:{line}: {detail}")


def _scalar(key: str, value: Any) -> float | int:
    if hasattr(value, "item") and getattr(value, "size", 1) == 1:   # numpy / jax scalars and 1-element arrays
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise MetricsError(f"metric {key!r}: expected a real number, got {type(value).__name__} {value!r}")
    return int(value) if isinstance(value, numbers.Integral) else float(value)


def _parse_lines(path: pathlib.Path, data: bytes) -> tuple[list[dict[str, Any]], int]:
    """The records of ``data`` and the byte length of its complete lines (a torn tail is excluded)."""
    end = data.rfind(b"\n") + 1
    records = []
    for number, line in enumerate(data[:end].splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            raise MetricsFormatError(path, number, f"not JSON ({err})") from None
        if not isinstance(rec, dict) or not isinstance(rec.get("step"), int) or isinstance(rec.get("step"), bool):
            raise MetricsFormatError(path, number, "expected an object with an integer 'step'")
        records.append(rec)
    return records, end


def read_metrics(path: os.PathLike | str) -> list[dict[str, Any]]:
    """Every complete record of a metrics JSONL file, in file order (a torn last line is ignored)."""
    path = storage.path_of(path)
    return _parse_lines(path, path.read_bytes())[0]


def iter_series(records: list[Mapping[str, Any]], key: str) -> Iterator[tuple[int, float]]:
    """``(step, value)`` for every record holding ``key``."""
    for rec in records:
        if key in rec:
            yield rec["step"], rec[key]


class MetricsWriter:
    """Writes scalars per step to ``logdir/metrics.jsonl`` and to TensorBoard under ``logdir/tb``.

    ``resume_step``: ``None`` for a fresh run (an existing non-empty file is an error, so a run never
    appends to another run's log by mistake), else the step of the checkpoint the run resumes from.
    ``tensorboard=False`` writes the JSONL file only.
    """

    def __init__(self, logdir: os.PathLike | str, *, resume_step: int | None = None, tensorboard: bool = True,
                 fsync: bool = False, jsonl_name: str = JSONL_NAME):
        self._mirror = storage.Mirror(logdir, only=(jsonl_name, TB_DIR))  # logdir itself when local
        self.dest = self._mirror.dest
        self.logdir = self._mirror.local
        self.path = self.logdir / jsonl_name
        self.fsync = fsync
        self.last_step: int | None = None
        self._keys_at_last: set[str] = set()
        self._prepare(resume_step)
        self._file = open(self.path, "ab")
        self._tb = None
        if tensorboard:
            from tensorboardX import SummaryWriter

            purge = None if resume_step is None else resume_step + 1
            tb_dir = self.logdir / TB_DIR
            # tensorboardX names files by the second: a numbered suffix keeps a quick resume from
            # overwriting the previous file, and keeps name order = creation order.
            n = len(list(tb_dir.glob("events.out.tfevents.*"))) if tb_dir.exists() else 0
            self._tb = SummaryWriter(logdir=str(tb_dir), purge_step=purge, flush_secs=10,
                                     filename_suffix=f".{n:05d}")

    def _prepare(self, resume_step: int | None) -> None:
        if not self.path.exists():
            return
        data = self.path.read_bytes()
        records, end = _parse_lines(self.path, data)
        if resume_step is None:
            if records:
                raise MetricsError(f"{self.path} already holds {len(records)} records; pass resume_step "
                                   "to continue that run, or use another logdir")
            kept = []
        else:
            kept = [r for r in records if r["step"] <= resume_step]
        if len(kept) != len(records) or end != len(data):
            tmp = self.path.with_name(self.path.name + ".tmp")
            with open(tmp, "wb") as f:
                f.write(b"".join(self._line(r) for r in kept))
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
        if kept:
            self.last_step = kept[-1]["step"]
            self._keys_at_last = {k for r in kept if r["step"] == self.last_step for k in r if k != "step"}

    @staticmethod
    def _line(record: Mapping[str, Any]) -> bytes:
        return (json.dumps(record, sort_keys=False, separators=(",", ":")) + "\n").encode("utf-8")

    def write(self, step: int, scalars: Mapping[str, Any]) -> None:
        """Writes ``scalars`` at ``step`` (keys in the order given; ``step`` is the first field)."""
        if isinstance(step, bool) or not isinstance(step, numbers.Integral) or step < 0:
            raise MetricsError(f"step must be a non-negative int, got {step!r}")
        step = int(step)
        if self._file.closed:
            raise MetricsError(f"{self.path}: the writer is closed")
        record: dict[str, Any] = {"step": step}
        for key, value in scalars.items():
            if not isinstance(key, str) or not key or key == "step":
                raise MetricsError(f"metric names must be non-empty strings other than 'step', got {key!r}")
            record[key] = _scalar(key, value)
        if self.last_step is not None:
            if step < self.last_step:
                raise MetricsError(f"step {step} after step {self.last_step}: steps never go back")
            if step == self.last_step and self._keys_at_last & record.keys():
                raise MetricsError(f"step {step} already has {sorted(self._keys_at_last & record.keys())}")
        if len(record) == 1:
            return
        self._file.write(self._line(record))
        self._file.flush()
        if self.fsync:
            os.fsync(self._file.fileno())
        if step != self.last_step:
            self.last_step, self._keys_at_last = step, set()
        self._keys_at_last |= record.keys() - {"step"}
        if self._tb is not None:
            for key, value in record.items():
                if key != "step" and math.isfinite(value):
                    self._tb.add_scalar(key, value, global_step=step)
        if self._mirror.remote:
            self.flush()

    def flush(self) -> None:
        """Flushes both files (and uploads what changed, in a bucket)."""
        self._file.flush()
        if self._tb is not None:
            self._tb.flush()
        self._mirror.sync()

    def close(self) -> None:
        if not self._file.closed:
            self._file.close()
        if self._tb is not None:
            self._tb.close()
            self._tb = None
        self._mirror.close()

    def __enter__(self) -> "MetricsWriter":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


# ------------------------------------------------------------------------------------------------
# Reading TensorBoard event files back (tests, reports) without TensorFlow or TensorBoard
# ------------------------------------------------------------------------------------------------


def read_event_scalars(logdir: os.PathLike | str) -> dict[str, list[tuple[int, float]]]:
    """Every scalar in the event files under ``logdir`` as ``{tag: [(step, value), ...]}``, files
    in name order, honouring TensorBoard's purge (a ``SessionLog.START`` at step ``s`` drops that
    tag's earlier-written points with step >= ``s``). Record checksums are verified."""
    from tensorboardX.crc32c import crc32c
    from tensorboardX.proto import event_pb2

    def masked(data: bytes) -> int:
        crc = crc32c(data)
        return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF

    out: dict[str, list[tuple[int, float]]] = {}
    paths = [p for p in storage.list_files(logdir).values() if p.name.startswith("events.out.tfevents.")]
    for path in sorted(paths, key=lambda p: (p.name.split(".")[3], p.name.rsplit(".", 1)[-1], p.name)):
        data = path.read_bytes()
        pos = 0
        while pos + 12 <= len(data):
            header = data[pos:pos + 8]
            (length,) = struct.unpack("<Q", header)
            (hcrc,) = struct.unpack("<I", data[pos + 8:pos + 12])
            body = data[pos + 12:pos + 12 + length]
            (bcrc,) = struct.unpack("<I", data[pos + 12 + length:pos + 16 + length])
            if hcrc != masked(header) or bcrc != masked(body):
                raise MetricsFormatError(path, pos, "event record checksum mismatch")
            pos += 16 + length
            event = event_pb2.Event()
            event.ParseFromString(body)
            if event.HasField("session_log") and event.session_log.status == event.session_log.START:
                for tag in out:
                    out[tag] = [(s, v) for s, v in out[tag] if s < event.step]
            if event.HasField("summary"):
                for value in event.summary.value:
                    if value.HasField("simple_value"):
                        out.setdefault(value.tag, []).append((event.step, value.simple_value))
    return out


__all__ = ["JSONL_NAME", "MetricsError", "MetricsFormatError", "MetricsWriter", "TB_DIR", "iter_series",
           "read_event_scalars", "read_metrics"]

"""RODS state on disk beside a checkpoint directory, written so that a kill at any point loses nothing.

Layout under ``<dir>/rods/``::

    generated/epoch_000003.jsonl   tasks generated at the boundary ending epoch 3 (one JSON per line)
    tracker_000004.json            the tracker at the start of epoch 4
    pool_000004.json               the pool (items, candidate queue, attempts, decision log)
    extra_000004.json              the caller's small run state (e.g. pending synthesis jobs)
    MANIFEST.json                  names and sha256 of every file above that belongs to the state

Every file is written atomically (temp file, fsync, rename, fsync of the directory) and versioned by
epoch; the manifest is written last, so a kill before it leaves the previous manifest pointing at
files that are still intact. Restore (:func:`load`) checks every hash and replays the generated
files in epoch order; anything unreadable raises :class:`CorruptStateError` naming the file.
In a bucket each file is one whole-object upload instead (:func:`cocoda_jax.storage.write_atomic`),
which readers likewise see whole or not at all; the manifest is still written last.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from etils.epath import Path

from cocoda_jax import storage
from cocoda_jax.rods.errors import CorruptStateError, RodsStateError
from cocoda_jax.rods.pool import PoolState
from cocoda_jax.rods.tasks import task_from_dict, task_to_dict
from cocoda_jax.rods.tracker import Tracker

MANIFEST = "MANIFEST.json"
FORMAT = "cocoda-rods-manifest/v1"
_KEEP_VERSIONS = 2


def atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so that readers see the old file or the new one, never a mix."""
    storage.write_atomic(path, data)


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclasses.dataclass(frozen=True)
class GeneratedRecord:
    """One generated task with where it came from."""

    task: Any
    parent_id: str
    attempt: int
    epoch: int

    def to_json(self) -> str:
        return json.dumps({"task": task_to_dict(self.task), "parent_id": self.parent_id,
                           "attempt": self.attempt, "epoch": self.epoch}, sort_keys=True, allow_nan=False)


@dataclasses.dataclass(frozen=True)
class Restored:
    """What :func:`load` gives back: the state at the start of ``epoch`` and every generated task."""

    epoch: int
    tracker: Tracker
    pool: PoolState
    generated: tuple[GeneratedRecord, ...]
    extra: Mapping[str, Any]

    @property
    def generated_tasks(self) -> dict[str, Any]:
        return {r.task.id: r.task for r in self.generated}


def rods_dir(checkpoint_dir: str | os.PathLike) -> Path:
    return storage.path_of(checkpoint_dir) / "rods"


def save(checkpoint_dir: str | os.PathLike, tracker: Tracker, pool: PoolState,
         new_generated: Sequence[GeneratedRecord], extra: Mapping[str, Any] | None = None, *,
         write: Callable[[Path, bytes], None] = atomic_write) -> Path:
    """Save the state at the start of ``pool.epoch``; ``new_generated``: the tasks made at the boundary
    that just ended (epoch ``pool.epoch - 1``). Returns the manifest path. ``write`` is replaceable
    for fault-injection tests."""
    root = rods_dir(checkpoint_dir)
    epoch = pool.epoch
    old = _read_manifest(root) if (root / MANIFEST).exists() else None
    if old is not None and old["epoch"] >= epoch:
        # Re-saving an epoch (a resumed run redoing it): drop later generated files from the record.
        generated = [g for g in old["generated"] if g["epoch"] < epoch - 1]
    else:
        generated = list(old["generated"]) if old is not None else []
    files: dict[str, bytes] = {}
    if new_generated:
        bad = [r.task.id for r in new_generated if r.epoch != epoch - 1]
        if bad:
            raise RodsStateError("generated", f"records {bad[:3]} are not from epoch {epoch - 1}")
        name = f"generated/epoch_{epoch - 1:06d}.jsonl"
        data = "".join(r.to_json() + "\n" for r in new_generated).encode()
        write(root / name, data)
        generated = [g for g in generated if g["epoch"] != epoch - 1] + [{"epoch": epoch - 1, "file": name, "sha256": _sha(data)}]
    files[f"tracker_{epoch:06d}.json"] = tracker.to_json().encode()
    files[f"pool_{epoch:06d}.json"] = pool.to_json().encode()
    files[f"extra_{epoch:06d}.json"] = json.dumps(dict(extra or {}), sort_keys=True, allow_nan=False).encode()
    for name, data in files.items():
        write(root / name, data)
    manifest = {
        "format": FORMAT, "epoch": epoch,
        "tracker": {"file": f"tracker_{epoch:06d}.json", "sha256": _sha(files[f"tracker_{epoch:06d}.json"])},
        "pool": {"file": f"pool_{epoch:06d}.json", "sha256": _sha(files[f"pool_{epoch:06d}.json"])},
        "extra": {"file": f"extra_{epoch:06d}.json", "sha256": _sha(files[f"extra_{epoch:06d}.json"])},
        "generated": sorted(generated, key=lambda g: g["epoch"]),
    }
    write(root / MANIFEST, json.dumps(manifest, sort_keys=True, indent=1).encode())
    _prune(root, epoch)
    return root / MANIFEST


_VERSIONED = re.compile(r"^(tracker|pool|extra)_(\d{6})\.json$")


def _prune(root: Path, epoch: int) -> None:
    """Remove versioned files older than the last few epochs (the manifest no longer names them)."""
    for p in root.iterdir():
        m = _VERSIONED.match(p.name)
        if m and int(m.group(2)) <= epoch - _KEEP_VERSIONS:
            p.unlink(missing_ok=True)


def _read_manifest(root: Path) -> dict:
    path = root / MANIFEST
    try:
        m = json.loads(path.read_bytes())
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CorruptStateError(str(path), f"cannot read the manifest: {exc}") from None
    if not isinstance(m, dict) or m.get("format") != FORMAT:
        raise CorruptStateError(str(path), f"not a RODS manifest (format {m.get('format') if isinstance(m, dict) else None!r})")
    for field in ("epoch", "tracker", "pool", "extra", "generated"):
        if field not in m:
            raise CorruptStateError(str(path), f"missing field {field!r}")
    return m


def _read_checked(root: Path, entry: Mapping[str, Any]) -> bytes:
    path = root / entry["file"]
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise CorruptStateError(str(path), f"missing or unreadable: {exc}") from None
    if _sha(data) != entry["sha256"]:
        raise CorruptStateError(str(path), "sha256 does not match the manifest (truncated or altered)")
    return data


def exists(checkpoint_dir: str | os.PathLike) -> bool:
    return (rods_dir(checkpoint_dir) / MANIFEST).exists()


def load(checkpoint_dir: str | os.PathLike) -> Restored:
    """The state named by the manifest; CorruptStateError (naming the file) if any part is bad."""
    root = rods_dir(checkpoint_dir)
    if not (root / MANIFEST).exists():
        raise FileNotFoundError(f"no RODS state under {root}")
    m = _read_manifest(root)

    def parse(entry, fn):
        data = _read_checked(root, entry)
        try:
            return fn(data)
        except RodsStateError as exc:
            raise CorruptStateError(str(root / entry["file"]), str(exc)) from None

    tracker = parse(m["tracker"], Tracker.from_json)
    pool = parse(m["pool"], PoolState.from_json)
    extra = parse(m["extra"], lambda d: _json_object(d))
    if pool.epoch != m["epoch"]:
        raise CorruptStateError(str(root / m["pool"]["file"]), f"epoch {pool.epoch} but manifest says {m['epoch']}")
    records: list[GeneratedRecord] = []
    for g in m["generated"]:
        data = _read_checked(root, g)
        for n, line in enumerate(data.decode().splitlines(), 1):
            where = f"{root / g['file']}:{n}"
            try:
                d = json.loads(line)
                records.append(GeneratedRecord(task_from_dict(d["task"], where), str(d["parent_id"]),
                                               int(d["attempt"]), int(d["epoch"])))
            except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
                raise CorruptStateError(where, f"bad generated-task record: {exc}") from None
    ids = [r.task.id for r in records]
    if len(ids) != len(set(ids)):
        raise CorruptStateError(str(root / "generated"), "a generated task id occurs twice")
    known = set(ids)
    missing = [it.task_id for it in pool.items if it.origin == "generated" and it.task_id not in known]
    missing += [c.task_id for c in pool.queue if c.task_id not in known]
    if missing:
        raise CorruptStateError(str(root / "generated"), f"pool names generated tasks with no record: {missing[:3]}")
    return Restored(m["epoch"], tracker, pool, tuple(records), extra)


def _json_object(data: bytes) -> dict:
    try:
        d = json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise RodsStateError("extra", f"not valid JSON: {exc}") from None
    if not isinstance(d, dict):
        raise RodsStateError("extra", "not a JSON object")
    return d

"""One place that saves and restores a whole run state together, with Orbax ``CheckpointManager``.

A checkpoint step holds three Orbax items, written in one atomic Orbax commit (a temporary
directory renamed into place, so a kill mid-save leaves the earlier steps as they were):

* ``state``: every array of the caller's train-state pytree (planner params as an ``nnx.State`` or
  a pure dict, the optax state, reference params, RNG keys, ...) as a flat dict of named leaves
  (absent when the tree holds no arrays);
* ``meta`` (JSON): format tag, step, the config, and per leaf its tree path, shape, dtype, PRNG
  implementation and a fingerprint of its contents; Python scalars of the tree (``step: int``,
  ``ref_step: int``) live here too;
* ``payloads`` (JSON): named text/JSON payloads (the library snapshot JSON, the RODS pool/tracker),
  each with a sha256 in ``meta``.

Why flat leaves: the state is rebuilt from the *target* tree's own structure (the caller's
``ShapeDtypeStruct``s or arrays), so optax states come back with their real NamedTuple types and
any pytree (``nnx.State``, ``flax.struct`` dataclasses) works; a target that does not fit the
saved tree is caught here, by path, before any array is read.

Why fingerprints: Orbax reads a damaged data chunk without complaint in some cases; a per-leaf
integer hash (exact on any mesh: wrap-around integer sums do not depend on reduction order)
turns silent corruption into :class:`CorruptCheckpointError`.

Nothing here deletes or rewrites an existing step: saving to a step that exists raises
:class:`StepExistsError`; restoring opens the manager read-only. Only Orbax's ``max_to_keep``
(``keep=``) removes old steps, after the new one is committed.

A directory is a local path or a bucket URL (:func:`cocoda_jax.storage.path_of`); Orbax writes to a
bucket itself (tensorstore), committing a step there with a marker file instead of a rename.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp
from etils import epath
from jax.sharding import NamedSharding, PartitionSpec, SingleDeviceSharding

from cocoda_jax.errors import CocodaError
from cocoda_jax import failpoints, storage

FORMAT = "cocoda-checkpoint/v1"
LIBRARY_PAYLOAD = "library"
_JSON_ITEMS = ("meta", "payloads")


# ------------------------------------------------------------------------------------------ errors
class CheckpointError(CocodaError):
    """Base of every error here; ``directory`` and ``step`` say which checkpoint (None if n/a)."""

    def __init__(self, message: str, directory: str | os.PathLike | None = None, step: int | None = None):
        self.directory = None if directory is None else str(directory)
        self.step = step
        where = "" if directory is None else f"{directory}" + ("" if step is None else f" step {step}") + ": "
        super().__init__(where + message)


class NoCheckpointError(CheckpointError):
    """No checkpoint at all, or not the requested step."""


class StepExistsError(CheckpointError):
    """A save to a step that is already on disk (refused: it would replace a checkpoint)."""


class InvalidSaveError(CheckpointError):
    """What was handed to :func:`save` cannot be stored (a config or payload that is not JSON, ...)."""


class CorruptCheckpointError(CheckpointError):
    """A file of the checkpoint is unreadable or its contents fail their hash/fingerprint."""


class IncompatibleCheckpointError(CheckpointError):
    """The checkpoint is intact but does not fit what the caller asked for."""


class FormatMismatchError(IncompatibleCheckpointError):
    """Not a checkpoint of this module's format (or another version of it)."""


class StructureMismatchError(IncompatibleCheckpointError):
    """Target and checkpoint trees differ: ``missing`` paths (in target only), ``unexpected`` (saved only)."""

    def __init__(self, missing, unexpected, directory=None, step=None):
        self.missing, self.unexpected = sorted(missing), sorted(unexpected)
        parts = []
        if self.missing:
            parts.append(f"{len(self.missing)} leaf/leaves the checkpoint lacks: {_few(self.missing)}")
        if self.unexpected:
            parts.append(f"{len(self.unexpected)} saved leaf/leaves the target lacks: {_few(self.unexpected)}")
        super().__init__("tree structure differs from the target; " + "; ".join(parts), directory, step)


class ShapeMismatchError(IncompatibleCheckpointError):
    """Same paths, other shapes/dtypes: ``mismatches[path] = (saved, expected)``."""

    def __init__(self, mismatches: Mapping[str, tuple[str, str]], directory=None, step=None):
        self.mismatches = dict(sorted(mismatches.items()))
        desc = ", ".join(f"{p}: saved {s}, target {e}" for p, (s, e) in list(self.mismatches.items())[:6])
        super().__init__(f"{len(self.mismatches)} shape/dtype mismatch(es): {desc}", directory, step)


class PayloadError(CheckpointError):
    """A named payload fails its decoder (``name``; the decoder's exception is the ``__cause__``)."""

    def __init__(self, name: str, message: str, directory=None, step=None):
        self.name = name
        super().__init__(f"payload {name!r}: {message}", directory, step)


class LibraryPayloadError(PayloadError, IncompatibleCheckpointError):
    """The library payload does not load with ``LibrarySnapshot.from_json``."""


def _few(items, n=6) -> str:
    items = list(items)
    return ", ".join(items[:n]) + (" ..." if len(items) > n else "")


# ------------------------------------------------------------------------------------ small helpers
def _is_key(x) -> bool:
    return hasattr(x, "dtype") and jnp.issubdtype(x.dtype, jax.dtypes.prng_key)


def _is_scalar(x) -> bool:
    return isinstance(x, (bool, int, float, str)) and not isinstance(x, np.generic)


def _leaf_name(path) -> str:
    """A readable Orbax key for a leaf (``opt_state.1.0.mu.embed.value``); uniqueness is checked."""
    return re.sub(r"[^A-Za-z0-9_.\-]", "_", jax.tree_util.keystr(path, simple=True, separator=".")) or "leaf"


def to_jsonable(obj: Any, what: str) -> Any:
    """Config/payload to plain JSON values (ConfigDict, dataclasses, tuples accepted): what a
    checkpoint stores, so a config compares equal with the one a checkpoint holds."""
    if hasattr(obj, "to_dict") and callable(obj.to_dict):
        obj = obj.to_dict()
    elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        obj = dataclasses.asdict(obj)
    try:
        text = json.dumps(obj, sort_keys=True, allow_nan=False, default=_json_default)
    except (TypeError, ValueError) as e:
        raise InvalidSaveError(f"{what} is not JSON-serialisable: {e}") from e
    return json.loads(text)


def _json_default(o):
    if isinstance(o, np.generic):
        return o.item()
    if dataclasses.is_dataclass(o) and not isinstance(o, type):
        return dataclasses.asdict(o)
    if hasattr(o, "to_dict") and callable(o.to_dict):
        return o.to_dict()
    raise TypeError(f"cannot serialise {type(o).__name__}")


def _payload_bytes(value: Any) -> bytes:
    if isinstance(value, str):
        return value.encode()
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()


def _mix(x):
    """A murmur-style uint32 finaliser: spreads every input bit over the output."""
    x = x ^ (x >> 16)
    x = x * jnp.uint32(0x85EBCA6B)
    x = x ^ (x >> 13)
    x = x * jnp.uint32(0xC2B2AE35)
    return x ^ (x >> 16)


def _as_u32(x):
    if x.dtype == jnp.bool_:
        return x.astype(jnp.uint32)
    size = np.dtype(x.dtype).itemsize
    if size == 4:
        return jax.lax.bitcast_convert_type(x, jnp.uint32)
    if size in (1, 2):
        return jax.lax.bitcast_convert_type(x, {1: jnp.uint8, 2: jnp.uint16}[size]).astype(jnp.uint32)
    return jax.lax.bitcast_convert_type(x, jnp.uint32)  # 8 bytes: adds a trailing dim of 2


@jax.jit
def _fingerprints(leaves):
    """Per leaf: sum_i mix(bits_i + mix(i)) mod 2**32, with i the element's flat index."""
    out = []
    for x in leaves:
        b = _as_u32(x)
        idx = jnp.zeros(b.shape, jnp.uint32)
        stride = 1
        for d in reversed(range(b.ndim)):
            idx = idx + jax.lax.broadcasted_iota(jnp.uint32, b.shape, d) * jnp.uint32(stride % 2**32)
            stride *= b.shape[d]
        out.append(jnp.sum(_mix(b + _mix(idx + jnp.uint32(1))), dtype=jnp.uint32))
    return out


def _fingerprint_list(arrays) -> list[int]:
    if not arrays:
        return []
    return [int(v) for v in jax.device_get(_fingerprints(list(arrays)))]


# ----------------------------------------------------------------------------------- the manager
def _manager(directory, *, keep: int | None = None, read_only: bool = False) -> ocp.CheckpointManager:
    options = ocp.CheckpointManagerOptions(max_to_keep=keep, create=not read_only, read_only=read_only,
                                           enable_async_checkpointing=False)
    return ocp.CheckpointManager(_path(directory), options=options)


def _path(directory: str | os.PathLike) -> epath.Path:
    """``directory`` as Orbax takes it: an ``epath.Path``, absolute when local."""
    path = storage.path_of(directory)
    return path if storage.is_remote(path) else epath.Path(os.path.abspath(path))


def open_manager(directory: str | os.PathLike, keep: int | None = None) -> ocp.CheckpointManager:
    """A manager for :func:`save` that keeps the newest ``keep`` steps (None: all). Reuse it
    across saves to avoid re-listing the directory each time; close it at the end."""
    return _manager(directory, keep=keep)


def all_steps(directory: str | os.PathLike) -> list[int]:
    """The committed steps under ``directory`` (Orbax ignores half-written temporary ones)."""
    if not _path(directory).is_dir():
        return []
    with _manager(directory, read_only=True) as m:
        return sorted(m.all_steps())


def latest_step(directory: str | os.PathLike) -> int | None:
    """The newest committed step, or None when there is none (a fresh run)."""
    steps = all_steps(directory)
    return steps[-1] if steps else None


# ---------------------------------------------------------------------------------------- saving
def _flatten(tree) -> list[tuple[str, Any, Any]]:
    return [(jax.tree_util.keystr(p), p, x) for p, x in jax.tree_util.tree_flatten_with_path(tree)[0]]


def save(manager_or_dir: ocp.CheckpointManager | str | os.PathLike, step: int, train_state: Any,
         payloads: Mapping[str, Any] | None = None, config: Any = None, *, keep: int | None = None) -> epath.Path:
    """Writes ``train_state`` (any pytree of arrays, PRNG keys and Python scalars), ``payloads``
    (name -> str, JSON value, or an object with ``to_json()`` such as a ``LibrarySnapshot``) and
    ``config`` (dict, ConfigDict or dataclass; stored as JSON) as checkpoint ``step``.

    Blocks until the step is committed. Refuses (``StepExistsError``) a step that is on disk:
    a checkpoint is never replaced. ``keep`` applies only when a directory is given."""
    step = int(step)
    if step < 0:
        raise InvalidSaveError(f"step must be >= 0, got {step}")
    own = not isinstance(manager_or_dir, ocp.CheckpointManager)
    if keep is not None and not own:
        raise InvalidSaveError("keep= applies to a directory; a manager keeps what its options say")
    manager = _manager(manager_or_dir, keep=keep) if own else manager_or_dir
    directory = str(manager.directory)
    try:
        manager.reload()
        if step in manager.all_steps():
            raise StepExistsError("a checkpoint of this step exists; refusing to replace it", directory, step)
        meta, flat, texts = _prepare(step, train_state, payloads or {}, config, directory)
        items = {"meta": ocp.args.JsonSave(meta), "payloads": ocp.args.JsonSave(texts)}
        if flat:  # Orbax refuses an empty item; a state of scalars only lives in meta
            items["state"] = ocp.args.StandardSave(flat)
        args = ocp.args.Composite(**items)
        try:
            saved = manager.save(step, args=args, force=True)
            failpoints.hit("checkpoint/write")
            manager.wait_until_finished()
        except Exception as e:  # Orbax raises assorted types; name the step
            raise CheckpointError(f"Orbax failed to write the checkpoint: {e}", directory, step) from e
        if not saved:
            raise CheckpointError("Orbax declined to save this step", directory, step)
        return _path(directory) / str(step)
    finally:
        if own:
            manager.close()


def _prepare(step, train_state, payloads, config, directory):
    leaves, flat, seen, arrays_for_fp = [], {}, set(), []
    for path, key_path, x in _flatten(train_state):
        if _is_scalar(x):
            leaves.append({"path": path, "scalar": x})
            continue
        if not hasattr(x, "shape") or not hasattr(x, "dtype"):
            raise InvalidSaveError(f"leaf {path} is a {type(x).__name__}, not an array or scalar", directory, step)
        if isinstance(x, jax.ShapeDtypeStruct):
            raise InvalidSaveError(f"leaf {path} is abstract (a ShapeDtypeStruct), not data", directory, step)
        impl = None
        if _is_key(x):
            impl = str(jax.random.key_impl(x))
            x = jax.random.key_data(x)
        x = x if isinstance(x, jax.Array) else jnp.asarray(x)
        name = _leaf_name(key_path)
        base, n = name, 1
        while name in seen:
            name, n = f"{base}_{n}", n + 1
        seen.add(name)
        flat[name] = x
        arrays_for_fp.append(x)
        leaves.append({"path": path, "name": name, "shape": list(x.shape), "dtype": str(x.dtype),
                       "key_impl": impl})
    fps = iter(_fingerprint_list(arrays_for_fp))
    for leaf in leaves:
        if "name" in leaf:
            leaf["fingerprint"] = next(fps)
    texts, hashes = {}, {}
    for name, value in payloads.items():
        if not isinstance(name, str) or not name:
            raise InvalidSaveError(f"payload names must be non-empty strings, got {name!r}", directory, step)
        if hasattr(value, "to_json") and callable(value.to_json):
            value = value.to_json()
        value = value if isinstance(value, str) else to_jsonable(value, f"payload {name!r}")
        texts[name] = value
        hashes[name] = hashlib.sha256(_payload_bytes(value)).hexdigest()
    meta = {"format": FORMAT, "step": step, "config": to_jsonable(config, "config"), "leaves": leaves,
            "payload_sha256": hashes}
    return meta, flat, texts


# -------------------------------------------------------------------------------------- restoring
@dataclasses.dataclass(frozen=True)
class Restored:
    """What :func:`restore` gives; unpacks as ``state, payloads, config = restore(...)``."""

    state: Any
    payloads: dict[str, Any]
    config: Any
    step: int

    def __iter__(self):
        return iter((self.state, self.payloads, self.config))


def _library_decoder(text):
    from cocoda_jax.library import LibrarySnapshot
    return LibrarySnapshot.from_json(text)


DEFAULT_DECODERS: dict[str, Callable[[Any], Any]] = {LIBRARY_PAYLOAD: _library_decoder}


def restore(directory: str | os.PathLike, target: Any = None, step: int | None = None, *,
            mesh: jax.sharding.Mesh | None = None, decoders: Mapping[str, Callable[[Any], Any]] | None = None,
            verify: bool = True, partial: bool = False) -> Restored:
    """Reads checkpoint ``step`` (None: the newest) into the structure of ``target``.

    ``target``: the train state's pytree with arrays or ``jax.ShapeDtypeStruct``s as leaves (their
    shardings say where each restored array goes, so another mesh is just another target; see
    :func:`abstract_state`); ``None`` reads only the config and payloads. A target leaf without
    a sharding goes replicated onto ``mesh`` if given, else to the default device.

    Payloads come back as saved (text or JSON), except those named in ``decoders`` (default: the
    ``library`` payload through ``LibrarySnapshot.from_json``), which come back decoded. Never
    writes to ``directory``. ``partial=True`` lets the target name a subset of the saved leaves
    (say, only ``params`` for evaluation); the others are not read."""
    if not _path(directory).is_dir():
        raise NoCheckpointError("no such directory", directory)
    decoders = DEFAULT_DECODERS if decoders is None else decoders
    with _manager(directory, read_only=True) as manager:
        steps = sorted(manager.all_steps())
        if not steps:
            raise NoCheckpointError("no committed checkpoint", directory)
        step = steps[-1] if step is None else int(step)
        if step not in steps:
            raise NoCheckpointError(f"no checkpoint of step {step}; have {steps}", directory)
        meta, texts = _read_json_items(manager, directory, step)
        payloads = _check_payloads(meta, texts, decoders, directory, step)
        state = None if target is None else _restore_state(manager, meta, target, mesh, verify, partial,
                                                           directory, step)
    return Restored(state=state, payloads=payloads, config=meta["config"], step=step)


def _read_json_items(manager, directory, step):
    step_dir = _path(directory) / str(step)
    missing = [i for i in _JSON_ITEMS if not (step_dir / i).is_dir()]
    if missing:
        raise CorruptCheckpointError(f"item folder(s) {missing} are missing", directory, step)
    try:
        got = manager.restore(step, args=ocp.args.Composite(meta=ocp.args.JsonRestore(),
                                                            payloads=ocp.args.JsonRestore()))
        meta, texts = got["meta"], got["payloads"]
    except Exception as e:
        raise CorruptCheckpointError(f"meta/payloads JSON unreadable: {type(e).__name__}: {e}", directory, step) from e
    if not isinstance(meta, dict) or not isinstance(texts, dict):
        raise CorruptCheckpointError("meta/payloads JSON is not an object", directory, step)
    if meta.get("format") != FORMAT:
        raise FormatMismatchError(f"format {meta.get('format')!r}, expected {FORMAT!r}", directory, step)
    if meta.get("step") != step or not isinstance(meta.get("leaves"), list):
        raise CorruptCheckpointError(f"meta is inconsistent (step {meta.get('step')!r})", directory, step)
    return meta, texts


def _check_payloads(meta, texts, decoders, directory, step):
    hashes = meta.get("payload_sha256", {})
    if set(hashes) != set(texts):
        raise CorruptCheckpointError(f"payloads {sorted(texts)} do not match the recorded {sorted(hashes)}",
                                     directory, step)
    out = {}
    for name, value in texts.items():
        if hashlib.sha256(_payload_bytes(value)).hexdigest() != hashes[name]:
            raise CorruptCheckpointError(f"payload {name!r} fails its sha256", directory, step)
        out[name] = value
        if name in decoders:
            try:
                out[name] = decoders[name](value)
            except Exception as e:
                cls = LibraryPayloadError if name == LIBRARY_PAYLOAD else PayloadError
                raise cls(name, f"does not decode: {type(e).__name__}: {e}", directory, step) from e
    return out


def _describe(x) -> str:
    return f"{x['dtype']}{list(x['shape'])}"


_LAYERS = "['layers']"


def _per_layer_leaves(missing: set[str], saved: Mapping[str, Any], target_by_path: Mapping[str, Any]
                      ) -> dict[str, list[str]]:
    """Checkpoints written before the decoder's layers were stored stacked hold one leaf per layer
    (``...['layers'][i]['attn']...``) where the model now has one (``...['layers']['attn']...``, a
    leading layer axis). For each missing target leaf under ``['layers']`` whose per-layer leaves are
    all saved with one layer's shape and the target's dtype, their paths in layer order; those leaves
    are read and stacked (the same values: the layers were stacked in their order)."""
    out: dict[str, list[str]] = {}
    for path in missing:
        if _LAYERS not in path:
            continue
        x = target_by_path[path]
        if _is_scalar(x) or not hasattr(x, "shape") or _is_key(x) or len(x.shape) < 1:
            continue
        parts = [path.replace(_LAYERS, f"{_LAYERS}[{i}]", 1) for i in range(x.shape[0])]
        if all(p in saved and "scalar" not in saved[p] and saved[p]["key_impl"] is None
               and saved[p]["shape"] == list(x.shape[1:]) and saved[p]["dtype"] == str(x.dtype) for p in parts):
            out[path] = parts
    return out


def _restore_state(manager, meta, target, mesh, verify, partial, directory, step):
    saved = {leaf["path"]: leaf for leaf in meta["leaves"]}
    flat_target, treedef = jax.tree_util.tree_flatten_with_path(target)
    paths = [jax.tree_util.keystr(p) for p, _ in flat_target]
    missing, unexpected = set(paths) - set(saved), set(saved) - set(paths)
    stacked = _per_layer_leaves(missing, saved, dict(zip(paths, (x for _, x in flat_target))))
    missing -= set(stacked)
    unexpected -= {p for parts in stacked.values() for p in parts}
    if missing or (unexpected and not partial):
        raise StructureMismatchError(missing, unexpected, directory, step)
    mismatches, wanted = {}, {}
    for path, (_, x) in zip(paths, flat_target):
        if path in stacked:  # one layer at a time, onto the host's default device; stacked below
            for part in stacked[path]:
                leaf = saved[part]
                wanted[leaf["name"]] = jax.ShapeDtypeStruct(tuple(leaf["shape"]), jnp.dtype(leaf["dtype"]),
                                                            sharding=SingleDeviceSharding(jax.devices()[0]))
            continue
        leaf = saved[path]
        if "scalar" in leaf:
            if not _is_scalar(x):
                mismatches[path] = (f"scalar {leaf['scalar']!r}", type(x).__name__)
            continue
        if _is_scalar(x) or not hasattr(x, "shape"):
            mismatches[path] = (_describe(leaf), type(x).__name__)
            continue
        if _is_key(x) != (leaf["key_impl"] is not None):
            mismatches[path] = (_describe(leaf) + (" key" if leaf["key_impl"] else ""),
                                f"{x.dtype}{list(x.shape)}")
            continue
        abs_x = jax.eval_shape(jax.random.key_data, x) if _is_key(x) else x
        got = {"shape": list(abs_x.shape), "dtype": str(abs_x.dtype)}
        if got["shape"] != leaf["shape"] or got["dtype"] != leaf["dtype"]:
            mismatches[path] = (_describe(leaf), _describe(got))
            continue
        wanted[leaf["name"]] = jax.ShapeDtypeStruct(abs_x.shape, abs_x.dtype, sharding=_sharding_of(x, mesh))
    if mismatches:
        raise ShapeMismatchError(mismatches, directory, step)
    if wanted:
        try:
            arrays = manager.restore(step, args=ocp.args.Composite(state=_restore_args(wanted, partial)))["state"]
        except Exception as e:
            raise CorruptCheckpointError(f"array data unreadable: {type(e).__name__}: {e}", directory, step) from e
        if set(arrays) != set(wanted):
            raise CorruptCheckpointError("restored arrays do not match the recorded leaves", directory, step)
    else:
        arrays = {}
    if verify and arrays:
        names = list(wanted)
        by_name = {leaf["name"]: leaf for leaf in meta["leaves"] if "name" in leaf}
        fps = _fingerprint_list([arrays[n] for n in names])
        bad = [by_name[n]["path"] for n, fp in zip(names, fps) if by_name[n].get("fingerprint") != fp]
        if bad:
            raise CorruptCheckpointError(f"contents of {len(bad)} leaf/leaves fail their fingerprint: {_few(bad)}",
                                         directory, step)
    leaves = []
    for path, (_, x) in zip(paths, flat_target):
        if path in stacked:
            whole = jnp.stack([arrays[saved[part]["name"]] for part in stacked[path]])
            leaves.append(jax.device_put(whole, _sharding_of(x, mesh)))
            continue
        leaf = saved[path]
        if "scalar" in leaf:
            leaves.append(leaf["scalar"])
        elif leaf["key_impl"] is not None:
            leaves.append(jax.random.wrap_key_data(arrays[leaf["name"]], impl=leaf["key_impl"]))
        else:
            leaves.append(arrays[leaf["name"]])
    return jax.tree_util.tree_unflatten(treedef, leaves)


def _restore_args(wanted, partial):
    """StandardRestore; for a partial target, PyTreeRestore (same on-disk format) reads the subset."""
    if not partial:
        return ocp.args.StandardRestore(wanted)
    restore_args = jax.tree.map(lambda x: ocp.ArrayRestoreArgs(sharding=x.sharding, global_shape=x.shape,
                                                               dtype=x.dtype), wanted)
    return ocp.args.PyTreeRestore(wanted, restore_args=restore_args, partial_restore=True)


def _sharding_of(x, mesh):
    """The target leaf's sharding (for a key, a NamedSharding's shorter spec leaves the trailing
    key-data dim replicated), else replicated on ``mesh``, else the default device."""
    sharding = getattr(x, "sharding", None)
    if sharding is not None:
        return sharding
    if mesh is not None:
        return NamedSharding(mesh, PartitionSpec())
    return SingleDeviceSharding(jax.devices()[0])


# ------------------------------------------------------------------------------------- targets
def abstract_state(tree: Any, shardings: Any = None, *, mesh: jax.sharding.Mesh | None = None) -> Any:
    """``tree`` (arrays, ShapeDtypeStructs, keys, scalars) as a restore target of ShapeDtypeStructs.

    ``shardings``: None (keep each leaf's own sharding, or replicate onto ``mesh`` when given), or
    a tree of ``Sharding``s with ``tree``'s structure (e.g. from :func:`opt_state_shardings` and
    ``models.sharding.param_shardings``). Scalars stay as they are."""
    def one(x, s=None):
        if _is_scalar(x):
            return x
        if s is None:
            s = NamedSharding(mesh, PartitionSpec()) if mesh is not None else getattr(x, "sharding", None)
        return jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=s)

    if shardings is None:
        return jax.tree.map(one, tree)
    return jax.tree.map(one, tree, shardings)


__all__ = [
    "CheckpointError", "CorruptCheckpointError", "DEFAULT_DECODERS", "FORMAT", "FormatMismatchError",
    "IncompatibleCheckpointError", "InvalidSaveError", "LIBRARY_PAYLOAD", "LibraryPayloadError",
    "NoCheckpointError", "PayloadError", "Restored", "ShapeMismatchError", "StepExistsError",
    "StructureMismatchError", "abstract_state", "all_steps", "latest_step", "open_manager",
    "restore", "save", "to_jsonable",
]

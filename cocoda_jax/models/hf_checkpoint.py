"""Hugging Face safetensors checkpoints <-> the NNX `Transformer`.

Reading parses the safetensors header itself and memory-maps the file, so each
parameter is read tensor by tensor and, on a mesh, each device reads only its own slice
(`jax.make_array_from_callback` over a lazy transposed/reshaped view). Writing produces
`config.json` plus `model.safetensors` (or shards with `model.safetensors.index.json`)
that `transformers.AutoModelForCausalLM.from_pretrained` loads.

Errors are typed: `MissingKeysError`, `UnexpectedKeysError`, `HFShapeMismatchError`
(all `HFCheckpointError`), each naming the keys (and file) concerned.
"""

from __future__ import annotations

import dataclasses
import json
import mmap
import os
import struct
from pathlib import Path
from typing import Callable

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
from flax import nnx

from cocoda_jax.errors import CocodaError
from cocoda_jax.models.config import ModelConfig
from cocoda_jax.models.sharding import named_sharding
from cocoda_jax.models.transformer import Transformer, abstract_model

CONFIG_NAME = "config.json"
SINGLE_NAME = "model.safetensors"
INDEX_NAME = "model.safetensors.index.json"


class HFCheckpointError(CocodaError, ValueError):
    """A checkpoint directory cannot be read into (or written from) the model."""


class MissingKeysError(HFCheckpointError):
    def __init__(self, keys, path):
        self.keys = sorted(keys)
        super().__init__(f"{path}: checkpoint lacks {len(self.keys)} tensor(s): {self.keys[:8]}"
                         + (" ..." if len(self.keys) > 8 else ""))


class UnexpectedKeysError(HFCheckpointError):
    def __init__(self, keys, path):
        self.keys = sorted(keys)
        super().__init__(f"{path}: checkpoint has {len(self.keys)} tensor(s) the model does not "
                         f"use: {self.keys[:8]}" + (" ..." if len(self.keys) > 8 else ""))


class HFShapeMismatchError(HFCheckpointError):
    def __init__(self, mismatches, path):
        self.mismatches = dict(sorted(mismatches.items()))  # key -> (found, expected)
        desc = ", ".join(f"{k}: found {f}, expected {e}" for k, (f, e) in list(self.mismatches.items())[:8])
        super().__init__(f"{path}: {len(self.mismatches)} shape mismatch(es): {desc}")


# ------------------------------------------------------------------ safetensors I/O
_ST_DTYPES = {
    "F32": np.dtype(np.float32), "F16": np.dtype(np.float16), "BF16": np.dtype(ml_dtypes.bfloat16),
    "F64": np.dtype(np.float64), "I64": np.dtype(np.int64), "I32": np.dtype(np.int32),
    "I16": np.dtype(np.int16), "I8": np.dtype(np.int8), "U8": np.dtype(np.uint8),
    "BOOL": np.dtype(np.bool_),
}
_ST_NAMES = {v: k for k, v in _ST_DTYPES.items()}


class SafetensorsFile:
    """A memory-mapped safetensors file; `get(key)` is a zero-copy numpy view."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        with open(self.path, "rb") as f:
            raw = f.read(8)
            if len(raw) != 8:
                raise HFCheckpointError(f"{self.path}: not a safetensors file (too short)")
            (n,) = struct.unpack("<Q", raw)
            try:
                header = json.loads(f.read(n))
            except (json.JSONDecodeError, UnicodeDecodeError) as e:
                raise HFCheckpointError(f"{self.path}: bad safetensors header: {e}") from None
        self._data_start = 8 + n
        self.metadata = header.pop("__metadata__", {}) or {}
        self.header = header
        size = self.path.stat().st_size
        if size > self._data_start:
            with open(self.path, "rb") as f:  # the mapping keeps its own handle
                self._mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        else:
            self._mm = b""

    def keys(self):
        return list(self.header)

    def shape(self, key) -> tuple[int, ...]:
        return tuple(self.header[key]["shape"])

    def get(self, key) -> np.ndarray:
        info = self.header[key]
        if info["dtype"] not in _ST_DTYPES:
            raise HFCheckpointError(f"{self.path}: tensor {key} has unsupported dtype {info['dtype']}")
        dt = _ST_DTYPES[info["dtype"]]
        start, end = info["data_offsets"]
        count = int(np.prod(info["shape"], dtype=np.int64))
        if (end - start) != count * dt.itemsize:
            raise HFCheckpointError(f"{self.path}: tensor {key} byte range does not match its shape")
        arr = np.frombuffer(self._mm, dtype=dt, count=count, offset=self._data_start + start)
        return arr.reshape(info["shape"])


def write_safetensors(path, tensors: dict[str, np.ndarray], metadata: dict[str, str] | None = None):
    """Writes `tensors` (name -> numpy array) in the safetensors format."""
    header: dict = {"__metadata__": dict(metadata or {"format": "pt"})}
    offset = 0
    arrays = []
    for name, arr in tensors.items():
        arr = np.ascontiguousarray(arr)
        if arr.dtype not in _ST_NAMES:
            raise HFCheckpointError(f"cannot write tensor {name} of dtype {arr.dtype}")
        header[name] = {"dtype": _ST_NAMES[arr.dtype], "shape": list(arr.shape),
                        "data_offsets": [offset, offset + arr.nbytes]}
        offset += arr.nbytes
        arrays.append(arr)
    hb = json.dumps(header, separators=(",", ":")).encode()
    hb += b" " * (-len(hb) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hb)))
        f.write(hb)
        for arr in arrays:
            f.write(arr.tobytes())


# ------------------------------------------------------------------ name mapping
@dataclasses.dataclass(frozen=True)
class ParamSpec:
    """One HF tensor <-> one model parameter (`path` in the NNX pure dict), or, with `layer`, that
    layer's slice of a stacked decoder parameter (leading layer axis)."""

    hf_key: str
    path: tuple
    hf_shape: tuple
    to_model: Callable[[np.ndarray], np.ndarray]   # HF layout -> model layout (lazy view)
    to_hf: Callable[[np.ndarray], np.ndarray]      # model layout -> HF layout
    layer: int | None = None


def _ident(x):
    return x


def _t(x):
    return x.T


def param_specs(cfg: ModelConfig) -> list[ParamSpec]:
    d, h, k, e, f, v = (cfg.d_model, cfg.n_heads, cfg.n_kv_heads, cfg.head_dim, cfg.ffn_dim,
                        cfg.vocab_size)

    def in_proj(n):  # HF [n*e, d] <-> ours [d, n, e]
        return (n * e, d), (lambda w: w.T.reshape(d, n, e)), (lambda a: a.reshape(d, n * e).T)

    o_proj = (d, h * e), (lambda w: w.T.reshape(h, e, d)), (lambda a: a.reshape(h * e, d).T)
    specs = [ParamSpec("model.embed_tokens.weight", ("embed",), (v, d), _ident, _ident),
             ParamSpec("model.norm.weight", ("final_norm", "scale"), (d,), _ident, _ident)]
    if not cfg.tie_embeddings:
        specs.append(ParamSpec("lm_head.weight", ("lm_head",), (v, d), _t, _t))
    for i in range(cfg.n_layers):
        p = f"model.layers.{i}."
        L = ("layers",)  # the decoder's stacked layers: layer i is index i of the leading axis
        layer = []
        layer += [
            (p + "input_layernorm.weight", L + ("input_norm", "scale"), (d,), _ident, _ident),
            (p + "post_attention_layernorm.weight", L + ("post_attn_norm", "scale"), (d,), _ident, _ident),
            (p + "self_attn.q_proj.weight", L + ("attn", "q_proj"), *in_proj(h)),
            (p + "self_attn.k_proj.weight", L + ("attn", "k_proj"), *in_proj(k)),
            (p + "self_attn.v_proj.weight", L + ("attn", "v_proj"), *in_proj(k)),
            (p + "self_attn.o_proj.weight", L + ("attn", "o_proj"), *o_proj),
            (p + "mlp.gate_proj.weight", L + ("mlp", "gate_proj"), (f, d), _t, _t),
            (p + "mlp.up_proj.weight", L + ("mlp", "up_proj"), (f, d), _t, _t),
            (p + "mlp.down_proj.weight", L + ("mlp", "down_proj"), (d, f), _t, _t),
        ]
        if cfg.qk_norm:
            layer += [
                (p + "self_attn.q_norm.weight", L + ("attn", "q_norm", "scale"), (e,), _ident, _ident),
                (p + "self_attn.k_norm.weight", L + ("attn", "k_norm", "scale"), (e,), _ident, _ident),
            ]
        specs += [ParamSpec(*fields, layer=i) for fields in layer]
    return specs


def _by_param(specs: list[ParamSpec]) -> dict[tuple, list[ParamSpec]]:
    """The specs grouped by model parameter, a stacked parameter's layers in order."""
    out: dict[tuple, list[ParamSpec]] = {}
    for s in specs:
        out.setdefault(s.path, []).append(s)
    for members in out.values():
        members.sort(key=lambda s: -1 if s.layer is None else s.layer)
    return out


def _get(tree, path):
    for p in path:
        tree = tree[p]
    return tree


def _set(tree, path, value):
    for p in path[:-1]:
        tree = tree[p]
    tree[path[-1]] = value


# ------------------------------------------------------------------ load
def _open_dir(path: Path) -> dict[str, SafetensorsFile]:
    """Maps every tensor name to its open file (single file or sharded with index)."""
    index = path / INDEX_NAME
    if index.exists():
        weight_map = json.loads(index.read_text())["weight_map"]
        files = {f: SafetensorsFile(path / f) for f in sorted(set(weight_map.values()))}
        out = {}
        for f in files.values():
            for key in f.keys():
                out[key] = f
        missing_in_files = sorted(set(weight_map) - set(out))
        if missing_in_files:
            raise MissingKeysError(missing_in_files, index)
        return out
    single = path / SINGLE_NAME
    if single.exists():
        f = SafetensorsFile(single)
        return {k: f for k in f.keys()}
    raise HFCheckpointError(f"{path}: neither {SINGLE_NAME} nor {INDEX_NAME} found")


def _hf_dtype(hf: dict) -> str:
    dt = hf.get("dtype") or hf.get("torch_dtype") or "float32"
    return dt if dt in ("float32", "bfloat16") else "float32"


def load_config(path) -> ModelConfig:
    path = Path(path)
    cfg_file = path / CONFIG_NAME
    if not cfg_file.exists():
        raise HFCheckpointError(f"{path}: no {CONFIG_NAME}")
    hf = json.loads(cfg_file.read_text())
    dt = _hf_dtype(hf)
    return ModelConfig.from_hf_config(hf, dtype=dt, param_dtype=dt)


def load_hf_checkpoint(path, *, mesh=None, dtype: str | None = None,
                       param_dtype: str | None = None) -> Transformer:
    """Loads a local HF Qwen3/Llama directory into a `Transformer`.

    `mesh`: place every parameter directly in its logical-axis sharding on this mesh
    (each device reads only its own slice); otherwise on the default device.
    `dtype` / `param_dtype` override the compute / storage dtype (default: the
    checkpoint's dtype). `model(input_ids)` then returns fp32 logits [b, s, vocab].
    """
    path = Path(path)
    cfg = load_config(path)
    over = {}
    if dtype is not None:
        over["dtype"] = dtype
    if param_dtype is not None:
        over["param_dtype"] = param_dtype
    if over:
        cfg = cfg.replace(**over)
    tensors = _open_dir(path)
    specs = param_specs(cfg)
    expected = {s.hf_key for s in specs}
    present = set(tensors)
    ignorable = {k for k in present if k.endswith("rotary_emb.inv_freq")}
    if cfg.tie_embeddings:
        ignorable.add("lm_head.weight")  # some writers store the tied head explicitly
    missing = expected - present
    if missing:
        raise MissingKeysError(missing, path)
    unexpected = present - expected - ignorable
    if unexpected:
        raise UnexpectedKeysError(unexpected, path)

    abs_model = abstract_model(cfg)
    graphdef, abs_state = nnx.split(abs_model)
    abs_pure = nnx.to_pure_dict(abs_state)
    axes = nnx.to_pure_dict(jax.tree.map(lambda v: v.get_metadata()["logical_axes"], abs_state,
                                         is_leaf=lambda x: isinstance(x, nnx.Variable)))
    mismatches = {}
    for s in specs:
        found = tensors[s.hf_key].shape(s.hf_key)
        if found != s.hf_shape:
            mismatches[s.hf_key] = (found, s.hf_shape)
    if mismatches:
        raise HFShapeMismatchError(mismatches, path)

    device = jax.devices()[0]
    pure = jax.tree.map(lambda x: x, abs_pure)
    for param, members in _by_param(specs).items():
        target = _get(abs_pure, param)
        np_dtype = np.dtype(jnp.dtype(target.dtype))
        views = [s.to_model(tensors[s.hf_key].get(s.hf_key)) for s in members]
        if mesh is not None:
            sharding = named_sharding(mesh, _get(axes, param), target.shape)
        else:
            sharding = jax.sharding.SingleDeviceSharding(device)
        if members[0].layer is None:
            def read(idx, view=views[0], dt=np_dtype):
                return np.ascontiguousarray(view[idx]).astype(dt)
        else:  # a stacked parameter: this shard's layers, each read from its own HF tensor
            def read(idx, views=views, dt=np_dtype):
                return np.stack([np.asarray(views[i][idx[1:]]) for i in range(len(views))[idx[0]]]).astype(dt)
        _set(pure, param, jax.make_array_from_callback(target.shape, sharding, read))
    nnx.replace_by_pure_dict(abs_state, pure)
    return nnx.merge(graphdef, abs_state)


# ------------------------------------------------------------------ export
def save_hf_checkpoint(model: Transformer, path, *, dtype: str | None = None,
                       max_shard_bytes: int | None = None) -> Path:
    """Writes `model` as an HF directory (config.json + safetensors, sharded with an index
    when the tensors exceed `max_shard_bytes`). Tensors are gathered one at a time (a stacked layer parameter's slice)."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    cfg: ModelConfig = model.cfg
    dtype = dtype or cfg.param_dtype
    np_dtype = np.dtype(jnp.dtype({"float32": jnp.float32, "bfloat16": jnp.bfloat16}[dtype]))
    hf_cfg = cfg.to_hf_config()
    hf_cfg["dtype"] = dtype
    hf_cfg["transformers_version"] = "5.0.0"
    pure = nnx.to_pure_dict(nnx.state(model, nnx.Param))
    shards: list[dict[str, np.ndarray]] = [{}]
    size = 0
    for s in param_specs(cfg):  # HF's order (layer by layer), a stacked parameter sliced on the host
        whole = _get(pure, s.path)
        arr = np.asarray(jax.device_get(whole if s.layer is None else whole[s.layer])).astype(np_dtype)
        hf_arr = np.ascontiguousarray(s.to_hf(arr))
        if max_shard_bytes is not None and shards[-1] and size + hf_arr.nbytes > max_shard_bytes:
            shards.append({})
            size = 0
        shards[-1][s.hf_key] = hf_arr
        size += hf_arr.nbytes
    for stale in (SINGLE_NAME, INDEX_NAME):
        (path / stale).unlink(missing_ok=True)
    if len(shards) == 1:
        write_safetensors(path / SINGLE_NAME, shards[0])
    else:
        n = len(shards)
        weight_map = {}
        total = 0
        for i, shard in enumerate(shards):
            name = f"model-{i + 1:05d}-of-{n:05d}.safetensors"
            write_safetensors(path / name, shard)
            for key, arr in shard.items():
                weight_map[key] = name
                total += arr.nbytes
        (path / INDEX_NAME).write_text(json.dumps(
            {"metadata": {"total_size": total}, "weight_map": weight_map}, indent=2))
    (path / CONFIG_NAME).write_text(json.dumps(hf_cfg, indent=2))
    return path

"""HF checkpoint import/export parity against tiny random transformers models (fp32)."""

import json

import chex
import jax.numpy as jnp
import numpy as np
import pytest

from cocoda_jax.models import (MissingKeysError, HFShapeMismatchError, UnexpectedKeysError,
                               load_hf_checkpoint, save_hf_checkpoint)
from cocoda_jax.models.hf_checkpoint import SafetensorsFile, write_safetensors
from tests.models.models_hf_fixtures import VOCAB, build_hf, torch_logits

CASES = [("qwen3", True), ("qwen3", False), ("llama", True), ("llama", False)]
TOL = 1e-4


@pytest.fixture(scope="module", params=CASES, ids=[f"{k}-{'tied' if t else 'untied'}" for k, t in CASES])
def hf_case(request, tmp_path_factory):
    kind, tied = request.param
    model = build_hf(kind, tied)
    path = tmp_path_factory.mktemp(f"{kind}_{tied}")
    model.save_pretrained(path)
    ids = np.random.RandomState(1).randint(0, VOCAB, (3, 40))
    return kind, tied, model, path, ids, torch_logits(model, ids)


@pytest.fixture(scope="module")
def one_case(tmp_path_factory):
    """A single checkpoint for the tests whose subject does not depend on the family."""
    model = build_hf("llama", tied=False, seed=4)
    path = tmp_path_factory.mktemp("one")
    model.save_pretrained(path)
    ids = np.random.RandomState(1).randint(0, VOCAB, (3, 40))
    return "llama", False, model, path, ids, torch_logits(model, ids)


def test_import_parity(hf_case):
    kind, tied, _, path, ids, ref = hf_case
    model = load_hf_checkpoint(path)
    assert model.cfg.tie_embeddings == tied and model.cfg.family == kind
    assert model.cfg.n_heads > model.cfg.n_kv_heads
    assert model.cfg.head_dim * model.cfg.n_heads != model.cfg.d_model
    out = model(jnp.asarray(ids))
    chex.assert_shape(out, (3, 40, VOCAB))
    chex.assert_type(out, jnp.float32)
    diff = float(np.abs(np.asarray(out) - ref).max())
    print(f"parity {kind} tied={tied}: max abs diff {diff:.3e}")
    assert diff <= TOL


def test_export_roundtrip(hf_case, tmp_path):
    kind, tied, hf_model, path, ids, ref = hf_case
    model = load_hf_checkpoint(path)
    out_dir = save_hf_checkpoint(model, tmp_path / "export", max_shard_bytes=30_000)
    assert (out_dir / "model.safetensors.index.json").exists()  # sharded on purpose
    reloaded = type(hf_model).from_pretrained(out_dir).eval()
    diff = float(np.abs(torch_logits(reloaded, ids) - ref).max())
    print(f"export {kind} tied={tied}: max abs diff {diff:.3e}")
    assert diff <= TOL
    again = load_hf_checkpoint(out_dir)
    np.testing.assert_allclose(np.asarray(again(jnp.asarray(ids))), np.asarray(model(jnp.asarray(ids))),
                               atol=1e-6)


def test_left_padding_matches_unpadded(one_case):
    _, _, _, path, ids, ref = one_case
    model = load_hf_checkpoint(path)
    pad = 5
    padded = np.concatenate([np.zeros((3, pad), ids.dtype), ids], axis=1)
    mask = np.concatenate([np.zeros((3, pad), bool), np.ones(ids.shape, bool)], axis=1)
    out = np.asarray(model(jnp.asarray(padded), attention_mask=jnp.asarray(mask)))[:, pad:]
    assert np.abs(out - ref).max() <= TOL


def test_bf16_compute_close_and_fp32_logits(one_case):
    _, _, _, path, ids, ref = one_case
    model = load_hf_checkpoint(path, dtype="bfloat16", param_dtype="bfloat16")
    assert model.embed[...].dtype == jnp.bfloat16
    out = model(jnp.asarray(ids))
    chex.assert_type(out, jnp.float32)
    # bf16 has ~3 significant digits; the logits are O(5).
    assert np.abs(np.asarray(out) - ref).mean() < 0.1


def _rewrite(path, dst, edit):
    f = SafetensorsFile(path / "model.safetensors")
    tensors = {k: np.array(f.get(k)) for k in f.keys()}
    edit(tensors)
    dst.mkdir()
    write_safetensors(dst / "model.safetensors", tensors)
    (dst / "config.json").write_text((path / "config.json").read_text())
    return dst


def test_missing_key_error(one_case, tmp_path):
    _, _, _, path, _, _ = one_case
    d = _rewrite(path, tmp_path / "m", lambda t: t.pop("model.layers.1.mlp.up_proj.weight"))
    with pytest.raises(MissingKeysError, match="model.layers.1.mlp.up_proj.weight") as e:
        load_hf_checkpoint(d)
    assert e.value.keys == ["model.layers.1.mlp.up_proj.weight"]


def test_unexpected_key_error(one_case, tmp_path):
    _, _, _, path, _, _ = one_case
    d = _rewrite(path, tmp_path / "u", lambda t: t.__setitem__("model.extra.bias", np.zeros(3, np.float32)))
    with pytest.raises(UnexpectedKeysError, match="model.extra.bias"):
        load_hf_checkpoint(d)


def test_shape_mismatch_error(one_case, tmp_path):
    _, _, _, path, _, _ = one_case
    key = "model.layers.0.self_attn.k_proj.weight"

    def edit(t):
        t[key] = t[key][:-2]
    d = _rewrite(path, tmp_path / "s", edit)
    with pytest.raises(HFShapeMismatchError, match="k_proj") as e:
        load_hf_checkpoint(d)
    found, want = e.value.mismatches[key]
    assert found[0] == want[0] - 2


def test_config_json_is_transformers_readable(hf_case, tmp_path):
    _, _, _, path, _, _ = hf_case
    model = load_hf_checkpoint(path)
    out = save_hf_checkpoint(model, tmp_path / "e")
    cfg = json.loads((out / "config.json").read_text())
    orig = json.loads((path / "config.json").read_text())
    for k in ("hidden_size", "num_attention_heads", "num_key_value_heads", "head_dim",
              "tie_word_embeddings", "rope_parameters", "vocab_size"):
        assert cfg[k] == orig[k], k


def test_transformers_sharded_and_bf16_checkpoints(tmp_path):
    """A checkpoint that transformers itself shards (with its index) loads; a bf16 export
    is written as BF16 and read back by both transformers and the loader."""
    hf_model = build_hf("qwen3", tied=False, seed=5)
    ids = np.random.RandomState(2).randint(0, VOCAB, (2, 16))
    ref = torch_logits(hf_model, ids)
    hf_model.save_pretrained(tmp_path / "sharded", max_shard_size="40KB")
    assert (tmp_path / "sharded" / "model.safetensors.index.json").exists()
    model = load_hf_checkpoint(tmp_path / "sharded")
    assert np.abs(np.asarray(model(jnp.asarray(ids))) - ref).max() <= TOL

    out = save_hf_checkpoint(model, tmp_path / "bf16", dtype="bfloat16")
    f = SafetensorsFile(out / "model.safetensors")
    assert {f.header[k]["dtype"] for k in f.keys()} == {"BF16"}
    assert json.loads((out / "config.json").read_text())["dtype"] == "bfloat16"
    back = load_hf_checkpoint(out, dtype="float32")
    assert back.cfg.param_dtype == "bfloat16" and back.embed[...].dtype == jnp.bfloat16
    reloaded = type(hf_model).from_pretrained(out).eval().float()
    np.testing.assert_allclose(torch_logits(reloaded, ids), np.asarray(back(jnp.asarray(ids))), atol=1e-4)
    assert np.abs(np.asarray(back(jnp.asarray(ids))) - ref).mean() < 0.1


def test_linear_rope_scaling_parity(tmp_path):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(7)
    cfg = LlamaConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=48, num_hidden_layers=1,
                      num_attention_heads=4, num_key_value_heads=1, initializer_range=0.2,
                      rope_parameters={"rope_type": "linear", "factor": 4.0, "rope_theta": 500.0})
    hf_model = LlamaForCausalLM(cfg).eval()
    hf_model.save_pretrained(tmp_path)
    model = load_hf_checkpoint(tmp_path)
    assert model.cfg.rope_scaling.rope_type == "linear" and model.cfg.rope_scaling.factor == 4.0
    ids = np.random.RandomState(3).randint(0, VOCAB, (2, 24))
    assert np.abs(np.asarray(model(jnp.asarray(ids))) - torch_logits(hf_model, ids)).max() <= TOL

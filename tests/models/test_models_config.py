"""Config validation, presets (real HF hyperparameters) and HF config translation."""

import dataclasses

import pytest

from cocoda_jax.errors import ConfigError
from cocoda_jax.models import PRESETS, ModelConfig, RopeScaling, get_preset
from cocoda_jax.models.config import tiny

# Published sizes (billions of parameters, as counted by HF for these checkpoints).
SIZES = {"qwen3_0p6b": 0.596, "qwen3_1p7b": 1.721, "qwen3_4b": 4.022, "qwen3_8b": 8.191,
         "qwen3_32b": 32.762, "llama3_8b": 8.030}


@pytest.mark.parametrize("name", sorted(SIZES))
def test_preset_sizes_match_published(name):
    cfg = get_preset(name)
    assert abs(cfg.num_params() / 1e9 - SIZES[name]) < 0.002
    assert cfg.head_dim == 128 and cfg.n_kv_heads == 8


def test_preset_details():
    q = get_preset("qwen3_0p6b")
    assert (q.d_model, q.n_layers, q.n_heads, q.ffn_dim, q.vocab_size) == (1024, 28, 16, 3072, 151_936)
    assert q.head_dim * q.n_heads != q.d_model and q.tie_embeddings and q.qk_norm
    assert q.rope_theta == 1e6 and q.rms_norm_eps == 1e-6
    assert not get_preset("qwen3_8b").tie_embeddings
    ll = get_preset("llama3_8b")
    assert (ll.rope_theta, ll.rms_norm_eps, ll.vocab_size, ll.ffn_dim) == (500_000.0, 1e-5, 128_256, 14_336)
    assert not ll.qk_norm
    t = get_preset("tiny")
    assert 128 <= t.d_model <= 192 and 3 <= t.n_layers <= 4 and t.n_heads == 4
    assert 1000 <= t.vocab_size <= 2048 and t.dtype == "float32"
    assert set(PRESETS) >= set(SIZES) | {"tiny"}
    with pytest.raises(ConfigError, match="unknown preset"):
        get_preset("gpt5")


@pytest.mark.parametrize("change, match", [
    (dict(n_kv_heads=3), "multiple of n_kv_heads"),
    (dict(head_dim=33), "even"),
    (dict(d_model=0), "positive int"),
    (dict(dtype="float16"), "dtype"),
    (dict(qk_norm=False), "qk_norm"),
    (dict(family="gpt2"), "family"),
    (dict(rope_theta=-1.0), "rope_theta"),
    (dict(rms_norm_eps=0.0), "rms_norm_eps"),
])
def test_validation(change, match):
    with pytest.raises(ConfigError, match=match):
        dataclasses.replace(tiny(), **change)


def test_rope_scaling_validation():
    with pytest.raises(ConfigError, match="rope_type"):
        RopeScaling(rope_type="yarn")
    with pytest.raises(ConfigError, match="high_freq_factor"):
        RopeScaling(rope_type="llama3", factor=8.0, low_freq_factor=4.0, high_freq_factor=1.0)


def test_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        tiny().d_model = 3


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_hf_round_trip(name):
    cfg = get_preset(name)
    back = ModelConfig.from_hf_config(cfg.to_hf_config(), dtype=cfg.dtype, param_dtype=cfg.param_dtype)
    assert back == cfg


def test_from_hf_old_style_rope_and_errors():
    hf = dict(model_type="llama", vocab_size=64, hidden_size=32, intermediate_size=48, num_hidden_layers=1,
              num_attention_heads=4, rope_theta=5e5,
              rope_scaling={"type": "linear", "factor": 2.0})
    cfg = ModelConfig.from_hf_config(hf)
    assert cfg.rope_theta == 5e5 and cfg.rope_scaling == RopeScaling("linear", 2.0)
    assert cfg.n_kv_heads == 4 and cfg.head_dim == 8
    with pytest.raises(ConfigError, match="lacks required key 'hidden_size'"):
        ModelConfig.from_hf_config({k: v for k, v in hf.items() if k != "hidden_size"})
    with pytest.raises(ConfigError, match="model_type"):
        ModelConfig.from_hf_config(dict(hf, model_type="mistral"))
    with pytest.raises(ConfigError, match="sliding"):
        ModelConfig.from_hf_config(dict(hf, use_sliding_window=True))

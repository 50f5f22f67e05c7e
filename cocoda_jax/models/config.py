"""Decoder configs for the Qwen3 and Llama families, with presets.

A `ModelConfig` is a frozen dataclass that validates itself on construction, so an
inconsistent shape (e.g. query heads not a multiple of key/value heads) fails at the
config, not deep inside a jit trace. `from_hf_config` / `to_hf_config` translate to
and from a Hugging Face `config.json` dict (both the transformers-5 `rope_parameters`
form and the older `rope_theta` + `rope_scaling` form are read).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Mapping

_DTYPES = ("float32", "bfloat16")
_ROPE_TYPES = ("default", "linear", "llama3")
_FAMILIES = ("qwen3", "llama")


from cocoda_jax.errors import ConfigError


@dataclasses.dataclass(frozen=True)
class RopeScaling:
    """Rotary-embedding frequency scaling, as in HF `rope_parameters`.

    `rope_type`: "default" (none), "linear" (positions divided by `factor`) or "llama3"
    (Llama 3.1 smooth low/high-frequency interpolation).
    """

    rope_type: str = "default"
    factor: float = 1.0
    low_freq_factor: float = 1.0
    high_freq_factor: float = 4.0
    original_max_position_embeddings: int = 8192

    def __post_init__(self):
        if self.rope_type not in _ROPE_TYPES:
            raise ConfigError(f"rope_type {self.rope_type!r} unsupported; expected one of {_ROPE_TYPES}")
        if not self.factor > 0:
            raise ConfigError(f"rope factor must be > 0, got {self.factor}")
        if self.rope_type == "llama3":
            if not self.high_freq_factor > self.low_freq_factor > 0:
                raise ConfigError(
                        f"llama3 rope needs high_freq_factor > low_freq_factor > 0, got "
                        f"{self.high_freq_factor}, {self.low_freq_factor}")
            if self.original_max_position_embeddings <= 0:
                raise ConfigError("llama3 rope needs original_max_position_embeddings > 0")


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    """Hyperparameters of a decoder-only transformer (names follow the paper-level meaning).

    `dtype` is the compute dtype of activations and matmuls; `param_dtype` the storage dtype
    of parameters. Log-probs are always computed in float32.
    """

    family: str
    vocab_size: int
    d_model: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    ffn_dim: int
    rope_theta: float = 10_000.0
    rope_scaling: RopeScaling = RopeScaling()
    rms_norm_eps: float = 1e-6
    tie_embeddings: bool = False
    qk_norm: bool = False
    max_seq_len: int = 2048
    dtype: str = "float32"
    param_dtype: str = "float32"
    bos_token_id: int | None = None
    eos_token_id: int | None = None

    def __post_init__(self):
        if self.family not in _FAMILIES:
            raise ConfigError(f"family {self.family!r} unsupported; expected one of {_FAMILIES}")
        for name in ("vocab_size", "d_model", "n_layers", "n_heads", "n_kv_heads", "head_dim",
                                  "ffn_dim", "max_seq_len"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
                raise ConfigError(f"{name} must be a positive int, got {v!r}")
        if self.n_heads % self.n_kv_heads:
            raise ConfigError(
                    f"n_heads ({self.n_heads}) must be a multiple of n_kv_heads ({self.n_kv_heads})")
        if self.head_dim % 2:
            raise ConfigError(f"head_dim must be even for rotary embeddings, got {self.head_dim}")
        if not (self.rope_theta > 0 and math.isfinite(self.rope_theta)):
            raise ConfigError(f"rope_theta must be a positive finite number, got {self.rope_theta}")
        if not isinstance(self.rope_scaling, RopeScaling):
            raise ConfigError(f"rope_scaling must be a RopeScaling, got {type(self.rope_scaling)}")
        if not 0 < self.rms_norm_eps < 1:
            raise ConfigError(f"rms_norm_eps must be in (0, 1), got {self.rms_norm_eps}")
        for name in ("dtype", "param_dtype"):
            if getattr(self, name) not in _DTYPES:
                raise ConfigError(f"{name} must be one of {_DTYPES}, got {getattr(self, name)!r}")
        if self.family == "qwen3" and not self.qk_norm:
            raise ConfigError("qwen3 uses per-head q/k RMSNorm: qk_norm must be True")
        if self.family == "llama" and self.qk_norm:
            raise ConfigError("llama has no q/k norm: qk_norm must be False")

    @property
    def group_size(self) -> int:
        return self.n_heads // self.n_kv_heads

    def replace(self, **kw) -> "ModelConfig":
        return dataclasses.replace(self, **kw)

    def num_params(self) -> int:
        d, f, h, k, dh = self.d_model, self.ffn_dim, self.n_heads, self.n_kv_heads, self.head_dim
        attn = d * h * dh * 2 + d * k * dh * 2 + (2 * dh if self.qk_norm else 0)
        per_layer = attn + 3 * d * f + 2 * d
        emb = self.vocab_size * d * (1 if self.tie_embeddings else 2)
        return self.n_layers * per_layer + emb + d

    # ----------------------------------------------------------------- HF translation
    @classmethod
    def from_hf_config(cls, hf: Mapping[str, Any], **overrides) -> "ModelConfig":
        """Builds a config from an HF `config.json` dict (model_type qwen3 or llama)."""
        mt = hf.get("model_type")
        if mt not in _FAMILIES:
            raise ConfigError(f"HF model_type {mt!r} unsupported; expected one of {_FAMILIES}")
        if hf.get("hidden_act", "silu") != "silu":
            raise ConfigError(f"hidden_act {hf.get('hidden_act')!r} unsupported (SwiGLU needs silu)")
        if hf.get("attention_bias", False) or hf.get("mlp_bias", False):
            raise ConfigError("attention_bias / mlp_bias are not supported")
        if hf.get("use_sliding_window", False):
            raise ConfigError("sliding-window attention is not supported")
        try:
            rope = dict(hf.get("rope_parameters") or {})
            theta = float(rope.pop("rope_theta", hf.get("rope_theta", 10_000.0)))
            if not rope and hf.get("rope_scaling"):
                rope = dict(hf["rope_scaling"])
            rtype = rope.pop("rope_type", rope.pop("type", "default")) or "default"
            fields = {f.name for f in dataclasses.fields(RopeScaling)}
            scaling = RopeScaling(rope_type=rtype, **{k: v for k, v in rope.items() if k in fields})
            hidden = int(hf["hidden_size"])
            heads = int(hf["num_attention_heads"])
            eos = hf.get("eos_token_id")
            if isinstance(eos, (list, tuple)):
                eos = eos[0] if eos else None
            kw = dict(
                    family=mt,
                    vocab_size=int(hf["vocab_size"]),
                    d_model=hidden,
                    n_layers=int(hf["num_hidden_layers"]),
                    n_heads=heads,
                    n_kv_heads=int(hf.get("num_key_value_heads") or heads),
                    head_dim=int(hf.get("head_dim") or hidden // heads),
                    ffn_dim=int(hf["intermediate_size"]),
                    rope_theta=theta,
                    rope_scaling=scaling,
                    rms_norm_eps=float(hf.get("rms_norm_eps", 1e-6)),
                    tie_embeddings=bool(hf.get("tie_word_embeddings", False)),
                    qk_norm=(mt == "qwen3"),
                    max_seq_len=int(hf.get("max_position_embeddings", 2048)),
                    bos_token_id=hf.get("bos_token_id"),
                    eos_token_id=eos,
            )
        except KeyError as e:
            raise ConfigError(f"HF config lacks required key {e.args[0]!r}") from None
        kw.update(overrides)
        return cls(**kw)

    def to_hf_config(self) -> dict[str, Any]:
        """The HF `config.json` dict (transformers-5 `rope_parameters` form)."""
        rope: dict[str, Any] = {"rope_type": self.rope_scaling.rope_type, "rope_theta": self.rope_theta}
        if self.rope_scaling.rope_type in ("linear", "llama3"):
            rope["factor"] = self.rope_scaling.factor
        if self.rope_scaling.rope_type == "llama3":
            rope.update(low_freq_factor=self.rope_scaling.low_freq_factor,
                                    high_freq_factor=self.rope_scaling.high_freq_factor,
                                    original_max_position_embeddings=self.rope_scaling.original_max_position_embeddings)
        arch = {"qwen3": "Qwen3ForCausalLM", "llama": "LlamaForCausalLM"}[self.family]
        out = {
                "architectures": [arch],
                "model_type": self.family,
                "vocab_size": self.vocab_size,
                "hidden_size": self.d_model,
                "intermediate_size": self.ffn_dim,
                "num_hidden_layers": self.n_layers,
                "num_attention_heads": self.n_heads,
                "num_key_value_heads": self.n_kv_heads,
                "head_dim": self.head_dim,
                "hidden_act": "silu",
                "max_position_embeddings": self.max_seq_len,
                "rms_norm_eps": self.rms_norm_eps,
                "tie_word_embeddings": self.tie_embeddings,
                "rope_parameters": rope,
                "attention_bias": False,
                "attention_dropout": 0.0,
                "dtype": self.param_dtype,
                "bos_token_id": self.bos_token_id,
                "eos_token_id": self.eos_token_id,
        }
        if self.family == "llama":
            out["mlp_bias"] = False
        else:
            out["use_sliding_window"] = False
        return out


# --------------------------------------------------------------------------- presets
def _qwen3(vocab=151_936, **kw) -> ModelConfig:
    base = dict(family="qwen3", vocab_size=vocab, head_dim=128, n_kv_heads=8, rope_theta=1_000_000.0,
                            rms_norm_eps=1e-6, qk_norm=True, max_seq_len=40_960, dtype="bfloat16",
                            param_dtype="bfloat16", bos_token_id=151_643, eos_token_id=151_645)
    base.update(kw)
    return ModelConfig(**base)


def qwen3_0p6b() -> ModelConfig:
    return _qwen3(d_model=1024, n_layers=28, n_heads=16, ffn_dim=3072, tie_embeddings=True)


def qwen3_1p7b() -> ModelConfig:
    return _qwen3(d_model=2048, n_layers=28, n_heads=16, ffn_dim=6144, tie_embeddings=True)


def qwen3_4b() -> ModelConfig:
    return _qwen3(d_model=2560, n_layers=36, n_heads=32, ffn_dim=9728, tie_embeddings=True)


def qwen3_8b() -> ModelConfig:
    return _qwen3(d_model=4096, n_layers=36, n_heads=32, ffn_dim=12_288, tie_embeddings=False)


def qwen3_32b() -> ModelConfig:
    return _qwen3(d_model=5120, n_layers=64, n_heads=64, ffn_dim=25_600, tie_embeddings=False)


def llama3_8b() -> ModelConfig:
    """Meta-Llama-3-8B (no rope scaling; Llama 3.1 adds RopeScaling("llama3", factor=8))."""
    return ModelConfig(family="llama", vocab_size=128_256, d_model=4096, n_layers=32, n_heads=32,
                                          n_kv_heads=8, head_dim=128, ffn_dim=14_336, rope_theta=500_000.0,
                                          rms_norm_eps=1e-5, tie_embeddings=False, qk_norm=False, max_seq_len=8192,
                                          dtype="bfloat16", param_dtype="bfloat16", bos_token_id=128_000,
                                          eos_token_id=128_001)


def tiny(vocab_size: int = 1024) -> ModelConfig:
    """The CPU planner: ~0.9M non-embedding params, Qwen3 layout, fp32 (fast on 2 cores)."""
    return ModelConfig(family="qwen3", vocab_size=vocab_size, d_model=128, n_layers=4, n_heads=4,
                                          n_kv_heads=2, head_dim=32, ffn_dim=384, rope_theta=10_000.0, rms_norm_eps=1e-6,
                                          tie_embeddings=True, qk_norm=True, max_seq_len=512, dtype="float32",
                                          param_dtype="float32")


def tiny_x4(vocab_size: int = 1024) -> ModelConfig:
    """``tiny`` at 4x its non-embedding parameters (width x2: ~3.1M), the study's ``large_frozen``
    planner (the small-vs-large claim); same layout, fp32."""
    return ModelConfig(family="qwen3", vocab_size=vocab_size, d_model=256, n_layers=4, n_heads=8,
                       n_kv_heads=4, head_dim=32, ffn_dim=768, rope_theta=10_000.0, rms_norm_eps=1e-6,
                       tie_embeddings=True, qk_norm=True, max_seq_len=512, dtype="float32", param_dtype="float32")


#: The CPU presets, whose vocabulary is the run's own trained BPE (the others load an HF tokenizer).
TOKENIZER_VOCAB_PRESETS = ("tiny", "tiny_x4")

PRESETS = {
        "qwen3_0p6b": qwen3_0p6b,
        "qwen3_1p7b": qwen3_1p7b,
        "qwen3_4b": qwen3_4b,
        "qwen3_8b": qwen3_8b,
        "qwen3_32b": qwen3_32b,
        "llama3_8b": llama3_8b,
        "tiny": tiny,
        "tiny_x4": tiny_x4,
}


def get_preset(name: str) -> ModelConfig:
    try:
        return PRESETS[name]()
    except KeyError:
        raise ConfigError(f"unknown preset {name!r}; known: {sorted(PRESETS)}") from None

"""Qwen3/Llama decoder (Flax NNX), configs, HF checkpoints, sharding, sampler, tokenizer."""

from cocoda_jax.models.config import ModelConfig, PRESETS, RopeScaling, get_preset
from cocoda_jax.models.hf_checkpoint import (HFCheckpointError, HFShapeMismatchError, MissingKeysError,
                                             UnexpectedKeysError, load_config, load_hf_checkpoint,
                                             save_hf_checkpoint)
from cocoda_jax.models.sampler import (CacheFullError, GenerationResult, Sampler, SamplerError,
                                       SamplerState, SamplingParams)
from cocoda_jax.models.sharding import LOGICAL_RULES, MESH_AXES, logical_to_spec, make_mesh
from cocoda_jax.models.tokenizer import TokenizerError, load_tokenizer, train_and_save, train_bpe_tokenizer
from cocoda_jax.models.transformer import (KVCache, Transformer, create_model, param_axes,
                                           token_log_probs)

__all__ = [
    "CacheFullError", "GenerationResult", "Sampler", "SamplerError", "SamplerState", "SamplingParams",
    "TokenizerError", "load_tokenizer", "train_and_save", "train_bpe_tokenizer",
    "HFCheckpointError", "HFShapeMismatchError", "KVCache", "LOGICAL_RULES", "MESH_AXES", "MissingKeysError",
    "ModelConfig", "PRESETS", "RopeScaling", "Transformer",
    "UnexpectedKeysError", "create_model", "get_preset", "load_config", "load_hf_checkpoint",
    "logical_to_spec", "make_mesh", "param_axes", "save_hf_checkpoint", "token_log_probs",
]

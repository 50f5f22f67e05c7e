"""Tiny random HF models built in-process with transformers (PyTorch); no download."""

import numpy as np
import torch
from transformers import LlamaConfig, LlamaForCausalLM, Qwen3Config, Qwen3ForCausalLM

VOCAB = 160


def build_hf(kind: str, tied: bool, seed: int = 0):
    """kind: 'qwen3' (GQA 2, head_dim 24 != 64/4) or 'llama' (GQA 4, head_dim 12 != 64/8,
    llama3 rope scaling exercised past its original context)."""
    torch.manual_seed(seed)
    common = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                  tie_word_embeddings=tied, initializer_range=0.2, rms_norm_eps=1e-6)
    if kind == "qwen3":
        cfg = Qwen3Config(num_attention_heads=4, num_key_value_heads=2, head_dim=24,
                          rope_theta=10_000.0, **common)
        model = Qwen3ForCausalLM(cfg)
    else:
        cfg = LlamaConfig(num_attention_heads=8, num_key_value_heads=2, head_dim=12,
                          rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                        "high_freq_factor": 4.0,
                                        "original_max_position_embeddings": 16},
                          **common)
        model = LlamaForCausalLM(cfg)
    # norms start at 1 in HF; randomise them so a mis-mapped norm weight shows up.
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.ndim == 1:
                p.copy_(1.0 + 0.3 * torch.randn_like(p))
    return model.eval()


def torch_logits(model, ids: np.ndarray) -> np.ndarray:
    with torch.no_grad():
        return model(torch.as_tensor(ids)).logits.float().numpy()

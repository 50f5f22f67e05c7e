"""Qwen3-0.6b student on GSM8K: --config=configs/qwen3_0p6b_gsm8k.py:node8 (8 GPUs) or :tpu."""

from configs import real_scale


def get_config(mesh: str = "node8"):
    return real_scale.make("qwen3_0p6b", "gsm8k", mesh or "node8")

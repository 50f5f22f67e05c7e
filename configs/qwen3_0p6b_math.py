"""Qwen3-0.6b student on MATH: --config=configs/qwen3_0p6b_math.py:node8 (8 GPUs) or :tpu."""

from configs import real_scale


def get_config(mesh: str = "node8"):
    return real_scale.make("qwen3_0p6b", "math", mesh or "node8")

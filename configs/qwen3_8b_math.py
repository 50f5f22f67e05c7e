"""Qwen3-8b student on MATH: --config=configs/qwen3_8b_math.py:node8 (8 GPUs) or :tpu."""

from configs import real_scale


def get_config(mesh: str = "node8"):
    return real_scale.make("qwen3_8b", "math", mesh or "node8")

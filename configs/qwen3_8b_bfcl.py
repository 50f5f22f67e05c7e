"""Qwen3-8B student co-evolving its library on BFCL v4 multi-turn:
``--config=configs/qwen3_8b_bfcl.py:node8`` (8 GPUs) or ``:tpu``, with
``--config.model.hf_checkpoint=/path/to/Qwen3-8B`` (a local HF directory; nothing is downloaded).

The domain is the same as the CPU miniature (``configs/bfcl_multi_turn.py``: the installed
``bfcl-eval`` package's data, split by scenario, gold replayed through BFCL's checker); the student
reads compact tool cards (signature and first sentence) and user turns whole. RODS synthesises no
variants (BFCL tasks have no generator yet); its boundary detection and replay pool run.
"""

import ml_collections

from configs import real_scale


def get_config(mesh: str = "node8") -> ml_collections.ConfigDict:
    c = real_scale.make("qwen3_8b", "gsm8k", mesh or "node8")
    c.domain = ml_collections.ConfigDict(dict(
        name="bfcl_multi_turn", seed=0,
        categories="multi_turn_base,multi_turn_miss_func,multi_turn_miss_param,multi_turn_long_context",
        n_train=0, n_val=0, n_test=0, module=""))
    c.rollout.update(dict(max_steps=24, max_len=8192, max_new_tokens=96, temperature=1.0, timeout_s=30.0))
    c.retrieval.update(dict(card_style="compact", k=16, l2_shortlist=24, l2_keep=32))
    c.sft.update(dict(steps=600, batch_size=32, n_demos=100_000, pack_length=8192))
    c.grpo.update(dict(iterations=300, iterations_per_round=50, tasks_per_iteration=32, group_size=8))
    c.coevolve.abstractor.max_inputs = 4
    c.rods.n_seeds = 10_000
    c.rods.thresholds.synth_per_epoch = 0
    c.sandbox.timeout_s = 30.0
    return c

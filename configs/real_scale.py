"""Shared settings of the real-scale runs (Qwen3 students on GSM8K / MATH on accelerators).

Each ``configs/qwen3_*`` file picks a student, a benchmark and a mesh:

* ``node8``: one 8-GPU node, ``data=2, fsdp=4, tensor=1`` for 0.6B, ``data=1, fsdp=4, tensor=2`` for 8B;
* ``tpu``: a TPU slice, ``data=-1`` (every chip the other axes leave), fsdp over 8 chips, and for 8B
  tensor parallelism over 4; multi-host start through ``--config.distributed.initialize=True``
  (JAX detects the pod; or give ``coordinator_address``/``num_processes``/``process_id``).

The student's weights and tokenizer come from a local HF directory (``--config.model.hf_checkpoint``;
nothing is downloaded), the benchmark files from ``--config.domain.data_dir``.
"""

import ml_collections

from configs import default

MESHES = {
    ("qwen3_0p6b", "node8"): dict(data=2, fsdp=4, tensor=1),
    ("qwen3_8b", "node8"): dict(data=1, fsdp=4, tensor=2),
    ("qwen3_0p6b", "tpu"): dict(data=-1, fsdp=8, tensor=1),
    ("qwen3_8b", "tpu"): dict(data=-1, fsdp=8, tensor=4),
}


def make(preset: str, benchmark: str, mesh: str = "node8"):
    c = default.get_config()
    c.model.preset = preset
    c.model.hf_checkpoint = ""            # set on the command line: a local HF Qwen3 directory
    # Memory of the train steps (launch.coevolve --dry_run): the layers as one scan with each layer
    # rematerialised, and the head's logits 512 positions at a time. Without them XLA's buffers for the
    # GRPO step are ~1.8 TB per device (every layer's attention scores kept); with them 8B node8 is 111 GB.
    c.model.update(dict(remat=True, scan_layers=True, logits_chunk=512))
    c.mesh.update(MESHES[(preset, mesh)])
    # The benchmark's local files (train/test; third_party/benchmarks/word_problems.py): validation is held
    # out of the training file. GSM8K's test has 1,319 questions; MATH's 5,000.
    c.domain = ml_collections.ConfigDict(dict(name=benchmark, module="", seed=0, data_dir="", n_train=7000, n_val=500,
                                              n_test=1319 if benchmark == "gsm8k" else 5000))
    # Stage 0: the benchmarks have answers, not programs. K programs a question from a teacher behind an
    # OpenAI-compatible endpoint (or the student served by launch/serve.py: source="student"), kept when
    # they verify (cocoda_jax/demos; docs/real_scale.md).
    c.demos = ml_collections.ConfigDict(dict(
        source="teacher", path="", collect=True, k=4, concurrency=32, chunk=256, base_url="http://127.0.0.1:8000",
        model="teacher", api_key_env="OPENAI_API_KEY", timeout_s=300.0, max_retries=5, temperature=0.7,
        max_tokens=512))
    c.rollout.update(dict(max_steps=12, max_len=4096, max_new_tokens=256, temperature=1.0))
    c.retrieval.update(dict(card_style="compact", k=8))
    c.sft.update(dict(steps=2000, batch_size=64, learning_rate=1e-5, warmup_steps=100,
                      micro_batches=4 if preset == "qwen3_8b" else 1, n_demos=7000, pack_length=4096))
    c.grpo.update(dict(iterations=600, iterations_per_round=100, tasks_per_iteration=64, group_size=8,
                       learning_rate=1e-6, beta=0.01, micro_batches=8 if preset == "qwen3_8b" else 4))
    c.coevolve.rounds = 6
    c.coevolve.refresh_sft_steps = 50
    c.coevolve.refresh_demos = 2048
    c.coevolve.refresh_learning_rate = 1e-6
    c.rods.n_seeds = 4000
    c.rods.thresholds.synth_per_epoch = 64
    c.sandbox.workers = 16
    c.report.retrieval_queries = 64
    return c

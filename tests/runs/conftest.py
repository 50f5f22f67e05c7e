"""Tiny budgets of the real launchers' configs: every stage runs, in seconds."""

import pytest

from configs import default

TIMING_KEYS = ("rollout_s", "update_s", "rollout_tokens_per_s", "train_tokens_per_s")


def tiny_config(**over):
    c = default.get_config()
    c.domain.n_train, c.domain.n_val, c.domain.n_test = 48, 6, 6
    c.model.vocab_size = 400
    c.sft.steps, c.sft.batch_size, c.sft.n_demos, c.sft.warmup_steps = 4, 4, 48, 1
    c.grpo.iterations, c.grpo.iterations_per_round = 3, 1
    c.grpo.tasks_per_iteration, c.grpo.group_size, c.grpo.eval_every = 2, 2, 2
    c.rollout.max_steps, c.rollout.max_new_tokens = 2, 8
    c.rollout.max_len, c.rollout.length_multiple = 512, 512
    c.checkpoint.every_sft_steps, c.checkpoint.every_iterations = 2, 1
    c.coevolve.rounds, c.coevolve.refresh_sft_steps, c.coevolve.refresh_demos = 2, 1, 8
    c.rods.n_seeds = 16
    c.mesh.data = 1  # one device: the sharded steps are tested in tests/rl (8 fake devices here)
    c.rods.thresholds.synth_per_epoch = 2
    c.report.retrieval_queries = 2
    for k, v in over.items():
        section, key = k.split("__")
        c[section][key] = v
    return c


def comparable(records):
    """Metrics records without wall-clock fields (they differ between any two runs)."""
    return [{k: v for k, v in r.items() if k not in TIMING_KEYS and not k.endswith("wall_s")} for r in records]


@pytest.fixture
def config():
    return tiny_config()

"""The chaos test's run (``launch/chaos.py``): the main job at a budget of seconds per stage that
still passes every failpoint — warm library, SFT, GRPO, mining and validation of a composite inside
a round, the SFT refresh it triggers, RODS synthesis, checkpoints, the report."""

from configs import default


def get_config():
    c = default.get_config()
    c.domain.n_train, c.domain.n_val, c.domain.n_test = 48, 6, 6
    c.model.vocab_size = 400
    c.mesh.data = 1
    c.sft.steps, c.sft.batch_size, c.sft.n_demos, c.sft.warmup_steps = 4, 4, 48, 1
    c.grpo.iterations_per_round, c.grpo.tasks_per_iteration, c.grpo.group_size = 1, 2, 2
    c.rollout.max_steps, c.rollout.max_new_tokens = 2, 8
    c.rollout.max_len, c.rollout.length_multiple = 512, 512
    c.coevolve.rounds, c.coevolve.refresh_sft_steps, c.coevolve.refresh_demos = 2, 1, 8
    c.rods.n_seeds = 16
    c.rods.thresholds.synth_per_epoch = 2
    c.report.retrieval_queries = 2
    return c

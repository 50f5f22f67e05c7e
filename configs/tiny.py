"""The smallest whole run of the main job: every stage in seconds (the base of the end-to-end tests'
configs, ``tests/runs/conftest.py``, and of the study's ``smoke`` preset). It passes every failpoint
of the main thread but the round's mining and refresh: its rollout budget (``max_new_tokens=8``,
shorter than one action step, which is 12-15 tokens) lets no rollout finish a step, so GRPO solves
nothing and a round mines nothing (stage 1 mines and validates composites from the demonstrations).
``configs/chaos.py`` is the run that mines inside a round. RODS: ``burn_in_epochs=0`` and ``hard=0``
(a task none of whose rollouts succeeds is at the boundary, not hard) so that it plans variant
synthesis at the first epoch boundary and runs it during the second round."""

from configs import default


def get_config():
    c = default.get_config()
    c.domain.n_train, c.domain.n_val, c.domain.n_test, c.domain.n_dev = 48, 6, 6, 4
    c.model.vocab_size = 400
    c.mesh.data = 1  # one device: the sharded steps are tested in tests/rl (8 fake devices there)
    c.sft.steps, c.sft.batch_size, c.sft.n_demos, c.sft.warmup_steps = 4, 4, 48, 1
    c.grpo.iterations, c.grpo.iterations_per_round = 3, 1
    c.coevolve.probation_iterations = 0  # one GRPO iteration a round: nothing to split
    c.grpo.tasks_per_iteration, c.grpo.group_size, c.grpo.eval_every = 2, 2, 2
    c.rollout.max_steps, c.rollout.max_new_tokens = 2, 8
    c.rollout.max_len, c.rollout.length_multiple = 512, 512
    c.checkpoint.every_sft_steps, c.checkpoint.every_iterations = 2, 1
    c.coevolve.rounds, c.coevolve.refresh_sft_steps, c.coevolve.refresh_demos = 2, 1, 8
    c.rods.n_seeds = 16
    c.coevolve.explore_tasks, c.coevolve.explore_samples = 2, 2  # the rounds' search, at its smallest
    c.rods.thresholds.synth_per_epoch = 2
    c.rods.thresholds.burn_in_epochs, c.rods.thresholds.hard = 0, 0.0
    c.report.retrieval_queries = 2
    return c

"""The embedded default of the main job (``launch/coevolve.py``): the tiny planner on synthetic math,
on the CPU, in minutes (904 s on 2 idle cores, measured 2026-12-07, docs/experiments.md section AC;
6 min 58 s before stage 2 and the rounds' refresh grew, section M).

It starts from every section's declared defaults (``cocoda_jax.runs.settings.default_config``: each
default has one home, its section's dataclass) and sets what has no default and what this run
changes; ``override`` refuses a value that repeats the one it replaces. ``--config.section.key=value``
overrides a key from the command line (ml_collections refuses keys that do not exist). The other
configs import this one and change the model, the domain, the mesh and the budgets.
"""

import ml_collections

from cocoda_jax.runs.settings import default_config, override


def get_config() -> ml_collections.ConfigDict:
    c = default_config()
    c.seed = 0

    # The domain (its keys are the registered domain's own; module: a module to import first, so a domain
    # defined outside this package can register itself; see docs/domains.md). heldout="instances":
    # validation/test are unseen instances in the training wording; "wording": the generator's held-out
    # templates and entities (a much harder transfer test). demos="seen_pairs": programs only for the
    # demonstrated motif pairs, the rest answer-only (the faithful setting, docs/design.md); n_val: the
    # tasks acceptance decides on (512: at 128 one task decided whether a grown library paid); n_dev:
    # held-out tasks no decision reads, scored after every round.
    c.domain = ml_collections.ConfigDict(dict(
        name="synthetic_math", seed=0, max_depth=2, n_train=2000, n_val=512, n_test=128, heldout="instances",
        data_dir="", grow_library_to=0, module="", demos="seen_pairs", n_dev=128))

    # The planner: a preset of cocoda_jax.models.config ("tiny" takes its vocabulary from the tokenizer
    # trained on the domain's demonstrations; real presets load HF weights in the real-scale configs).
    override(c, "model", preset="tiny", vocab_size=1024, hf_checkpoint="")
    # One mesh over (data, fsdp, tensor); data=-1 takes every device the other axes leave.
    override(c, "mesh", data=-1, fsdp=1, tensor=1)
    # Multi-host start (jax.distributed.initialize); leave the address empty to let JAX detect the
    # cluster (TPU pods, SLURM), or give coordinator/process count/id explicitly (docs/scale.md).
    override(c, "distributed", initialize=False, coordinator_address="", num_processes=1, process_id=0)

    # Episodes: 4 turns, where no two-motif chain fits from the primitives (docs/design.md, the faithful
    # setting); nucleus sampling at the papers' top-p.
    override(c, "rollout", max_steps=4, top_p=0.95)

    # R = R_res + lam * sum Phi (docs/reward.md): the composite credit is paid on success only.
    override(c, "reward", credit_requires_success=True)

    # Stage 2: SFT on the (refactored) gold demonstrations, to convergence (560 steps: depth-1 dev 1.000 and
    # the demonstrated two-motif tasks at the warm library's turn ceiling; at 200 the rounds' gain was mostly
    # the SFT stage 2 had not finished, docs/experiments.md section Q).
    # Each step's 16 demonstrations (120-292 tokens) packed into rows of 384 tokens: the same loss in about 3/4 of
    # the token slots of one a row (docs/experiments.md section W).
    override(c, "sft", steps=560, batch_size=16, learning_rate=5e-3, warmup_steps=20, micro_batches=1, n_demos=2000,
             pack_length=384)

    # GRPO (beta=0: no reference forward on the CPU budget). "grpo_gar": the composite credit kept in
    # reward units (docs/reward.md). lr 5e-5 was chosen on seed 0's dev split (docs/experiments.md
    # section M: 1e-4 and 2e-4 lost dev accuracy over the rounds); a cosine schedule after 2 warmup steps.
    override(c, "grpo", iterations=30, iterations_per_round=10, tasks_per_iteration=12, group_size=8,
              learning_rate=5e-5, epsilon=0.2, epsilon_high=0.28, beta=0.0, aggregation="token_mean",
              normalize_std=True, micro_batches=1, mask_uniform_groups=True, ppo_epochs=2, eval_every=10,
              advantage="grpo_gar", schedule="cosine", warmup_steps=2)

    # Stage 1: rounds of the symbolic abstractor over the gold demonstrations.
    override(c, "warm", rounds=2)

    # Stage 3: co-evolution rounds; each round's last 3 GRPO iterations are the new composites' probation,
    # and the planner's own solutions of answer-only tasks join the demonstrations (docs/acceptance.md).
    # After a round's first GRPO iterations, a best-of-N search: 16 samples on each of 64 answer-only training
    # tasks without a demonstration (a GRPO group of 8 almost never holds a first success; docs/experiments.md,
    # sections X and Z).
    # The refresh: 240 steps at 3e-4 over up to 2,048 demonstrations (a converged planner needs them to
    # adopt a round's composites; section Q).
    override(c, "coevolve", rounds=3, rho=0.8, frozen_library=False, refresh_sft_steps=240, refresh_demos=2048,
             refresh_learning_rate=3e-4, probation_iterations=3, keep_successes=True, explore_tasks=64,
             abstractor=dict(max_candidates=4), acceptance=dict(tolerance=0.04))

    # RODS: the task curriculum (on by default; docs/design.md). The tasks the rounds' search solved now and then
    # join its live pool, drawn in the probation iterations, with 4 variants of each made at once (docs/experiments.md,
    # section Z: +1.2 test points [+0.2, +2.3] over the default before it, which had neither; chosen by a rule fixed
    # before most of its cells ran: an interval above zero against the old default, then the higher dev accuracy).
    override(c, "rods", enabled=True, n_seeds=256, background=True, admit_explored=True,
             thresholds=dict(synth_per_epoch=8, found_variants=4))

    override(c, "sandbox", workers=2, timeout_s=10.0)
    override(c, "checkpoint", keep=3, every_sft_steps=100, every_iterations=10)
    override(c, "report", retrieval_queries=16, retrieval_k=8)
    return c

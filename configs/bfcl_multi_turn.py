"""The co-evolution job on BFCL v4 multi-turn (real tools, real tasks, BFCL's own checker), as a CPU
miniature with the tiny planner (budget: 30 minutes on 2 cores).

    python -m launch.coevolve --config=configs/bfcl_multi_turn.py --workdir=/tmp/bfcl_run

The domain is third_party.benchmarks.bfcl_domain: 800 conversations of the four supported multi-turn
categories split by scenario (a scenario and its three variants stay in one split; 60/20/20), every
gold replayed through the sandbox's BFCL backends and the package's checker before training. Episodes
are long (about ten calls, user turns revealed one by one), so the context and the step budget are
larger than the synthetic-math default and the GRPO budget smaller. RODS runs its boundary detection,
replay pool and retirement; it synthesises no variants here (BFCL tasks have no generator yet).
"""

import ml_collections

from configs import default


def get_config() -> ml_collections.ConfigDict:
    c = default.get_config()
    c.domain = ml_collections.ConfigDict(dict(
        name="bfcl_multi_turn", seed=0,
        categories="multi_turn_base,multi_turn_miss_func,multi_turn_miss_param,multi_turn_long_context",
        n_train=0, n_val=32, n_test=0, module=""))
    c.model.vocab_size = 2048
    c.rollout.update(dict(max_steps=20, max_len=1024, max_new_tokens=40, length_multiple=256, timeout_s=20.0))
    c.retrieval.update(dict(k=12, l2_shortlist=16, l2_keep=24))
    c.sft.update(dict(steps=200, batch_size=8, n_demos=100_000))
    c.grpo.update(dict(iterations=6, iterations_per_round=2, tasks_per_iteration=4, group_size=4, eval_every=100))
    c.coevolve.rounds = 3
    c.coevolve.explore_tasks = 0  # no best-of-N search: the miniature's budgets (docs/bfcl.md) were set without it
    c.coevolve.probation_iterations = 0  # two GRPO iterations a round: both before the mining
    c.coevolve.abstractor.max_inputs = 4  # a run of two or three stateful calls has that many arguments
    c.coevolve.refresh_demos = 128
    c.rods.n_seeds = 10_000
    c.rods.thresholds.synth_per_epoch = 0
    c.sandbox.timeout_s = 20.0
    c.report.retrieval_queries = 16
    return c

"""The chaos run's config (``launch/chaos.py``'s default, and the tests' one whole run): a run of
about two minutes on 2 cores that passes every failpoint of the main thread, a composite mined,
validated and accepted inside a round included.

For a round to mine, GRPO rollouts must succeed, on at least two tasks that share a pattern. The
tiny planner learns that only by memorising: SFT on the first 8 training tasks (``max_depth=1``:
two- and three-call programs; task 0's longer program does not fit ``max_len`` and is dropped), 120
steps (80 are too few: round 1 then solves 1 rollout in 16 and mines nothing), and GRPO draws from
the same 8 tasks (``rods.n_seeds``). A 1,024-token BPE (the default 400 is nearly character-level)
makes the demonstrations 117-159 tokens, so one 160-token bucket holds them: SFT steps cost about
half of what 256 cost. Tasks 1 and 5 both start
``dozens_to_items -> subtract``; round 1 solves both (train accuracy ~0.8) and mines that motif.
Each round's second GRPO iteration is the probation of the round's new composites (in the prompts,
paid by GAR) before acceptance judges them. Two choices make the mining possible and differ from the default: ``warm.rounds=0`` (stage 1 would mine
the same recurring motif from the same demonstrations, leaving the round nothing to find) and the
abstractor's ``tool_cost = body_cost = 0`` (a two-call motif in two tasks then compresses; at cost 1
it needs four uses). So this config does not pass ``warm/round``: ``configs/tiny.py`` does.
RODS: ``burn_in_epochs=0`` and ``hard=0`` (see ``configs/tiny.py``), so synthesis runs in round 2.
"""

from configs import tiny


def get_config():
    c = tiny.get_config()
    c.domain.max_depth = 1
    c.warm.rounds = 0
    c.coevolve.abstractor.tool_cost, c.coevolve.abstractor.body_cost = 0.0, 0.0
    c.sft.steps, c.sft.batch_size, c.sft.n_demos = 120, 8, 8
    c.sft.learning_rate, c.sft.warmup_steps = 2e-2, 5
    c.rods.n_seeds = 8
    c.rollout.max_steps, c.rollout.max_new_tokens = 4, 20
    # the sampling this run's round-1 mining was measured with (the default's 1.0 / 0.95 explore more)
    c.rollout.temperature, c.rollout.top_p = 0.6, 1.0
    c.model.vocab_size = 1024
    c.rollout.max_len, c.rollout.length_multiple = 160, 160
    c.grpo.tasks_per_iteration, c.grpo.group_size = 8, 2
    # two GRPO iterations a round, the second the probation of what the first one's successes mined
    c.grpo.iterations, c.grpo.iterations_per_round, c.coevolve.probation_iterations = 4, 2, 1
    return c

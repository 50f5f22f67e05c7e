"""A GRPO iteration played in shares (cocoda_jax/runs/shares.py) equals the one-process iteration
with ``host_shards = P`` on the same params: the P processes are simulated in one process (each
share played with its own process index, the exchange by a stand-in gather), so the equality the
design promises is checked bit for bit (rollouts, rewards, metrics, the params after the step),
without the float differences of another mesh. The planner memorises eight tasks first (SFT), so
its rollouts run steps in the sandbox and one group carries a learning signal."""

import jax
import numpy as np
import pytest

from cocoda_jax.data import synthetic_math as sm
from cocoda_jax.models import create_model, train_bpe_tokenizer
from cocoda_jax.models.config import tiny
from cocoda_jax.rl import grpo as G
from cocoda_jax.rl import loop as L
from cocoda_jax.rl import rewards as R
from cocoda_jax.rl import trajectory as T
from cocoda_jax.rl.learner import Learner, LearnerConfig
from cocoda_jax.rl.prompts import all_cards
from cocoda_jax.rl.update import OptimConfig
from cocoda_jax.runs import shares

pytestmark = [pytest.mark.filterwarnings("ignore:Some donated buffers were not usable"), pytest.mark.slow]

RC = L.RolloutConfig(max_steps=4, max_len=256, max_new_tokens=16, temperature=1.0, length_multiple=64)
GROUP = 2
SFT_STEPS = 100


class _Played(Exception):
    """Stops a simulated process once its share is played: the share is what the test collects."""


@pytest.fixture(scope="module")
def setup(math_library, sandbox):
    """Eight depth-1 tasks and a tiny planner that has memorised their gold programs (SFT), so that
    its rollouts run steps in the sandbox and some groups carry a learning signal."""
    tasks = sm.generate(8, seed=3, split="train", max_depth=1)
    cards = all_cards(math_library, "bare")
    segments = L.gold_segments(tasks, cards)
    tok = L.Tokenizer(train_bpe_tokenizer([T.segments_text(s) for s in segments], 512))
    sft = Learner(create_model(tiny(tok.vocab_size), seed=1), LearnerConfig(optim=OptimConfig(learning_rate=2e-2)))
    demos = L.demonstration_records(segments, tok, RC)
    state = L.sft_phase(sft, sft.init_state(), demos, steps=SFT_STEPS, batch_size=8, seed=0, rc=RC, pad_id=tok.pad_id)
    learner = Learner(sft.model(state), LearnerConfig(grpo=G.GRPOConfig(beta=0.0)))
    return tasks, tok, learner, cards


def _in_shares(learner, tok, library, sandbox, cards, count, counts):
    """The ``rollouts`` of process 0 of ``count``, the other processes' shares played beforehand."""
    parts = {}

    def play_share(p):
        def capture(mine):
            parts[p] = mine
            raise _Played
        return shares.share_rollouts(learner, tok, library, sandbox, rc=RC, cards=cards,
                                     reward_config=R.RewardConfig(), group_size=GROUP, process_index=p,
                                     process_count=count, gather=capture, on_share=counts.append)

    def rollouts(state, rows, key):
        for p in range(1, count):
            with pytest.raises(_Played):
                play_share(p)(state, rows, key)
        first = shares.share_rollouts(learner, tok, library, sandbox, rc=RC, cards=cards,
                                      reward_config=R.RewardConfig(), group_size=GROUP, process_index=0,
                                      process_count=count, on_share=counts.append,
                                      gather=lambda mine: [mine] + [parts[p] for p in range(1, count)])
        return first(state, rows, key)

    return rollouts


def _iteration_with_a_signal(learner, tok, drawn, library, sandbox, cards, *, rows, rc, keys=8):
    """The first iteration key (of ``keys``) whose one-process iteration has a learning signal (a
    group that is not uniform) and runs programs in process 0's rows: which key does depends on the
    host's floats (the planner's SFT and sampling), what the test checks does not. Returns the
    iteration's keywords and ``grpo_iteration``'s result."""
    for k in range(keys):
        kw = dict(group_size=GROUP, cards=cards, key=jax.random.key(k))
        state, metrics, it = L.grpo_iteration(learner, learner.init_state(), tok, drawn, library, sandbox, rc=rc, **kw)
        if metrics["uniform_group_share"] < 1 and any(s.outcome is not None for t in it.trajectories[:rows]
                                                      for s in t.steps):
            return kw, state, metrics, it
    pytest.fail(f"no key of {keys} gave a group with a learning signal: the SFT planner runs no programs")


@pytest.mark.parametrize("count", [2, 4])
def test_an_iteration_in_shares_is_the_one_process_iteration_with_as_many_host_shards(
        setup, math_library, sandbox, count):
    tasks, tok, learner, cards = setup
    drawn = tasks[:4]  # 4 groups: 2 and 4 processes cut the rows where host_shards 2 and 4 do
    kw, whole_state, whole_metrics, whole = _iteration_with_a_signal(
        learner, tok, drawn, math_library, sandbox, cards, rows=len(drawn) * GROUP // count,
        rc=L.RolloutConfig(**{**RC.__dict__, "host_shards": count}))
    counts = []
    state, metrics, shared = L.grpo_iteration(
        learner, learner.init_state(), tok, drawn, math_library, sandbox, rc=RC,
        rollouts=_in_shares(learner, tok, math_library, sandbox, cards, count, counts), **kw)
    assert shared.trajectories == whole.trajectories and shared.records == whole.records
    assert shared.breakdowns == whole.breakdowns
    assert metrics["uniform_group_share"] < 1  # a group with a learning signal: the step moved the params
    timing = ("rollout_s", "update_s", "rollout_tokens_per_s", "train_tokens_per_s")
    assert {k: v for k, v in metrics.items() if k not in timing} == \
        {k: v for k, v in whole_metrics.items() if k not in timing}
    for a, b in zip(jax.tree.leaves(state.params), jax.tree.leaves(whole_state.params)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    # process 0's share was counted once it had the whole iteration: its rows, its programs
    assert [c.rows for c in counts] == [len(drawn) * GROUP // count]
    assert 0 < counts[0].sandbox_programs <= counts[0].rows * RC.max_steps
    assert counts[0].sandbox_programs == sum(1 for t in whole.trajectories[:counts[0].rows] for s in t.steps
                                             if s.outcome is not None)
    assert counts[0].iteration_programs == sum(1 for t in whole.trajectories for s in t.steps if s.outcome is not None)


def test_one_process_plays_every_row_with_the_iteration_key(setup, math_library, sandbox):
    """On one process the shares' path samples exactly what the default path samples (no fold-in)."""
    tasks, tok, learner, cards = setup
    kw = dict(group_size=GROUP, cards=cards, key=jax.random.key(3))
    _, _, plain = L.grpo_iteration(learner, learner.init_state(), tok, tasks[:3], math_library, sandbox, rc=RC, **kw)
    counts = []
    rollouts = shares.share_rollouts(learner, tok, math_library, sandbox, rc=RC, cards=cards,
                                     reward_config=R.RewardConfig(), group_size=GROUP, on_share=counts.append)
    _, _, shared = L.grpo_iteration(learner, learner.init_state(), tok, tasks[:3], math_library, sandbox, rc=RC,
                                    rollouts=rollouts, **kw)
    assert shared.trajectories == plain.trajectories and shared.records == plain.records
    ran = sum(1 for t in plain.trajectories for s in t.steps if s.outcome is not None)
    assert ran > 0 and [(c.rows, c.sandbox_programs, c.iteration_programs) for c in counts] == [(6, ran, ran)]

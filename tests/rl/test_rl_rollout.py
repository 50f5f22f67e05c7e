"""Token-level rollouts with the real KV-cache sampler inside the real episode loop: the record is
exactly what the model saw, its mask marks exactly the sampled tokens, the sampler's log-probs
match the trainer's, and a fixed key gives the same rollouts."""

import jax
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from cocoda_jax.data import synthetic_math as sm
from cocoda_jax.models import create_model, train_bpe_tokenizer
from cocoda_jax.models.config import tiny
from cocoda_jax.rl import grpo as G
from cocoda_jax.rl import loop as L
from cocoda_jax.rl import trajectory as T
from cocoda_jax.rl.learner import Learner, LearnerConfig
from cocoda_jax.rl.prompts import all_cards
from cocoda_jax.rl.rewards import RewardConfig
from cocoda_jax.rl.rollout import SamplerPolicy, Tokenizer, bucket_length, grpo_batch, sample_rollouts

pytestmark = pytest.mark.filterwarnings("ignore:Some donated buffers were not usable")

RC = L.RolloutConfig(max_steps=3, max_len=256, max_new_tokens=12, temperature=1.0)


@pytest.fixture(scope="module")
def setup(math_library):
    tasks = sm.generate(40, seed=3, split="train", max_depth=1)
    segments = L.gold_segments(tasks, all_cards(math_library, "bare"))
    tok = Tokenizer(train_bpe_tokenizer([T.segments_text(s) for s in segments], 512))
    model = create_model(tiny(tok.vocab_size).replace(n_layers=2), seed=1)  # depth is not the point here
    return tasks, tok, model


def test_records_are_what_the_model_saw(setup, math_library, sandbox):
    tasks, tok, model = setup
    group = [tasks[0]] * 3 + [tasks[1]] * 3
    trajs, records = sample_rollouts(model, tok, group, math_library, sandbox, sampling=RC.sampling(),
                                     key=jax.random.key(0), max_steps=RC.max_steps, max_len=RC.max_len,
                                     cards=all_cards(math_library, "bare"))
    assert len(trajs) == len(records) == 6
    for traj, rec in zip(trajs, records):
        assert len(rec) <= RC.max_len
        assert len(rec.ids) == len(rec.loss_mask) == len(rec.old_logp)
        prompt = tok.encode(traj.prompt)
        assert list(rec.ids[:len(prompt)]) == prompt and not any(rec.loss_mask[:len(prompt)])
        sampled = [t for s in traj.steps for t in s.generation.tokens]
        assert [i for i, m in zip(rec.ids, rec.loss_mask) if m] == sampled[:sum(rec.loss_mask)]
        for s in traj.steps:  # the step text the checker saw comes from the sampled tokens
            assert s.raw == tok.decode(s.generation.tokens)
            assert len(s.generation.tokens) <= RC.max_new_tokens
        assert all(lp == 0.0 for lp, m in zip(rec.old_logp, rec.loss_mask) if not m)
        assert all(lp <= 0.0 for lp in rec.old_logp)


@pytest.mark.parametrize("temperature,top_p", [(1.0, 1.0), (1.5, 0.95), (0.6, 1.0)])
def test_sampler_log_probs_match_the_trainer(setup, math_library, sandbox, temperature, top_p):
    """At any sampling temperature (nucleus truncation or not) the sampler's log-prob of each sampled
    token is the trainer's at the GRPO temperature: the first epoch's ratio is 1, not a temperature gap."""
    tasks, tok, model = setup
    rc = L.RolloutConfig(max_steps=2, max_len=RC.max_len, max_new_tokens=12, temperature=temperature, top_p=top_p)
    trajs, records = sample_rollouts(model, tok, tasks[:4], math_library, sandbox, sampling=rc.sampling(),
                                     key=jax.random.key(1), max_steps=2, max_len=RC.max_len,
                                     cards=all_cards(math_library, "bare"))
    length = bucket_length(max(len(r) for r in records), 64, RC.max_len)
    batch = grpo_batch(records, np.zeros(len(records)), length, tok.pad_id)
    learner = Learner(model, LearnerConfig(grpo=G.GRPOConfig(temperature=temperature)))
    trainer = np.asarray(learner.log_probs(learner.init_state().params, batch["tokens"], batch["valid"]))
    mask = batch["loss_mask"] > 0
    assert mask.sum() > 10
    np.testing.assert_allclose(trainer[mask], batch["old_logp"][mask], atol=2e-4)
    if temperature != 1.0:  # and it is not the model's own distribution's
        plain = np.asarray(Learner(model, LearnerConfig()).log_probs(learner.init_state().params, batch["tokens"],
                                                                     batch["valid"]))
        assert np.abs(plain[mask] - batch["old_logp"][mask]).max() > 1e-2


def test_same_key_same_rollouts_and_new_key_differs(setup, math_library, sandbox):
    tasks, tok, model = setup

    def go(seed):
        _, recs = sample_rollouts(model, tok, tasks[:3], math_library, sandbox, sampling=RC.sampling(),
                                  key=jax.random.key(seed), max_steps=2, max_len=RC.max_len,
                                  cards=all_cards(math_library, "bare"))
        return [r.ids for r in recs]

    assert go(5) == go(5)
    assert go(5) != go(6)


def test_host_shards_are_independent_rollouts_of_their_slices(setup, math_library, sandbox):
    """``host_shards=2``: each contiguous slice of the rows is played exactly as a one-batch rollout of
    that slice alone with the key ``fold_in(key, j)`` (the shards share nothing but the model and the
    tokenizer), the records come back in row order, and the same key gives the same rollouts."""
    tasks, tok, model = setup
    batch = [tasks[0]] * 3 + [tasks[1]] * 2
    kw = dict(sampling=RC.sampling(), max_steps=RC.max_steps, max_len=RC.max_len, cards=all_cards(math_library, "bare"))
    key = jax.random.key(7)
    trajs, recs = sample_rollouts(model, tok, batch, math_library, sandbox, key=key, host_shards=2, **kw)
    again = sample_rollouts(model, tok, batch, math_library, sandbox, key=key, host_shards=2, **kw)[1]
    assert recs == again
    expected_trajs, expected = [], []
    for j, (lo, hi) in enumerate([(0, 2), (2, 5)]):  # cuts = len * j // shards
        t, r = sample_rollouts(model, tok, batch[lo:hi], math_library, sandbox, key=jax.random.fold_in(key, j), **kw)
        expected_trajs += t
        expected += r
    assert recs == expected
    assert [[s.raw for s in t.steps] for t in trajs] == [[s.raw for s in t.steps] for t in expected_trajs]
    # more shards than rows: one row each
    assert len(sample_rollouts(model, tok, batch[:2], math_library, sandbox, key=key, host_shards=4, **kw)[1]) == 2
    with pytest.raises(ValueError, match="host_shards"):
        sample_rollouts(model, tok, batch, math_library, sandbox, key=key, host_shards=0, **kw)


@given(st.integers(1, 12), st.integers(0, 10), st.integers(1, 8))
def test_shard_cuts_are_even_slices_of_whole_blocks(unit, blocks, shards):
    from cocoda_jax.rl.rollout import shard_cuts

    cuts = shard_cuts(unit * blocks, shards, unit)
    assert len(cuts) == shards + 1 and cuts[0] == 0 and cuts[-1] == unit * blocks
    sizes = [b - a for a, b in zip(cuts, cuts[1:])]
    assert all(n >= 0 and n % unit == 0 for n in sizes)
    assert max(sizes) - min(sizes) <= unit  # as even as whole blocks allow


def test_shard_cuts_refuse_a_split_block():
    from cocoda_jax.rl.rollout import shard_cuts

    with pytest.raises(ValueError, match="whole 8-row blocks"):
        shard_cuts(12, 2, unit=8)
    with pytest.raises(ValueError):
        shard_cuts(8, 0)


def test_sharded_policy_routes_rows_and_checks_its_cuts():
    calls = []

    class Echo:
        overflowed, row_turns = 1, 2

        def __init__(self, name):
            self.name = name

        def __call__(self, contexts, rows):
            calls.append((self.name, list(rows)))
            return [f"{self.name}:{c}:{r}" for c, r in zip(contexts, rows)]

        def records(self):
            return [self.name]

    from concurrent.futures import ThreadPoolExecutor

    from cocoda_jax.rl.rollout import ShardedPolicy

    with ThreadPoolExecutor(2) as pool:
        policy = ShardedPolicy([Echo("a"), Echo("b")], [0, 2, 5], pool)
        assert policy(["c4", "c0", "c2"], [4, 0, 2]) == ["b:c4:2", "a:c0:0", "b:c2:0"]
        assert sorted(calls) == [("a", [0]), ("b", [2, 0])]
        calls.clear()
        assert policy(["c3"], [3]) == ["b:c3:1"] and calls == [("b", [1])]  # a shard with no live row is not called
        assert policy.records() == ["a", "b"] and policy.overflowed == 2 and policy.row_turns == 4
        with pytest.raises(ValueError, match="outside"):
            policy(["x"], [5])
        with pytest.raises(ValueError, match="cuts"):
            ShardedPolicy([Echo("a")], [1, 3], pool)


def test_observations_follow_each_step_unsampled(setup, math_library, sandbox):
    """Each observation the episode loop rendered is in the record, masked, right after its step."""
    tasks, tok, model = setup
    trajs, records = sample_rollouts(model, tok, tasks[:2], math_library, sandbox, sampling=RC.sampling(),
                                     key=jax.random.key(2), max_steps=3, max_len=RC.max_len,
                                     cards=all_cards(math_library, "bare"))
    for traj, rec in zip(trajs, records):
        pos = len(tok.encode(traj.prompt))
        for s in traj.steps[:-1]:
            pos += len(s.generation.tokens)
            obs = s.observation + "\n"
            if not s.generation.tokens or s.generation.tokens[-1] not in tok.line_end_ids:
                obs = "\n" + obs
            ids = tok.encode(obs)
            if pos + len(ids) > len(rec):
                break
            assert list(rec.ids[pos:pos + len(ids)]) == ids
            assert not any(rec.loss_mask[pos:pos + len(ids)])
            pos += len(ids)


def test_a_prompt_too_long_for_max_len_is_never_sampled(setup, math_library, sandbox):
    """A prompt that leaves no room for a step writes nothing and fails; the other rows run."""
    tasks, tok, model = setup
    cards = all_cards(math_library, "bare")
    short = min(tasks, key=lambda t: len(tok.encode(T.render_prompt(t, cards))))
    long_task = max(tasks, key=lambda t: len(tok.encode(T.render_prompt(t, cards))))
    limit = len(tok.encode(T.render_prompt(short, cards))) + RC.max_new_tokens + 4
    assert len(tok.encode(T.render_prompt(long_task, cards))) + RC.max_new_tokens > limit
    trajs, recs = sample_rollouts(model, tok, [long_task, short], math_library, sandbox, sampling=RC.sampling(),
                                  key=jax.random.key(0), max_steps=2, max_len=limit, cards=cards)
    assert all(not s.generation.tokens for s in trajs[0].steps) and trajs[0].r_res == 0.0
    assert sum(recs[0].loss_mask) == 0 and len(recs[0]) == limit
    assert sum(recs[1].loss_mask) > 0 and len(recs[1]) <= limit


def test_the_newline_must_stop_a_turn(setup):
    _, tok, model = setup
    from cocoda_jax.models import Sampler, SamplingParams
    assert tok.newline_id in tok.line_end_ids
    assert all(tok.decode([i]).endswith("\n") for i in tok.line_end_ids)
    with pytest.raises(ValueError, match="line-ending"):
        SamplerPolicy(Sampler(model, cache_size=64), tok, SamplingParams(stop_tokens=(tok.newline_id + 1,)),
                      jax.random.key(0), max_len=32)


def test_grpo_batch_places_columns_and_refuses_long_records():
    from cocoda_jax.rl.rollout import TokenRecord
    recs = [TokenRecord((1, 2, 3), (0, 1, 1), (0.0, -0.5, -0.25)), TokenRecord((4, 5), (0, 1), (0.0, -1.0))]
    b = grpo_batch(recs, [1.0, -1.0], 4, pad_id=9)
    np.testing.assert_array_equal(b["tokens"], [[1, 2, 3, 9], [4, 5, 9, 9]])
    np.testing.assert_array_equal(b["loss_mask"], [[0, 1, 1, 0], [0, 1, 0, 0]])
    np.testing.assert_array_equal(b["valid"], [[1, 1, 1, 0], [1, 1, 0, 0]])
    np.testing.assert_allclose(b["old_logp"], [[0, -0.5, -0.25, 0], [0, -1.0, 0, 0]])
    np.testing.assert_allclose(b["advantages"], [1.0, -1.0])
    with pytest.raises(ValueError, match="more than length"):
        grpo_batch(recs, [0.0, 0.0], 2)
    assert bucket_length(65, 64, 512) == 128 and bucket_length(700, 64, 512) == 512 and bucket_length(0, 64, 512) == 64


def test_grpo_iteration_steps_once_per_ppo_epoch(setup, math_library, sandbox):
    """Two PPO epochs take two optimizer steps on the same rollouts; the second epoch sees a ratio
    away from 1 (the sampler's log-probs are the old policy's). The advantages are the registered
    variant the config names (here Dr. GRPO's: centred, not divided by the group's std). The untrained
    planner's rollouts all score alike here (zero advantages, zero gradient), so AdamW's decoupled
    weight decay is what moves the policy in the first epoch: by far more than float noise (the
    sampler's and the learner's log-probs of the same tokens may agree to the last bit)."""
    from cocoda_jax.rl import grpo as G
    from cocoda_jax.rl.update import OptimConfig

    tasks, tok, model = setup
    learner = Learner(model, LearnerConfig(optim=OptimConfig(learning_rate=1e-2, weight_decay=0.1),
                                           grpo=G.GRPOConfig(beta=0.0, advantage="dr_grpo")))
    rc = L.RolloutConfig(max_steps=2, max_len=256, max_new_tokens=8)
    cards = all_cards(math_library, "bare")
    state, metrics, it = L.grpo_iteration(learner, learner.init_state(), tok, tasks[:2], math_library, sandbox,
                                          group_size=2, rc=rc, cards=cards, key=jax.random.key(3), ppo_epochs=2,
                                          mask_uniform_groups=False,
                                          reward_config=RewardConfig(malformed_penalty=0.1))
    assert int(state.step) == 2 and metrics["grpo/step"] == 2
    assert metrics["train_rows"] == 4  # nothing masked, nothing dropped
    assert len(it.trajectories) == 4 and len(it.group_rewards(lambda t, b: b.total)) == 2
    assert abs(metrics["grpo/ratio"] - 1.0) > 1e-5
    totals = np.asarray([b.total for b in it.breakdowns], np.float32)
    dr = np.asarray(G.group_advantages(totals, 2, G.GRPOConfig(normalize_std=False)))
    assert metrics["grpo/advantage_std"] == pytest.approx(float(dr.std()), abs=1e-6)
    with pytest.raises(ValueError, match="ppo_epochs"):
        L.grpo_iteration(learner, state, tok, tasks[:1], math_library, sandbox, group_size=2, rc=rc,
                         cards=cards, key=jax.random.key(0), ppo_epochs=0)


def test_grpo_iteration_with_the_shared_prompt_takes_the_full_batch_step(setup, math_library, sandbox):
    """The loop runs each group's prompt once (``share_prefix``, the default) in the step and in the
    reference forward: the same rollouts give the same loss, metrics and update as with every row's
    prompt run (SGD: params compare gradients). The untrained planner's rollouts score alike, so the
    gradient comes from the KL term, to a reference that differs from the policy."""
    from cocoda_jax.rl import grpo as G
    from cocoda_jax.rl.update import OptimConfig

    tasks, tok, model = setup
    rc = L.RolloutConfig(max_steps=2, max_len=256, max_new_tokens=8, length_multiple=8)
    cards = all_cards(math_library, "bare")
    out = []
    for share in (True, False):
        learner = Learner(model, LearnerConfig(optim=OptimConfig(learning_rate=0.5, optimizer="sgd", clip_norm=None),
                                               grpo=G.GRPOConfig(beta=0.1)))
        ref = jax.tree.map(lambda x: x * 1.05, learner.init_state().params)
        state, metrics, _ = L.grpo_iteration(learner, learner.init_state(), tok, tasks[:2], math_library, sandbox,
                                             group_size=2, rc=rc, cards=cards, key=jax.random.key(5), ref_params=ref,
                                             mask_uniform_groups=False, share_prefix=share,
                                             reward_config=RewardConfig(malformed_penalty=0.1))
        out.append((metrics, jax.device_get(state.params)))
    (shared, p_shared), (full, p_full) = out
    assert shared["shared_prefix_len"] >= 8 and shared["shared_prefix_len"] % 8 == 0
    assert full["shared_prefix_len"] == 0
    assert shared["grpo/grad_norm"] > 1e-4  # a real update to compare, not two zero gradients
    for key in ("grpo/loss", "grpo/kl", "grpo/tokens", "grpo/entropy", "grpo/grad_norm", "reward_mean"):
        assert shared[key] == pytest.approx(full[key], rel=2e-5, abs=1e-7), key
    for x, y in zip(jax.tree.leaves(p_full), jax.tree.leaves(p_shared)):
        np.testing.assert_allclose(y, x, atol=2e-6, rtol=0)


def test_finished_episodes_leave_the_batch_and_the_live_ones_continue_unchanged(setup, math_library):
    """40 episodes, 12 then 3 still running: the sampler's batch shrinks to 16 then 8 rows, and each
    live row's greedy turns and log-probs are what the full batch gives it."""
    from cocoda_jax.models.sampler import Sampler, SamplingParams

    tasks, tok, model = setup
    cards = all_cards(math_library, "bare")
    prompts = [T.render_prompt(t, cards) for t in tasks[:40]]
    params = SamplingParams(max_new_tokens=6, greedy=True, stop_tokens=tok.line_end_ids)
    turns = [list(range(40)), list(range(0, 36, 3)), [3, 18, 33]]

    def play(drop):
        policy = SamplerPolicy(Sampler(model, cache_size=512, pad_id=tok.pad_id), tok, params, jax.random.key(0),
                               max_len=400, drop_finished=drop)
        out, sizes = [], []
        for k, rows in enumerate(turns):
            contexts = [prompts[r] + "".join(f"\nobservation {r} {j}" for j in range(k)) + ("\n" if k else "")
                        for r in rows]
            out.append([(g.tokens, np.asarray(g.log_probs)) for g in policy(contexts, rows)])
            sizes.append(policy.row_turns)
        return out, sizes, policy.records()

    full, full_sizes, full_records = play(False)
    dropped, sizes, records = play(True)
    assert full_sizes == [40, 80, 120] and sizes == [40, 56, 64]  # 40, then 16, then 8 rows decoded
    for a, b in zip(full, dropped):
        assert [t for t, _ in a] == [t for t, _ in b]
        for (_, la), (_, lb) in zip(a, b):
            np.testing.assert_allclose(la, lb, atol=1e-5)
    assert [r.ids for r in full_records] == [r.ids for r in records]
    assert any(len(t) for t, _ in dropped[2])


def test_select_rows_refuses_a_bad_selection(setup):
    from cocoda_jax.models.sampler import Sampler, SamplerError, SamplingParams

    _, tok, model = setup
    sampler = Sampler(model, cache_size=64)
    out = sampler.generate([[3, 4], [5, 6]], SamplingParams(max_new_tokens=2, greedy=True), jax.random.key(0))
    for bad in ([], [2], [-1]):
        with pytest.raises(SamplerError, match="selection"):
            sampler.select_rows(out.state, bad)
    picked = sampler.select_rows(out.state, [1])
    assert picked.history == (out.state.history[1],) and picked.pos.shape == (1,)


def test_grpo_iteration_refills_while_too_few_groups_carry_signal(setup, math_library, sandbox):
    """Dynamic sampling: the untrained planner's groups all score alike (no signal), so the iteration
    asks for refills ``1, 2`` (never more than ``max_refills``), samples them with their own keys and
    returns every sampled group; with ``min_informative_groups=0`` it never asks and samples what it
    did without a refill function."""
    from cocoda_jax.rl import grpo as G

    tasks, tok, model = setup
    learner = Learner(model, LearnerConfig(grpo=G.GRPOConfig(beta=0.0)))
    rc = L.RolloutConfig(max_steps=2, max_len=256, max_new_tokens=8)
    cards = all_cards(math_library, "bare")
    asked = []

    def refill(k):
        asked.append(k)
        return tasks[2 * k:2 * k + 2]

    def run(**kw):
        return L.grpo_iteration(learner, learner.init_state(), tok, tasks[:2], math_library, sandbox, group_size=2,
                                rc=rc, cards=cards, key=jax.random.key(3), **kw)

    _, metrics, it = run(refill=refill, min_informative_groups=1, max_refills=2)
    assert asked == [1, 2] and metrics["refills"] == 2 and metrics["informative_groups"] == 0
    assert [t.task_id for t in it.trajectories] == [str(t.id) for t in tasks[:6] for _ in range(2)]
    assert metrics["uniform_group_share"] == 1.0
    asked.clear()
    _, plain, it0 = run(refill=refill, min_informative_groups=0, max_refills=2)
    _, _, it1 = run()
    assert asked == [] and plain["refills"] == 0
    assert [t.program for t in it0.trajectories] == [t.program for t in it1.trajectories]


def test_a_forced_step_start_is_read_as_given_and_the_planner_writes_the_rest(setup, math_library, sandbox):
    """``forced={(row, turn): text}``: that row's step at that turn starts with ``text`` (in the prompt of the
    turn, with no loss and no log-prob) and the sampled tokens continue it; with host shards the rows keep
    their own forced text."""
    tasks, tok, model = setup
    name = math_library.names()[0]
    kw = dict(sampling=RC.sampling(), max_steps=2, max_len=RC.max_len, cards=all_cards(math_library, "bare"))
    forced = {(1, 0): f"x1 = {name}(", (2, 1): "answer = "}
    for shards in (1, 2):
        trajs, records = sample_rollouts(model, tok, tasks[:3], math_library, sandbox, key=jax.random.key(3),
                                         host_shards=shards, forced=forced, **kw)
        first = trajs[1].steps[0].generation
        assert first.text == f"x1 = {name}(" + tok.decode(first.tokens)
        rec, start = records[1], len(tok.encode(trajs[1].prompt))
        ids = tok.encode(f"x1 = {name}(")
        assert list(rec.ids[start:start + len(ids)]) == ids
        assert not any(rec.loss_mask[start:start + len(ids)]) and not any(rec.old_logp[start:start + len(ids)])
        assert list(rec.ids[start + len(ids):start + len(ids) + len(first.tokens)]) == list(first.tokens)
        assert all(rec.loss_mask[start + len(ids):start + len(ids) + len(first.tokens)])
        if len(trajs[2].steps) > 1:  # the second turn of row 2 starts with the answer step's target
            assert trajs[2].steps[1].generation.text.startswith("answer = ")
        for row in (0, 2):  # rows without a forced first turn write it all themselves
            g = trajs[row].steps[0].generation
            assert g.text == tok.decode(g.tokens)

"""The cheap, deterministic parts of launch/bench_grpo (no TRL, no wall-clock assertions): our
registered GRPO loss equals TRL's documented formula on the settings the bench pairs, the rollout
layout the two peers share, the reward, the result JSON's keys, and that timing our iteration by
phase changes nothing it computes (a tiny HF directory written with torch)."""

import math

import numpy as np
import pytest

from cocoda_jax.rl import grpo as G
from launch.bench import grpo as B


def _synthetic(seed=0, groups=2, group_size=4, t=6):
    rng = np.random.RandomState(seed)
    b = groups * group_size
    logp = rng.uniform(-4.0, -0.5, (b, t)).astype(np.float32)
    old = (logp + rng.normal(0.0, 0.3, (b, t))).astype(np.float32)  # ratios beyond 1 +- eps: the clip acts
    ref = (logp + rng.normal(0.0, 0.2, (b, t))).astype(np.float32)
    rewards = rng.uniform(0.0, 1.0, b).astype(np.float32)
    mask = np.ones((b, t), np.float32)
    for i, n in enumerate(rng.randint(1, t + 1, b)):  # ragged completions
        mask[i, n:] = 0.0
    return logp, old, ref, rewards, mask, group_size


@pytest.mark.parametrize("aggregation,loss_type", [("token_mean", "dapo"), ("token_mean", "bnpo"),
                                                   ("seq_mean", "grpo")])
@pytest.mark.parametrize("beta", [0.0, 0.04])
def test_our_loss_is_trls_formula(aggregation, loss_type, beta):
    logp, old, ref, rewards, mask, g = _synthetic()
    cfg = G.GRPOConfig(epsilon=0.2, beta=beta, aggregation=aggregation, normalize_std=False)
    adv = G.compute_advantages(rewards, g, cfg)
    ours = G.finalize(G.compute_loss(logp, old, ref if beta else None, adv, mask, cfg))["loss"]
    theirs = B.trl_formula_loss(logp, old, ref, rewards, mask, g, beta=beta, epsilon_low=0.2, epsilon_high=0.2,
                                scale_rewards="none", loss_type=loss_type)
    assert float(ours) == pytest.approx(theirs, abs=1e-6)
    assert float(G.finalize(G.compute_loss(logp, old, ref, adv, mask, cfg))["clip_fraction"]) > 0


def test_std_scaled_advantages_differ_by_construction():
    """Why the bench pairs the unscaled variants: TRL's group std is Bessel-corrected."""
    logp, old, ref, rewards, mask, g = _synthetic(seed=1)
    cfg = G.GRPOConfig(epsilon=0.2, beta=0.0, normalize_std=True)
    ours = float(G.finalize(G.compute_loss(logp, old, None, G.compute_advantages(rewards, g, cfg), mask,
                                           cfg))["loss"])
    theirs = B.trl_formula_loss(logp, old, None, rewards, mask, g, beta=0.0, epsilon_low=0.2, epsilon_high=0.2,
                                scale_rewards="group")
    assert abs(ours - theirs) > 1e-4


def test_rollout_columns_layout():
    prompts = [[5, 6, 7], [8, 9, 10]]
    cols = B.rollout_columns(prompts, [[11, B.EOS_ID], [12, 13, 14]], [[-1.0, -2.0], [-3.0, -4.0, -5.0]], 4)
    assert cols["tokens"].tolist() == [[5, 6, 7, 11, 1, 0, 0], [8, 9, 10, 12, 13, 14, 0]]
    assert cols["loss_mask"].tolist() == [[0, 0, 0, 1, 1, 0, 0], [0, 0, 0, 1, 1, 1, 0]]
    assert cols["valid"].tolist() == [[True] * 5 + [False] * 2, [True] * 6 + [False]]
    assert cols["old_logp"][1].tolist() == [0, 0, 0, -3, -4, -5, 0]  # position t scores tokens[t]
    assert cols["completion_ids"].tolist() == [[11, 1, 0, 0], [12, 13, 14, 0]]
    assert cols["completion_old_logp"][0].tolist() == [-1, -2, 0, 0]
    with pytest.raises(ValueError):
        B.rollout_columns(prompts, [[1] * 5, [2]], [[0.0] * 5, [0.0]], 4)


def test_prompts_text_and_reward():
    a = B.make_prompts(3, 5, 64, seed=7)
    assert a == B.make_prompts(3, 5, 64, seed=7) and a != B.make_prompts(3, 5, 64, seed=8)
    assert all(B.FIRST_WORD_ID <= i < 64 for row in a for i in row)
    assert B.ids_to_text([3, 42]) == "t3 t42"
    assert B.reward_from_ids([4, 5, 6, B.EOS_ID]) == pytest.approx(2 / 3)  # special ids are not scored
    assert B.reward_from_ids([B.EOS_ID]) == 0.0 and B.reward_from_ids([]) == 0.0


def test_paired_seconds_leaves_our_interleaved_iterations_out():
    # the peer marks iterations at 0, 10, 21, 33; ours ran 10-14, 21-26 (resumes 14, 26) and 33-33
    marks, resumes = [0.0, 10.0, 21.0, 33.0], [0.0, 14.0, 26.0, 33.0]
    assert B.paired_seconds(marks, resumes, 1, 2) == [7.0, 7.0]
    assert B.paired_seconds(marks, resumes, 0, 1) == [10.0]
    with pytest.raises(ValueError):
        B.paired_seconds(marks, resumes, 1, 3)
    assert B.typical([3.0, 1.0, 100.0]) == 3.0  # a burst of load on one iteration does not decide


def test_summarize_keys_ratios_and_tunix_reason():
    out = B.summarize(0.5, 2.0, "no tunix: because", 128, 1e-7, seed=0)
    assert tuple(out)[:len(B.RESULT_KEYS)] == B.RESULT_KEYS
    assert out["ratio_vs_trl"] == 4.0
    assert out["tunix_s_per_iter"] is None and out["ratio_vs_tunix"] is None
    assert out["tunix_unavailable_reason"] == "no tunix: because" and out["seed"] == 0
    out = B.summarize(0.5, None, 1.0, 128, None)
    assert out["trl_s_per_iter"] is None and out["ratio_vs_trl"] is None
    assert math.isclose(out["ratio_vs_tunix"], 2.0) and "tunix_unavailable_reason" not in out
    out = B.summarize(0.5, 2.0, 1.0, 128, 0.0, ours_beside_trl_s=0.25, ours_beside_tunix_s=1.0)
    assert out["ours_s_per_iter"] == 0.5 and out["ratio_vs_trl"] == 8.0 and out["ratio_vs_tunix"] == 1.0


def test_phase_timing_leaves_the_iteration_unchanged(tmp_path):
    """Timing our iteration by phase (the device waited for at each phase's end) records every phase
    and changes nothing the iteration computes: two bench models from one HF directory, one timed."""
    hf_dir = str(tmp_path / "model")
    B.write_hf_dir(hf_dir, 64, seed=0)
    prompts = B.make_prompts(2, 8, 64, seed=0)
    make = lambda: B.Ours(hf_dir, group_size=2, max_new_tokens=4, beta=0.01, epsilon=0.2,  # noqa: E731
                          learning_rate=1e-3, seed=0)
    plain, timed = make(), make()
    phases: dict = {}
    for it in range(2):
        m_plain, c_plain = plain.iteration(prompts, it)
        m_timed, c_timed = timed.iteration(prompts, it, phases)
        assert m_plain == m_timed
        np.testing.assert_array_equal(c_plain["tokens"], c_timed["tokens"])
        np.testing.assert_array_equal(c_plain["ref_logp"], c_timed["ref_logp"])
    assert set(phases) == set(B.PHASES)
    assert all(len(v) == 2 and min(v) >= 0.0 for v in phases.values())
    summary = B.ours_phase_ms(timed, prompts, 2, 2)
    assert set(summary) == set(B.PHASES) | {"iteration"}
    assert summary["iteration"] >= max(summary[k] for k in B.PHASES)


def test_host_shards_generate_each_slice_of_groups_alone(tmp_path):
    """``--host_shards=2``: shard ``j``'s rows are what one sampler gives its slice of whole groups alone
    with ``fold_in(key, j)``; the iteration is deterministic."""
    import jax

    hf_dir = str(tmp_path / "model")
    B.write_hf_dir(hf_dir, 64, seed=0)
    prompts = B.make_prompts(2, 8, 64, seed=0)
    make = lambda shards: B.Ours(hf_dir, group_size=2, max_new_tokens=4, beta=0.01, epsilon=0.2,  # noqa: E731
                                 learning_rate=1e-3, seed=0, host_shards=shards)
    a, b, one = make(2), make(2), make(1)
    m_a, c_a = a.iteration(prompts, 0)
    m_b, c_b = b.iteration(prompts, 0)
    assert m_a == m_b
    np.testing.assert_array_equal(c_a["tokens"], c_b["tokens"])
    assert len(a.samplers) == 2
    rows = [list(p) for p in prompts for _ in range(2)]
    key = jax.random.fold_in(one.key, 0)
    sampler = one._make_sampler(one.learner.model(one.state), len(rows[0]))  # the same (initial) params
    expected = []
    for j, part in enumerate((rows[:2], rows[2:])):
        expected += sampler.generate(part, one.params, jax.random.fold_in(key, j)).tokens
    got = [list(map(int, r[c_a["prompt_ids"].shape[1]:][c_a["completion_mask"][i] > 0]))
           for i, r in enumerate(c_a["tokens"])]
    assert got == [list(t) for t in expected]
    with pytest.raises(ValueError, match="host_shards"):
        make(0)

"""The graph-aware decoupled advantage (``grpo_gar``): composite credit moves the advantages in reward
units where ``grpo``'s std division cancels it; the loop's uniform-group mask reads the advantages;
top-p reaches the rollout sampler."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cocoda_jax.models import ModelConfig, create_model
from cocoda_jax.models.sampler import SamplingParams, sample_logits
from cocoda_jax.rl import grpo as G
from cocoda_jax.rl import loop as L
from cocoda_jax.rl.learner import Learner, LearnerConfig
from cocoda_jax.rl.update import OptimConfig

pytestmark = pytest.mark.filterwarnings("ignore:Some donated buffers were not usable")

EPS = 1e-6
GAR = G.GRPOConfig(advantage="grpo_gar")
PLAIN = G.GRPOConfig()


def gar(rewards, credit, group_size=4, config=GAR):
    return np.asarray(G.compute_advantages(jnp.asarray(rewards, jnp.float32), group_size, config,
                                           credit=jnp.asarray(credit, jnp.float32)))


def test_composite_credit_changes_the_advantages_where_grpo_cancels_it():
    with_phi, without = [1.4, 1.4, 0.0, 0.0], [1.0, 1.0, 0.0, 0.0]
    # grpo: the shared credit cancels in the std division, both groups give +-1
    np.testing.assert_allclose(G.compute_advantages(jnp.asarray(with_phi), 4, PLAIN),
                               G.compute_advantages(jnp.asarray(without), 4, PLAIN), atol=1e-6)
    a_phi, a_plain = gar(with_phi, [0.4, 0.4, 0, 0]), gar(without, [0.0] * 4)
    s = 0.5 / (0.5 + EPS)
    np.testing.assert_allclose(a_plain, [s, s, -s, -s], atol=1e-6)
    np.testing.assert_allclose(a_phi, [s + 0.2, s + 0.2, -s - 0.2, -s - 0.2], atol=1e-6)
    assert a_phi[0] > a_plain[0] + 0.19  # the composite-using successes are pushed harder


def test_all_successes_with_different_credit_are_ranked_and_not_uniform():
    rewards, credit = [1.4, 1.0, 1.4, 1.0], [0.4, 0.0, 0.4, 0.0]
    adv = gar(rewards, credit)
    # std(res) = 0 (up to the rounding of 1.4 - 0.4): only the centred credit is left
    np.testing.assert_allclose(adv, [0.2, -0.2, 0.2, -0.2], atol=1e-6)
    assert adv[0] > 0 > adv[1]
    totals = np.asarray(rewards, np.float32)
    assert not L.uniform_groups(adv, totals, 4, GAR).any()
    # a flat group (equal results, equal credit) is uniform under both; under grpo the rule is today's
    flat = gar([1.4] * 4, [0.4] * 4)
    assert (flat == 0).all() and L.uniform_groups(flat, np.full(4, 1.4, np.float32), 4, GAR).all()
    assert L.uniform_groups(np.zeros(4), totals, 4, PLAIN).tolist() == [False]
    both = np.r_[np.full(4, 0.3, np.float32), totals]
    assert L.uniform_groups(np.asarray(G.compute_advantages(both, 4, PLAIN)), both, 4, PLAIN).tolist() == [True, False]


def test_grpo_and_dr_grpo_are_unchanged_and_ignore_the_credit():
    rng = np.random.default_rng(0)
    rewards = rng.normal(size=12).astype(np.float32)
    credit = rng.random(12).astype(np.float32)
    g = rewards.reshape(-1, 4)
    want_grpo = ((g - g.mean(1, keepdims=True)) / (g.std(1, keepdims=True) + EPS)).reshape(-1)
    want_dr = (g - g.mean(1, keepdims=True)).reshape(-1)
    dr = G.GRPOConfig(advantage="dr_grpo")
    for cfg, want, fn in ((PLAIN, want_grpo, G.group_advantages), (dr, want_dr, G.dr_grpo_advantages)):
        plain = np.asarray(G.compute_advantages(rewards, 4, cfg))
        np.testing.assert_allclose(plain, want, atol=1e-5)
        np.testing.assert_array_equal(np.asarray(G.compute_advantages(rewards, 4, cfg, credit=credit)), plain)
        np.testing.assert_array_equal(np.asarray(fn(rewards, 4, cfg)), plain)  # bit-identical to the function
        assert not G.advantage_reads_credit(cfg.advantage)
    assert G.advantage_reads_credit("grpo_gar") and G.get_advantage("grpo_gar") is G.gar_advantages
    with pytest.raises(ValueError, match="credit"):
        G.compute_advantages(rewards, 4, GAR)
    with pytest.raises(ValueError, match="groups of 5"):
        G.compute_advantages(rewards, 5, GAR, credit=credit)
    # jit-friendly: the same numbers under jit
    jitted = jax.jit(lambda r, c: G.compute_advantages(r, 4, GAR, credit=c))(rewards, credit)
    np.testing.assert_allclose(jitted, gar(rewards, credit), atol=1e-6)


# rewards on a grid of reward-like values (result 0/1, penalties and credits in steps of 0.1)
_row = st.tuples(st.sampled_from([0.0, 1.0]), st.integers(0, 3), st.integers(0, 6))  # R_res, penalty, Phi
_groups = st.integers(2, 5).flatmap(
    lambda g: st.tuples(st.just(g), st.lists(st.lists(_row, min_size=g, max_size=g), min_size=1, max_size=3)))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_groups)
def test_gar_advantages_sum_to_zero_and_equal_grpo_without_credit(case):
    group_size, groups = case
    rows = [r for grp in groups for r in grp]
    res = np.asarray([r - 0.1 * p for r, p, _ in rows], np.float32)
    credit = np.asarray([0.1 * c * r for r, _, c in rows], np.float32)  # paid on success only
    adv = gar(res + credit, credit, group_size)
    np.testing.assert_allclose(adv.reshape(-1, group_size).sum(axis=1), 0.0, atol=1e-4)
    # without credit: grpo's advantages, except that a flat group is exactly 0 (grpo's mean of equal
    # values may round, leaving float noise over a near-zero std)
    alone = gar(res, np.zeros_like(res), group_size).reshape(-1, group_size)
    plain = np.asarray(G.compute_advantages(res, group_size, PLAIN)).reshape(-1, group_size)
    flat = (res.reshape(-1, group_size) == res.reshape(-1, group_size)[:, :1]).all(axis=1)
    np.testing.assert_allclose(alone[~flat], plain[~flat], atol=1e-6)
    assert (alone[flat] == 0).all()


# ------------------------------------------------------------------------------------------------
# the step


SMALL = ModelConfig(family="qwen3", vocab_size=64, d_model=32, n_layers=1, n_heads=4, n_kv_heads=2, head_dim=8,
                    ffn_dim=64, qk_norm=True, tie_embeddings=True, max_seq_len=64)
SGD = OptimConfig(learning_rate=0.5, optimizer="sgd", clip_norm=None)


def _batch(advantages, seed=0, t=12):
    rng = np.random.default_rng(seed)
    b = len(advantages)
    valid = np.ones((b, t), bool)
    mask = np.zeros((b, t), np.float32)
    mask[:, t // 2:] = 1.0  # a shared prompt, then the action tokens
    tokens = rng.integers(0, SMALL.vocab_size, (b, t)).astype(np.int32)
    old = np.full((b, t), -np.log(SMALL.vocab_size), np.float32)
    return dict(tokens=tokens, loss_mask=mask, valid=valid, old_logp=old,
                advantages=np.asarray(advantages, np.float32))


def test_the_learner_step_differs_when_the_composite_credit_differs():
    """One real GRPO step on the tiny planner, from the same init and batch, with the advantages of
    rewards [1.4, 1.4, 0, 0] (credit 0.4 on the successes) and [1, 1, 0, 0]: under ``grpo`` the two
    updates are the same, under ``grpo_gar`` they differ."""
    model = create_model(SMALL, seed=7)
    credit = np.asarray([0.4, 0.4, 0.0, 0.0], np.float32)
    with_phi, without = np.asarray([1.4, 1.4, 0, 0], np.float32), np.asarray([1.0, 1.0, 0, 0], np.float32)
    params = {}
    for name, cfg in (("grpo", G.GRPOConfig(beta=0.0)), ("grpo_gar", G.GRPOConfig(beta=0.0, advantage="grpo_gar"))):
        learner = Learner(model, LearnerConfig(optim=SGD, grpo=cfg))
        for label, rewards, c in (("phi", with_phi, credit), ("plain", without, np.zeros(4, np.float32))):
            adv = np.asarray(G.compute_advantages(rewards, 4, cfg, credit=c))
            state, metrics = learner.grpo_step(learner.init_state(), _batch(adv))
            assert float(metrics["grad_norm"]) > 0
            params[name, label] = jax.tree.leaves(jax.device_get(state.params))
    def gap(a, b):
        return max(float(np.abs(x - y).max()) for x, y in zip(params[a], params[b]))
    assert gap(("grpo", "phi"), ("grpo", "plain")) < 1e-6
    assert gap(("grpo_gar", "phi"), ("grpo_gar", "plain")) > 1e-4


# ------------------------------------------------------------------------------------------------
# top-p


def test_rollout_config_passes_top_p_to_the_sampler():
    rc = L.RolloutConfig(top_p=0.9, top_k=5, temperature=0.7)
    params = rc.sampling()
    assert isinstance(params, SamplingParams) and params.top_p == 0.9 and params.top_k == 5
    assert params.temperature == 0.7 and not params.greedy
    assert rc.sampling(greedy=True).greedy
    assert L.RolloutConfig().sampling().top_p == 1.0
    for bad in (0.0, -0.1, 1.5):
        with pytest.raises(ValueError, match="top_p"):
            L.RolloutConfig(top_p=bad)


def test_small_top_p_keeps_only_the_top_token():
    logits = jnp.tile(jnp.asarray([[0.0, 2.0, 1.0, 0.5]]), (256, 1))  # token 1 has p ~ 0.57
    key = jax.random.key(0)
    nucleus = sample_logits(key, logits, jnp.float32(1.0), jnp.int32(0), jnp.float32(0.3), jnp.bool_(False))
    assert set(np.asarray(nucleus).tolist()) == {1}
    full = sample_logits(key, logits, jnp.float32(1.0), jnp.int32(0), jnp.float32(1.0), jnp.bool_(False))
    assert len(set(np.asarray(full).tolist())) > 1  # without top-p the others are drawn too

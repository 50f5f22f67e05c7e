"""GRPO math against hand-computed tiny batches, the variant registry, and exact micro-batching
(the learner's ``accumulate_gradients``) on a tiny linear policy."""

import math

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from cocoda_jax.models import token_log_probs
from cocoda_jax.rl import grpo as G
from cocoda_jax.rl.learner import accumulate_gradients

EPS = 1e-6


# ------------------------------------------------------------------------------------------------
# advantages


def test_group_advantages_hand_computed():
    rewards = jnp.array([1.0, 0.0, 0.0, 1.0, 1.6, 1.6, 1.6, 1.6, 0.0, 0.0, 0.0, 2.0])
    adv = G.group_advantages(rewards, 4)
    s = 0.5 / (0.5 + EPS)  # group 1: mean 0.5, population std 0.5
    # group 3: mean 0.5, std sqrt(0.75)
    s3 = 1 / (math.sqrt(0.75) + EPS)
    chex.assert_trees_all_close(adv, jnp.array([s, -s, -s, s, 0, 0, 0, 0, -0.5 * s3, -0.5 * s3, -0.5 * s3, 1.5 * s3]),
                                atol=1e-6)
    dr = G.group_advantages(rewards, 4, G.GRPOConfig(normalize_std=False))
    chex.assert_trees_all_close(dr, jnp.array([0.5, -0.5, -0.5, 0.5, 0, 0, 0, 0, -0.5, -0.5, -0.5, 1.5]), atol=1e-6)
    assert G.get_advantage("grpo") is G.group_advantages
    mean, var = G.group_stats(rewards, 4)
    chex.assert_trees_all_close(mean, jnp.array([0.5, 1.6, 0.5]), atol=1e-6)
    chex.assert_trees_all_close(var, jnp.array([0.25, 0.0, 0.75]), atol=1e-6)
    with pytest.raises(ValueError, match="groups of 5"):
        G.group_advantages(rewards, 5)


# ------------------------------------------------------------------------------------------------
# per-token terms


def test_k3_kl_hand_computed():
    logp = jnp.log(jnp.array([0.5, 0.25, 0.1]))
    ref = jnp.log(jnp.array([0.5, 0.5, 0.05]))
    d = np.log([1.0, 2.0, 0.5])
    chex.assert_trees_all_close(G.k3_kl(logp, ref), jnp.asarray(np.exp(d) - d - 1), atol=1e-6)
    assert float(G.k3_kl(logp, ref)[0]) == 0.0 and bool(jnp.all(G.k3_kl(logp, ref) >= 0))


def test_clipped_surrogate_hand_computed():
    ratio = jnp.array([1.5, 1.5, 0.5, 0.5, 1.1, 1.0])
    adv = jnp.array([1.0, -1.0, -1.0, 1.0, 2.0, -3.0])
    loss, r, active = G.clipped_surrogate(jnp.log(ratio), jnp.zeros(6), adv, 0.2)
    chex.assert_trees_all_close(r, ratio, atol=1e-6)
    chex.assert_trees_all_close(loss, jnp.array([-1.2, 1.5, 0.8, -0.5, -2.2, 3.0]), atol=1e-6)
    assert active.tolist() == [True, False, True, False, False, False]
    high, _, active_h = G.clipped_surrogate(jnp.log(ratio), jnp.zeros(6), adv, 0.2, epsilon_high=0.28)
    assert float(high[0]) == pytest.approx(-1.28) and float(high[2]) == pytest.approx(0.8)
    assert active_h.tolist() == [True, False, True, False, False, False]


def test_token_log_probs_and_exact_entropy():
    logits = jnp.log(jnp.array([[[0.5, 0.25, 0.25], [1 / 3, 1 / 3, 1 / 3]]]))
    lp = token_log_probs(logits, jnp.array([[1, 2]]))
    chex.assert_trees_all_close(lp, jnp.log(jnp.array([[0.25, 1 / 3]])), atol=1e-6)
    s, c = G.full_entropy(logits, jnp.array([[1.0, 1.0]]))
    want = -(0.5 * np.log(0.5) + 0.5 * np.log(0.25)) + np.log(3)
    assert float(s) == pytest.approx(want, abs=1e-5) and float(c) == 2.0


# ------------------------------------------------------------------------------------------------
# the loss


LOGP = jnp.log(jnp.array([[0.5, 0.25, 0.9], [0.2, 0.4, 0.8]]))
OLD = jnp.log(jnp.array([[0.5, 0.5, 0.9], [0.2, 0.2, 0.8]]))     # ratios [[1, .5, 1], [1, 2, 1]]
REF = jnp.log(jnp.array([[0.25, 0.25, 0.9], [0.2, 0.4, 0.4]]))
ADV = jnp.array([1.0, -2.0])
MASK = jnp.array([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]])


def _hand_tokens(beta):
    # surrogate per token: seq 0 (A=1): ratios 1, .5 -> -1, -.5 ; seq 1 (A=-2): ratios 1, 2, 1 -> 2, 4, 2
    surrogate = np.array([[-1.0, -0.5, -0.9], [2.0, 4.0, 2.0]])
    d = np.log(np.array([[0.5, 1.0, 1.0], [1.0, 1.0, 0.5]]))
    return surrogate + beta * (np.exp(d) - d - 1), np.exp(d) - d - 1


@pytest.mark.parametrize("aggregation", G.AGGREGATIONS)
@pytest.mark.parametrize("beta", [0.0, 0.01])
def test_grpo_loss_hand_computed(aggregation, beta):
    cfg = G.GRPOConfig(beta=beta, aggregation=aggregation, max_tokens=4)
    sums = G.grpo_loss(LOGP, OLD, REF if beta else None, ADV, MASK, cfg)
    tok, kl = _hand_tokens(beta)
    m = np.asarray(MASK)
    if aggregation == "token_mean":
        want_sum, want_count = (tok * m).sum(), 5.0
    elif aggregation == "seq_mean":
        want_sum, want_count = (tok[0, :2].sum() / 2 + tok[1].sum() / 3), 2.0
    else:
        want_sum, want_count = (tok * m).sum(), 2 * 4.0
    assert float(sums.loss_sum) == pytest.approx(want_sum, abs=1e-5)
    assert float(sums.loss_count) == want_count
    out = G.finalize(sums)
    assert float(out["loss"]) == pytest.approx(want_sum / want_count, abs=1e-5)
    assert float(out["tokens"]) == 5.0
    assert float(out["kl"]) == pytest.approx((kl * m).sum() / 5 if beta else 0.0, abs=1e-6)  # no ref at beta 0
    assert float(out["clip_fraction"]) == 0.0  # ratio 2 with A < 0 and ratio 0.5 with A > 0 keep their gradient
    assert float(out["entropy"]) == pytest.approx(float(-(LOGP * MASK).sum() / 5), abs=1e-6)
    assert float(out["ratio"]) == pytest.approx((1 + 0.5 + 1 + 2 + 1) / 5, abs=1e-6)


def test_clip_fraction_counts_only_tokens_whose_gradient_is_clipped():
    logp = jnp.log(jnp.array([[2.0, 0.5, 2.0, 0.5]]))
    sums = G.grpo_loss(logp, jnp.zeros((1, 4)), None, jnp.array([1.0]), jnp.ones((1, 4)), G.GRPOConfig(beta=0.0))
    assert float(G.finalize(sums)["clip_fraction"]) == 0.5  # ratio 2 with A > 0, twice
    neg = G.grpo_loss(logp, jnp.zeros((1, 4)), None, jnp.array([-1.0]), jnp.ones((1, 4)), G.GRPOConfig(beta=0.0))
    assert float(G.finalize(neg)["clip_fraction"]) == 0.5  # ratio 0.5 with A < 0, twice


def test_beta_zero_needs_no_reference_and_ignores_it():
    cfg = G.GRPOConfig(beta=0.0)
    without = G.grpo_loss(LOGP, OLD, None, ADV, MASK, cfg)
    with_ref = G.grpo_loss(LOGP, OLD, REF, ADV, MASK, cfg)
    chex.assert_trees_all_close(without._replace(kl_sum=0.0), with_ref._replace(kl_sum=0.0))
    assert float(without.kl_sum) == 0.0 and float(with_ref.kl_sum) > 0  # reported, not penalised
    grads = [jax.grad(lambda lp, r=r: G.grpo_loss(lp, OLD, r, ADV, MASK, cfg).loss_sum)(LOGP) for r in (None, REF)]
    chex.assert_trees_all_close(grads[0], grads[1])
    with pytest.raises(ValueError, match="ref_logp"):
        G.grpo_loss(LOGP, OLD, None, ADV, MASK, G.GRPOConfig(beta=0.01))


def test_on_policy_gradient_is_minus_advantage_over_count():
    """At ratio 1 the clipped objective's gradient w.r.t. logp is -A per loss token / count."""
    def f(logp):
        sums = G.grpo_loss(logp, None, None, ADV, MASK, G.GRPOConfig(beta=0.0))
        return sums.loss_sum / sums.loss_count

    g = jax.grad(f)(LOGP)
    chex.assert_trees_all_close(g, -ADV[:, None] * MASK / 5.0, atol=1e-6)
    sums = G.grpo_loss(LOGP, None, None, ADV, MASK, G.GRPOConfig(beta=0.0))
    assert float(G.finalize(sums)["logp_gap"]) == 0.0 and float(G.finalize(sums)["ratio"]) == 1.0


def test_loss_jits_with_the_config_static():
    cfg = G.GRPOConfig(aggregation="seq_mean", epsilon_high=0.28)
    fn = jax.jit(G.grpo_loss, static_argnames="config")
    chex.assert_trees_all_close(fn(LOGP, OLD, REF, ADV, MASK, config=cfg), G.grpo_loss(LOGP, OLD, REF, ADV, MASK, cfg),
                                atol=1e-6)


def test_sft_loss_and_empty_batches():
    s, c = G.sft_loss(LOGP, MASK)
    assert float(s) == pytest.approx(float(-(LOGP * MASK).sum()), abs=1e-6) and float(c) == 5.0
    empty = G.grpo_loss(LOGP, OLD, None, ADV, jnp.zeros_like(MASK), G.GRPOConfig(beta=0.0, aggregation="seq_mean"))
    out = G.finalize(empty)
    assert float(out["loss"]) == 0.0 and float(out["kl"]) == 0.0 and not math.isnan(float(out["entropy"]))


def test_config_validation():
    for bad in (dict(epsilon=0.0), dict(epsilon=1.0), dict(epsilon_high=0.0), dict(beta=-1.0), dict(aggregation="x"),
                dict(max_tokens=0), dict(std_eps=0.0)):
        with pytest.raises(ValueError):
            G.GRPOConfig(**bad)
    assert G.GRPOConfig().upper_clip == 0.2 and G.GRPOConfig(epsilon_high=0.28).upper_clip == 0.28
    with pytest.raises(ValueError, match="max_tokens"):
        G.aggregate(jnp.ones((1, 5)), jnp.ones((1, 5)), "constant", 4)
    with pytest.raises(ValueError, match="already registered"):
        G.register_loss("grpo")(lambda *a: None)


# ------------------------------------------------------------------------------------------------
# the variant registry


def test_unknown_variant_names_fail_when_the_config_is_built():
    for field in ("advantage", "loss"):
        with pytest.raises(G.UnknownVariantError, match=rf"unknown {field} 'dr_gpro'.*registered: .*'dr_grpo'"):
            G.GRPOConfig(**{field: "dr_gpro"})
    with pytest.raises(G.UnknownVariantError):
        G.get_loss("nope")
    assert issubclass(G.UnknownVariantError, ValueError)


def test_dispatch_runs_the_named_variant():
    rewards = jnp.array([1.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 2.0])
    grpo = G.GRPOConfig(beta=0.01, max_tokens=4)
    dr = G.GRPOConfig(beta=0.01, max_tokens=4, advantage="dr_grpo", loss="dr_grpo")
    chex.assert_trees_all_close(G.compute_advantages(rewards, 4, grpo), G.group_advantages(rewards, 4))
    # Dr. GRPO: centred only (normalize_std=True is overridden by the variant)
    chex.assert_trees_all_close(G.compute_advantages(rewards, 4, dr),
                                jnp.array([0.5, -0.5, -0.5, 0.5, -0.5, -0.5, -0.5, 1.5]), atol=1e-6)
    # ... and the sequence sums over the constant normaliser (aggregation="token_mean" is overridden)
    got = G.compute_loss(LOGP, OLD, REF, ADV, MASK, dr)
    chex.assert_trees_all_close(got, G.grpo_loss(LOGP, OLD, REF, ADV, MASK, G.GRPOConfig(beta=0.01, max_tokens=4,
                                                                                        aggregation="constant")))
    assert float(got.loss_count) == 2 * 4.0
    plain = G.compute_loss(LOGP, OLD, REF, ADV, MASK, grpo)
    assert float(plain.loss_count) == 5.0 and float(plain.loss_sum) == pytest.approx(float(got.loss_sum))


# ------------------------------------------------------------------------------------------------
# micro-batching (the learner's accumulate_gradients): exactly the full-batch gradient


from tests.rl.rl_policy import T_, batch as _batch, objective as _objective, sums_fn as _sums_fn  # noqa: E402


def _split(batch, sizes):
    out, start = [], 0
    for n in sizes:
        out.append(jax.tree.map(lambda a: a[start:start + n], batch))
        start += n
    return out


def _full_grad(fn, params, batch):
    return jax.jit(jax.grad(lambda p: (lambda s: s.loss_sum / s.loss_count)(fn(p, batch))))(params)


_accumulate = jax.jit(accumulate_gradients, static_argnums=(0, 3))


@pytest.mark.parametrize("aggregation", G.AGGREGATIONS)
def test_micro_batch_gradient_equals_full_batch(aggregation):
    """Strided micro-batches with very unequal loss-token counts (one row has none) give the
    full-batch gradient and metrics under every aggregation."""
    cfg = G.GRPOConfig(aggregation=aggregation, max_tokens=T_, epsilon_high=0.28)
    params, batch = _batch()
    fn, obj = _sums_fn(cfg), _objective(cfg)
    want = _full_grad(fn, params, batch)
    assert float(jnp.abs(want["w"]).sum()) > 1e-3  # the gradient is not trivially zero
    full_metrics = G.finalize(fn(params, batch))
    for n in (1, 2, 3, 6):
        got, sums = _accumulate(obj, params, batch, n)
        chex.assert_trees_all_close(got, want, atol=1e-6, rtol=1e-5)
        chex.assert_trees_all_close(G.finalize(sums), full_metrics, atol=1e-6, rtol=1e-5)
    with pytest.raises(ValueError, match="do not split"):
        accumulate_gradients(obj, params, batch, 4)


def test_sharded_micro_batches_on_8_devices_equal_one_device():
    """The batch split over an 8-device data axis (params replicated), two micro-batches: the same
    gradient and sums as on one device."""
    from jax.sharding import NamedSharding, PartitionSpec as P

    assert jax.device_count() == 8, "tests/conftest.py provides 8 fake CPU devices"
    params, data = _batch(5, size=32)
    obj = _objective(G.GRPOConfig(aggregation="token_mean"))
    single, s1 = _accumulate(obj, params, data, 2)
    mesh = jax.make_mesh((8,), ("data",), axis_types=(jax.sharding.AxisType.Auto,))
    sharded = jax.device_put(data, NamedSharding(mesh, P("data")))
    with jax.set_mesh(mesh):
        multi, s8 = _accumulate(obj, jax.device_put(params, NamedSharding(mesh, P())), sharded, 2)
    assert len(sharded["x"].sharding.device_set) == 8
    chex.assert_trees_all_close(multi, single, atol=1e-6)
    chex.assert_trees_all_close(G.finalize(s8), G.finalize(s1), atol=1e-6)


def test_naive_mean_of_micro_batch_means_is_not_the_full_gradient():
    """What the (sum, count) form is for: averaging per-micro-batch means is biased under token_mean."""
    cfg = G.GRPOConfig(aggregation="token_mean")
    params, batch = _batch()
    fn = _sums_fn(cfg)
    want = _full_grad(fn, params, batch)
    first, second = _split(batch, (3, 3))
    naive = jax.tree.map(lambda a, b: (a + b) / 2, _full_grad(fn, params, first), _full_grad(fn, params, second))
    assert float(jnp.abs(naive["w"] - want["w"]).max()) > 1e-4

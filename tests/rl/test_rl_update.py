"""Optimizer, schedules, clipping and PPO epochs on the tiny linear policy (no planner model)."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from cocoda_jax.rl import grpo as G
from cocoda_jax.rl import update as U
from tests.rl.rl_policy import B, batch, sums_fn


def test_schedules():
    warm_cos = U.make_schedule(U.OptimConfig(learning_rate=1.0, schedule="cosine", warmup_steps=10, total_steps=110,
                                             end_fraction=0.1))
    assert float(warm_cos(0)) == 0.0 and float(warm_cos(5)) == pytest.approx(0.5)
    assert float(warm_cos(10)) == pytest.approx(1.0) and float(warm_cos(60)) == pytest.approx(0.55, abs=1e-6)
    assert float(warm_cos(110)) == pytest.approx(0.1, abs=1e-6)
    lin = U.make_schedule(U.OptimConfig(learning_rate=2.0, schedule="linear", total_steps=4))
    assert [float(lin(i)) for i in range(5)] == pytest.approx([2.0, 1.5, 1.0, 0.5, 0.0])
    assert float(U.make_schedule(U.OptimConfig(learning_rate=3.0))(999)) == 3.0


def test_global_norm_clipping_bounds_an_sgd_update():
    params = {"w": jnp.zeros(4)}
    grads = {"w": jnp.array([30.0, 40.0, 0.0, 0.0])}  # norm 50
    opt = U.make_optimizer(U.OptimConfig(learning_rate=0.1, optimizer="sgd", clip_norm=1.0))
    updates, _ = opt.update(grads, opt.init(params), params)
    chex.assert_trees_all_close(updates["w"], jnp.array([-0.06, -0.08, 0.0, 0.0]), atol=1e-7)
    unclipped = U.make_optimizer(U.OptimConfig(learning_rate=0.1, optimizer="sgd", clip_norm=None))
    updates, _ = unclipped.update(grads, unclipped.init(params), params)
    assert float(U.global_norm(updates)) == pytest.approx(5.0)


def test_config_validation():
    for bad in (dict(learning_rate=0.0), dict(optimizer="lion"), dict(schedule="step"), dict(warmup_steps=5, total_steps=4),
                dict(end_fraction=1.5), dict(clip_norm=0.0), dict(weight_decay=-1.0)):
        with pytest.raises(ValueError):
            U.OptimConfig(**bad)
    with pytest.raises(ValueError):
        U.make_update_step(lambda p, b: None, optax.sgd(0.1), 0)


def test_minibatch_indices_cover_the_batch_once_per_epoch():
    idx = U.minibatch_indices(jax.random.PRNGKey(0), 12, 3)
    assert idx.shape == (3, 4) and sorted(np.asarray(idx).ravel().tolist()) == list(range(12))
    with pytest.raises(ValueError):
        U.minibatch_indices(jax.random.PRNGKey(0), 10, 3)


def test_ppo_epochs_improve_the_objective_deterministically():
    params, data = batch(2)
    data = dict(data, adv=jnp.array([1.0, -1.0, 1.0, -1.0, 1.0, -1.0]))
    cfg = G.GRPOConfig(beta=0.01, aggregation="token_mean")
    fn = sums_fn(cfg)
    opt = U.make_optimizer(U.OptimConfig(learning_rate=0.05, clip_norm=1.0))
    step = U.make_update_step(fn, opt, num_micro_batches=1)
    # the "old" policy is the current one: the first step starts on-policy
    logp0 = G.token_logprobs(data["x"] @ params["w"] + params["b"], data["tokens"])
    data = dict(data, old=logp0)
    before = float(G.finalize(fn(params, data))["loss"])
    new, state, history = U.ppo_update(step, params, opt.init(params), data, jax.random.PRNGKey(1), epochs=4,
                                       num_minibatches=2)
    after = float(G.finalize(fn(new, data))["loss"])
    assert len(history) == 8 and after < before - 1e-3
    assert float(history[0]["ratio"]) == pytest.approx(1.0, abs=1e-6)   # on-policy at the first step
    assert float(history[-1]["logp_gap"]) > 0.0                          # and off-policy later
    assert all(float(h["grad_norm"]) > 0 for h in history)
    again, _, _ = U.ppo_update(step, params, opt.init(params), data, jax.random.PRNGKey(1), epochs=4, num_minibatches=2)
    chex.assert_trees_all_equal(new, again)
    assert state is not None and data["x"].shape[0] == B


def test_update_step_micro_batching_matches_one_slice():
    params, data = batch(3)
    fn = sums_fn(G.GRPOConfig(aggregation="seq_mean", beta=0.0))
    opt = U.make_optimizer(U.OptimConfig(learning_rate=0.01, optimizer="sgd", clip_norm=None))
    one, _, m1 = U.make_update_step(fn, opt, 1)(params, opt.init(params), data)
    three, _, m3 = U.make_update_step(fn, opt, 3)(params, opt.init(params), data)
    chex.assert_trees_all_close(one, three, atol=1e-6)
    assert float(m1["loss"]) == pytest.approx(float(m3["loss"]), abs=1e-6)


def test_sharded_step_on_8_devices_equals_one_device():
    """The same update with the batch split over an 8-device data axis (params replicated) as on
    one device: same loss, same new params."""
    from jax.sharding import NamedSharding, PartitionSpec as P

    assert jax.device_count() == 8, "tests/conftest.py provides 8 fake CPU devices"
    params, data = batch(5, size=16)
    fn = sums_fn(G.GRPOConfig(aggregation="token_mean"))
    opt = U.make_optimizer(U.OptimConfig(learning_rate=0.05))
    single, _, m1 = U.make_update_step(fn, opt, 2)(params, opt.init(params), data)
    mesh = jax.make_mesh((8,), ("data",), axis_types=(jax.sharding.AxisType.Auto,))
    sharded_data = jax.device_put(data, NamedSharding(mesh, P("data")))
    replicated = jax.device_put(params, NamedSharding(mesh, P()))
    step = U.make_update_step(fn, opt, 2, donate=True)
    multi, _, m8 = step(replicated, opt.init(replicated), sharded_data)
    assert len(sharded_data["x"].sharding.device_set) == 8
    chex.assert_trees_all_close(multi, single, atol=1e-6)
    assert float(m8["loss"]) == pytest.approx(float(m1["loss"]), abs=1e-6)

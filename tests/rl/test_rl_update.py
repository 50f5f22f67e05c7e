"""Optimizer, schedules and clipping (the update step itself is the learner's: tests/rl/test_rl_learner.py;
exact micro-batching: tests/rl/test_rl_grpo.py; PPO epochs: tests/rl/test_rl_rollout.py)."""

import chex
import jax.numpy as jnp
import pytest

from cocoda_jax.rl import update as U


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

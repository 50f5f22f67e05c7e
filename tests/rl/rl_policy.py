"""A tiny linear "policy" over random features: enough to test exact gradients and updates with no
planner model."""

import jax.numpy as jnp
import numpy as np

from cocoda_jax.models import token_log_probs
from cocoda_jax.rl import grpo as G

B, T_, D, V = 6, 5, 4, 7


def batch(seed=0, size=B):
    """Host-side random data (numpy: no eager compiles), a linear "policy" over features. With the
    default size the loss-token counts are very unequal and one sequence has none."""
    rng = np.random.default_rng(seed)
    x = jnp.asarray(rng.normal(size=(size, T_, D)), jnp.float32)
    tokens = jnp.asarray(rng.integers(0, V, size=(size, T_)), jnp.int32)
    lengths = np.array([5, 1, 3, 0, 4, 2]) if size == B else rng.integers(0, T_ + 1, size=size)
    mask = jnp.asarray(np.arange(T_)[None, :] < lengths[:, None], jnp.float32)
    w_old = rng.normal(size=(D, V)) * 0.5
    w_ref = rng.normal(size=(D, V)) * 0.5
    logits_old = np.einsum("btd,dv->btv", np.asarray(x), w_old)
    logits_ref = np.einsum("btd,dv->btv", np.asarray(x), w_ref)
    old = token_log_probs(jnp.asarray(logits_old, jnp.float32), tokens)
    ref = token_log_probs(jnp.asarray(logits_ref, jnp.float32), tokens)
    adv = G.group_advantages(jnp.asarray(rng.normal(size=(size,)), jnp.float32), 2)
    params = {"w": jnp.asarray(w_old + 0.3 * rng.normal(size=(D, V)), jnp.float32), "b": jnp.zeros((V,))}
    return params, {"x": x, "tokens": tokens, "mask": mask, "old": old, "ref": ref, "adv": adv}


def sums_fn(cfg):
    def fn(params, batch):
        logp = token_log_probs(batch["x"] @ params["w"] + params["b"], batch["tokens"])
        return G.grpo_loss(logp, batch["old"], batch["ref"], batch["adv"], batch["mask"], cfg)
    return fn


def objective(cfg):
    """``sums_fn`` in the form :func:`cocoda_jax.rl.learner.accumulate_gradients` takes."""
    fn = sums_fn(cfg)

    def obj(params, batch):
        sums = fn(params, batch)
        return sums.loss_sum, sums
    return obj

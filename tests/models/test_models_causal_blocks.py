"""`transformer.causal_attention`: attention by query blocks that skip the keys past each block gives
what the whole causal score matrix gives, for the plain forward, the shared-prefix forward, their
gradients, and with the layers scanned and rematerialised."""

import functools

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cocoda_jax.models import create_model
from cocoda_jax.models import transformer as TR
from cocoda_jax.models.config import tiny


@functools.partial(jax.jit, static_argnames="block")
def _whole_and_blocked(q, k, v, mask, block):
    """Both attentions in one program: one compile per example's shapes and block, where op-by-op
    dispatch would compile each block's slices and primitives apart."""
    return TR.attention_core(q, k, v, mask), TR.causal_attention(q, k, v, mask, block=block)


@settings(max_examples=15, deadline=None)
@given(b=st.integers(1, 3), t=st.integers(1, 13), off=st.integers(0, 5), block=st.integers(1, 6),
       seed=st.integers(0, 2**16))
def test_blocks_equal_the_whole_matrix_on_every_row_with_a_visible_key(b, t, off, block, seed):
    r = np.random.default_rng(seed)
    q = jnp.asarray(r.standard_normal((b, t, 4, 3)), jnp.float32)
    k, v = (jnp.asarray(r.standard_normal((b, 2, off + t, 3)), jnp.float32) for _ in range(2))
    valid = r.random((b, off + t)) < 0.8
    causal = np.concatenate([np.ones((t, off), bool), np.tril(np.ones((t, t), bool))], axis=1)
    mask = jnp.asarray(causal[None] & valid[:, None, :])
    seen = np.asarray(mask).any(-1)  # rows with a visible key
    whole, blocked = _whole_and_blocked(q, k, v, mask, block=block)
    chex.assert_shape(blocked, whole.shape)
    np.testing.assert_allclose(np.asarray(blocked)[seen], np.asarray(whole)[seen], rtol=1e-5, atol=1e-5)


@pytest.fixture(scope="module")
def model():
    return create_model(tiny(64).replace(n_layers=2), seed=0)


@pytest.mark.parametrize("scan,remat", [(False, False), (True, True)])
def test_the_model_forward_and_its_gradient_do_not_depend_on_the_block(monkeypatch, model, scan, remat):
    r = np.random.default_rng(0)
    tokens = jnp.asarray(r.integers(3, 64, (4, 21)), jnp.int32)
    valid = jnp.asarray(np.arange(21)[None, :] < np.array([21, 17, 9, 20])[:, None])  # right-padded rows
    prefix = jnp.asarray(r.integers(3, 64, (2, 5)), jnp.int32)

    def score(m, block, with_prefix):
        monkeypatch.setattr(TR, "CAUSAL_BLOCK", block)
        logits = m(tokens, attention_mask=valid, scan=scan, remat=remat, prefix=prefix if with_prefix else None)
        return jnp.sum(jnp.where(valid[..., None], jnp.tanh(logits), 0.0))

    for with_prefix in (False, True):
        whole, g_whole = jax.jit(jax.value_and_grad(lambda m: score(m, 0, with_prefix)))(model)
        # 21 queries by 8: three blocks, the last one ragged
        blocked, g_blocked = jax.jit(jax.value_and_grad(lambda m: score(m, 8, with_prefix)))(model)
        np.testing.assert_allclose(float(blocked), float(whole), rtol=1e-5)
        chex.assert_trees_all_close(jax.tree.leaves(g_blocked), jax.tree.leaves(g_whole), rtol=1e-4, atol=1e-4)

"""`transformer.dense`: the projections as 2-D matrix products give the einsums' values and gradients."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cocoda_jax.models.transformer import dense


def _ours(x, w_in, w_out):
    return jnp.sin(dense(jnp.tanh(dense(x, w_in)), w_out, n_in=2)).sum()


def _einsums(x, w_in, w_out):
    q = jnp.einsum("btd,dhe->bthe", x, w_in)
    return jnp.sin(jnp.einsum("bthe,hed->btd", jnp.tanh(q), w_out)).sum()


@jax.jit
def _values_and_grads(x, w_in, w_out):
    """Both sides' values and gradients in one program: one compile per example's shapes, where
    op-by-op dispatch would compile each of their many primitives apart."""
    both = [jax.value_and_grad(f, argnums=(0, 1, 2))(x, w_in, w_out) for f in (_ours, _einsums)]
    return tuple(both)


@settings(max_examples=20, deadline=None)
@given(b=st.integers(1, 3), t=st.integers(1, 5), d=st.integers(1, 6), h=st.integers(1, 3), e=st.integers(1, 4),
       seed=st.integers(0, 2**16))
def test_dense_equals_the_einsum_in_value_and_gradient(b, t, d, h, e, seed):
    r = np.random.default_rng(seed)
    x = jnp.asarray(r.standard_normal((b, t, d)), jnp.float32)
    w_in = jnp.asarray(r.standard_normal((d, h, e)), jnp.float32)  # q projection: one input axis, two out
    w_out = jnp.asarray(r.standard_normal((h, e, d)), jnp.float32)  # o projection: two input axes
    (value, grads), (want_value, want_grads) = _values_and_grads(x, w_in, w_out)
    chex.assert_trees_all_close(value, want_value, rtol=1e-5, atol=1e-5)
    chex.assert_trees_all_close(grads, want_grads, rtol=1e-4, atol=1e-4)


def test_dense_keeps_the_leading_axes_and_the_accumulation_type():
    x = jnp.ones((2, 3, 4), jnp.bfloat16)
    w = jnp.ones((4, 5), jnp.bfloat16)
    y = dense(x, w, preferred_element_type=jnp.float32)
    chex.assert_shape(y, (2, 3, 5))
    assert y.dtype == jnp.float32
    chex.assert_trees_all_equal(y, jnp.full((2, 3, 5), 4.0, jnp.float32))


def test_dense_refuses_mismatched_input_axes():
    with pytest.raises(ValueError, match="input axes"):
        dense(jnp.ones((2, 3, 4)), jnp.ones((5, 6)))
    with pytest.raises(ValueError, match="input axes"):
        dense(jnp.ones((2, 3, 4)), jnp.ones((4, 3, 6)), n_in=2)

"""The sampler's cache buffers grow with the conversation (``Sampler(grow_step=)``): the same
tokens, log-probs and stop reasons as a whole ``cache_size`` buffer from the start, in a buffer
that is only as long as the next decode can reach."""

import jax
import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from cocoda_jax.models import ModelConfig, create_model
from cocoda_jax.models.sampler import Sampler, SamplerError, SamplingParams, _grow_fn
from cocoda_jax.models.transformer import KVCache

CFG = ModelConfig(family="qwen3", vocab_size=96, d_model=32, n_layers=2, n_heads=4, n_kv_heads=2,
                  head_dim=8, ffn_dim=64, qk_norm=True, tie_embeddings=True, max_seq_len=128)
GREEDY = SamplingParams(max_new_tokens=6, greedy=True, stop_tokens=(3,))


@pytest.fixture(scope="module")
def model():
    return create_model(CFG, seed=3)


def _conversation(sampler, prompts, turns, params=GREEDY):
    """Every turn's result and its cache's (size, end), read before the next turn consumes it:
    ``turns`` is a list of per-row observations (``[]``: the row rests)."""
    results = [sampler.generate(prompts, params, jax.random.key(0))]
    shapes = [(results[0].state.cache.size, int(results[0].state.cache.end))]
    for i, obs in enumerate(turns):
        results.append(sampler.continue_generation(results[-1].state, obs, params, jax.random.key(i + 1)))
        shapes.append((results[-1].state.cache.size, int(results[-1].state.cache.end)))
    return results, shapes


def _assert_same(grown, whole):
    (grown, grown_shapes), (whole, whole_shapes) = grown, whole
    for g, w in zip(grown, whole):
        assert g.tokens == w.tokens
        assert g.stop_reasons == w.stop_reasons
        for a, b in zip(g.log_probs, w.log_probs):
            np.testing.assert_allclose(a, b, atol=1e-5)
        assert g.state.history == w.state.history
    assert [e for _, e in grown_shapes] == [e for _, e in whole_shapes]  # the same slots filled
    np.testing.assert_array_equal(np.asarray(grown[-1].state.pos), np.asarray(whole[-1].state.pos))
    return [s for s, _ in grown_shapes], [s for s, _ in whole_shapes]


@pytest.mark.parametrize("scan", [False, True])
def test_grown_buffer_decodes_like_a_whole_one(model, scan):
    prompts = [[5, 6, 7], [8, 9, 10, 11, 12, 13, 14, 15, 16, 17], [42]]
    turns = [[[1, 2], [4] * 9, [5]], [[], [6, 7], [8] * 14], [[9], [10], [11]]]
    whole = _conversation(Sampler(model, cache_size=72, scan_layers=scan, grow_step=0), prompts, turns)
    grown = _conversation(Sampler(model, cache_size=72, scan_layers=scan, grow_step=16), prompts, turns)
    sizes, whole_sizes = _assert_same(grown, whole)
    assert set(whole_sizes) == {72}
    assert sizes[0] == 32  # a 16-token prompt bucket + 6 new tokens, rounded up to 16s
    assert sizes == sorted(sizes) and all(s % 16 == 0 or s == 72 for s in sizes) and sizes[1] == 48


def test_growth_through_compaction_and_reprefill(model):
    """A conversation that fills the logical cache: compaction and the re-prefill of the history run
    on a grown buffer exactly as on a whole one."""
    prompts = [list(range(3, 29)), [8]]
    turns = [[[], [1] * 25], [[4], [5]], [[6] * 3, [7]]]
    whole = _conversation(Sampler(model, cache_size=56, grow_step=0), prompts, turns)
    grown = _conversation(Sampler(model, cache_size=56, grow_step=8), prompts, turns)
    sizes, _ = _assert_same(grown, whole)
    assert sizes[0] == 40 and sizes[-1] == 56


# Drawn batches have 3 rows (of any lengths, equal or not): the compiled programs are per batch size,
# bucket and buffer size, so a fixed row count and step sizes that round the buffers to few sizes let
# the examples share them; the explicit examples add a lone row at step 1 (a buffer exactly as long as
# the next decode reaches, so nearly every turn compiles anew) and two rows at step 24.
@settings(max_examples=5, deadline=None)  # each draw compiles its own decode programs (~4 s each)
@given(st.lists(st.integers(1, 20), min_size=3, max_size=3), st.lists(st.integers(0, 12), min_size=3, max_size=3),
       st.sampled_from([8, 24]))
@example([20], [12, 0, 5], 1)
@example([3, 17], [0, 12, 7], 24)
def test_property_growth_changes_no_token(model, prompt_lens, obs_lens, step):
    prompts = [[4 + (7 * i + j) % 80 for j in range(n)] for i, n in enumerate(prompt_lens)]
    turns = [[[5 + (j + t) % 60 for j in range(obs_lens[(i + t) % 3])] for i in range(len(prompts))]
             for t in range(2)]
    whole = _conversation(Sampler(model, cache_size=64, grow_step=0), prompts, turns)
    grown = _conversation(Sampler(model, cache_size=64, grow_step=step), prompts, turns)
    _assert_same(grown, whole)


@pytest.mark.parametrize("stacked", [False, True])
def test_grow_appends_empty_slots(stacked):
    cache = KVCache.zeros(CFG, 2, 8, stacked=stacked)
    fill = lambda x: x + 1.0  # noqa: E731
    k = fill(cache.k) if stacked else tuple(fill(x) for x in cache.k)
    cache = cache.replace(k=k, v=k, valid=cache.valid.at[:, :5].set(True), end=cache.end + 5)
    out = _grow_fn(cache, 4)
    assert out.size == 12 and int(out.end) == 5
    np.testing.assert_array_equal(np.asarray(out.valid[:, :8]), np.asarray(cache.valid))
    assert not np.asarray(out.valid[:, 8:]).any()
    for old, new in zip(jax.tree.leaves(cache.k), jax.tree.leaves(out.k)):
        np.testing.assert_array_equal(np.asarray(new)[..., :8, :], np.asarray(old))
        assert not np.asarray(new)[..., 8:, :].any()


def test_negative_grow_step_is_refused(model):
    with pytest.raises(SamplerError, match="grow_step"):
        Sampler(model, cache_size=32, grow_step=-1)

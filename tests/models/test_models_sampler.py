"""The KV-cache sampler against full recomputation with the training forward."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cocoda_jax.models import ModelConfig, create_model, token_log_probs
from cocoda_jax.models.sampler import (CacheFullError, Sampler, SamplerError, SamplingParams,
                                       bucket_size, categorical, feed_bucket, first_argmax, sample_logits)
from cocoda_jax.models.transformer import KVCache

CFG = ModelConfig(family="qwen3", vocab_size=128, d_model=64, n_layers=2, n_heads=4, n_kv_heads=2,
                  head_dim=16, ffn_dim=128, qk_norm=True, tie_embeddings=True, max_seq_len=128)
PROMPTS = [[5, 6, 7], [1, 2, 3, 4, 5, 9, 10], [42]]


@pytest.fixture(scope="module")
def model():
    return create_model(CFG, seed=1)


@pytest.fixture(scope="module")
def forward(model):
    return jax.jit(lambda x: model(x))


FULL_LEN = 64


def _full_log_probs(forward, seq, temperature=1.0):
    """Training-forward log-probs of seq[1:] (at ``temperature``) and logits; right-padded to one length
    (causal, so padding after the sequence changes nothing) to compile once."""
    n = len(seq)
    padded = jnp.asarray([list(seq) + [0] * (FULL_LEN - n)])
    logits = forward(padded)
    lp = token_log_probs(logits[:, :-1], padded[:, 1:], temperature)
    return np.asarray(lp)[0, :n - 1], np.asarray(logits)[0, :n]


def test_bucket_size():
    assert [bucket_size(n) for n in (1, 8, 9, 16, 17, 100)] == [8, 8, 16, 16, 32, 128]
    assert bucket_size(3, minimum=1) == 4


def test_feed_bucket_is_a_half_octave():
    assert [feed_bucket(n) for n in (1, 8, 9, 13, 17, 25, 90, 129, 186, 193, 257)] == \
        [8, 8, 12, 16, 24, 32, 96, 192, 192, 256, 384]
    assert [feed_bucket(n, minimum=1) for n in (1, 2, 3, 5, 7)] == [1, 2, 3, 6, 8]


@given(st.integers(1, 5000), st.sampled_from([1, 2, 8, 16, 64]))
def test_property_feed_bucket_fits_and_wastes_at_most_a_third(n, minimum):
    b = feed_bucket(n, minimum)
    assert max(n, minimum) <= b <= bucket_size(n, minimum)  # a power-of-two cache holds it
    assert 2 * b <= 3 * max(n, minimum)  # at most a third of the bucket is padding
    assert feed_bucket(b, minimum) == b  # a bucket is its own bucket


def test_cached_decode_equals_full_forward(model, forward):
    ids = jax.random.randint(jax.random.key(2), (1, 12), 0, CFG.vocab_size)
    full = forward(jnp.pad(ids, ((0, 0), (0, FULL_LEN - 12))))[:, :12]  # causal: padding after is inert

    step = jax.jit(lambda ids, pos, mask, cache: model.decode(ids, pos, mask, cache))
    cache = KVCache.zeros(CFG, 1, 32)
    pos = jnp.broadcast_to(jnp.arange(12), (1, 12))
    mask = jnp.ones((1, 12), bool)
    logits, cache = step(ids[:, :5], pos[:, :5], mask[:, :5], cache)  # prefill 5
    chunks = [logits]
    for t in range(5, 12):  # then one token at a time (one more compile)
        lg, cache = step(ids[:, t:t + 1], pos[:, t:t + 1], mask[:, t:t + 1], cache)
        chunks.append(lg)
    cached = jnp.concatenate(chunks, axis=1)
    chex.assert_trees_all_close(cached, full, atol=1e-5)
    assert int(cache.end) == 12


def test_greedy_deterministic_and_equals_recomputation(model, forward):
    s = Sampler(model, cache_size=64)
    p = SamplingParams(max_new_tokens=12, greedy=True)
    r1 = s.generate(PROMPTS, p, jax.random.key(0))
    r2 = s.generate(PROMPTS, p, jax.random.key(99))  # the key does not matter for greedy
    assert r1.tokens == r2.tokens
    for prompt, gen, lp in zip(PROMPTS, r1.tokens, r1.log_probs):
        assert len(gen) == 12
        ref_lp, logits = _full_log_probs(forward, prompt + gen)
        np.testing.assert_array_equal(np.argmax(logits[len(prompt) - 1:-1], -1), gen)
        np.testing.assert_allclose(lp, ref_lp[len(prompt) - 1:], atol=2e-5)
        chex.assert_type(lp, np.float32)


@pytest.mark.parametrize("greedy", [False, True])
def test_sampled_log_probs_equal_training_forward(model, forward, greedy):
    """The sampler's log-probs are the training forward's at the sampling temperature, before the top-k /
    top-p truncation (greedy: temperature 1)."""
    s = Sampler(model, cache_size=64)
    p = SamplingParams(max_new_tokens=10, temperature=1.3, top_k=20, top_p=0.9, greedy=greedy)
    r = s.generate(PROMPTS, p, jax.random.key(3))
    for prompt, gen, lp in zip(PROMPTS, r.tokens, r.log_probs):
        ref_lp, _ = _full_log_probs(forward, prompt + gen, 1.0 if greedy else 1.3)
        np.testing.assert_allclose(lp, ref_lp[len(prompt) - 1:], atol=2e-5)


def test_deterministic_per_key(model):
    s = Sampler(model, cache_size=64)
    p = SamplingParams(max_new_tokens=10, temperature=2.0)
    a = s.generate(PROMPTS, p, jax.random.key(7)).tokens
    b = s.generate(PROMPTS, p, jax.random.key(7)).tokens
    c = s.generate(PROMPTS, p, jax.random.key(8)).tokens
    assert a == b
    assert a != c


def test_one_compile_per_bucket(model):
    s = Sampler(model, cache_size=64)
    key = jax.random.key(0)
    a0, g0 = s._append._cache_size(), s._generate._cache_size()
    for n in (1, 3, 8):  # all bucket 8 (batch of 5 rows: shapes no other test uses)
        s.generate([[4] * n] * 5, SamplingParams(max_new_tokens=3, greedy=True), key)
    for temp, k in ((0.5, 3), (1.5, 0)):  # sampling knobs are traced: no recompile
        s.generate([[4] * 5, [5] * 2] * 2 + [[6]], SamplingParams(max_new_tokens=3, temperature=temp, top_k=k),
                   key)
    assert s._append._cache_size() - a0 == 1
    assert s._generate._cache_size() - g0 == 1
    s.generate([[4] * 9] * 4 + [[5] * 16], SamplingParams(max_new_tokens=3, greedy=True), key)  # bucket 16
    assert s._append._cache_size() - a0 == 2
    assert s._generate._cache_size() - g0 == 1


def test_stop_tokens(model):
    s = Sampler(model, cache_size=64)
    greedy = s.generate(PROMPTS, SamplingParams(max_new_tokens=8, greedy=True), jax.random.key(0))
    stop = greedy.tokens[1][2]
    r = s.generate(PROMPTS, SamplingParams(max_new_tokens=8, greedy=True, stop_tokens=(stop,)),
                   jax.random.key(0))
    first = greedy.tokens[1].index(stop)
    assert r.tokens[1] == greedy.tokens[1][:first + 1]
    assert r.stop_reasons[1] == "stop_token"
    for g, t, reason in zip(greedy.tokens, r.tokens, r.stop_reasons):
        if stop not in g:
            assert t == g and reason == "length"


def _detok(ids):
    return " ".join(f"t{i}" for i in ids)


def test_stop_strings_and_rollback_keeps_cache_consistent(model, forward):
    s = Sampler(model, cache_size=64, tokenizer=_detok)
    greedy = s.generate(PROMPTS, SamplingParams(max_new_tokens=8, greedy=True), jax.random.key(0))
    target = greedy.tokens[0][:3]
    stop_string = _detok(target)
    p = SamplingParams(max_new_tokens=8, greedy=True, stop_strings=(stop_string,))
    r = s.generate(PROMPTS, p, jax.random.key(0))
    assert r.tokens[0] == target and r.stop_reasons[0] == "stop_string"
    assert int(r.state.pos[0]) == len(PROMPTS[0]) + 3
    # the cut-off tokens are gone from the cache: continuing matches full recomputation
    r2 = s.continue_generation(r.state, [[11, 12], [13], [14, 15, 16]],
                               SamplingParams(max_new_tokens=5, greedy=True), jax.random.key(1))
    for hist, gen, lp in zip(r2.state.history, r2.tokens, r2.log_probs):
        ref_lp, _ = _full_log_probs(forward, hist)
        np.testing.assert_allclose(lp, ref_lp[len(hist) - 1 - len(gen):], atol=2e-5)


def test_stop_strings_need_tokenizer(model):
    s = Sampler(model, cache_size=64)
    with pytest.raises(SamplerError, match="tokenizer"):
        s.generate(PROMPTS, SamplingParams(max_new_tokens=2, stop_strings=("x",)), jax.random.key(0))


def test_multi_turn_continues_without_recomputing_prefix(model, forward):
    s = Sampler(model, cache_size=64)
    p = SamplingParams(max_new_tokens=6, temperature=1.0, top_p=0.95)
    r1 = s.generate(PROMPTS, p, jax.random.key(4))
    fed = s.prefill_tokens
    obs = [[20, 21, 22], [23], []]  # row 2 is finished: no observation
    r2 = s.continue_generation(r1.state, obs, p, jax.random.key(5))
    assert s.prefill_tokens - fed == 8 * 3  # only the observation bucket was fed
    assert r2.tokens[2] == [] and r2.stop_reasons[2] == "done"
    for prompt, g1, o, g2, lp in zip(PROMPTS, r1.tokens, obs, r2.tokens, r2.log_probs):
        if not o:
            continue
        hist = prompt + g1 + o + g2
        ref_lp, _ = _full_log_probs(forward, hist)
        np.testing.assert_allclose(lp, ref_lp[len(hist) - 1 - len(g2):], atol=2e-5)
    # a third turn still matches
    r3 = s.continue_generation(r2.state, [[30], [31, 32], [33]], p, jax.random.key(6))
    for hist, gen, lp in zip(r3.state.history, r3.tokens, r3.log_probs):
        ref_lp, _ = _full_log_probs(forward, hist)
        np.testing.assert_allclose(lp, ref_lp[len(hist) - 1 - len(gen):], atol=2e-5)


def test_full_cache_reprefills_then_raises(model, forward):
    s = Sampler(model, cache_size=48)
    p = SamplingParams(max_new_tokens=12, greedy=True)
    r1 = s.generate([[5, 6, 7], [8]], p, jax.random.key(0))  # 8 + 12 slots used
    fed = s.prefill_tokens
    r2 = s.continue_generation(r1.state, [[1] * 17, [2]], p, jax.random.key(1))  # +24: no room
    assert s.prefill_tokens - fed == 2 * 24  # compacted first (end 15), then the 24-token bucket fed
    assert int(r2.state.cache.end) == 32 + 12
    for hist, gen, lp in zip(r2.state.history, r2.tokens, r2.log_probs):
        ref_lp, _ = _full_log_probs(forward, hist)
        np.testing.assert_allclose(lp, ref_lp[len(hist) - 1 - len(gen):], atol=2e-5)
    with pytest.raises(CacheFullError):
        s.continue_generation(r2.state, [[3] * 20, [3]], p, jax.random.key(2))  # 64-token history
    with pytest.raises(CacheFullError):
        s.generate([[1] * 49], p, jax.random.key(0))  # a 64-token bucket


def test_sample_logits_truncation():
    logits = jnp.log(jnp.asarray([[0.5, 0.3, 0.15, 0.05]] * 2000))
    keys = jax.random.key(0)
    fn = jax.jit(sample_logits)  # every knob is traced: one compile for all draws

    def draw(**kw):
        kw = dict(dict(temperature=1.0, top_k=0, top_p=1.0, greedy=False), **kw)
        return np.asarray(fn(keys, logits, *kw.values()))
    assert set(draw(top_k=2)) == {0, 1}
    assert set(draw(top_p=0.7)) == {0, 1}      # 0.5 < 0.7, 0.5 + 0.3 >= 0.7
    assert set(draw(top_p=0.4)) == {0}
    assert set(draw(greedy=True)) == {0}
    assert set(draw()) == {0, 1, 2, 3}
    freq = np.bincount(draw(), minlength=4) / 2000
    np.testing.assert_allclose(freq, [0.5, 0.3, 0.15, 0.05], atol=0.04)


def test_bad_params():
    with pytest.raises(SamplerError):
        SamplingParams(top_p=0.0)
    with pytest.raises(SamplerError):
        SamplingParams(temperature=0.0)


def test_full_cache_compacts_before_it_reprefills(model, forward):
    """No room for the next turn: the holes are dropped (KVCache.compact), nothing is fed again,
    and the conversation continues exactly as a full forward over its tokens scores it."""
    s = Sampler(model, cache_size=48)
    p = SamplingParams(max_new_tokens=4, greedy=True)
    r1 = s.generate([[5, 6, 7], [8]], p, jax.random.key(0))                     # end 8 + 4
    r2 = s.continue_generation(r1.state, [[1] * 17, [2]], p, jax.random.key(1))  # end 36 + 4
    fed = s.prefill_tokens
    r3 = s.continue_generation(r2.state, [[3], []], p, jax.random.key(2))  # 40 + 8 + 4 > 48: compact
    assert s.prefill_tokens - fed == 2 * 8 and r3.tokens[1] == []  # only the observation bucket was fed
    assert int(r3.state.cache.end) == 28 + 8 + 4  # the longest row (7 + 17 + 4) heads the cache
    r4 = s.continue_generation(r3.state, [[4], [5]], p, jax.random.key(3))
    for hist, gen, lp in zip(r4.state.history, r4.tokens, r4.log_probs):
        assert len(gen) == 4
        ref_lp, _ = _full_log_probs(forward, hist)
        np.testing.assert_allclose(lp, ref_lp[len(hist) - 1 - len(gen):], atol=2e-5)


def test_reprefill_keeps_resting_rows_continuable(model, forward):
    """When compaction is not enough (the longest row plus the observation bucket overflow) the
    history is re-prefilled; a row with no observation then (it rests) is re-prefilled with its
    whole history, so a later turn that fits in the cache continues it correctly."""
    s = Sampler(model, cache_size=56)
    p = SamplingParams(max_new_tokens=4, greedy=True)
    r1 = s.generate([list(range(3, 29)), [8]], p, jax.random.key(0))            # rows 30 and 5
    fed = s.prefill_tokens
    r2 = s.continue_generation(r1.state, [[], [1] * 25], p, jax.random.key(1))  # 30 + 32 + 1 > 56
    assert s.prefill_tokens - fed == 2 * 32 and r2.tokens[0] == []  # both 30-token histories
    fed = s.prefill_tokens
    r3 = s.continue_generation(r2.state, [[4], [5]], p, jax.random.key(3))  # fits: no re-prefill
    assert s.prefill_tokens - fed == 2 * 8
    for hist, gen, lp in zip(r3.state.history, r3.tokens, r3.log_probs):
        assert len(gen) == 4
        ref_lp, _ = _full_log_probs(forward, hist)
        np.testing.assert_allclose(lp, ref_lp[len(hist) - 1 - len(gen):], atol=2e-5)


@pytest.mark.parametrize("stacked", [False, True])
def test_kv_cache_compact_moves_valid_slots_to_the_front_in_order(stacked):
    cfg = CFG.replace(n_layers=2)
    cache = KVCache.zeros(cfg, 3, 8, stacked=stacked)
    valid = np.array([[0, 1, 1, 0, 1, 0, 0, 0], [1, 1, 1, 1, 1, 1, 1, 1], [0, 0, 0, 0, 0, 0, 0, 0]], bool)
    shape = cache.k.shape if stacked else cache.k[0].shape
    vals = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    k = jnp.asarray(vals) if stacked else tuple(jnp.asarray(vals + i) for i in range(2))
    cache = cache.replace(k=k, v=k, valid=jnp.asarray(valid), end=jnp.int32(6))
    out = cache.compact()
    assert int(out.end) == 8
    np.testing.assert_array_equal(np.asarray(out.valid), np.arange(8)[None] < np.array([3, 8, 0])[:, None])
    got = np.asarray(out.k) if stacked else np.asarray(out.k[1])
    ref = vals if stacked else vals + 1
    slot = 3 if stacked else 2
    first = np.take(np.take(got, 0, axis=slot - 2), [0, 1, 2], axis=slot - 1)  # row 0's compacted slots
    want = np.take(np.take(ref, 0, axis=slot - 2), [1, 2, 4], axis=slot - 1)
    np.testing.assert_array_equal(first, want)
    np.testing.assert_array_equal(np.take(got, 1, axis=slot - 2), np.take(ref, 1, axis=slot - 2))  # full row


def test_bf16_model_samples_with_fp32_log_probs():
    cfg = CFG.replace(dtype="bfloat16", param_dtype="bfloat16")
    model = create_model(cfg, seed=1)
    s = Sampler(model, cache_size=32)
    r = s.generate(PROMPTS, SamplingParams(max_new_tokens=4, greedy=True), jax.random.key(0))
    assert s.params["embed"][...].dtype == jnp.bfloat16
    forward = jax.jit(lambda x: model(x))
    for prompt, gen, lp in zip(PROMPTS, r.tokens, r.log_probs):
        assert lp.dtype == np.float32 and len(gen) == 4
        ref, _ = _full_log_probs(forward, prompt + gen)
        np.testing.assert_allclose(lp, ref[len(prompt) - 1:], atol=0.05)  # bf16 cache vs bf16 forward
    chex.assert_type(forward(jnp.zeros((1, FULL_LEN), jnp.int32)), jnp.float32)


# ------------------------------------------------------------------ stacked layers, scanned or unrolled
def test_the_layers_are_stored_stacked_and_initialised_as_separate_layers(model):
    """One Block whose weights carry a leading layer axis ("layers"), each layer's slice the values a
    separately built layer gets from the same key stream (so stacking changed no initial weight)."""
    from flax import nnx

    from cocoda_jax.models.transformer import Block, layer_state

    q = model.layers.attn.q_proj
    assert q[...].shape == (CFG.n_layers, CFG.d_model, CFG.n_heads, CFG.head_dim)
    assert q.get_metadata()["logical_axes"] == ("layers", "embed", "heads", "head_dim")
    rngs = nnx.Rngs(1)
    rngs.params()  # the embedding's draw comes first
    _, stacked = nnx.split(model.layers)
    for i in range(CFG.n_layers):
        alone = nnx.state(Block(CFG, rngs=rngs))
        # (create_model initialises under jit, this layer eagerly: equal up to float rounding)
        chex.assert_trees_all_close(nnx.to_pure_dict(layer_state(stacked, i)), nnx.to_pure_dict(alone),
                                    atol=1e-7, rtol=1e-6)


@pytest.mark.parametrize("remat", [False, True])
def test_scanned_layers_compute_the_unrolled_forward(model, remat):
    ids = jax.random.randint(jax.random.key(4), (2, 10), 0, CFG.vocab_size)
    unrolled = jax.jit(lambda x: model(x, remat=remat))(ids)
    scanned = jax.jit(lambda x: model(x, remat=remat, scan=True))(ids)
    chex.assert_trees_all_close(scanned, unrolled, atol=1e-5, rtol=1e-5)


def test_scanned_decode_samples_what_the_unrolled_decode_samples(model):
    """Prefill, decode and a continuation with the layers as one ``lax.scan`` carrying the whole
    stacked cache: the same tokens, log-probs and cache as the unrolled layers."""
    p = SamplingParams(max_new_tokens=6, temperature=1.0)
    runs = {}
    for scan in (False, True):
        s = Sampler(model, cache_size=64, scan_layers=scan)
        first = s.generate(PROMPTS, p, jax.random.key(5))
        more = s.continue_generation(first.state, [[3, 4], [], [7]], p, jax.random.key(6))
        runs[scan] = (first, more)
    for a, b in zip(runs[False], runs[True]):
        assert a.tokens == b.tokens
        for x, y in zip(a.log_probs, b.log_probs):
            np.testing.assert_allclose(x, y, atol=1e-5)
    assert runs[True][1].state.cache.stacked and not runs[False][1].state.cache.stacked
    chex.assert_trees_all_close(runs[True][1].state.cache.k, jnp.stack(runs[False][1].state.cache.k), atol=1e-5)


def test_the_unrolled_decode_reads_a_stacked_cache_as_it_reads_per_layer_buffers(model):
    """``decode`` without scan accepts either cache layout (a cache made for a scanned sampler stays
    usable); a scanned decode refuses per-layer buffers with a clear error."""
    ids = jax.random.randint(jax.random.key(8), (2, 6), 0, CFG.vocab_size)
    pos = jnp.broadcast_to(jnp.arange(6), (2, 6))
    mask = jnp.ones((2, 6), bool)
    out = {}
    for stacked in (False, True):
        logits, cache = model.decode(ids, pos, mask, KVCache.zeros(CFG, 2, 16, stacked=stacked))
        out[stacked] = (logits, jnp.stack(cache.k) if not stacked else cache.k)
    chex.assert_trees_all_close(out[True], out[False], atol=1e-6)
    with pytest.raises(ValueError, match="stacked KVCache"):
        model.decode(ids, pos, mask, KVCache.zeros(CFG, 2, 16), scan=True)


@settings(max_examples=60, deadline=None)
@given(rows=st.lists(st.lists(st.sampled_from([-np.inf, -2.0, 0.0, 0.5, 3.0, 3.0]), min_size=1, max_size=9),
                     min_size=1, max_size=4).filter(lambda r: len({len(x) for x in r}) == 1))
def test_first_argmax_is_argmax_with_its_tie_rule(rows):
    """Ties (and all -inf rows) go to the first index, as ``jnp.argmax``: the sampler's greedy and
    Gumbel draws are what they were with it."""
    x = jnp.asarray(rows, jnp.float32)
    np.testing.assert_array_equal(np.asarray(first_argmax(x)), np.asarray(jnp.argmax(x, axis=-1)))


def test_categorical_draws_jax_random_categoricals_tokens_bit_for_bit():
    logits = jax.random.normal(jax.random.key(1), (6, 97)) * 3.0
    logits = logits.at[0, 5:].set(-jnp.inf)  # a row with few live entries
    for i in range(20):
        key = jax.random.key(i)
        np.testing.assert_array_equal(np.asarray(categorical(key, logits)),
                                      np.asarray(jax.random.categorical(key, logits, axis=-1)))


def test_a_decode_given_the_sliced_layer_states_computes_what_it_slices_itself(model):
    """The sampler's loop slices each layer's weights out of the stacked state once (``layers=``);
    the logits and cache are exactly those of a decode that slices them in place; wrong use is a
    typed error."""
    ids = jax.random.randint(jax.random.key(9), (2, 5), 0, CFG.vocab_size)
    pos = jnp.broadcast_to(jnp.arange(5), (2, 5))
    mask = jnp.ones((2, 5), bool)
    plain = jax.jit(lambda c: model.decode(ids, pos, mask, c))(KVCache.zeros(CFG, 2, 16))
    sliced = jax.jit(lambda c: model.decode(ids, pos, mask, c, layers=model.layer_states()))(KVCache.zeros(CFG, 2, 16))
    chex.assert_trees_all_equal(sliced, plain)
    with pytest.raises(ValueError, match="unrolled decode"):
        model.decode(ids, pos, mask, KVCache.zeros(CFG, 2, 16), layers=model.layer_states()[:1])
    with pytest.raises(ValueError, match="unrolled decode"):
        model.decode(ids, pos, mask, KVCache.zeros(CFG, 2, 16, stacked=True), scan=True, layers=model.layer_states())


def test_repeated_prompts_are_prefilled_once_and_sample_what_separate_prefills_sample(model):
    """GRPO's groups: a batch repeating each prompt G times prefills the distinct prompts only, and
    generating and continuing from that shared prefill samples the tokens (and log-probs) that one
    prefill per row samples."""
    groups = [[5, 6, 7, 8, 9], [11, 12], [40, 41, 42, 43, 44, 45, 46, 47, 48]]
    rows = [g for g in groups for _ in range(4)]
    params = SamplingParams(max_new_tokens=6, temperature=1.0, stop_tokens=(3,))
    out = {}
    for share in (True, False):
        s = Sampler(model, cache_size=48, share_prompts=share)
        first = s.generate(rows, params, jax.random.key(5))
        fed = s.prefill_tokens
        obs = [[20 + i] if i % 2 else [] for i in range(len(rows))]
        second = s.continue_generation(first.state, obs, params, jax.random.key(6))
        out[share] = (first, second, fed)
    (a1, a2, fed_shared), (b1, b2, fed_each) = out[True], out[False]
    assert fed_shared == 3 * 12 and fed_each == 12 * 12  # one 12-token bucket per distinct prompt / per row
    assert a1.tokens == b1.tokens and a2.tokens == b2.tokens
    assert len({tuple(t) for t in a1.tokens[:4]}) > 1  # the group's rows still draw their own tokens
    for x, y in zip(a1.log_probs + a2.log_probs, b1.log_probs + b2.log_probs):
        np.testing.assert_allclose(x, y, atol=1e-5)
    np.testing.assert_array_equal(np.asarray(a2.state.pos), np.asarray(b2.state.pos))

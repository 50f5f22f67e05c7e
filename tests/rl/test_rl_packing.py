"""Packed SFT rows: several demonstrations a row, attending only within their own segment, give the
logits, the loss and the gradient of the same demonstrations one a row."""

import chex
import hypothesis.strategies as st
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings

from cocoda_jax.models import ModelConfig, create_model, make_mesh
from cocoda_jax.models.transformer import segment_positions
from cocoda_jax.rl import grpo as G
from cocoda_jax.rl import trajectory as tr
from cocoda_jax.rl.learner import BatchError, Learner, LearnerConfig
from cocoda_jax.rl.loop import RolloutConfig, sft_batch, sft_phase
from cocoda_jax.rl.update import OptimConfig

pytestmark = pytest.mark.filterwarnings("ignore:Some donated buffers were not usable")

SMALL = ModelConfig(family="qwen3", vocab_size=64, d_model=32, n_layers=2, n_heads=4, n_kv_heads=2, head_dim=8,
                    ffn_dim=64, qk_norm=True, tie_embeddings=True, max_seq_len=64)
SGD = OptimConfig(learning_rate=0.5, optimizer="sgd", clip_norm=None)


@pytest.fixture(scope="module")
def model():
    return create_model(SMALL, seed=3)


def _episodes(lengths, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for n in lengths:
        mask = (rng.random(n) < 0.5).astype(int)
        out.append(tr.TokenizedEpisode(tuple(int(i) for i in rng.integers(1, SMALL.vocab_size, n)),
                                       tuple(int(m) for m in mask)))
    return out


def test_pack_episodes_places_every_episode_once_whole_and_masks_its_first_token():
    eps = _episodes([7, 3, 5, 2, 6])
    ids, mask, valid, seg = tr.pack_episodes(eps, 10, pad_id=0, row_multiple=4)
    chex.assert_shape([ids, mask, valid, seg], (4, 10))  # first-fit decreasing: [7,3] [6,2] [5] -> 3, rounded to 4
    found = []
    for r in range(ids.shape[0]):
        for s in range(1, seg[r].max() + 1):
            cols = np.flatnonzero(seg[r] == s)
            assert (np.diff(cols) == 1).all()  # contiguous
            match = [i for i, e in enumerate(eps) if tuple(ids[r, cols]) == e.ids]
            assert len(match) == 1
            e = eps[match[0]]
            assert mask[r, cols[0]] == 0 and tuple(mask[r, cols[1:]].astype(int)) == e.loss_mask[1:]
            found.append(match[0])
    assert sorted(found) == list(range(len(eps)))
    assert not valid[3].any() and (valid == (seg > 0)).all()
    assert int(valid.sum()) == sum(len(e) for e in eps)


def test_pack_episodes_refuses_an_episode_longer_than_a_row():
    with pytest.raises(ValueError, match="more than length"):
        tr.pack_episodes(_episodes([5, 11]), 10)
    with pytest.raises(ValueError, match=">= 1"):
        tr.pack_episodes(_episodes([5]), 10, row_multiple=0)


def test_segment_positions_restart_at_each_segment():
    seg = jnp.asarray([[1, 1, 1, 2, 2, 0, 0], [1, 2, 2, 2, 3, 3, 3]])
    chex.assert_trees_all_equal(segment_positions(seg),
                                jnp.asarray([[0, 1, 2, 0, 1, 0, 1], [0, 0, 1, 2, 0, 1, 2]]))


@pytest.fixture(scope="module")
def forwards():
    """Jitted forwards at fixed shapes (5 rows of 16: every example of the property fits), one
    compile each: packed rows with segments, and one episode a row, right-padded."""
    from flax import nnx

    packed = nnx.jit(lambda m, ids, valid, seg: m(ids, attention_mask=valid, segment_ids=seg))
    alone = nnx.jit(lambda m, ids, valid: m(ids, attention_mask=valid))
    return packed, alone


@settings(max_examples=8, deadline=None)
@given(st.lists(st.integers(1, 12), min_size=1, max_size=5))
def test_packed_logits_equal_each_episode_alone(model, forwards, lengths):
    eps = _episodes(lengths, seed=sum(lengths))
    ids, _, valid, seg = tr.pack_episodes(eps, 16, row_multiple=5)
    packed = forwards[0](model, jnp.asarray(ids[:5]), jnp.asarray(valid[:5]), jnp.asarray(seg[:5]))
    one_ids, _, one_valid = tr.pad_episodes(eps + _episodes([1] * (5 - len(eps))), 16)
    alone = forwards[1](model, jnp.asarray(one_ids), jnp.asarray(one_valid))
    seen = 0
    for r in range(ids.shape[0]):
        for s in range(1, seg[r].max() + 1):
            cols = np.flatnonzero(seg[r] == s)
            i = next(i for i, e in enumerate(eps) if e.ids == tuple(ids[r, cols]))
            chex.assert_trees_all_close(packed[r, cols], alone[i, :len(cols)], atol=2e-5, rtol=2e-5)
            seen += 1
    assert seen == len(eps)


@pytest.mark.parametrize("num_micro_batches", [1, 2])
def test_a_packed_sft_step_is_the_padded_step(model, num_micro_batches):
    eps = _episodes([9, 4, 12, 3, 7, 5, 2, 10], seed=1)
    padded = dict(zip(("tokens", "loss_mask", "valid"), tr.pad_episodes(eps, 16)))
    packed = dict(zip(("tokens", "loss_mask", "valid", "segments"),
                      tr.pack_episodes(eps, 16, row_multiple=num_micro_batches)))
    assert packed["tokens"].shape[0] < padded["tokens"].shape[0]
    learner = Learner(model, LearnerConfig(optim=SGD, num_micro_batches=num_micro_batches))
    results = []
    for batch in (padded, packed):
        state, metrics = learner.sft_step(learner.init_state(), batch)
        results.append(jax.device_get((metrics, state.params)))
    (m_pad, p_pad), (m_pack, p_pack) = results
    assert m_pad["tokens"] == m_pack["tokens"]
    chex.assert_trees_all_close(m_pack["loss"], m_pad["loss"], rtol=1e-5)
    chex.assert_trees_all_close(p_pack, p_pad, atol=1e-5, rtol=1e-5)


def test_packed_rows_split_over_eight_devices_give_the_one_device_step(model):
    eps = _episodes([9, 4, 12, 3, 7, 5, 2, 10, 6, 8, 11, 1], seed=2)
    rc = RolloutConfig(max_len=16, length_multiple=8)
    params = []
    for mesh in (None, make_mesh(data=8)):
        learner = Learner(model, LearnerConfig(optim=SGD), mesh)
        state = sft_phase(learner, learner.init_state(), eps, steps=1, batch_size=12, seed=0, rc=rc, pad_id=0,
                          pack_length=16)
        params.append(jax.device_get(state.params))
    chex.assert_trees_all_close(params[0], params[1], atol=1e-5, rtol=1e-5)


def test_sft_batch_packs_the_same_draw_and_keeps_long_episodes_whole():
    eps = _episodes([5, 9, 30, 4, 6, 7], seed=4)
    rc = RolloutConfig(max_len=64, length_multiple=8)
    # a batch of all six: the 30-token episode is drawn, longer than a row of 16: rows of its bucket (32)
    padded = sft_batch(eps, 6, step=3, seed=1, rc=rc, pad_id=0)
    packed = sft_batch(eps, 6, step=3, seed=1, rc=rc, pad_id=0, pack_length=16, row_multiple=2)
    assert sorted(padded["tokens"][padded["valid"]].tolist()) == sorted(packed["tokens"][packed["valid"]].tolist())
    assert padded["tokens"].shape == (6, 32)
    assert packed["tokens"].shape == (2, 32)  # first-fit, longest first: [30] and [9, 7, 6, 5, 4]


def test_packed_rows_refuse_a_loss_that_counts_rows(model):
    ids, mask, valid, seg = tr.pack_episodes(_episodes([5, 4]), 12)
    learner = Learner(model, LearnerConfig(optim=SGD, sft_aggregation="seq_mean"))
    with pytest.raises(BatchError, match="token_mean"):
        learner.sft_step(learner.init_state(), dict(tokens=ids, loss_mask=mask, valid=valid, segments=seg))


def test_packed_rows_are_refused_in_a_grpo_step_and_beside_a_prefix(model):
    eps = _episodes([5, 4])
    ids, mask, valid, seg = tr.pack_episodes(eps, 12)
    learner = Learner(model, LearnerConfig(optim=SGD, grpo=G.GRPOConfig(beta=0.0)))
    batch = dict(tokens=ids, loss_mask=mask, valid=valid, segments=seg, advantages=np.zeros(ids.shape[0], np.float32))
    with pytest.raises(BatchError, match="SFT batches only"):
        learner.grpo_step(learner.init_state(), batch)
    with pytest.raises(ValueError, match="do not combine"):
        model(jnp.asarray(ids), segment_ids=jnp.asarray(seg), prefix=jnp.asarray(ids[:1, :2]))

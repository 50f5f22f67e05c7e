"""A GRPO group's shared prompt run once per group (``batch["prefix"]``): the same forward, scores,
loss and update as the full batch, on one device, micro-batched and on 8 fake devices."""

import chex
import jax
import numpy as np
import pytest

from cocoda_jax.models import ModelConfig, create_model, make_mesh
from cocoda_jax.rl import grpo as G
from cocoda_jax.rl import loop as L
from cocoda_jax.rl.learner import BatchError, Learner, LearnerConfig
from cocoda_jax.rl.update import OptimConfig

pytestmark = pytest.mark.filterwarnings("ignore:Some donated buffers were not usable")

SMALL = ModelConfig(family="qwen3", vocab_size=64, d_model=32, n_layers=2, n_heads=4, n_kv_heads=2, head_dim=8,
                    ffn_dim=64, qk_norm=True, tie_embeddings=True, max_seq_len=64)
GROUP, GROUPS, T = 4, 4, 24
SGD = OptimConfig(learning_rate=0.5, optimizer="sgd", clip_norm=None)
PROMPTS = (9, 12, 7, 10)  # each group's prompt length: the shortest (7) bounds the shared columns


def _batch(seed=0):
    """Right-padded GRPO rows, ``GROUP`` per prompt: each group's rows start with its prompt (real
    tokens, no loss) and go on with their own actions (loss) and observations (no loss)."""
    rng = np.random.default_rng(seed)
    rows = GROUP * GROUPS
    tokens = rng.integers(3, SMALL.vocab_size, (rows, T)).astype(np.int32)
    mask = (rng.random((rows, T)) < 0.6).astype(np.float32)
    lengths = rng.integers(14, T + 1, rows)
    for g, p in enumerate(PROMPTS):
        rs = slice(g * GROUP, (g + 1) * GROUP)
        tokens[rs, :p] = rng.integers(3, SMALL.vocab_size, p)
        mask[rs, :p] = 0.0
    valid = np.arange(T)[None] < lengths[:, None]
    tokens, mask = np.where(valid, tokens, 0).astype(np.int32), mask * valid
    old = (-np.log(SMALL.vocab_size) + 0.2 * rng.normal(size=(rows, T))).astype(np.float32)
    ref = (-np.log(SMALL.vocab_size) + 0.2 * rng.normal(size=(rows, T))).astype(np.float32)
    adv = np.asarray(G.group_advantages(rng.normal(size=rows).astype(np.float32), GROUP))
    return dict(tokens=tokens, loss_mask=mask, valid=valid, old_logp=old, ref_logp=ref, advantages=adv)


@pytest.fixture(scope="module")
def model():
    return create_model(SMALL, seed=3)


def test_the_shared_columns_are_the_groups_common_prompt_less_one():
    data = _batch()
    shared = L.shared_group_prefix(data, GROUP)
    c = min(PROMPTS) - 1  # column 6 is still prompt, but it starts each row's own part
    chex.assert_shape(shared["prefix"], (GROUPS, c))
    np.testing.assert_array_equal(shared["prefix"], data["tokens"][::GROUP, :c])
    for k in ("tokens", "valid", "loss_mask", "old_logp", "ref_logp"):
        np.testing.assert_array_equal(shared[k], data[k][:, c:])
    assert shared["advantages"] is data["advantages"]
    assert L.shared_group_prefix(data, GROUP, multiple=4)["prefix"].shape == (GROUPS, 4)
    # nothing to share (rounded to 0), rows that are not whole groups, groups that do not split into the
    # micro-batches, a row that differs in its first token: the batch as it was
    assert L.shared_group_prefix(data, GROUP, multiple=8) is data
    assert L.shared_group_prefix(data, 5) is data
    assert L.shared_group_prefix(data, GROUP, num_micro_batches=3) is data
    odd = dict(data, tokens=data["tokens"].copy())
    odd["tokens"][1, 0] += 1
    assert L.shared_group_prefix(odd, GROUP) is odd


@pytest.mark.parametrize("scan,remat,chunk", [(False, False, 0), (True, True, 5)])
def test_scores_with_a_shared_prefix_equal_the_full_rows(model, scan, remat, chunk):
    data = _batch(1)
    shared = L.shared_group_prefix(data, GROUP)
    c = shared["prefix"].shape[1]
    learner = Learner(model, LearnerConfig(remat=remat, scan_layers=scan, logits_chunk=chunk))
    params = learner.init_state().params
    full = np.asarray(learner.log_probs(params, data["tokens"], data["valid"]))
    ours = np.asarray(learner.log_probs(params, shared["tokens"], shared["valid"], shared["prefix"]))
    chex.assert_shape(ours, shared["tokens"].shape)
    valid = shared["valid"][:, 1:]
    np.testing.assert_allclose(np.where(valid, ours[:, 1:], 0), np.where(valid, full[:, c + 1:], 0), atol=2e-6)
    assert np.all(ours[:, 0] == 0)


def _step(model, batch, mesh=None, num_micro_batches=1, aggregation="seq_mean", beta=0.05):
    cfg = G.GRPOConfig(beta=beta, aggregation=aggregation, epsilon=0.2)
    learner = Learner(model, LearnerConfig(optim=SGD, grpo=cfg, num_micro_batches=num_micro_batches), mesh)
    state, metrics = learner.grpo_step(learner.init_state(), batch)
    return jax.device_get((metrics, state.params))


KEYS = ("loss", "kl", "clip_fraction", "ratio", "logp_gap", "entropy", "tokens", "grad_norm")


def _assert_same(want, got):
    for key in KEYS:
        np.testing.assert_allclose(got[0][key], want[0][key], rtol=2e-5, atol=1e-7, err_msg=key)
    for x, y in zip(jax.tree.leaves(want[1]), jax.tree.leaves(got[1])):
        np.testing.assert_allclose(y, x, atol=2e-6, rtol=0)


@pytest.mark.parametrize("aggregation,beta,micro", [("seq_mean", 0.05, 1), ("token_mean", 0.0, 2),
                                                    ("constant", 0.05, 4)])
def test_a_step_with_a_shared_prefix_is_the_full_batch_step(model, aggregation, beta, micro):
    data = _batch(2)
    shared = L.shared_group_prefix(data, GROUP, num_micro_batches=micro)
    assert "prefix" in shared
    full = _step(model, data, aggregation=aggregation, beta=beta)
    _assert_same(full, _step(model, shared, num_micro_batches=micro, aggregation=aggregation, beta=beta))


def test_a_shared_prefix_on_eight_devices_is_the_one_device_step(model):
    data = _batch(3)
    shared = L.shared_group_prefix(data, GROUP)
    _assert_same(_step(model, data), _step(model, shared, mesh=make_mesh(data=2, fsdp=2, tensor=2)))


def test_bad_prefixes_get_clear_errors(model):
    data = L.shared_group_prefix(_batch(), GROUP)
    learner = Learner(model, LearnerConfig(optim=SGD, num_micro_batches=2))
    state = learner.init_state()
    with pytest.raises(BatchError, match="groups dividing"):
        learner.grpo_step(state, dict(data, prefix=data["prefix"][:3]))
    with pytest.raises(BatchError, match="groups dividing"):
        learner.grpo_step(state, dict(data, prefix=data["prefix"][:, :0]))
    with pytest.raises(BatchError, match="micro-batches"):
        learner.grpo_step(state, dict(data, prefix=data["prefix"][:1]))  # one group of 16 rows
    with pytest.raises(BatchError, match="GRPO batches only"):
        learner.sft_step(state, data)

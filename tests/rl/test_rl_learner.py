"""The sharded SFT/GRPO train steps on the real NNX planner: 1 device vs 8 fake CPU devices,
micro-batched vs full batch, beta = 0 without a reference, SFT learning on synthetic-math demos."""

import chex
import jax
import numpy as np
import optax
import pytest

from cocoda_jax.models import ModelConfig, create_model, make_mesh, train_bpe_tokenizer
from cocoda_jax.models.config import tiny
from cocoda_jax.models.transformer import token_log_probs
from cocoda_jax.rl import grpo as G
from cocoda_jax.rl import trajectory as tr
from cocoda_jax.rl.learner import BatchError, Learner, LearnerConfig
from cocoda_jax.rl.update import OptimConfig

pytestmark = pytest.mark.filterwarnings("ignore:Some donated buffers were not usable")

SMALL = ModelConfig(family="qwen3", vocab_size=64, d_model=32, n_layers=1, n_heads=4, n_kv_heads=2, head_dim=8,
                    ffn_dim=64, qk_norm=True, tie_embeddings=True, max_seq_len=64)
B, T = 16, 24
# SGD: the update is the gradient itself, so parameters compare the exact gradients (Adam would
# blow up float-order noise on near-zero gradient entries into lr-sized differences).
SGD = OptimConfig(learning_rate=0.5, optimizer="sgd", clip_norm=None)
GRPO_CFG = G.GRPOConfig(beta=0.05, aggregation="seq_mean", epsilon=0.2)


def _batch(seed=0):
    """Right-padded rows of unequal lengths, actions interleaved with masked observations, GRPO
    columns: sampler and reference log-probs near the policy's, group advantages (G = 4)."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(6, T + 1, size=B)
    lengths[3] = T
    valid = np.arange(T)[None, :] < lengths[:, None]
    mask = ((rng.random((B, T)) < 0.6) & valid).astype(np.float32)
    mask[:, 0] = 0.0
    mask[5] = 0.0  # a row with no action tokens
    tokens = np.where(valid, rng.integers(0, SMALL.vocab_size, (B, T)), 0).astype(np.int32)
    old = (-np.log(SMALL.vocab_size) + 0.2 * rng.normal(size=(B, T))).astype(np.float32)
    ref = (-np.log(SMALL.vocab_size) + 0.2 * rng.normal(size=(B, T))).astype(np.float32)
    adv = np.asarray(G.group_advantages(rng.normal(size=B).astype(np.float32), 4))
    return dict(tokens=tokens, loss_mask=mask, valid=valid, old_logp=old, ref_logp=ref, advantages=adv)


@pytest.fixture(scope="module")
def small_model():
    """One model for every test: each Learner copies its params (onto its own mesh)."""
    return create_model(SMALL, seed=7)


def _run(model, mesh=None, num_micro_batches=1, sft=True):
    """From the same init: one SFT step (if ``sft``) and one GRPO step; host metrics and params."""
    learner = Learner(model, LearnerConfig(optim=SGD, grpo=GRPO_CFG, num_micro_batches=num_micro_batches), mesh)
    data = _batch()
    out = {}
    if sft:
        state, metrics = learner.sft_step(learner.init_state(), data)
        out["sft"] = jax.device_get((metrics, state.params))
    state, metrics = learner.grpo_step(learner.init_state(), data)
    out["grpo"] = jax.device_get((metrics, state.params))
    return learner, state, out


@pytest.fixture(scope="module")
def reference(small_model):
    return _run(small_model)


METRICS = {"sft": ("loss", "nll", "accuracy", "tokens", "grad_norm"),
           "grpo": ("loss", "kl", "clip_fraction", "ratio", "logp_gap", "entropy", "tokens", "grad_norm")}


def _assert_same(want, got):
    for kind in got:
        (m_want, p_want), (m_got, p_got) = want[kind], got[kind]
        for key in METRICS[kind]:
            np.testing.assert_allclose(m_got[key], m_want[key], rtol=2e-5, atol=1e-7, err_msg=f"{kind} {key}")
        leaves_want, leaves_got = jax.tree.leaves(p_want), jax.tree.leaves(p_got)
        assert len(leaves_want) == len(leaves_got)
        for x, y in zip(leaves_want, leaves_got):
            np.testing.assert_allclose(y, x, atol=2e-6, rtol=0, err_msg=kind)


def test_reference_steps_are_meaningful(reference):
    learner, _, out = reference
    data = _batch()
    want_tokens = float((data["loss_mask"][:, 1:] * data["valid"][:, 1:]).sum())
    sft, grpo = out["sft"][0], out["grpo"][0]
    assert float(sft["tokens"]) == want_tokens and float(grpo["tokens"]) == want_tokens
    assert abs(float(sft["loss"]) - np.log(SMALL.vocab_size)) < 0.5   # near uniform at init
    assert float(grpo["kl"]) > 0 and float(grpo["grad_norm"]) > 0 and int(grpo["step"]) == 1
    fresh, again = learner.init_state(), learner.init_state()  # copies: a donated step never frees them
    leaf = lambda s: jax.tree.leaves(s.params)[0]
    assert leaf(fresh).unsafe_buffer_pointer() != leaf(again).unsafe_buffer_pointer()
    init = jax.tree.leaves(jax.device_get(fresh.params))
    for kind in ("sft", "grpo"):
        moved = max(float(np.abs(a - b).max()) for a, b in zip(init, jax.tree.leaves(out[kind][1])))
        assert moved > 1e-4, kind


def test_eight_devices_match_one_device(reference, small_model):
    mesh = make_mesh(data=2, fsdp=2, tensor=2)
    _, state, out = _run(small_model, mesh)
    _assert_same(reference[2], out)
    embed = state.params["embed"][...]
    assert embed.sharding.spec == jax.sharding.PartitionSpec("tensor", "fsdp") and embed.sharding.mesh.shape == mesh.shape
    # Adam's moments are sharded like their params (FSDP memory), not replicated
    adam = Learner(small_model, LearnerConfig(optim=OptimConfig(learning_rate=1e-3)), mesh).init_state()
    (moments,) = [x for x in jax.tree.leaves(adam.opt_state, is_leaf=lambda x: isinstance(x, optax.ScaleByAdamState))
                  if isinstance(x, optax.ScaleByAdamState)]
    want = [p.sharding.spec for p in jax.tree.leaves(adam.params)]
    assert any(w != jax.sharding.PartitionSpec(None) for w in want)
    for tree in (moments.mu, moments.nu):
        assert [m.sharding.spec for m in jax.tree.leaves(tree)] == want


def test_micro_batched_step_equals_full_batch(reference, small_model):
    # 4 strided micro-batches of 4 rows with unequal action-token counts (one row has none)
    _assert_same(reference[2], _run(small_model, num_micro_batches=4)[2])


def test_beta_zero_needs_no_reference_and_matches_the_pure_loss(small_model):
    cfg = G.GRPOConfig(beta=0.0, aggregation="token_mean")
    learner = Learner(small_model, LearnerConfig(optim=SGD, grpo=cfg))
    data = _batch(1)
    del data["ref_logp"]
    state = learner.init_state()
    # the same loss from the pure function on log-probs scored apart (column t scores tokens[t])
    logp = learner.log_probs(state.params, data["tokens"], data["valid"])
    mask = data["loss_mask"] * data["valid"]
    want = G.finalize(G.grpo_loss(logp[:, 1:], data["old_logp"][:, 1:], None, data["advantages"], mask[:, 1:], cfg))
    state, metrics = learner.grpo_step(state, data)
    assert float(metrics["kl"]) == 0.0 and int(state.step) == 1
    for key in ("loss", "ratio", "clip_fraction", "entropy", "tokens"):
        np.testing.assert_allclose(float(metrics[key]), float(want[key]), rtol=1e-5, err_msg=key)
    strict = Learner(small_model, LearnerConfig(optim=SGD, grpo=G.GRPOConfig(beta=0.01)))
    with pytest.raises(BatchError, match="ref_logp"):
        strict.grpo_step(strict.init_state(), data)


def test_grpo_scores_at_its_temperature_and_sft_at_one(small_model):
    """``grpo.temperature``: the GRPO step's log-probs (chunked head or not) are the logits' over it, and
    its loss is the pure loss on them; the SFT step never reads it (demonstrations train the model's own
    distribution)."""
    data = _batch(3)
    del data["ref_logp"]
    cfg = G.GRPOConfig(beta=0.0, aggregation="token_mean", temperature=1.7)
    hot = Learner(small_model, LearnerConfig(optim=SGD, grpo=cfg))
    chunked = Learner(small_model, LearnerConfig(optim=SGD, grpo=cfg, logits_chunk=8))
    state = hot.init_state()
    logits = hot.model(state)(jax.numpy.asarray(data["tokens"]), attention_mask=jax.numpy.asarray(data["valid"]))
    want = np.asarray(token_log_probs(logits[:, :-1], data["tokens"][:, 1:], 1.7))
    got = np.asarray(hot.log_probs(state.params, data["tokens"], data["valid"]))
    np.testing.assert_allclose(got[:, 1:], want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(chunked.log_probs(state.params, data["tokens"], data["valid"])), got,
                               rtol=1e-5, atol=1e-5)
    plain = np.asarray(token_log_probs(logits[:, :-1], data["tokens"][:, 1:]))
    assert np.abs(plain - want).max() > 1e-2
    mask = (data["loss_mask"] * data["valid"])[:, 1:]
    pure = G.finalize(G.grpo_loss(want, data["old_logp"][:, 1:], None, data["advantages"], mask, cfg))
    _, metrics = hot.grpo_step(hot.init_state(), data)
    for key in ("loss", "ratio", "entropy"):
        np.testing.assert_allclose(float(metrics[key]), float(pure[key]), rtol=1e-5, err_msg=key)
    cold = Learner(small_model, LearnerConfig(optim=SGD, grpo=G.GRPOConfig(beta=0.0, aggregation="token_mean")))
    sft_hot, sft_cold = (jax.device_get(lr.sft_step(lr.init_state(), data)) for lr in (hot, cold))
    chex.assert_trees_all_close(sft_hot[1], sft_cold[1])
    chex.assert_trees_all_close(sft_hot[0].params, sft_cold[0].params)
    with pytest.raises(ValueError, match="temperature"):
        G.GRPOConfig(temperature=0.0)


def test_the_configured_loss_variant_is_the_one_that_steps(small_model):
    """The learner dispatches on ``config.grpo.loss``: Dr. GRPO (sequence sums over a constant
    normaliser) moves the params differently from plain GRPO on the same batch and init."""
    data = _batch(2)
    plain = G.GRPOConfig(beta=0.0, aggregation="token_mean")
    dr = G.GRPOConfig(beta=0.0, aggregation="token_mean", loss="dr_grpo", max_tokens=T)
    out = {}
    for name, cfg in (("grpo", plain), ("dr_grpo", dr)):
        learner = Learner(small_model, LearnerConfig(optim=SGD, grpo=cfg))
        state, metrics = learner.grpo_step(learner.init_state(), data)
        out[name] = jax.device_get((metrics, state.params))
    (m_plain, p_plain), (m_dr, p_dr) = out["grpo"], out["dr_grpo"]
    # the same loss sum at the shared init, over a different count: tokens vs rows * max_tokens
    np.testing.assert_allclose(float(m_dr["loss"]) * B * T, float(m_plain["loss"]) * float(m_plain["tokens"]),
                               rtol=1e-5)
    moved = max(float(np.abs(a - b).max()) for a, b in zip(jax.tree.leaves(p_plain), jax.tree.leaves(p_dr)))
    assert moved > 1e-4
    with pytest.raises(G.UnknownVariantError, match="dr_gpro"):
        LearnerConfig(grpo=G.GRPOConfig(loss="dr_gpro"))


def test_bad_batches_get_clear_errors(small_model):
    learner = Learner(small_model, LearnerConfig(optim=SGD, num_micro_batches=3))
    data = _batch()
    with pytest.raises(BatchError, match="loss_mask"):
        learner.sft_step(None, {"tokens": data["tokens"], "valid": data["valid"]})
    with pytest.raises(BatchError, match="batch, time"):
        learner.sft_step(None, dict(data, tokens=data["tokens"][0]))
    with pytest.raises(BatchError, match="micro-batches"):
        learner.sft_step(None, data)
    with pytest.raises(BatchError, match="advantages"):
        learner.grpo_step(None, dict(data, advantages=data["advantages"][:4]))
    with pytest.raises(ValueError):
        LearnerConfig(num_micro_batches=0)


def test_sft_on_synthetic_math_demonstrations_lowers_the_loss(math_library):
    from cocoda_jax.data import synthetic_math

    tasks = [synthetic_math.make_task(0, "train", i, depth=1) for i in range(200)]

    def segments(task):
        used = sorted({fn for fn, _ in task.skeleton})  # the tools a retriever would put in the prompt
        return tr.demonstration_segments(task, tr.tool_cards(math_library, used))

    demos = [segments(t) for t in tasks]
    tok = train_bpe_tokenizer([tr.segments_text(s) for s in demos], vocab_size=1024)
    encode = lambda text: tok.encode(text, add_special_tokens=False)
    episodes = [tr.tokenize_segments(s, encode) for s in demos]
    length = 176
    chosen = [e for e in episodes if len(e) <= length][:8]
    assert len(chosen) == 8
    tokens, mask, valid = tr.pad_episodes(chosen, length, pad_id=tok.pad_token_id)
    assert tok.decode(tokens[0][mask[0] > 0]).startswith("x0 = ")  # the loss covers the actions only
    cfg = tiny(vocab_size=len(tok)).replace(n_layers=2)
    learner = Learner(create_model(cfg, seed=0),
                      LearnerConfig(optim=OptimConfig(learning_rate=2e-3, clip_norm=1.0)))
    state = learner.init_state()
    losses = []
    for _ in range(8):
        state, metrics = learner.sft_step(state, {"tokens": tokens, "loss_mask": mask, "valid": valid})
        losses.append(float(metrics["loss"]))
    print("sft losses", [round(x, 3) for x in losses])
    assert losses[0] > np.log(len(tok)) - 1.0          # starts near uniform
    assert losses[-1] < 0.6 * losses[0] and losses[-1] == min(losses)
    assert int(state.step) == 8


def test_sft_phase_overlaps_batches_but_reports_every_step_in_order(small_model):
    """The pipelined phase (next batch built and next step queued while the device runs) gives the
    plain loop's params, and hands on_step each step's own metrics, on the host, in order."""
    from cocoda_jax.rl import loop

    rng = np.random.default_rng(3)
    episodes = [tr.TokenizedEpisode(tuple(int(i) for i in rng.integers(1, SMALL.vocab_size, n)), (0,) + (1,) * (n - 1))
                for n in rng.integers(6, 20, size=10)]
    rc = loop.RolloutConfig(max_len=32, length_multiple=8)
    learner = Learner(small_model, LearnerConfig(optim=SGD, grpo=GRPO_CFG))
    seen = []

    def on_step(step, metrics):
        assert all(isinstance(v, float) for v in metrics.values())
        seen.append((step, metrics))

    piped = loop.sft_phase(learner, learner.init_state(), episodes, steps=4, batch_size=4, seed=5, rc=rc, pad_id=0,
                           on_step=on_step)
    state = learner.init_state()
    plain = []
    for step in range(4):
        state, metrics = learner.sft_step(state, loop.sft_batch(episodes, 4, step, 5, rc, 0))
        plain.append({k: float(v) for k, v in jax.device_get(metrics).items()})
    assert [s for s, _ in seen] == [1, 2, 3, 4]
    assert [m for _, m in seen] == plain
    jax.tree.map(np.testing.assert_array_equal, jax.device_get(piped.params), jax.device_get(state.params))
    resumed = loop.sft_phase(learner, learner.init_state(), episodes, steps=2, batch_size=4, seed=5, rc=rc, pad_id=0)
    resumed = loop.sft_phase(learner, resumed, episodes, steps=4, batch_size=4, seed=5, rc=rc, pad_id=0)
    jax.tree.map(np.testing.assert_array_equal, jax.device_get(resumed.params), jax.device_get(state.params))


def test_remat_gives_the_same_steps(reference, small_model):
    """Rematerialised layers recompute the same values: SFT and GRPO steps match the plain ones; and
    the gradient really goes through one remat per layer."""
    from flax import nnx

    graphdef, params = nnx.split(small_model)
    tokens = jax.numpy.ones((1, 8), jax.numpy.int32)
    for remat, count in ((False, 0), (True, SMALL.n_layers)):
        jaxpr = str(jax.make_jaxpr(jax.grad(lambda p: nnx.merge(graphdef, p)(tokens, remat=remat).sum()))(params))
        assert jaxpr.count("remat") == count, remat
    plain = reference[2]  # _run(small_model): the plain steps from the same init
    remat = Learner(small_model, LearnerConfig(optim=SGD, grpo=GRPO_CFG, remat=True))
    data = _batch()
    micro = Learner(small_model, LearnerConfig(optim=SGD, grpo=GRPO_CFG, remat=True, num_micro_batches=2))
    for kind, step in (("sft", remat.sft_step), ("grpo", remat.grpo_step), ("sft", micro.sft_step),
                       ("grpo", micro.grpo_step)):
        state, metrics = step((micro if step.__self__ is micro else remat).init_state(), data)
        got_metrics, got_params = jax.device_get((metrics, state.params))
        want_metrics, want_params = plain[kind]
        for key in METRICS[kind]:
            np.testing.assert_allclose(got_metrics[key], want_metrics[key], rtol=1e-5, atol=1e-6, err_msg=key)
        jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6), got_params, want_params)


def test_scanned_layers_give_the_same_steps(reference, small_model):
    """``scan_layers``: the layers as one ``lax.scan`` over their stacked weights (with remat, and
    with micro-batches) step exactly as the unrolled layers do; the scan is in the gradient's jaxpr."""
    from flax import nnx

    graphdef, params = nnx.split(small_model)
    tokens = jax.numpy.ones((1, 8), jax.numpy.int32)
    jaxpr = str(jax.make_jaxpr(jax.grad(lambda p: nnx.merge(graphdef, p)(tokens, scan=True, remat=True).sum()))(params))
    assert "scan" in jaxpr and jaxpr.count("remat") >= 1
    plain = reference[2]  # _run(small_model): the plain steps from the same init
    for learner in (Learner(small_model, LearnerConfig(optim=SGD, grpo=GRPO_CFG, scan_layers=True, remat=True)),
                    Learner(small_model, LearnerConfig(optim=SGD, grpo=GRPO_CFG, scan_layers=True, num_micro_batches=2))):
        for kind, step in (("sft", learner.sft_step), ("grpo", learner.grpo_step)):
            state, metrics = step(learner.init_state(), _batch())
            got_metrics, got_params = jax.device_get((metrics, state.params))
            want_metrics, want_params = plain[kind]
            for key in METRICS[kind]:
                np.testing.assert_allclose(got_metrics[key], want_metrics[key], rtol=1e-5, atol=1e-6, err_msg=key)
            jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6), got_params, want_params)


@pytest.mark.parametrize("chunk", [3, 64])  # a chunk that leaves a ragged last piece, and one longer than the rows
def test_chunked_logits_give_the_same_steps_and_scores(reference, small_model, chunk):
    """``logits_chunk``: the head runs a few positions at a time, the same values and gradients; the
    scorer (old/reference log-probs) agrees too."""
    plain = reference[2]  # _run(small_model): the plain steps from the same init
    learner = Learner(small_model, LearnerConfig(optim=SGD, grpo=GRPO_CFG, logits_chunk=chunk))
    whole = reference[0]  # the same config but the chunk
    data = _batch()
    for kind, step in (("sft", learner.sft_step), ("grpo", learner.grpo_step)):
        state, metrics = step(learner.init_state(), data)
        got_metrics, got_params = jax.device_get((metrics, state.params))
        want_metrics, want_params = plain[kind]
        for key in METRICS[kind]:
            np.testing.assert_allclose(got_metrics[key], want_metrics[key], rtol=1e-5, atol=1e-6, err_msg=key)
        jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6), got_params, want_params)
    params = learner.init_state().params
    np.testing.assert_allclose(learner.log_probs(params, data["tokens"], data["valid"]),
                               whole.log_probs(params, data["tokens"], data["valid"]), rtol=1e-5, atol=1e-6)


def test_a_learner_holds_no_optimizer_state_or_second_param_copy(small_model):
    """Built on a model already in place, a learner adds no device arrays of the params' or the
    moments' size (the main job builds three learners; at scale each copy is gigabytes)."""
    import gc

    def live_bytes():
        gc.collect()
        return sum(a.nbytes for a in jax.live_arrays())

    param_bytes = sum(x.nbytes for x in jax.tree.leaves(nnx_state(small_model)))
    before = live_bytes()
    learner = Learner(small_model, LearnerConfig(optim=OptimConfig(learning_rate=1e-3)))
    assert live_bytes() - before < param_bytes // 4
    state = learner.init_state()  # made on demand: params copied, Adam's two moments
    assert live_bytes() - before >= 3 * param_bytes
    del state


def test_a_checkpoint_is_restored_into_the_abstract_state_without_a_fresh_one(small_model, tmp_path, monkeypatch):
    """``runs.rundir.restore_state`` restores into the learner's shapes and shardings: no step-0
    state (a params copy and Adam's moments) is made only to be overwritten."""
    from cocoda_jax.runs import rundir

    learner = Learner(small_model, LearnerConfig(optim=OptimConfig(learning_rate=1e-3)))
    state, _ = learner.sft_step(learner.init_state(), _batch())
    rundir.save_checkpoint(tmp_path, 1, state, {}, {"seed": 0})
    want = jax.tree.map(np.asarray, (state.params, state.opt_state))
    monkeypatch.setattr(Learner, "init_state", lambda self: pytest.fail("restore made a fresh state"))
    monkeypatch.setattr(Learner, "state_from_params", lambda self, p: pytest.fail("restore made a fresh state"))
    abstract = learner.abstract_state()
    assert all(isinstance(x, jax.ShapeDtypeStruct) for x in jax.tree.leaves(abstract))
    restored, ref = rundir.restore_state(tmp_path, learner, 1, with_ref=False)
    assert ref is None and int(restored.step) == 1
    chex.assert_trees_all_equal(jax.tree.map(np.asarray, (restored.params, restored.opt_state)), want)
    assert jax.tree.leaves(jax.tree.map(lambda a, b: a.sharding == b.sharding, restored.params, state.params)) \
        and all(jax.tree.leaves(jax.tree.map(lambda a, b: a.sharding == b.sharding, restored.params, state.params)))


def nnx_state(model):
    from flax import nnx

    return nnx.state(model)


@pytest.mark.parametrize("aggregation,beta", [("token_mean", 0.0), ("seq_mean", 0.05)])
def test_dropping_masked_groups_gives_the_same_step(small_model, aggregation, beta):
    """The rows of groups masked out of the loss (uniform rewards) leave the step's batch, and the
    columns shrink to the longest row left: the step equals the full masked batch's, and the loss's
    own metrics too. ``constant`` aggregation counts rows, so it must keep them."""
    from cocoda_jax.rl import loop as L

    cfg = G.GRPOConfig(beta=beta, aggregation=aggregation, epsilon=0.2)
    assert L.drops_masked_rows_exactly(cfg)
    assert not L.drops_masked_rows_exactly(G.GRPOConfig(aggregation="constant"))
    assert not L.drops_masked_rows_exactly(G.GRPOConfig(loss="dr_grpo"))
    data = _batch(2)
    uniform = np.repeat(np.array([True, False, True, True]), 4)  # groups of 4; only group 1 is kept
    data["loss_mask"][uniform] = 0.0
    data["valid"][uniform] = True  # the masked rows are the longest: the kept rows' length is shorter
    data["valid"][~uniform, 12:] = False
    data["loss_mask"][~uniform, 12:] = 0.0
    small = L.without_masked_groups(data, uniform, row_multiple=8, length_multiple=4, max_len=T)
    assert small["tokens"].shape == (8, 12) and small["advantages"].shape == (8,)
    kept = np.flatnonzero(~uniform)
    np.testing.assert_array_equal(small["tokens"][np.isin(np.sort(np.r_[kept, [0, 1, 2, 3]]), kept)],
                                  data["tokens"][kept, :12])
    out = []
    for batch in (data, small):
        learner = Learner(small_model, LearnerConfig(optim=SGD, grpo=cfg))
        state, metrics = learner.grpo_step(learner.init_state(), batch)
        out.append(jax.device_get((metrics, state.params)))
    for key in ("loss", "kl", "clip_fraction", "ratio", "logp_gap", "entropy", "tokens", "grad_norm"):
        np.testing.assert_allclose(out[1][0][key], out[0][0][key], rtol=2e-5, atol=1e-7, err_msg=key)
    for x, y in zip(jax.tree.leaves(out[0][1]), jax.tree.leaves(out[1][1])):
        np.testing.assert_allclose(y, x, atol=2e-6, rtol=0)
    # nothing to drop, or too little to fill fewer rows: the batch as it was
    assert L.without_masked_groups(data, np.zeros(B, bool), row_multiple=8, length_multiple=4, max_len=T) is data
    assert L.without_masked_groups(data, uniform, row_multiple=16, length_multiple=4, max_len=T) is data
    # every group uniform: one bucket of masked rows still takes the optimizer step
    silent = dict(data, loss_mask=np.zeros_like(data["loss_mask"]))
    assert L.without_masked_groups(silent, np.ones(B, bool), row_multiple=8, length_multiple=4,
                                   max_len=T)["tokens"].shape == (8, 4)
    data["loss_mask"][0, 3] = 1.0
    with pytest.raises(ValueError, match="still has loss tokens"):
        L.without_masked_groups(data, uniform, row_multiple=8, length_multiple=4, max_len=T)


def test_dropped_rows_stay_whole_shards_of_the_batch_axes():
    """The compacted step's rows are a multiple of the mesh's batch shards, so the batch stays split
    over (data, fsdp) instead of falling back to a replicated batch."""
    from cocoda_jax.rl import loop as L

    assert L.batch_shards(None) == 1
    assert L.batch_shards(make_mesh(data=2, fsdp=2, tensor=2)) == 4  # tensor does not split rows
    assert L.batch_shards(make_mesh(data=8)) == 8

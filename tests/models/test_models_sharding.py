"""Sharded creation / loading / forward on 8 fake CPU devices equals the single-device model."""

import chex
import jax
import numpy as np
import pytest
from flax import nnx
from jax.sharding import PartitionSpec as P

from cocoda_jax.models import (ModelConfig, create_model, load_hf_checkpoint, logical_to_spec,
                               make_mesh, save_hf_checkpoint)

MESHES = [dict(data=2, fsdp=2, tensor=2), dict(fsdp=8), dict(data=4, tensor=2)]
IDS = lambda m: ",".join(f"{k}={v}" for k, v in m.items())

CFG = ModelConfig(family="qwen3", vocab_size=256, d_model=64, n_layers=2, n_heads=4, n_kv_heads=2,
                  head_dim=16, ffn_dim=128, tie_embeddings=False, qk_norm=True, max_seq_len=64)


def _forward(model, ids, mesh=None):
    graphdef, state = nnx.split(model)
    fn = jax.jit(lambda s, x: nnx.merge(graphdef, s)(x))
    if mesh is None:
        return fn(state, ids)
    with jax.set_mesh(mesh):
        return fn(state, ids)


@pytest.fixture(scope="module")
def reference():
    model = create_model(CFG, seed=3)
    ids = jax.random.randint(jax.random.key(0), (8, 12), 0, CFG.vocab_size)
    return model, ids, np.asarray(_forward(model, ids))


def test_eight_devices():
    assert jax.device_count() == 8


@pytest.mark.parametrize("axes", MESHES, ids=IDS)
def test_sharded_init_forward_and_shardings(reference, axes):
    ref_model, ids, ref = reference
    mesh = make_mesh(**axes)
    model = create_model(CFG, seed=3, mesh=mesh)
    # identical values to the unsharded init (same key), created directly sharded
    np.testing.assert_allclose(np.asarray(model.embed[...]), np.asarray(ref_model.embed[...]), atol=1e-7)
    fsdp, tensor = axes.get("fsdp", 1), axes.get("tensor", 1)
    want = {
        "embed": P("tensor" if tensor > 1 else None, "fsdp" if fsdp > 1 else None),
        # the decoder layers' weights are stacked: a leading, unsharded layer axis
        "q": P(None, "fsdp" if fsdp > 1 else None, "tensor" if tensor > 1 else None, None),
        "down": P(None, "tensor" if tensor > 1 else None, "fsdp" if fsdp > 1 else None),
    }
    got = {"embed": model.embed[...].sharding.spec, "q": model.layers.attn.q_proj[...].sharding.spec,
           "down": model.layers.mlp.down_proj[...].sharding.spec}
    assert model.layers.attn.q_proj[...].shape == (CFG.n_layers, CFG.d_model, CFG.n_heads, CFG.head_dim)
    assert got == want
    assert model.embed[...].sharding.mesh.shape == mesh.shape
    if fsdp * tensor > 1:  # no device holds the whole embedding
        shard = model.embed[...].addressable_shards[0].data
        assert shard.size == CFG.vocab_size * CFG.d_model // (fsdp * tensor)
    out = _forward(model, ids, mesh)
    chex.assert_shape(out, (8, 12, CFG.vocab_size))
    np.testing.assert_allclose(np.asarray(out), ref, atol=2e-5, rtol=1e-5)
    batch_axes = tuple(a for a in ("data", "fsdp") if axes.get(a, 1) > 1)
    spec0 = out.sharding.spec[0]
    assert (spec0 if isinstance(spec0, tuple) else (spec0,) if spec0 else ()) == batch_axes


@pytest.mark.parametrize("axes", [dict(data=2, fsdp=2, tensor=2), dict(data=4, tensor=2)], ids=IDS)
def test_the_embedding_lookup_with_sharded_vocab_is_partitioned_without_replication(reference, axes, capfd):
    """XLA's SPMD partitioner used to replicate the lookup's result ("involuntary full
    rematerialization") when the vocabulary is split over tensor; it logs that on stderr at compile."""
    ref_model, ids, ref = reference
    mesh = make_mesh(**axes)
    model = create_model(CFG, seed=3, mesh=mesh)
    graphdef, state = nnx.split(model)
    capfd.readouterr()
    with jax.set_mesh(mesh):
        embedded = jax.jit(lambda s, x: nnx.merge(graphdef, s)._embed(x)).lower(state, ids).compile()(state, ids)
    assert "Involuntary full rematerialization" not in capfd.readouterr().err
    np.testing.assert_allclose(np.asarray(embedded), np.asarray(ref_model.embed[...])[np.asarray(ids)], atol=1e-7)


@pytest.mark.parametrize("axes", MESHES[:1], ids=IDS)
def test_load_hf_checkpoint_into_mesh(reference, axes, tmp_path):
    ref_model, ids, ref = reference
    path = save_hf_checkpoint(ref_model, tmp_path / "ckpt")
    mesh = make_mesh(**axes)
    model = load_hf_checkpoint(path, mesh=mesh)
    assert model.layers.mlp.gate_proj[...].sharding.spec == P(None, "fsdp", "tensor")
    np.testing.assert_allclose(np.asarray(_forward(model, ids, mesh)), ref, atol=2e-5, rtol=1e-5)


def test_logical_rules_drop_non_dividing_axes():
    mesh = make_mesh(data=2, fsdp=2, tensor=2)
    assert logical_to_spec(("vocab", "embed"), (255, 64), mesh) == P(None, "fsdp")
    assert logical_to_spec(("act_batch", "act_seq"), (4, 3), mesh) == P(("data", "fsdp"), None)
    assert logical_to_spec(("act_batch", "act_seq"), (2, 3), mesh) == P("data", None)
    with pytest.raises(KeyError, match="no logical-axis rule"):
        logical_to_spec(("nonsense",), (4,), mesh)


def test_sampler_on_mesh_equals_single_device(reference):
    from cocoda_jax.models.sampler import Sampler, SamplingParams

    ref_model, _, _ = reference
    prompts = [[5, 6, 7], [1, 2, 3, 4], [9], [8, 8]]
    p = SamplingParams(max_new_tokens=5, temperature=1.0, top_k=50)
    single = Sampler(ref_model, cache_size=32).generate(prompts, p, jax.random.key(0))
    mesh = make_mesh(data=2, fsdp=2, tensor=2)
    model = create_model(CFG, seed=3, mesh=mesh)
    with jax.set_mesh(mesh):
        s = Sampler(model, cache_size=32)
        res = s.generate(prompts, p, jax.random.key(0))
        more = s.continue_generation(res.state, [[3], [4], [], [6, 7]], p, jax.random.key(1))
    assert res.tokens == single.tokens
    for a, b in zip(res.log_probs, single.log_probs):
        np.testing.assert_allclose(a, b, atol=2e-5)
    assert len(more.state.cache.k) == CFG.n_layers  # one buffer per layer (the unrolled decode)
    assert tuple(more.state.cache.k[1].sharding.spec)[:2] == (("data", "fsdp"), "tensor")
    with jax.set_mesh(mesh):  # the scanned decode's stacked cache: the layer axis whole
        stacked = Sampler(model, cache_size=32, scan_layers=True).generate(prompts, p, jax.random.key(0))
    assert stacked.tokens == single.tokens
    assert tuple(stacked.state.cache.k.sharding.spec)[:3] == (None, ("data", "fsdp"), "tensor")
    assert more.state.pos.sharding.spec == P(("data", "fsdp"))
    assert more.tokens[2] == [] and all(len(t) == 5 for i, t in enumerate(more.tokens) if i != 2)


def test_sampler_compacts_a_sharded_cache(reference):
    """A continuation that must compact the cache (KVCache.compact) does so on the mesh too: the
    tokens and log-probs of the single-device sampler, the cache still split over (data, fsdp) and
    tensor."""
    from cocoda_jax.models.sampler import Sampler, SamplingParams

    ref_model, _, _ = reference
    prompts = [[5, 6, 7], [1, 2, 3, 4], [9], [8, 8]]
    obs = [[3], [4], [], [6, 7]]
    p = SamplingParams(max_new_tokens=5, temperature=1.0, top_k=50)
    # 24 slots: prompts 8 + 5 generated, then 8 + 5 more do not fit until the holes are dropped
    s1 = Sampler(ref_model, cache_size=24)
    single = s1.continue_generation(s1.generate(prompts, p, jax.random.key(0)).state, obs, p, jax.random.key(1))
    mesh = make_mesh(data=2, fsdp=2, tensor=2)
    model = create_model(CFG, seed=3, mesh=mesh)
    with jax.set_mesh(mesh):
        s = Sampler(model, cache_size=24)
        fed = s.prefill_tokens
        res = s.generate(prompts, p, jax.random.key(0))
        more = s.continue_generation(res.state, obs, p, jax.random.key(1))
    assert s.prefill_tokens - fed == 4 * 8 + 4 * 8  # the prompts and the observation bucket: no re-prefill
    assert int(more.state.cache.end) == 9 + 8 + 5  # compacted to the longest row (4 + 5), then one turn
    assert more.tokens == single.tokens
    for a, b in zip(more.log_probs, single.log_probs):
        np.testing.assert_allclose(a, b, atol=2e-5)
    assert tuple(more.state.cache.k[1].sharding.spec)[:2] == (("data", "fsdp"), "tensor")


@pytest.mark.parametrize("preset", ["qwen3_8b", "qwen3_32b", "llama3_8b"])
def test_real_presets_shard_every_matrix(preset):
    """Abstractly (no memory): on (data=2, fsdp=2, tensor=2) every weight matrix of the real
    presets is split over fsdp x tensor (1/4 per device), norms are replicated, and the stacked
    layers' leading layer axis is never split (a layer's weights live where its matrices say)."""
    from cocoda_jax.models import get_preset
    from cocoda_jax.models.transformer import abstract_model, param_axes, state_shardings

    cfg = get_preset(preset)
    _, abs_state = nnx.split(abstract_model(cfg))
    mesh = make_mesh(data=2, fsdp=2, tensor=2)
    shardings = jax.tree.leaves(state_shardings(abs_state, mesh))
    shapes = [v.shape for v in jax.tree.leaves(nnx.to_pure_dict(abs_state))]
    axes = jax.tree.leaves(param_axes(abs_state), is_leaf=lambda x: isinstance(x, tuple))
    assert len(shardings) == len(shapes) == len(axes)
    # q, k, v, o, gate, up, down, the two layer norms, and Qwen3's q/k norms
    assert sum(a[0] == "layers" for a in axes) == 9 + 2 * cfg.qk_norm
    for sh, shape, names in zip(shardings, shapes, axes):
        local = sh.shard_shape(shape)
        if names[0] == "layers":
            assert shape[0] == cfg.n_layers and local[0] == cfg.n_layers
        if sum(n != "layers" for n in names) >= 2:
            assert np.prod(local) * 4 == np.prod(shape), (shape, sh.spec)
        else:
            assert local == shape


def test_param_and_opt_state_shardings_follow_the_logical_axes():
    """One helper each: the params' shardings (as create_model places them) and an optax state's
    (moments like their params, counts replicated), abstractly."""
    import optax

    from cocoda_jax.models.sharding import opt_state_shardings, param_shardings
    from cocoda_jax.models.transformer import abstract_model, state_shardings

    _, abs_state = nnx.split(abstract_model(CFG))
    mesh = make_mesh(data=2, fsdp=2, tensor=2)
    params = param_shardings(abs_state, mesh)
    assert nnx.to_pure_dict(params) == state_shardings(abs_state, mesh)
    assert params["embed"].get_value().spec == P("tensor", "fsdp")
    optimizer = optax.chain(optax.clip_by_global_norm(1.0), optax.adamw(1e-3))
    abs_opt = jax.eval_shape(optimizer.init, abs_state)
    got = opt_state_shardings(optimizer, abs_opt, params, mesh)
    (adam,) = [x for x in jax.tree.leaves(got, is_leaf=lambda x: isinstance(x, optax.ScaleByAdamState))
               if isinstance(x, optax.ScaleByAdamState)]
    want = [s.spec for s in jax.tree.leaves(params)]
    assert [s.spec for s in jax.tree.leaves(adam.mu)] == [s.spec for s in jax.tree.leaves(adam.nu)] == want
    assert adam.count.spec == P() and adam.count.mesh.shape == mesh.shape

"""cocoda_jax.checkpoint: exact round trips (real optax types, keys, payloads), restore onto
another mesh, an exactly reproduced resumed step, and typed errors that never cost a good step."""

import dataclasses
import hashlib
import json
from pathlib import Path

import chex
import flax.struct
import jax
import jax.numpy as jnp
import optax
import pytest
from flax import nnx
from jax.sharding import NamedSharding, PartitionSpec as P

from cocoda_jax import checkpoint as ck
from cocoda_jax.library import LibrarySnapshot, Tool
from cocoda_jax.models import create_model, get_preset, make_mesh, token_log_probs
from cocoda_jax.models.sharding import opt_state_shardings
from cocoda_jax.models.transformer import abstract_model, state_shardings
from cocoda_jax.rl.update import OptimConfig, make_optimizer

# The `tiny` preset's layout, shrunk so that every test compiles in a second or two.
CFG = dataclasses.replace(get_preset("tiny"), vocab_size=128, d_model=64, n_layers=1, head_dim=16, ffn_dim=128)
OPTIM = OptimConfig(learning_rate=1e-2, optimizer="adamw", weight_decay=0.01, clip_norm=1.0)
CONFIG = {"model": dataclasses.asdict(CFG), "optim": dataclasses.asdict(OPTIM), "seed": 0}


def _loss(graphdef, params, tokens):
    """Mean next-token NLL of the planner's logits: tiny, deterministic, touches every param."""
    logits = nnx.merge(graphdef, params)(tokens)
    return -jnp.mean(token_log_probs(logits[:, :-1], tokens[:, 1:]))


def _make_step(graphdef, optimizer):
    @jax.jit
    def step(params, opt_state, tokens):
        loss, grads = jax.value_and_grad(lambda p: _loss(graphdef, p, tokens))(params)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return loss, optax.apply_updates(params, updates), opt_state

    def run(*args):  # inputs committed to device 0 (as restored arrays are): a single compile
        return step(*jax.device_put(args, jax.devices()[0]))
    return run


def _batch(rng, step):
    return jax.random.randint(jax.random.fold_in(rng, step), (4, 12), 0, CFG.vocab_size)


def _library():
    add = Tool.from_source("def add(a: float, b: float) -> float:\n    return a + b\n", "Add two numbers.",
                           examples=[({"a": 2, "b": 3}, 5)])
    return LibrarySnapshot.empty(max_depth=8).insert(add)


@pytest.fixture(scope="module")
def trained():
    """A state after one real adamw step (so mu/nu/count are not zeros), with keys and scalars."""
    model = create_model(CFG, seed=0)
    graphdef, params = nnx.split(model)
    optimizer = make_optimizer(OPTIM)
    step = _make_step(graphdef, optimizer)
    rng = jax.random.key(7)
    ref = jax.tree.map(jnp.copy, params)
    _, params, opt_state = step(params, jax.jit(optimizer.init)(params), _batch(rng, 0))
    state = {"params": params, "opt_state": opt_state, "ref_params": nnx.to_pure_dict(ref), "step": 1,
             "ref_step": 0, "rng": {"sample": rng, "legacy": jax.random.PRNGKey(3)}}
    return graphdef, optimizer, step, state


def _key_data(tree):
    return jax.tree.map(lambda x: jax.random.key_data(x) if ck._is_key(x) else x, tree)


def _tree_digest(path: Path) -> dict[str, str]:
    return {str(p.relative_to(path)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(path.rglob("*")) if p.is_file()}


def test_round_trip_exact_with_real_types_and_payloads(tmp_path, trained):
    _, _, _, state = trained
    lib = _library()
    payloads = {"library": lib, "pool": {"items": [1, 2], "name": "p"}, "note": "plain text"}
    path = ck.save(tmp_path, 1, state, payloads, CONFIG)
    assert path == tmp_path.absolute() / "1" and ck.latest_step(tmp_path) == 1

    got = ck.restore(tmp_path, ck.abstract_state(state))
    restored, pay, config = got
    assert got.step == 1
    chex.assert_trees_all_equal(_key_data(restored), _key_data(state))
    assert jax.tree.structure(restored) == jax.tree.structure(state)
    assert isinstance(restored["params"], nnx.State)
    adam = restored["opt_state"][1][0]
    assert type(adam) is type(state["opt_state"][1][0]) and isinstance(adam, optax.ScaleByAdamState)
    assert int(adam.count) == 1 and restored["step"] == 1 and isinstance(restored["step"], int)
    assert jax.random.key_impl(restored["rng"]["sample"]) == jax.random.key_impl(state["rng"]["sample"])
    assert not ck._is_key(restored["rng"]["legacy"])  # a raw uint32 key stays raw
    assert pay["library"] == lib and pay["library"].to_json() == lib.to_json()
    assert pay["pool"] == payloads["pool"] and pay["note"] == "plain text"
    assert config == json.loads(json.dumps(CONFIG))

    raw = ck.restore(tmp_path, None, decoders={})  # config and payloads only, undecoded
    assert raw.state is None and raw.payloads["library"] == lib.to_json()


def _sharding_tree(abs_params, mesh):
    """The model's logical-axis shardings as a tree shaped like the nnx.State params."""
    sh = state_shardings(abs_params, mesh)
    flat = dict(jax.tree_util.tree_flatten_with_path(nnx.to_pure_dict(abs_params))[0])
    keyed = {k: v for k, v in jax.tree_util.tree_flatten_with_path(sh)[0]}
    assert keyed.keys() == flat.keys()
    out = jax.tree.map(lambda x: x, abs_params)
    nnx.replace_by_pure_dict(out, sh)
    return out


def test_restore_onto_another_mesh_and_back(tmp_path, trained):
    _, optimizer, _, state = trained
    state = {k: state[k] for k in ("params", "opt_state", "step")}
    ck.save(tmp_path, 1, state, {}, CONFIG)

    mesh = make_mesh(fsdp=8)
    _, abs_params = nnx.split(abstract_model(CFG))
    p_sh = _sharding_tree(abs_params, mesh)
    abs_params = jax.tree.map(lambda x, s: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=s), abs_params, p_sh)
    abs_opt = jax.eval_shape(optimizer.init, abs_params)
    o_sh = opt_state_shardings(optimizer, abs_opt, p_sh, mesh)
    target = ck.abstract_state({"params": abs_params, "opt_state": abs_opt, "step": 0},
                               {"params": p_sh, "opt_state": o_sh, "step": None})
    on8 = ck.restore(tmp_path, target).state
    chex.assert_trees_all_equal(on8, state)
    assert [x.sharding for x in jax.tree.leaves(on8["params"])] == jax.tree.leaves(p_sh)
    embed = on8["params"]["embed"][...]
    assert embed.sharding == NamedSharding(mesh, P(None, "fsdp")) and len(embed.sharding.device_set) == 8
    adam = on8["opt_state"][1][0]
    assert adam.mu["embed"][...].sharding == embed.sharding and adam.nu["embed"][...].sharding == embed.sharding
    assert adam.count.sharding == NamedSharding(mesh, P())

    ck.save(tmp_path, 2, on8, {}, CONFIG)  # written from 8 shards, read onto one device
    back = ck.restore(tmp_path, ck.abstract_state(state), step=2).state
    chex.assert_trees_all_equal(back, state)
    assert back["params"]["embed"][...].sharding.device_set == {jax.devices()[0]}


def test_resumed_run_reproduces_the_next_loss_exactly(tmp_path, trained):
    graphdef, optimizer, step, state = trained
    params, opt_state = state["params"], state["opt_state"]
    rng = jax.random.key(11)
    for i in (1, 2):
        _, params, opt_state = step(params, opt_state, _batch(rng, i))
    ck.save(tmp_path, 3, {"params": params, "opt_state": opt_state, "rng": rng, "step": 3}, {}, CONFIG)
    loss3, params4, _ = step(params, opt_state, _batch(rng, 3))

    # A fresh process knows only the config: the target is abstract (no arrays, default device).
    abs_params = nnx.split(abstract_model(CFG))[1]
    target = {"params": abs_params, "opt_state": jax.eval_shape(optimizer.init, abs_params),
              "rng": jax.eval_shape(lambda: jax.random.key(0)), "step": 0}
    got = ck.restore(tmp_path, target).state
    assert got["step"] == 3
    resumed_loss, resumed_params, _ = step(got["params"], got["opt_state"], _batch(got["rng"], got["step"]))
    assert float(resumed_loss) == float(loss3)
    chex.assert_trees_all_equal(resumed_params, params4)


def _corrupt_meta(step_dir):
    f = step_dir / "meta" / "metadata"
    f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])


def _corrupt_array_files(step_dir):
    for f in (step_dir / "state").rglob("*"):
        if f.is_file() and f.parent.name == "d":
            f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])


def _corrupt_manifest(step_dir):
    f = step_dir / "state" / "manifest.ocdbt"
    f.write_bytes(f.read_bytes()[:-7])


def _tamper_payload(step_dir):
    f = step_dir / "payloads" / "metadata"
    data = json.loads(f.read_text())
    data["note"] = "edited by hand"
    f.write_text(json.dumps(data))


def _tamper_fingerprint(step_dir):
    """Stands in for a flipped bit Orbax cannot see: the data is intact, the record disagrees."""
    f = step_dir / "meta" / "metadata"
    data = json.loads(f.read_text())
    leaf = next(l for l in data["leaves"] if "fingerprint" in l)
    leaf["fingerprint"] = (leaf["fingerprint"] + 1) % 2**32
    f.write_text(json.dumps(data))


def _drop_item(step_dir):
    for f in sorted((step_dir / "payloads").rglob("*"), reverse=True):
        f.unlink() if f.is_file() else f.rmdir()
    (step_dir / "payloads").rmdir()


@pytest.mark.parametrize("damage", [_corrupt_meta, _corrupt_array_files, _corrupt_manifest, _tamper_payload,
                                    _tamper_fingerprint, _drop_item], ids=lambda f: f.__name__.strip("_"))
def test_corrupt_checkpoint_is_a_typed_error_and_never_touched(tmp_path, trained, damage):
    _, _, _, state = trained
    ck.save(tmp_path, 1, state, {"note": "good"}, CONFIG)
    ck.save(tmp_path, 2, state, {"note": "good"}, CONFIG)
    damage(tmp_path / "2")
    before = _tree_digest(tmp_path / "2")
    target = ck.abstract_state(state)
    with pytest.raises(ck.CorruptCheckpointError) as err:
        ck.restore(tmp_path, target)  # newest: the damaged one
    assert err.value.step == 2 and "step 2" in str(err.value)
    with pytest.raises(ck.StepExistsError):
        ck.save(tmp_path, 2, state, {"note": "good"}, CONFIG)
    ck.save(tmp_path, 3, state, {"note": "good"}, CONFIG, keep=None)
    assert _tree_digest(tmp_path / "2") == before and ck.all_steps(tmp_path) == [1, 2, 3]
    good = ck.restore(tmp_path, target, step=1)
    chex.assert_trees_all_equal(_key_data(good.state), _key_data(state))
    assert good.payloads == {"note": "good"}


def test_incompatible_targets_name_the_problem(tmp_path, trained):
    _, _, _, state = trained
    ck.save(tmp_path, 5, state, {"library": "{\"not\": \"a library\"}"}, CONFIG)
    target = ck.abstract_state(state)

    no_ref = dict(target, ref_params=None, extra=jax.ShapeDtypeStruct((2,), jnp.float32))
    with pytest.raises(ck.StructureMismatchError) as err:
        ck.restore(tmp_path, no_ref, decoders={})
    assert err.value.missing == ["['extra']"]
    assert any(p.startswith("['ref_params']['embed']") for p in err.value.unexpected)
    params_only = ck.restore(tmp_path, {"params": target["params"]}, decoders={}, partial=True).state
    chex.assert_trees_all_equal(params_only["params"], state["params"])
    with pytest.raises(ck.StructureMismatchError):  # partial allows fewer leaves, never unknown ones
        ck.restore(tmp_path, dict(target, extra=jnp.zeros(2)), decoders={}, partial=True)

    wider = dataclasses.replace(CFG, vocab_size=256)
    other = dict(target, params=ck.abstract_state(nnx.split(abstract_model(wider))[1]))
    with pytest.raises(ck.ShapeMismatchError) as err:
        ck.restore(tmp_path, other, decoders={})
    assert list(err.value.mismatches) == ["['params']['embed'].value"]
    assert err.value.mismatches["['params']['embed'].value"] == ("float32[128, 64]", "float32[256, 64]")

    cast = dict(target, step=jax.ShapeDtypeStruct((), jnp.int32))
    with pytest.raises(ck.ShapeMismatchError, match=r"\['step'\]"):
        ck.restore(tmp_path, cast, decoders={})

    with pytest.raises(ck.LibraryPayloadError) as err:
        ck.restore(tmp_path, target)
    assert err.value.name == "library" and isinstance(err.value, ck.IncompatibleCheckpointError)
    assert ck.restore(tmp_path, target, decoders={}).payloads["library"] == "{\"not\": \"a library\"}"
    assert ck.all_steps(tmp_path) == [5]


def test_keep_missing_steps_and_bad_inputs(tmp_path, trained):
    _, _, _, state = trained
    small = {"w": jnp.arange(6.0).reshape(2, 3), "step": 0}
    assert ck.latest_step(tmp_path / "none") is None
    with pytest.raises(ck.NoCheckpointError):
        ck.restore(tmp_path / "none", small)
    manager = ck.open_manager(tmp_path, keep=2)
    for s in (1, 2, 3):
        ck.save(manager, s, dict(small, step=s), {"s": {"i": s}}, {"seed": s})
    manager.close()
    assert ck.all_steps(tmp_path) == [2, 3]
    with pytest.raises(ck.NoCheckpointError, match=r"no checkpoint of step 1; have \[2, 3\]"):
        ck.restore(tmp_path, small, step=1)
    got = ck.restore(tmp_path, ck.abstract_state(small))
    assert got.step == 3 and got.state["step"] == 3 and got.payloads == {"s": {"i": 3}} and got.config == {"seed": 3}
    chex.assert_trees_all_equal(got.state["w"], small["w"])

    # A save killed before its commit leaves only Orbax's temporary folder: not a step, and kept.
    leftover = tmp_path / "7.orbax-checkpoint-tmp-1234"
    (leftover / "state").mkdir(parents=True)
    (leftover / "state" / "half").write_bytes(b"\x00" * 10)
    assert ck.all_steps(tmp_path) == [2, 3] and ck.restore(tmp_path, small).step == 3 and leftover.is_dir()

    ck.save(tmp_path, 4, {"step": 4, "ref_step": 1}, {}, None)  # scalars only: no array item at all
    assert ck.restore(tmp_path, {"step": 0, "ref_step": 0}).state == {"step": 4, "ref_step": 1}

    with pytest.raises(ck.InvalidSaveError, match="config"):
        ck.save(tmp_path, 9, small, {}, {"f": object()})
    with pytest.raises(ck.InvalidSaveError, match="abstract"):
        ck.save(tmp_path, 9, ck.abstract_state(small), {}, {})
    assert ck.all_steps(tmp_path) == [2, 3, 4] and not any(p.name.startswith("9") for p in tmp_path.iterdir())


@flax.struct.dataclass
class _LearnerLike:
    params: dict
    opt_state: object
    step: jax.Array


def test_any_pytree_state_and_colliding_names(tmp_path):
    """A flax.struct train state (as the learner keeps) round-trips with its own types; two paths
    that sanitise to the same Orbax key stay distinct."""
    params = {"a.b": jnp.ones((2, 2)), "a": {"b": jnp.full((2, 2), 2.0)}, "c": jnp.arange(3, dtype=jnp.int8)}
    optimizer = optax.chain(optax.clip_by_global_norm(1.0), optax.sgd(0.1, momentum=0.9))
    state = _LearnerLike(params=params, opt_state=optimizer.init(params), step=jnp.asarray(5, jnp.int32))
    ck.save(tmp_path, 5, state, {}, {})
    got = ck.restore(tmp_path, ck.abstract_state(state)).state
    assert type(got) is _LearnerLike and isinstance(got.opt_state[1][0], optax.TraceState)
    chex.assert_trees_all_equal(got, state)
    meta = json.loads((tmp_path / "5" / "meta" / "metadata").read_text())
    names = [leaf["name"] for leaf in meta["leaves"]]
    assert len(set(names)) == len(names) and "params.a.b" in names and "params.a.b_1" in names


def _per_layer(tree, n_layers):
    """``tree`` as checkpoints before the stacked layers held it: under every ``layers`` key, a list of
    one subtree per layer (each the layer's slice) instead of one stacked subtree."""
    if isinstance(tree, dict):
        return {k: ([jax.tree.map(lambda a, i=i: a[i], v) for i in range(n_layers)] if k == "layers"
                    else _per_layer(v, n_layers)) for k, v in tree.items()}
    return tree


def test_a_checkpoint_with_one_leaf_per_layer_restores_into_the_stacked_layers(tmp_path):
    """Runs saved before the decoder's layers were stored stacked (``['layers'][i][...]``) restore
    into today's model (``['layers'][...]``, leading layer axis), exactly and verified, params and
    Adam moments alike; a per-layer leaf of the wrong shape is still a typed error."""
    cfg = dataclasses.replace(CFG, n_layers=3)
    params = nnx.to_pure_dict(nnx.state(create_model(cfg, seed=2)))
    opt = {"mu": jax.tree.map(lambda a: a + 1.0, params), "count": jnp.int32(4)}
    state = {"params": params, "opt": opt, "step": 4}
    old = {"params": _per_layer(params, 3), "opt": {"mu": _per_layer(opt["mu"], 3), "count": opt["count"]},
           "step": 4}
    ck.save(tmp_path, 4, old, {}, CONFIG)
    restored = ck.restore(tmp_path, ck.abstract_state(state), decoders={}).state
    chex.assert_trees_all_equal(restored, state)
    assert restored["params"]["layers"]["attn"]["q_proj"].shape == (3, cfg.d_model, cfg.n_heads, cfg.head_dim)
    only = ck.restore(tmp_path, {"params": ck.abstract_state(params)}, decoders={}, partial=True).state
    chex.assert_trees_all_equal(only["params"], params)

    deeper = nnx.to_pure_dict(nnx.state(abstract_model(dataclasses.replace(cfg, n_layers=4))))
    with pytest.raises(ck.StructureMismatchError) as err:  # 4 stacked layers from a 3-layer run
        ck.restore(tmp_path, dict(ck.abstract_state(state), params=ck.abstract_state(deeper)), decoders={})
    assert "['params']['layers']['attn']['q_proj']" in err.value.missing

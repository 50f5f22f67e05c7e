"""One device mesh with named axes (data, fsdp, tensor) and logical-axis rules.

Every parameter and activation dimension carries a logical name ("vocab", "embed",
"heads", "act_batch", ...). `LOGICAL_RULES` maps a logical name to mesh axes (as in
MaxText); `logical_to_spec` turns a tuple of names into a `PartitionSpec` for a given
mesh, dropping any mesh axis that is absent, of size 1, already used by an earlier
dimension, or that does not divide the dimension (so tiny models still shard cleanly).
`param_shardings` and `opt_state_shardings` are the one place that turns a model's state and its
optimizer state into shardings by those rules.
"""

from __future__ import annotations

from typing import Any, Sequence

import jax
import numpy as np
import optax
from flax import nnx
from jax.sharding import AxisType, Mesh, NamedSharding, PartitionSpec as P

MESH_AXES = ("data", "fsdp", "tensor")

# logical name -> mesh axes, in order of preference (several may combine on one dim).
LOGICAL_RULES: dict[str, tuple[str, ...]] = {
    # parameters
    "vocab": ("tensor",),
    "embed": ("fsdp",),
    "heads": ("tensor",),
    "kv_heads": ("tensor",),
    "head_dim": (),
    "mlp": ("tensor",),
    "norm": (),
    # activations
    "act_batch": ("data", "fsdp"),
    "act_seq": (),
    "act_embed": (),
    "act_heads": ("tensor",),
    "act_kv_heads": ("tensor",),
    "act_mlp": ("tensor",),
    "act_vocab": ("tensor",),
    # the embedding lookup's output before it takes the activation layout: the table is gathered
    # over its vocab shards (tensor) but keeps its embed shards (fsdp), so the lookup's rows are
    # split by data and its width by fsdp; a direct lookup into the (tensor, fsdp)-sharded table
    # made XLA replicate the whole result ("involuntary full rematerialization")
    "act_lookup_batch": ("data",),
    "act_lookup_embed": ("fsdp",),
    "cache_batch": ("data", "fsdp"),
    "cache_seq": (),
    "cache_kv_heads": ("tensor",),
    "layers": (),
}


def make_mesh(data: int = 1, fsdp: int = 1, tensor: int = 1, devices=None) -> Mesh:
    """A (data, fsdp, tensor) mesh with Auto axis types (implicit sharding propagation)."""
    shape = (data, fsdp, tensor)
    n = int(np.prod(shape))
    if devices is None:
        if n > jax.device_count():
            raise ValueError(f"mesh {dict(zip(MESH_AXES, shape))} needs {n} devices, "
                             f"have {jax.device_count()}")
        devices = jax.devices()[:n]
    return jax.make_mesh(shape, MESH_AXES, axis_types=(AxisType.Auto,) * 3, devices=devices)


def logical_to_spec(names: Sequence[str | None], shape: Sequence[int] | None = None,
                    mesh: Mesh | None = None, rules: dict[str, tuple[str, ...]] | None = None) -> P:
    """PartitionSpec for dims named `names` on `mesh` (the ambient mesh if None)."""
    rules = LOGICAL_RULES if rules is None else rules
    if mesh is None:
        mesh = jax.sharding.get_abstract_mesh()
    sizes = dict(mesh.shape) if mesh is not None and not mesh.empty else {}
    used: set[str] = set()
    out = []
    for i, name in enumerate(names):
        if name is None:
            out.append(None)
            continue
        if name not in rules:
            raise KeyError(f"no logical-axis rule for {name!r}")
        dim = None if shape is None else shape[i]
        axes = []
        prod = 1
        for ax in rules[name]:
            size = sizes.get(ax, 1)
            if size == 1 or ax in used:
                continue
            if dim is not None and dim % (prod * size):
                continue
            axes.append(ax)
            prod *= size
        used.update(axes)
        out.append(None if not axes else axes[0] if len(axes) == 1 else tuple(axes))
    return P(*out)


def named_sharding(mesh: Mesh, names: Sequence[str | None], shape: Sequence[int]) -> NamedSharding:
    return NamedSharding(mesh, logical_to_spec(names, shape, mesh))


def param_shardings(state: nnx.State, mesh: Mesh) -> nnx.State:
    """Per variable of an (abstract or concrete) ``nnx.State``, the NamedSharding its
    ``logical_axes`` metadata asks for on ``mesh`` (replicated where it has none), in a copy of the
    variable: the result has the state's exact structure, so it serves ``jax.device_put(state, ...)``
    and :func:`opt_state_shardings` as it is (``nnx.to_pure_dict`` of it gives the pure-dict form)."""
    def one(var):
        value = var.get_value()
        axes = var.get_metadata().get("logical_axes") or (None,) * value.ndim
        return var.replace(named_sharding(mesh, axes, value.shape))
    return jax.tree.map(one, state, is_leaf=lambda x: isinstance(x, nnx.Variable))


def opt_state_shardings(optimizer: optax.GradientTransformation, opt_state: Any, param_shardings: Any,
                        mesh: Mesh) -> Any:
    """Shardings for an (abstract) optax state: the parts that mirror the params (Adam's mu/nu,
    momenta) take the params' shardings, so FSDP shards them too; the rest (counts) is replicated."""
    replicated = NamedSharding(mesh, P())
    return optax.tree_map_params(optimizer, lambda _, sharding: sharding, opt_state, param_shardings,
                                 transform_non_params=lambda _: replicated)


def constrain(x: jax.Array, names: Sequence[str | None]) -> jax.Array:
    """`with_sharding_constraint` by logical names; a no-op without an ambient mesh."""
    mesh = jax.sharding.get_abstract_mesh()
    if mesh is None or mesh.empty or all(s == 1 for s in mesh.shape.values()):
        return x
    return jax.lax.with_sharding_constraint(x, logical_to_spec(names, x.shape, mesh))


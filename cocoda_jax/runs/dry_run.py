"""``launch.coevolve --dry_run``: the per-device memory a config's train steps need, with no weights.

A real-scale run must know before it starts whether its planner, optimizer state and train steps fit
the accelerators. This builds the planner *abstractly* (``nnx.eval_shape``: shapes, dtypes and
logical axes, no arrays), places it on the config's mesh by the same sharding rules as a real run,
and lowers and compiles the jitted SFT and GRPO steps of :class:`~cocoda_jax.rl.learner.Learner`
on abstract batches of the config's sizes. Per device it reports:

* ``params``: the bytes of this device's shards of the parameters (what FSDP/tensor axes leave it);
* ``optimizer``: the same for the optax state (Adam's moments are sharded like their params);
* ``reference``: the frozen KL reference's params when ``grpo.beta > 0`` (a second copy), else 0;
* ``train_step_temp``: XLA's temporary buffers of the larger compiled step
  (``compiled.memory_analysis().temp_size_in_bytes``: activations kept for the backward pass,
  gradients, micro-batch accumulators), read from the compiled program itself;
* ``total``: the sum: what one device holds at the peak of a train step.

A *topology* (``--dry_run_topology``, :func:`parse_topology`) names the machines the run is meant for:
a TPU slice (``v5p-128``: 64 chips on 16 hosts), GPU nodes (``4x8xh100``) or explicit counts
(``devices=64,hosts=16,device_gb=95``). ``data = -1`` then takes the devices the other axes leave,
as on the real slice (so the per-device batch is the real one), and the plan adds the device's
memory, the hosts, and the headroom the exact parts leave (``device_bytes - params - optimizer -
reference``). Without a topology ``data = -1`` counts as 1.

The devices are the host CPU's, as many fake ones as the mesh needs,
so ``train_step_temp`` comes from XLA's CPU compiler, whose buffer assignment is not the GPU's or
TPU's. It is **not** a reliable accelerator estimate: XLA:CPU does not show what rematerialisation
saves (a 16-layer toy MLP's gradient reports 145 MB of temporaries without ``jax.checkpoint`` and
176 MB with it; the 8B node8 config: 1,807 GB either way). ``params``, ``optimizer`` and ``reference``
are exact (the shard shapes of the run's own shardings), and so is each step's ``logits_bytes``: one
micro-batch's float32 logits on a device, a floor under the step's memory. Not counted: the
sampler's KV cache (rollouts run between train steps, not during them), the XLA runtime's own
reserve, and the host side.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import jax
import numpy as np

from cocoda_jax.models import make_mesh
from cocoda_jax.errors import ConfigError
from cocoda_jax.models.config import TOKENIZER_VOCAB_PRESETS, get_preset
from cocoda_jax.models.transformer import abstract_model
from cocoda_jax.rl.learner import Learner
from cocoda_jax.runs import builders
from cocoda_jax.runs.settings import RunSettings

H200_BYTES = 141 * 10**9

#: Accelerators a topology can name: bytes of memory per device, devices per host. TPU v4/v5p are
#: counted as their accelerator types are, in TensorCores (2 a chip; JAX sees one device a chip).
GPU_BYTES = {"h100": 80 * 10**9, "h200": H200_BYTES, "a100": 80 * 10**9}  # the 80 GB parts
TPU_CHIPS = {"v4": (32 * 2**30, 4), "v5p": (95 * 10**9, 4)}


@dataclasses.dataclass(frozen=True)
class Topology:
    """The machines a dry run plans for: ``devices`` accelerators on ``hosts`` hosts (one JAX
    process each), ``device_bytes`` of memory per device."""

    name: str
    devices: int
    hosts: int
    device_bytes: int

    def __post_init__(self) -> None:
        if min(self.devices, self.hosts, self.device_bytes) < 1 or self.devices % self.hosts:
            raise ConfigError(f"topology {self.name!r}: {self.devices} devices on {self.hosts} hosts "
                              f"of {self.device_bytes} bytes each is not a machine")

    @property
    def per_host(self) -> int:
        return self.devices // self.hosts


def _positive(text: str, what: str, spec: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise ConfigError(f"--dry_run_topology={spec!r}: {what} must be a positive integer, got {text!r}")
    return int(text)


def parse_topology(spec: str) -> Topology:
    """``v4-N`` / ``v5p-N`` (N TensorCores: N/2 chips, 4 a host), ``NODESxGPUSxKIND`` (``KIND`` in
    :data:`GPU_BYTES`; one host a node), or ``devices=D,hosts=H,device_gb=G``; :class:`ConfigError` else."""
    text = spec.strip().lower()
    if "=" in text:
        fields = dict(part.split("=", 1) for part in text.split(",") if "=" in part)
        if set(fields) != {"devices", "hosts", "device_gb"} or text.count("=") != 3:
            raise ConfigError(f"--dry_run_topology={spec!r}: give devices=D,hosts=H,device_gb=G")
        try:
            gb = float(fields["device_gb"])
        except ValueError:
            raise ConfigError(f"--dry_run_topology={spec!r}: device_gb must be a number") from None
        return Topology(spec, _positive(fields["devices"], "devices", spec), _positive(fields["hosts"], "hosts", spec),
                        int(gb * 10**9))
    kind, _, cores = text.partition("-")
    if kind in TPU_CHIPS and cores:
        n = _positive(cores, "the TensorCore count", spec)
        if n % 2:
            raise ConfigError(f"--dry_run_topology={spec!r}: {kind} slices count TensorCores, two a chip")
        chip_bytes, per_host = TPU_CHIPS[kind]
        chips = n // 2
        return Topology(spec, chips, max(1, chips // per_host), chip_bytes)
    parts = text.split("x")
    if len(parts) == 3 and parts[2] in GPU_BYTES:
        nodes, gpus = _positive(parts[0], "the node count", spec), _positive(parts[1], "GPUs a node", spec)
        return Topology(spec, nodes * gpus, nodes, GPU_BYTES[parts[2]])
    raise ConfigError(f"--dry_run_topology={spec!r}: not v4-N, v5p-N, NODESxGPUSx{{{','.join(GPU_BYTES)}}} "
                      "or devices=D,hosts=H,device_gb=G")


def mesh_shape(settings: RunSettings, topology: Topology | None = None) -> tuple[int, int, int]:
    """(data, fsdp, tensor) of the dry run: the config's axes; ``data = -1`` takes the devices the
    others leave on ``topology`` (as on the real machines), or 1 without one. :class:`ConfigError`
    when the mesh does not fit the topology."""
    m = settings.mesh
    if topology is None:
        return (m.data if m.data > 0 else 1), m.fsdp, m.tensor
    model_axes = m.fsdp * m.tensor
    data = m.data if m.data > 0 else topology.devices // model_axes
    if data < 1 or data * model_axes > topology.devices:
        raise ConfigError(f"config.mesh (data={m.data}, fsdp={m.fsdp}, tensor={m.tensor}) needs more than the "
                          f"{topology.devices} devices of {topology.name}")
    return data, m.fsdp, m.tensor


def use_fake_cpu_devices(count: int) -> None:
    """Runs JAX on ``count`` host-CPU devices; only possible before JAX has started a backend
    (the launcher calls it first). Afterwards the devices already there must be enough."""
    try:
        jax.config.update("jax_platforms", "cpu")
        jax.config.update("jax_num_cpu_devices", count)
    except RuntimeError:  # a backend is already up: keep it (checked against the mesh below)
        pass


def _model_config(settings: RunSettings):
    model = settings.model
    if model.hf_checkpoint:
        from cocoda_jax.models import load_config  # config.json only: no weights are read
        return load_config(model.hf_checkpoint)
    try:
        cfg = get_preset(model.preset)
    except Exception as e:
        raise ConfigError(f"config.model.preset: {e}") from e
    if model.preset in TOKENIZER_VOCAB_PRESETS:
        cfg = dataclasses.replace(cfg, vocab_size=model.vocab_size)
    return cfg


def _shard_bytes(tree: Any) -> int:
    """The bytes one device holds of an abstract tree placed with NamedShardings (the largest
    shard: uneven splits are padded to it)."""
    total = 0
    for leaf in jax.tree.leaves(tree):
        shape = leaf.sharding.shard_shape(leaf.shape) if leaf.sharding is not None else leaf.shape
        total += math.prod(shape) * np.dtype(leaf.dtype).itemsize
    return int(total)


def memory_plan(config: Any, config_name: str = "", topology: Topology | None = None) -> dict[str, Any]:
    """The dry run's JSON (see the module docstring); :class:`ConfigError` when the mesh needs
    more devices than JAX has (or than ``topology`` has)."""
    settings = RunSettings.of(config)
    data, fsdp, tensor = mesh_shape(settings, topology)
    need = data * fsdp * tensor
    if jax.device_count() < need:
        raise ConfigError(f"the dry run of mesh data={data}, fsdp={fsdp}, tensor={tensor} needs {need} devices, "
                          f"JAX has {jax.device_count()} (start it with --dry_run before anything else uses JAX)")
    mesh = make_mesh(data, fsdp, tensor, devices=jax.devices()[:need])
    cfg = _model_config(settings)
    model = abstract_model(cfg)
    sft = Learner.abstract(model, builders.sft_learner_config(settings), mesh)
    grpo = Learner.abstract(model, builders.grpo_learner_config(settings), mesh)
    beta = grpo.config.grpo.beta
    packed = settings.sft.pack_length > 0
    steps = {}
    # packed SFT rows: at most one a demonstration, each of pack_length tokens or of the longest episode's
    for kind, learner, rows, length in (
            ("sft", sft, settings.sft.batch_size, max(settings.rollout.max_len, settings.sft.pack_length)),
            ("grpo", grpo, settings.grpo.tasks_per_iteration * settings.grpo.group_size, settings.rollout.max_len)):
        compiled = learner.lower_step(kind, rows, length, with_ref=beta > 0, packed=packed and kind == "sft").compile()
        ma = compiled.memory_analysis()
        micro = learner.config.num_micro_batches
        per_device_rows = -(-rows // (micro * data * fsdp))  # the batch axes are data x fsdp
        steps[kind] = {"rows": rows, "length": length, "micro_batches": micro,
                       "temp_bytes": int(ma.temp_size_in_bytes), "argument_bytes": int(ma.argument_size_in_bytes),
                       "output_bytes": int(ma.output_size_in_bytes), "alias_bytes": int(ma.alias_size_in_bytes),
                       # exact arithmetic, whatever the compiler: one micro-batch's float32 logits on a device
                       # (with model.logits_chunk: one chunk's positions, not the whole sequence's)
                       "logits_bytes": per_device_rows * min(learner.config.logits_chunk or length - 1, length - 1)
                       * cfg.vocab_size * 4}
    state = grpo.abstract_state()
    params, optimizer = _shard_bytes(state.params), _shard_bytes(state.opt_state)
    reference = params if beta > 0 else 0
    temp = max(s["temp_bytes"] for s in steps.values())
    per_device = {"params": params, "optimizer": optimizer, "reference": reference, "train_step_temp": temp,
                  "total": params + optimizer + reference + temp}
    n_params = sum(math.prod(x.shape) for x in jax.tree.leaves(state.params))
    target = {} if topology is None else {"topology": {
        "name": topology.name, "devices": topology.devices, "hosts": topology.hosts, "per_host": topology.per_host,
        "device_bytes": topology.device_bytes, "device_gb": round(topology.device_bytes / 1e9, 2),
        "mesh_devices": data * fsdp * tensor,
        # exact: what the state's shards leave of a device for the step's activations, the KV cache, XLA
        "headroom_after_state_gb": round((topology.device_bytes - params - optimizer - reference) / 1e9, 2)}}
    return {"config": config_name, "mesh": {"data": data, "fsdp": fsdp, "tensor": tensor},
            "model": {"preset": settings.model.preset, "params": int(n_params), "param_dtype": cfg.param_dtype,
                      "layers": cfg.n_layers},
            "per_device_bytes": per_device, "per_device_gb": {k: round(v / 1e9, 2) for k, v in per_device.items()},
            # no fits/does-not-fit verdict: the temporaries are XLA:CPU's (see the module docstring)
            "train_step_temp_from": f"xla:{jax.default_backend()} buffer assignment (not an accelerator estimate)",
            "h200_bytes": H200_BYTES, "steps": steps, "backend": jax.default_backend(), **target}


__all__ = ["GPU_BYTES", "H200_BYTES", "TPU_CHIPS", "Topology", "memory_plan", "mesh_shape", "parse_topology",
           "use_fake_cpu_devices"]

"""``launch.coevolve --dry_run --dry_run_topology=...``: the machines a dry run plans for (a TPU slice,
GPU nodes, explicit counts), how ``data = -1`` resolves on them, and what the plan adds."""

import json
import subprocess
import sys

import pytest

from cocoda_jax.errors import ConfigError
from cocoda_jax.runs import dry_run
from cocoda_jax.runs.settings import RunSettings
from tests.runs.conftest import tiny_config

pytestmark = pytest.mark.filterwarnings("ignore:Some donated buffers were not usable")


@pytest.mark.parametrize("spec, devices, hosts, device_bytes", [
    ("v5p-128", 64, 16, 95 * 10**9),       # 128 TensorCores, 2 a chip, 4 chips a host
    ("v5p-8", 4, 1, 95 * 10**9),
    ("v4-32", 16, 4, 32 * 2**30),
    ("4x8xh100", 32, 4, 80 * 10**9),
    ("1x8xH200", 8, 1, dry_run.H200_BYTES),
    ("devices=64,hosts=16,device_gb=95", 64, 16, 95 * 10**9),
])
def test_topologies_parse(spec, devices, hosts, device_bytes):
    t = dry_run.parse_topology(spec)
    assert (t.devices, t.hosts, t.device_bytes) == (devices, hosts, device_bytes) and t.per_host == devices // hosts


@pytest.mark.parametrize("spec", ["v5p-7", "v5p-", "v9-8", "2x8xk80", "4x0xh100", "devices=8,hosts=3,device_gb=16",
                                  "devices=8,device_gb=16", "devices=8,hosts=2,device_gb=lots", ""])
def test_bad_topologies_are_config_errors(spec):
    with pytest.raises(ConfigError, match="topology"):
        dry_run.parse_topology(spec)


def test_data_minus_one_takes_what_the_topology_leaves():
    settings = RunSettings.of(tiny_config(mesh__data=-1, mesh__fsdp=2, mesh__tensor=1))
    assert dry_run.mesh_shape(settings) == (1, 2, 1)  # without a topology: one replica
    assert dry_run.mesh_shape(settings, dry_run.parse_topology("devices=8,hosts=2,device_gb=16")) == (4, 2, 1)
    with pytest.raises(ConfigError, match="needs more than the 1 devices"):
        dry_run.mesh_shape(settings, dry_run.parse_topology("devices=1,hosts=1,device_gb=16"))
    fixed = RunSettings.of(tiny_config(mesh__data=2, mesh__fsdp=4, mesh__tensor=1))
    with pytest.raises(ConfigError, match="needs more than"):
        dry_run.mesh_shape(fixed, dry_run.parse_topology("v5p-8"))


def _small(**mesh):
    c = tiny_config()
    c.mesh.update(mesh)
    c.rollout.max_len, c.rollout.length_multiple = 64, 64
    return c


@pytest.mark.slow
def test_the_plan_on_a_topology_splits_the_batch_over_its_replicas():
    """data=-1 on 4 devices with fsdp=2 is 2 replicas: each device holds the same shards of the state
    as with 1 replica, and half the rows."""
    topology = dry_run.parse_topology("devices=4,hosts=2,device_gb=16")
    one = dry_run.memory_plan(_small(data=-1, fsdp=2, tensor=1), "tiny")
    two = dry_run.memory_plan(_small(data=-1, fsdp=2, tensor=1), "tiny", topology)
    assert one["mesh"]["data"] == 1 and two["mesh"] == {"data": 2, "fsdp": 2, "tensor": 1}
    assert two["per_device_bytes"]["params"] == one["per_device_bytes"]["params"]
    assert two["steps"]["grpo"]["logits_bytes"] * 2 == one["steps"]["grpo"]["logits_bytes"]
    t = two["topology"]
    assert (t["devices"], t["hosts"], t["per_host"], t["mesh_devices"]) == (4, 2, 2, 4) and "topology" not in one
    state = sum(two["per_device_bytes"][k] for k in ("params", "optimizer", "reference"))
    assert t["headroom_after_state_gb"] == round((16 * 10**9 - state) / 1e9, 2)


@pytest.mark.slow
def test_the_launcher_takes_a_topology():
    out = subprocess.run([sys.executable, "-m", "launch.coevolve", "--config=configs/tiny.py", "--dry_run",
                          "--dry_run_topology=devices=4,hosts=2,device_gb=16", "--config.mesh.data=-1",
                          "--config.mesh.fsdp=2", "--config.rollout.max_len=64", "--config.rollout.length_multiple=64"],
                         capture_output=True, text=True, timeout=600, check=True)
    plan = json.loads(out.stdout.strip().splitlines()[-1])
    assert plan["mesh"] == {"data": 2, "fsdp": 2, "tensor": 1} and plan["topology"]["hosts"] == 2
    bad = subprocess.run([sys.executable, "-m", "launch.coevolve", "--config=configs/tiny.py", "--dry_run",
                          "--dry_run_topology=v5p-7"], capture_output=True, text=True, timeout=600)
    assert bad.returncode != 0 and "TensorCores" in bad.stderr + bad.stdout

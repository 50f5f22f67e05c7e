"""``launch.coevolve --dry_run``: per-device memory from an abstract planner, without weights. The
abstract learner's shard sizes must equal a real learner's on the same mesh, and the launcher must
print its one JSON line with no workdir."""

import json
import math
import subprocess
import sys

import jax
import pytest

from cocoda_jax.errors import ConfigError
from cocoda_jax.runs import builders, dry_run
from cocoda_jax.runs.settings import RunSettings
from tests.runs.conftest import tiny_config

pytestmark = pytest.mark.filterwarnings("ignore:Some donated buffers were not usable")


def small_config(**mesh):
    c = tiny_config()
    c.mesh.update(dict(dict(data=1, fsdp=2, tensor=2), **mesh))
    c.rollout.max_len, c.rollout.length_multiple = 64, 64
    return c


def device_bytes(tree):
    """What device 0 really holds of a placed tree."""
    return sum(s.data.nbytes for leaf in jax.tree.leaves(tree) for s in leaf.addressable_shards
               if s.device == jax.devices()[0])


@pytest.mark.slow
def test_the_plan_matches_what_a_real_learner_holds_per_device():
    config = small_config()
    plan = dry_run.memory_plan(config, "tiny")
    assert plan["mesh"] == {"data": 1, "fsdp": 2, "tensor": 2} and plan["backend"] == "cpu"
    settings = RunSettings.of(config)
    mesh = builders.mesh_of(settings)
    model = builders.build_planner(settings, settings.model.vocab_size, mesh)
    real = builders.grpo_learner(model, settings, mesh).init_state()
    per = plan["per_device_bytes"]
    assert per["params"] == device_bytes(real.params) and per["optimizer"] == device_bytes(real.opt_state)
    n_params = sum(math.prod(x.shape) for x in jax.tree.leaves(real.params))
    assert plan["model"]["params"] == n_params and per["params"] < 4 * n_params  # float32, sharded
    assert per["reference"] == 0 and per["train_step_temp"] > 0
    assert per["total"] == per["params"] + per["optimizer"] + per["reference"] + per["train_step_temp"]
    grpo = plan["steps"]["grpo"]
    assert grpo["rows"] == settings.grpo.tasks_per_iteration * settings.grpo.group_size
    per_device_rows = -(-grpo["rows"] // (grpo["micro_batches"] * 2))  # fsdp 2 splits the batch
    assert grpo["logits_bytes"] == per_device_rows * 63 * settings.model.vocab_size * 4
    assert plan["train_step_temp_from"].startswith("xla:cpu") and "fits_h200" not in plan


def test_a_mesh_larger_than_the_devices_is_a_config_error():
    with pytest.raises(ConfigError, match="needs 16 devices"):
        dry_run.memory_plan(small_config(data=4, fsdp=2, tensor=2))


def test_the_launcher_prints_one_json_line_without_a_workdir():
    out = subprocess.run([sys.executable, "-m", "launch.coevolve", "--config=configs/tiny.py", "--dry_run",
                          "--config.mesh.fsdp=2", "--config.rollout.max_len=64", "--config.rollout.length_multiple=64"],
                         capture_output=True, text=True, timeout=600, check=True)
    plan = json.loads(out.stdout.strip().splitlines()[-1])
    assert plan["config"].endswith("configs/tiny.py") and plan["mesh"] == {"data": 1, "fsdp": 2, "tensor": 1}
    assert set(plan["per_device_bytes"]) >= {"params", "optimizer", "train_step_temp", "total"}

"""Every shipped config loads, its sections build their components, and its mesh fits its target."""

import importlib

import jax
import pytest

from cocoda_jax.coevolve.abstractor import AbstractorConfig
from cocoda_jax.coevolve.acceptance import AcceptanceConfig
from cocoda_jax.rods.config import RodsConfig
from cocoda_jax.runs import builders, domains, settings
from cocoda_jax.errors import ConfigError

REAL = ("qwen3_0p6b_gsm8k", "qwen3_0p6b_math", "qwen3_8b_gsm8k", "qwen3_8b_math", "qwen3_8b_bfcl")


def _load(name, *args):
    return importlib.import_module(f"configs.{name}").get_config(*args)


@pytest.mark.parametrize("name", ("default", "train_math", "bfcl_multi_turn", *REAL))
def test_sections_build(name):
    c = _load(name)
    builders.rollout_config(c)
    builders.reward_config(c)
    builders.retrieval_config(c)
    settings.section(c.rods, "thresholds", RodsConfig)
    settings.section(c.coevolve, "abstractor", AbstractorConfig)
    settings.section(c.coevolve, "acceptance", AcceptanceConfig)


@pytest.mark.parametrize("name", REAL)
def test_node8_meshes_use_eight_devices_and_tpu_meshes_shard_fsdp(name):
    assert jax.device_count() == 8
    mesh = builders.mesh_of(_load(name, "node8"))
    assert mesh.devices.size == 8 and dict(mesh.shape)["fsdp"] == 4
    tpu = _load(name, "tpu")
    assert tpu.mesh.data == -1 and tpu.mesh.fsdp == 8


def test_a_benchmark_domain_without_its_files_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="data_dir"):
        domains.build_domain(_load("qwen3_0p6b_gsm8k"), sandbox=None)
    c = _load("qwen3_0p6b_math")
    c.domain.data_dir = str(tmp_path)
    with pytest.raises(ConfigError, match="MATH"):
        domains.build_domain(c, sandbox=None)


def test_a_mesh_larger_than_the_machine_is_a_config_error():
    c = _load("qwen3_8b_math", "tpu")  # fsdp 8 x tensor 4 = 32 devices
    with pytest.raises(ConfigError, match="mesh"):
        builders.mesh_of(c)


def test_retrieval_section_is_validated():
    c = _load("default")
    assert builders.retrieval_config(c).mode == "cascade"
    c.retrieval.mode = "everything"
    with pytest.raises(ConfigError, match="retrieval.mode"):
        builders.retrieval_config(c)
    c = _load("default")
    c.retrieval.kk = 3
    with pytest.raises(ConfigError, match="unknown key"):
        builders.retrieval_config(c)


def test_bfcl_categories_are_checked_before_anything_loads():
    c = _load("bfcl_multi_turn")
    c.domain.categories = "multi_turn_base,memory"
    with pytest.raises(ConfigError, match="multi-turn categories"):
        domains.build_domain(c, sandbox=None)


def test_the_grpo_variant_is_chosen_by_name_and_an_unknown_one_is_refused():
    import jax.numpy as jnp  # noqa: F401 - the learner builds on the default backend
    from cocoda_jax.models import create_model, get_preset
    import dataclasses
    c = _load("default")
    c.mesh.data = 1
    model = create_model(dataclasses.replace(get_preset("tiny"), vocab_size=64), seed=0)
    c.grpo.loss = c.grpo.advantage = "dr_grpo"
    assert builders.grpo_learner(model, c, None).config.grpo.loss == "dr_grpo"
    c.grpo.loss = "nope"
    with pytest.raises(ConfigError, match="config.grpo"):
        builders.grpo_learner(model, c, None)

"""The run config is parsed once, at the edge (cocoda_jax/runs/settings.py): every shipped config
parses, a wrong type, an out-of-range value or an unknown key in any section is a ConfigError naming
the key, the optional keys keep their old defaults and no other key gets one, parsing is pure, and
the jobs read no raw config value any more."""

from __future__ import annotations

import ast
import copy
import dataclasses
import importlib
import inspect
import json
import re
from pathlib import Path

import pytest

from cocoda_jax import checkpoint as ckpt
from cocoda_jax.coevolve.abstractor import AbstractorConfig
from cocoda_jax.coevolve.acceptance import AcceptanceConfig
from cocoda_jax.rods.config import RodsConfig
from cocoda_jax.runs import coevolve
from cocoda_jax.runs import builders, rundir, settings
from cocoda_jax.errors import ConfigError
from cocoda_jax.runs.settings import (CoevolveSettings, DomainSettings, GrpoSettings, RodsSettings, RunSettings,
                                      SftSettings)
from configs import default, real_scale

ROOT = Path(__file__).resolve().parents[2]
#: configs/*.py that are not run configs, and what they are for instead.
NOT_RUN_CONFIGS = {"demo_foundation": "launch.demo_foundation's own keys (depth bound, workers, lookup limit)",
                   "study": "launch.study's own keys (run, seeds, arms, bootstrap)"}
#: configs/*.py without get_config (helpers the others import).
HELPERS = {"real_scale"}


def _config_modules() -> list[str]:
    return sorted(p.stem for p in (ROOT / "configs").glob("*.py") if p.stem != "__init__")


def _shipped() -> list[tuple[str, tuple]]:
    """(module, get_config args) for every run config: the mesh-taking ones at each mesh."""
    out = []
    for name in _config_modules():
        if name in NOT_RUN_CONFIGS or name in HELPERS:
            continue
        params = inspect.signature(importlib.import_module(f"configs.{name}").get_config).parameters
        out += [(name, ())] + ([(name, ("node8",)), (name, ("tpu",))] if "mesh" in params else [])
    return out


def _dict(**changes):
    """default.py as a plain dict with ``changes`` applied (``"grpo.group_size": 1``; a value of
    ``DELETE`` removes the key). Plain dicts let a test give any type (a ConfigDict refuses some)."""
    d = default.get_config().to_dict()
    for path, value in changes.items():
        *parents, key = path.split(".")
        target = d
        for p in parents:
            target = target[p]
        if value is DELETE:
            del target[key]
        else:
            target[key] = value
    return d


DELETE = object()


# ------------------------------------------------------------------------------------------------
# Every shipped config parses
# ------------------------------------------------------------------------------------------------


def test_every_config_file_is_covered():
    covered = {name for name, _ in _shipped()} | set(NOT_RUN_CONFIGS) | HELPERS
    assert covered == set(_config_modules())
    assert {"default", "train_math", "chaos", "bfcl_multi_turn", "qwen3_8b_bfcl"} <= covered


@pytest.mark.parametrize("name,args", _shipped(), ids=lambda v: v if isinstance(v, str) else ":".join(v) or "-")
def test_every_shipped_config_parses_to_its_own_values(name, args):
    c = importlib.import_module(f"configs.{name}").get_config(*args)
    s = RunSettings.parse(c)
    d = c.to_dict()
    assert s.seed == d["seed"]
    for section in ("model", "mesh", "sft", "grpo", "warm", "sandbox", "checkpoint", "report", "distributed"):
        assert dataclasses.asdict(getattr(s, section)) == d[section], section
    for section in ("rollout", "retrieval", "reward"):  # the older dataclasses, parsed as before
        assert getattr(s, section) == settings.section(c, section, type(getattr(s, section)))
    co = {k: v for k, v in d["coevolve"].items() if k not in ("abstractor", "acceptance", "teacher")}
    assert {k: getattr(s.coevolve, k) for k in co} == co
    assert dataclasses.asdict(s.coevolve.teacher) == d["coevolve"]["teacher"]
    assert s.coevolve.abstractor == AbstractorConfig(**d["coevolve"]["abstractor"])
    assert s.coevolve.acceptance == AcceptanceConfig(**d["coevolve"]["acceptance"])
    assert s.rods.thresholds == RodsConfig(**d["rods"]["thresholds"])
    assert (s.rods.enabled, s.rods.n_seeds, s.rods.background, s.rods.signal) == \
        (d["rods"]["enabled"], d["rods"]["n_seeds"], d["rods"]["background"], d["rods"]["signal"])
    assert s.domain.as_config().to_dict() == d["domain"]


@pytest.mark.parametrize("preset,mesh", sorted(real_scale.MESHES))
@pytest.mark.parametrize("benchmark", ["gsm8k", "math"])
def test_real_scale_configs_parse_at_every_mesh(preset, mesh, benchmark):
    s = RunSettings.parse(real_scale.make(preset, benchmark, mesh))
    assert dataclasses.asdict(s.mesh) == real_scale.MESHES[(preset, mesh)]
    assert s.model.preset == preset and s.domain.name == benchmark and s.grpo.beta == 0.01


def test_the_foundation_demo_config_is_not_a_run_config():
    with pytest.raises(ConfigError, match=r"unknown section\(s\) \['lookup_limit', 'max_depth'"):
        RunSettings.parse(importlib.import_module("configs.demo_foundation").get_config())


def test_a_command_line_override_reaches_the_typed_field():
    c = default.get_config()
    c.grpo.group_size, c.coevolve.rho, c.rods.enabled = 4, 1, False  # ConfigDict keeps rho a float
    s = RunSettings.parse(c)
    assert s.grpo.group_size == 4 and s.coevolve.rho == 1.0 and isinstance(s.coevolve.rho, float)
    assert s.rods.curriculum is None and RunSettings.parse(default.get_config()).rods.curriculum == s.rods.thresholds


# ------------------------------------------------------------------------------------------------
# Purity
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["default", "bfcl_multi_turn", "qwen3_8b_math"])
def test_parsing_is_pure(name):
    c = importlib.import_module(f"configs.{name}").get_config()
    before = copy.deepcopy(c.to_dict())
    a, b = RunSettings.parse(c), RunSettings.parse(c)
    assert a == b and a is not b and hash(a) == hash(b)
    assert c.to_dict() == before  # the ConfigDict is left as it was
    assert RunSettings.of(a) is a and RunSettings.of(c) == a
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.grpo.group_size = 3  # type: ignore[misc]
    # a checkpoint's saved (JSON) config parses to the same settings: what runs.evaluate reads
    saved = json.loads(json.dumps(ckpt.to_jsonable(c.to_dict(), "config")))
    assert RunSettings.parse(saved) == a


def test_the_domain_section_reaches_the_domain_as_it_was():
    c = importlib.import_module("configs.bfcl_multi_turn").get_config()
    section = RunSettings.parse(c).domain.as_config()
    assert section["categories"] == c.domain.categories and section.n_val == c.domain.n_val
    assert section.get("absent", 7) == 7 and section.to_dict() == c.domain.to_dict()


def test_the_builders_take_a_config_or_its_settings():
    c = default.get_config()
    s = RunSettings.parse(c)
    assert builders.rollout_config(s) is s.rollout and builders.rollout_config(c) == s.rollout
    assert builders.retrieval_config(s) is s.retrieval and builders.reward_config(c) == s.reward
    assert settings.section is not None and settings.RunSettings is RunSettings



@pytest.mark.parametrize("temperature", [1.0, 1.5])
def test_grpo_scores_at_the_rollouts_temperature(temperature):
    """One knob: ``rollout.temperature`` samples the rollouts and is the temperature GRPO's loss scores
    the policy at; the SFT and refresh learners score the model's own distribution."""
    c = default.get_config()
    c.rollout.temperature = temperature
    assert builders.grpo_learner_config(c).grpo.temperature == temperature
    assert builders.sft_learner_config(c).grpo.temperature == 1.0

# ------------------------------------------------------------------------------------------------
# Optional keys keep their old defaults; no other key gets one
# ------------------------------------------------------------------------------------------------


def test_the_optional_keys_keep_their_old_defaults():
    s = RunSettings.parse(_dict(**{"grpo.advantage": DELETE, "grpo.loss": DELETE, "rods.signal": DELETE,
                                   "domain.module": DELETE, "distributed": DELETE}))
    assert (s.grpo.advantage, s.grpo.loss, s.rods.signal, s.domain.module) == ("grpo", "grpo", "reward", "")
    assert s.distributed is None


def test_launch_train_needs_no_coevolution_section_but_launch_coevolve_does():
    d = _dict(warm=DELETE, coevolve=DELETE, rods=DELETE, report=DELETE)
    s = RunSettings.parse(d)
    assert (s.warm, s.coevolve, s.rods, s.report) == (None, None, None, None)
    with pytest.raises(ConfigError, match="config lacks the section 'coevolve'"):
        s.required("coevolve")
    with pytest.raises(ConfigError, match=r"config lacks \['warm', 'coevolve', 'rods', 'report'\]"):
        coevolve._settings(d)
    assert coevolve._settings(default.get_config()) == RunSettings.parse(default.get_config())


@pytest.mark.parametrize("path,message", [
    ("seed", "config lacks the key 'seed'"),
    ("sft", "config lacks the section 'sft'"),
    ("grpo.group_size", r"config.grpo lacks key\(s\) \['group_size'\]"),
    ("grpo.mask_uniform_groups", r"config.grpo lacks key\(s\) \['mask_uniform_groups'\]"),
    ("rods.n_seeds", r"config.rods lacks key\(s\) \['n_seeds'\]"),
    ("rods.thresholds", r"config.rods lacks key\(s\) \['thresholds'\]"),
    ("coevolve.abstractor", r"config.coevolve lacks key\(s\) \['abstractor'\]"),
    ("coevolve.refresh_learning_rate", r"config.coevolve lacks key\(s\) \['refresh_learning_rate'\]"),
    ("checkpoint.keep", r"config.checkpoint lacks key\(s\) \['keep'\]"),
    ("distributed.process_id", r"config.distributed lacks key\(s\) \['process_id'\]"),
    ("domain.name", r"config.domain lacks key\(s\) \['name'\]"),
])
def test_a_missing_key_is_not_filled_in(path, message):
    with pytest.raises(ConfigError, match=message):
        RunSettings.parse(_dict(**{path: DELETE}))


# ------------------------------------------------------------------------------------------------
# Refused values name their key
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("path,value,message", [
    ("seed", -1, "config.seed must be an int >= 0, got -1"),
    ("seed", True, "config.seed must be an int >= 0, got True"),
    ("domain.name", "", "config.domain.name must be a non-empty string"),
    ("domain.module", 3, "config.domain.module must be a string, got 3"),
    ("domain.n_train", -5, "config.domain.n_train must be an int >= 0, got -5"),
    ("model.preset", "", "config.model.preset must be a non-empty string"),
    ("model.vocab_size", 1.5, "config.model.vocab_size must be an int >= 1, got 1.5"),
    ("mesh.data", 0, "config.mesh.data must be an int >= 1 or -1, got 0"),
    ("mesh.fsdp", "4", "config.mesh.fsdp must be an int >= 1, got '4'"),
    ("distributed.initialize", "yes", "config.distributed.initialize must be a bool, got 'yes'"),
    ("distributed.process_id", 1, "config.distributed.process_id must be < num_processes=1, got 1"),
    ("rollout.max_len", 0, "config.rollout: max_len must be >= 1"),
    ("retrieval.k", 0, "config.retrieval: retrieval.k must be an int >= 1"),
    ("reward.lam", -1.0, "config.reward: lam must be >= 0"),
    ("sft.steps", -1, "config.sft.steps must be an int >= 0, got -1"),
    ("sft.batch_size", 8.0, "config.sft.batch_size must be an int >= 1, got 8.0"),
    ("sft.learning_rate", 0.0, "config.sft.learning_rate must be a finite number > 0, got 0.0"),
    ("sft.n_demos", 0, "config.sft.n_demos must be an int >= 1, got 0"),
    ("grpo.group_size", 1, "config.grpo.group_size must be an int >= 2, got 1"),
    ("grpo.group_size", "8", "config.grpo.group_size must be an int >= 2, got '8'"),
    ("grpo.iterations_per_round", 0, "config.grpo.iterations_per_round must be an int >= 1, got 0"),
    ("grpo.epsilon", 1.5, "config.grpo.epsilon must be a finite number > 0 and < 1, got 1.5"),
    ("grpo.epsilon_high", 0.0, "config.grpo.epsilon_high must be a finite number > 0 or None, got 0.0"),
    ("grpo.beta", float("nan"), "config.grpo.beta must be a finite number >= 0, got nan"),
    ("grpo.aggregation", "mean", "config.grpo.aggregation must be one of"),
    ("grpo.mask_uniform_groups", 1, "config.grpo.mask_uniform_groups must be a bool, got 1"),
    ("grpo.eval_every", 0, "config.grpo.eval_every must be an int >= 1, got 0"),
    ("grpo.loss", "", "config.grpo.loss must be a non-empty string"),
    ("warm.rounds", -1, "config.warm.rounds must be an int >= 0, got -1"),
    ("coevolve.rounds", 2.5, "config.coevolve.rounds must be an int >= 0, got 2.5"),
    ("coevolve.rho", "high", "config.coevolve.rho must be a finite number >= 0, got 'high'"),
    ("coevolve.frozen_library", "no", "config.coevolve.frozen_library must be a bool, got 'no'"),
    ("coevolve.explore_tasks", -1, "config.coevolve.explore_tasks must be an int >= 0, got -1"),
    ("coevolve.explore_samples", 0, "config.coevolve.explore_samples must be an int >= 1, got 0"),
    ("coevolve.refresh_learning_rate", -1e-5, "config.coevolve.refresh_learning_rate must be a finite number > 0"),
    ("coevolve.abstractor.min_nodes", 1, "config.coevolve.abstractor: need 2 <= min_nodes"),
    ("coevolve.acceptance.reference", "worst", "config.coevolve.acceptance: reference must be one of"),
    ("rods.enabled", "true", "config.rods.enabled must be a bool, got 'true'"),
    ("rods.n_seeds", 0, "config.rods.n_seeds must be an int >= 1, got 0"),
    ("rods.signal", "vibes", "config.rods.signal must be one of ('reward', 'progress'), got 'vibes'"),
    ("rods.seed_pool", "test", "config.rods.seed_pool must be one of ('train', 'answer_only'), got 'test'"),
    ("rods.thresholds.mastered", 2.0, "config.rods.thresholds: RodsConfig.mastered must be a number in"),
    ("sandbox.workers", 0, "config.sandbox.workers must be an int >= 1, got 0"),
    ("sandbox.timeout_s", float("inf"), "config.sandbox.timeout_s must be a finite number > 0, got inf"),
    ("checkpoint.keep", 0, "config.checkpoint.keep must be an int >= 1, got 0"),
    ("checkpoint.every_sft_steps", 0, "config.checkpoint.every_sft_steps must be an int >= 1, got 0"),
    ("report.retrieval_k", 0, "config.report.retrieval_k must be an int >= 1, got 0"),
    ("report.retrieval_queries", -1, "config.report.retrieval_queries must be an int >= 0, got -1"),
])
def test_a_wrong_type_or_range_is_a_config_error_naming_the_key(path, value, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        RunSettings.parse(_dict(**{path: value}))


@pytest.mark.parametrize("path", ["grpo.group_sise", "sft.stepz", "model.dtype", "mesh.pipeline", "sandbox.memory_mb",
                                  "checkpoint.every", "report.k", "warm.round", "coevolve.roundz",
                                  "coevolve.abstractor.max_depth", "coevolve.acceptance.margin", "rods.thresholds.foo",
                                  "rods.signals", "distributed.host", "rollout.top_q", "retrieval.kk", "reward.gamma"])
def test_an_unknown_key_in_any_section_is_refused(path):
    where, key = path.rsplit(".", 1)
    with pytest.raises(ConfigError, match=rf"config\.{where} has unknown key\(s\) \['{key}'\]"):
        RunSettings.parse(_dict(**{path: 1}))


def test_an_unknown_top_level_section_is_refused_and_domain_keys_belong_to_the_domain():
    with pytest.raises(ConfigError, match=r"config has unknown section\(s\) \['optim'\]"):
        RunSettings.parse(_dict(optim={"lr": 1.0}))
    with pytest.raises(ConfigError, match="config.grpo must be a section of keys, got 3"):
        RunSettings.parse(_dict(grpo=3))
    s = RunSettings.parse(_dict(**{"domain.categories": "a,b"}))  # a domain's own key: its build checks it
    assert s.domain.get("categories") == "a,b"


def test_the_section_dataclasses_validate_when_built_directly():
    with pytest.raises(ConfigError, match="config.sft.micro_batches must be an int >= 1, got 0"):
        SftSettings(steps=1, batch_size=1, learning_rate=1e-3, warmup_steps=0, micro_batches=0, n_demos=1)
    with pytest.raises(ConfigError, match="config.rods.thresholds must be a section parsed as RodsConfig"):
        RodsSettings(enabled=True, n_seeds=1, background=False, thresholds={"window": 4})
    with pytest.raises(ConfigError, match="config.coevolve.acceptance must be a section parsed as AcceptanceConfig"):
        CoevolveSettings(rounds=1, rho=0.5, frozen_library=False, refresh_sft_steps=0, refresh_demos=0,
                         refresh_learning_rate=1e-5, abstractor=AbstractorConfig(), acceptance=None)
    with pytest.raises(ConfigError, match="config.domain.name is a field of its own"):
        DomainSettings("synthetic_math", "", (("name", "x"),))
    g = GrpoSettings(iterations=1, iterations_per_round=1, tasks_per_iteration=1, group_size=2, learning_rate=1,
                     epsilon=0.2, epsilon_high=None, beta=0, aggregation="token_mean", normalize_std=True,
                     micro_batches=1, mask_uniform_groups=True, ppo_epochs=1, eval_every=1)
    assert isinstance(g.learning_rate, float) and isinstance(g.beta, float) and g.loss == "grpo"


# ------------------------------------------------------------------------------------------------
# The jobs read typed settings, not raw config values
# ------------------------------------------------------------------------------------------------

SECTIONS = {"seed", "domain", "model", "mesh", "distributed", "rollout", "retrieval", "reward", "sft", "grpo", "warm",
            "coevolve", "rods", "sandbox", "checkpoint", "report", "get"}


def _is_config(node) -> bool:
    if isinstance(node, ast.Name):
        return node.id == "config"
    # ctx.config / job.config / self.config, but not a learner's own LearnerConfig (grpo_learner.config)
    return (isinstance(node, ast.Attribute) and node.attr == "config"
            and not (isinstance(node.value, ast.Attribute) and node.value.attr.endswith("learner")))


@pytest.mark.parametrize("module", ["builders", "domains", "rundir", "coevolve", "train", "evaluate"])
def test_the_jobs_read_no_raw_config_value(module):
    tree = ast.parse((ROOT / "cocoda_jax" / "runs" / f"{module}.py").read_text())
    raw = [ast.unparse(n) for n in ast.walk(tree)
           if (isinstance(n, ast.Attribute) and n.attr in SECTIONS and _is_config(n.value))
           or (isinstance(n, ast.Subscript) and _is_config(n.value))]
    assert raw == []


def test_the_multi_host_start_runs_once_per_process(monkeypatch):
    """--with_baseline and --compare_rods run the job three times in one process; a second
    jax.distributed.initialize would raise, so only the first run initialises."""
    import jax

    calls = []
    monkeypatch.setattr(jax.distributed, "initialize", lambda **kw: calls.append(kw))
    monkeypatch.setattr(jax.distributed, "is_initialized", lambda: bool(calls))
    config = default.get_config()
    config.distributed.initialize = True
    for _ in range(3):
        builders.maybe_initialize_distributed(config)
    assert len(calls) == 1
    config.distributed.initialize = False
    calls.clear()
    builders.maybe_initialize_distributed(config)
    assert calls == []


@pytest.mark.parametrize("url", ["file:///tmp/x", "ftp://host/run"])
def test_a_workdir_url_epath_cannot_write_is_refused_before_anything_is_written(url, tmp_path, monkeypatch):
    """A bucket URL is a work directory (test_runs_gcs.py); another scheme is refused, never turned
    into a local directory such as ``file:/tmp/x``."""
    from cocoda_jax.runs import coevolve, train
    from tests.runs.conftest import tiny_config

    monkeypatch.chdir(tmp_path)
    for job in (coevolve.run, train.run):
        with pytest.raises(ConfigError, match="not reachable"):
            job(tiny_config(), url, progress=False)
    assert list(tmp_path.iterdir()) == []
    assert rundir.run_path("runs/a:b") == Path("runs/a:b")  # a colon alone does not make a URL
    assert str(rundir.run_path("gs://bucket/run")) == "gs://bucket/run"
    with pytest.raises(ConfigError, match="is a URL"):  # the jobs that write local files only
        rundir.local_workdir("gs://bucket/run")

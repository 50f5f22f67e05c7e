"""Each config default has one home (its section's dataclass): the config files start from the declared
defaults and only set what has no default or what they change."""

import ast
import pathlib

import pytest

from cocoda_jax.errors import ConfigError
from cocoda_jax.runs import rundir
from cocoda_jax.runs.settings import RunSettings, default_config, override

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _override_calls(path):
    """``(section, key, value)`` of every ``override(c, "section", key=literal, ...)`` in a config file,
    nested dicts flattened (``coevolve.abstractor``)."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "override":
            section = ast.literal_eval(node.args[1])
            for kw in node.keywords:
                value = ast.literal_eval(kw.value) if not isinstance(kw.value, ast.Call) else \
                    {k.arg: ast.literal_eval(k.value) for k in kw.value.keywords}
                if isinstance(value, dict):
                    out += [(f"{section}.{kw.arg}", k, v) for k, v in value.items()]
                else:
                    out.append((section, kw.arg, value))
    return out


def test_the_default_config_only_sets_what_differs_from_the_declared_defaults():
    defaults = default_config()
    calls = _override_calls(ROOT / "configs" / "default.py")
    assert len(calls) > 40  # the file was read
    repeated = []
    for section, key, value in calls:
        node = defaults
        for name in section.split("."):
            node = node[name]
        if key in node and node[key] == value and isinstance(node[key], bool) == isinstance(value, bool):
            repeated.append(f"{section}.{key}")
    assert repeated == []
    # and nothing sets a section's keys by hand beside override (the domain is the open section)
    source = (ROOT / "configs" / "default.py").read_text()
    assert "ConfigDict(dict(" not in source.replace("c.domain = ml_collections.ConfigDict(dict(", "")


def test_override_refuses_a_repeated_value_and_sets_a_new_one():
    c = default_config()
    with pytest.raises(ConfigError, match=r"config.rollout.max_steps = 8 repeats"):
        override(c, "rollout", max_steps=8)
    override(c, "rollout", max_steps=4)
    assert c.rollout.max_steps == 4
    with pytest.raises(ConfigError, match=r"coevolve.acceptance.reference"):
        override(c, "coevolve", acceptance=dict(reference="best"))


def test_a_config_that_writes_a_default_and_one_that_leaves_it_out_are_one_run():
    from configs import default

    full = default.get_config()
    partial = full.to_dict()
    del partial["rods"]["thresholds"]["explore_weight"], partial["rollout"]["host_shards"]
    assert RunSettings.parse(partial) == RunSettings.parse(full)
    assert rundir.run_identity_changes(partial, full) == []
    partial["grpo"].pop("schedule")  # an older run, before the key: the declared default ("constant")
    assert rundir.run_identity_changes(partial, full) == ["grpo.schedule: 'constant' -> 'cosine'"]

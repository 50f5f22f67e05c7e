"""A work directory belongs to one run: resuming it with another config is refused with the list of
changed keys (unless explicitly allowed), and the launchers require --workdir."""

import subprocess
import sys

import pytest

from cocoda_jax import checkpoint as ckpt
from cocoda_jax.runs import rundir

from cocoda_jax.errors import ConfigError
from cocoda_jax.runs import train
from tests.runs.conftest import tiny_config


def test_config_diff_names_every_changed_key():
    a, b = tiny_config(), tiny_config()
    b.grpo.learning_rate = 1.0
    b.sft.steps = 99
    assert rundir.config_diff(a, a) == []
    assert rundir.config_diff(a, b) == [f"grpo.learning_rate: {a.grpo.learning_rate!r} -> 1.0",
                                   f"sft.steps: {a.sft.steps!r} -> 99"]


def test_a_key_added_since_a_run_was_saved_is_no_change_at_its_old_value():
    """``rollout.host_shards`` came after runs were saved without it: absent in the saved config and 1
    (the one-batch path) in the current one is the same run; any other value is a change from 1."""
    saved = ckpt.to_jsonable(tiny_config().to_dict(), "config")
    del saved["rollout"]["host_shards"]
    current = tiny_config()
    assert current.rollout.host_shards == 1
    assert rundir.run_identity_changes(saved, current.to_dict()) == []
    assert rundir.config_diff(saved, current.to_dict()) == ["rollout.host_shards: '<absent>' -> 1"]
    current.rollout.host_shards = 2  # the saved run ran at 1: that is what the change says
    assert rundir.run_identity_changes(saved, current.to_dict()) == ["rollout.host_shards: 1 -> 2"]
    assert "host_shards" not in saved["rollout"]  # the saved config itself is left as it was


def test_resuming_with_another_config_is_refused_unless_allowed(tmp_path):
    config = tiny_config()
    config.grpo.iterations = 1
    train.run(config, tmp_path, progress=False, stop_after_step=config.sft.steps)
    changed = tiny_config()
    changed.grpo.iterations = 1
    changed.grpo.learning_rate = 0.5
    with pytest.raises(ConfigError, match=r"grpo\.learning_rate: .* -> 0\.5.*--allow_config_change"):
        train.run(changed, tmp_path, progress=False)
    latest = rundir.latest_checkpoint(tmp_path)
    assert rundir.claim_workdir(tmp_path, config, latest) == latest.step  # the same config resumes
    assert rundir.claim_workdir(tmp_path, changed, latest, allow_change=True) == latest.step  # allowed: no error
    # the checkpoint's config is the run's (config.json now holds the changed one, the checkpoint not)
    with pytest.raises(ConfigError, match=r"grpo\.learning_rate"):
        rundir.claim_workdir(tmp_path, changed, latest)
    assert rundir.claim_workdir(tmp_path, config, latest) == latest.step
    (tmp_path / "fresh").mkdir()
    assert rundir.claim_workdir(tmp_path / "fresh", changed, None) is None  # a fresh directory takes any config


def test_a_run_that_died_before_its_first_checkpoint_keeps_its_claim(tmp_path):
    config, changed = tiny_config(), tiny_config(sft__steps=99)
    assert rundir.claim_workdir(tmp_path, config, None) is None
    assert rundir.claim_workdir(tmp_path, config, None) == -1  # the same run, started over
    with pytest.raises(ConfigError, match=r"sft\.steps: .* -> 99"):
        rundir.claim_workdir(tmp_path, changed, None)


@pytest.mark.parametrize("launcher", ["launch.coevolve", "launch.train"])
def test_the_launchers_require_a_workdir(launcher):
    out = subprocess.run([sys.executable, "-m", launcher], capture_output=True, text=True, timeout=120)
    assert out.returncode != 0 and "--workdir" in out.stderr


def test_a_resume_under_other_numerics_is_refused_unless_allowed(tmp_path, monkeypatch):
    """The directory records the numerics its run started under; a process with the portable setting
    switched the other way (here: set, not applied) may not resume it, unless allowed; a directory
    from before the record is resumed without the check."""
    import json

    from cocoda_jax.runs import numerics

    config = tiny_config()
    monkeypatch.delenv(numerics.ENV, raising=False)
    assert rundir.claim_workdir(tmp_path, config, None) is None
    saved = json.loads((tmp_path / rundir.RUN_NUMERICS).read_text())
    assert saved == numerics.status() and saved["portable"] is False
    assert rundir.claim_workdir(tmp_path, config, None) == -1  # the same numerics: the same run
    monkeypatch.setenv(numerics.ENV, "1")
    with pytest.raises(ConfigError, match="other numerics.*setting"):
        rundir.claim_workdir(tmp_path, config, None)
    assert json.loads((tmp_path / rundir.RUN_NUMERICS).read_text()) == saved  # nothing overwritten
    assert rundir.claim_workdir(tmp_path, config, None, allow_change=True) == -1
    assert json.loads((tmp_path / rundir.RUN_NUMERICS).read_text())["setting"].startswith(numerics.ENV)
    (tmp_path / rundir.RUN_NUMERICS).unlink()
    monkeypatch.delenv(numerics.ENV)
    assert rundir.claim_workdir(tmp_path, config, None) == -1


def test_numerics_resume_differences_name_each_key():
    from cocoda_jax.runs import numerics

    now = {"setting": "off", "jax": "0.8.0", "jaxlib": "0.8.0", "numpy": "2.4.0", "python": "3.11.2"}
    assert numerics.resume_differences(now, dict(now, python="3.11.9")) == []
    assert numerics.resume_differences(now, dict(now, jaxlib="0.8.1", setting="COCODA_PORTABLE_NUMERICS=2")) == [
        "setting: 'off' -> 'COCODA_PORTABLE_NUMERICS=2'", "jaxlib: '0.8.0' -> '0.8.1'"]

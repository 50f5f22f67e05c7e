"""A run resumed right after stage 2 from a checkpoint saved under another reward (the study's shared
prefix for ``no_gar``): round 0's validation reward is measured again under this run's reward, and the
run ends where a run started under that reward ends."""

import shutil

import pytest

from cocoda_jax.runs import coevolve, rundir

from cocoda_jax.errors import ConfigError
from cocoda_jax.runs.progress import RunProgress
from tests.runs.conftest import tiny_config

pytestmark = pytest.mark.filterwarnings("ignore:Some donated buffers were not usable")

# every tiny rollout is cut off inside its first action (configs/tiny.py), so a malformed-step penalty
# changes each validation reward while the outcomes stay as they are
BASE = dict(coevolve__rounds=1, rods__enabled=False)
OTHER = dict(BASE, reward__malformed_penalty=0.5)


def _round0(workdir):
    return RunProgress.from_json(rundir.latest_checkpoint(workdir).payloads["progress"]).records[0].to_json()


def _without_times(record):
    return {k: v for k, v in record.items() if k not in ("wall_s", "stage_s")}


@pytest.fixture(scope="module")
def prefix(tmp_path_factory):
    wd = tmp_path_factory.mktemp("prefix")
    assert coevolve.run(tiny_config(**BASE), wd, progress=False, stop_after_round=0) == {"stopped_after_round": 0}
    return wd


def test_round_0_is_restated_and_the_run_ends_as_if_run_under_its_reward(prefix, tmp_path):
    cell = tmp_path / "cell"
    shutil.copytree(prefix, cell)
    resumed = coevolve.run(tiny_config(**OTHER), cell, progress=False, allow_config_change=True)
    fresh = coevolve.run(tiny_config(**OTHER), tmp_path / "fresh", progress=False)
    saved = _round0(prefix)
    assert resumed["per_round"][0]["val_reward"] == fresh["per_round"][0]["val_reward"] != saved["val_reward"]
    assert resumed["per_round"][0]["val_accuracy"] == saved["val_accuracy"]
    assert "restate_reward" in resumed["per_round"][0]["stage_s"]
    assert "restate_reward" not in fresh["per_round"][0]["stage_s"]
    assert [_without_times(r) for r in resumed["per_round"]] == [_without_times(r) for r in fresh["per_round"]]
    assert resumed["test_outcomes"] == fresh["test_outcomes"]


def test_the_same_reward_resumes_without_restating_round_0(prefix, tmp_path):
    cell = tmp_path / "cell"
    shutil.copytree(prefix, cell)
    report = coevolve.run(tiny_config(**BASE), cell, progress=False)
    assert "restate_reward" not in report["per_round"][0]["stage_s"]
    assert report["per_round"][0]["val_reward"] == _round0(prefix)["val_reward"]


def test_a_prefix_whose_planner_does_not_give_its_round_0_is_refused(prefix, tmp_path, monkeypatch):
    import dataclasses

    cell = tmp_path / "cell"
    shutil.copytree(prefix, cell)
    evaluate = coevolve._evaluate

    def off_by_one_task(*args, **kwargs):
        ev = evaluate(*args, **kwargs)
        return dataclasses.replace(ev, accuracy=ev.accuracy + 1.0 / len(args[3]))

    monkeypatch.setattr(coevolve, "_evaluate", off_by_one_task)
    with pytest.raises(ConfigError, match="not this run's stages 1-2"):
        coevolve.run(tiny_config(**OTHER), cell, progress=False, allow_config_change=True)
    assert _round0(cell) == _round0(prefix)  # nothing saved over the prefix's checkpoint

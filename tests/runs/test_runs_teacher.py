"""The main job with a teacher LM among the proposers (``coevolve.proposers``): the warm stage asks
a local OpenAI-compatible server (the canned one of tests/coevolve) and its composite goes through the
same validation as the symbolic miner's; a bad proposers value or endpoint is a config error."""

import pytest

from cocoda_jax.errors import ConfigError
from cocoda_jax.runs import coevolve, rundir
from cocoda_jax.runs.progress import RunProgress
from cocoda_jax.runs.settings import RunSettings
from tests.coevolve.test_coevolve_teacher import GOOD_REPLY, Teacher
from tests.runs.conftest import tiny_config

pytestmark = pytest.mark.filterwarnings("ignore:Some donated buffers were not usable")


def test_the_warm_stage_asks_the_teacher_and_validates_its_composite(tmp_path):
    teacher = Teacher()
    teacher.script = [(200, GOOD_REPLY, 0)]
    try:
        config = tiny_config(coevolve__rounds=1, rods__enabled=False, coevolve__proposers="both")
        config.coevolve.teacher.base_url, config.coevolve.teacher.model = teacher.url, "local-teacher"
        config.coevolve.teacher.api_key_env = ""
        coevolve.run(config, tmp_path, progress=False, stop_after_round=0)  # stages 1-2 are where it acts here
    finally:
        teacher.close()
    assert teacher.requests and teacher.requests[0]["body"]["model"] == "local-teacher"
    assert "Authorization" not in teacher.requests[0]["headers"]
    warm = RunProgress.from_json(rundir.latest_checkpoint(tmp_path).payloads["progress"]).warm
    first = warm["rounds"][0]
    proposers = {p["name"]: p["proposer"] for p in first["proposed"]}
    assert proposers.get("discount_then_tax") == "teacher" and "symbolic" in proposers.values()
    decided = set(first["accepted"]) | {r["name"] for r in first["rejections"]}
    assert "discount_then_tax" in decided  # judged by the same validation as the miner's


@pytest.mark.parametrize("key, value, fragment", [
    ("proposers", "oracle", "config.coevolve.proposers"),
    ("teacher", {"base_url": "ftp://x"}, "config.coevolve.teacher"),
    ("teacher", {"max_candidates": -1}, "config.coevolve.teacher.max_candidates"),
])
def test_bad_proposer_settings_are_config_errors(key, value, fragment):
    config = tiny_config()
    if isinstance(value, dict):
        config.coevolve.teacher.update(value)
    else:
        config.coevolve[key] = value
    with pytest.raises(ConfigError, match=fragment.replace(".", r"\.")):
        RunSettings.parse(config)

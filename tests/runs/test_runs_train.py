"""launch/train.py's job end to end on tiny budgets: SFT then GRPO, checkpoints, exact resumption
(the resumed run's next losses equal the uninterrupted run's), typed config errors."""

import json

import pytest

from cocoda_jax.report import read_metrics
from cocoda_jax.errors import ConfigError
from cocoda_jax.runs import train
from tests.runs.conftest import comparable, tiny_config

pytestmark = pytest.mark.filterwarnings("ignore:Some donated buffers were not usable")


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    wd = tmp_path_factory.mktemp("train_full")
    summary = train.run(tiny_config(), wd, progress=False)
    return wd, summary


def test_the_job_writes_its_summary_and_metrics(uninterrupted):
    wd, summary = uninterrupted
    assert summary == json.loads((wd / "train_summary.json").read_text())
    assert summary["sft_steps"] == 4 and summary["grpo_iterations"] == 3
    assert 0.0 <= summary["accuracy"]["sft_val"] <= 1.0 and 0.0 <= summary["accuracy"]["grpo_test"] <= 1.0
    records = read_metrics(wd / "metrics.jsonl")
    steps = [r["step"] for r in records]
    assert steps == sorted(steps) and max(steps) == 7
    sft = [r for r in records if "sft/loss" in r]
    grpo = [r for r in records if "grpo/loss" in r]
    assert [r["step"] for r in sft] == [1, 2, 3, 4] and [r["step"] for r in grpo] == [5, 6, 7]
    for key in ("reward_mean", "reward_std", "r_res_mean", "credit_mean", "grpo/kl", "grpo/clip_fraction",
                "grpo/entropy", "grpo/logp_gap", "rollout_tokens_per_s", "calls_per_trajectory",
                "composite_call_share", "grpo/advantage_std"):
        assert key in grpo[0], key
    assert (wd / "tb").is_dir() and (wd / "tokenizer").is_dir()


def test_a_resumed_run_repeats_the_uninterrupted_one(uninterrupted, tmp_path):
    """Stopped after SFT step 2 (mid-SFT), resumed and stopped again after GRPO iteration 1 (step 5),
    then resumed to the end: the metrics (losses included) equal the uninterrupted run's."""
    full_wd, full_summary = uninterrupted
    assert train.run(tiny_config(), tmp_path, progress=False, stop_after_step=2) == {"stopped_at_step": 2}
    assert train.run(tiny_config(), tmp_path, progress=False, stop_after_step=5) == {"stopped_at_step": 5}
    resumed = train.run(tiny_config(), tmp_path, progress=False)
    assert comparable(read_metrics(tmp_path / "metrics.jsonl")) == comparable(read_metrics(full_wd / "metrics.jsonl"))
    assert resumed["accuracy"] == full_summary["accuracy"]


def test_unknown_config_keys_are_typed_errors(tmp_path):
    bad = tiny_config()
    bad.rollout.temprature = 0.5
    with pytest.raises(ConfigError, match="temprature"):
        train.run(bad, tmp_path, progress=False)
    bad = tiny_config(domain__name="gsm9k")
    with pytest.raises(ConfigError, match="gsm9k"):
        train.run(bad, tmp_path, progress=False)


def test_a_library_too_large_for_the_prompt_is_a_typed_error_and_the_cascade_still_fits(uninterrupted, tmp_path):
    """mode=full over 400 tools: no demonstration fits max_len, so nothing can train (a clear error,
    before any checkpoint); the run's own cascade prompts stay short and say what they found."""
    _, summary = uninterrupted
    r = summary["retrieval"]
    assert r["mode"] == "cascade" and r["overflow_episodes"] == 0 and r["prompt_tokens_per_episode"] > 0
    big = tiny_config(domain__grow_library_to=400, retrieval__mode="full")
    with pytest.raises(ConfigError, match="longer than rollout.max_len"):
        train.run(big, tmp_path, progress=False)
    assert not (tmp_path / "checkpoints").exists()

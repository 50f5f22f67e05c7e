"""Chaos-tested resume: failpoints kill for real, the kill plan covers the phases, and the main job
killed (SIGKILL) at several points and resumed each time ends byte-identical to an uninterrupted run."""

import json
import os
import signal
import subprocess
import sys

import pytest

from cocoda_jax import failpoints
from cocoda_jax.runs import chaos

TRACE = ["warm/round", "validation/candidate", "warm/round", "sft/step", "sft/step", "checkpoint/write",
         "library/json", "grpo/iteration", "mining/proposed", "validation/candidate", "rods/saved",
         "checkpoint/write", "library/json", "grpo/iteration", "rods/saved", "checkpoint/write", "library/json",
         "report/write"]


def test_a_failpoint_spec_is_checked():
    assert failpoints.parse("sft/step@3") == ("sft/step", 3)
    assert failpoints.parse("sft/step") == ("sft/step", 1)
    for bad in ("sft/stp@1", "sft/step@x", "sft/step@0"):
        with pytest.raises(ValueError):
            failpoints.parse(bad)
    with pytest.raises(ValueError, match="unknown failpoint"):
        failpoints.hit("no/such/point")


def test_a_failpoint_traces_its_hits(tmp_path, monkeypatch):
    monkeypatch.setenv(failpoints.TRACE_ENV, str(tmp_path / "t"))
    failpoints.hit("grpo/iteration")
    failpoints.hit("report/write")
    assert (tmp_path / "t").read_text().split() == ["grpo/iteration", "report/write"]


def test_a_failpoint_kills_the_process_at_its_kth_hit():
    code = ("from cocoda_jax import failpoints\n"
            "for i in range(3):\n"
            "    print(i, flush=True)\n"
            "    failpoints.hit('sft/step')\n")
    env = {**os.environ, failpoints.KILL_ENV: "sft/step@2"}
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == -signal.SIGKILL
    assert proc.stdout.split() == ["0", "1"]


def test_the_plan_covers_every_phase_first_and_is_seeded():
    plan = chaos.plan_positions(TRACE, 9, seed=3)
    assert plan == sorted(set(plan)) and len(plan) == 9
    phases = {TRACE[i] for i in plan}
    assert phases == set(TRACE)  # 9 phases in the trace, one kill each
    assert chaos.plan_positions(TRACE, 9, seed=3) == plan
    assert {TRACE[i] for i in chaos.plan_positions(TRACE, 4, seed=1, points=["sft/step", "report/write"])} \
        == {"sft/step", "report/write"}


def test_a_resumed_process_counts_its_hits_from_its_checkpoint():
    assert chaos.restart_index(TRACE, None) == 0
    assert chaos.restart_index(TRACE, 0) == 7 and chaos.restart_index(TRACE, 2) == 17
    with pytest.raises(chaos.ChaosError):
        chaos.restart_index(TRACE, 3)
    # resumed after round 0: the second grpo/iteration of the trace is this process's second hit
    assert chaos.kill_at(TRACE, 13, 7) == chaos.Kill("grpo/iteration", 2, 13)
    assert chaos.kill_at(TRACE, 13, 12) == chaos.Kill("grpo/iteration", 1, 13)


def test_the_synthesis_kill_goes_where_a_synthesis_job_must_run():
    # jobs planned at the first boundary (rods/saved at 10) are collected at the second (14)
    assert chaos.with_background_kill(TRACE, [3, 9, 15, 17]) == [3, 9, None, 15, 17]
    assert chaos.with_background_kill(TRACE, [3, 9]) == [3, 9, None]


def test_timing_fields_are_left_out_of_the_comparison(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    for d, wall, lib in ((a, 1.0, "x"), (b, 2.0, "x")):
        (d / "library").mkdir(parents=True)
        (d / "library" / "round_000.json").write_text(lib)
        (d / "report.json").write_text(json.dumps({"wall_s": wall, "per_round": [{"wall_s": wall, "acc": 0.5}]}))
        (d / "metrics.jsonl").write_text(json.dumps({"step": 1, "rollout_s": wall, "loss": 1.0}) + "\n")
    assert chaos.compare_runs(a, b) == []
    (b / "library" / "round_000.json").write_text("y")
    (b / "report.json").write_text(json.dumps({"wall_s": 3.0, "per_round": [{"wall_s": 1.0, "acc": 0.6}]}))
    assert chaos.compare_runs(a, b) == ["library/round_000.json: bytes differ", "report.json['per_round'] differs"]


@pytest.mark.slow
def test_killed_and_resumed_the_job_ends_where_an_uninterrupted_run_ends(tiny_run, tmp_path):
    """SIGKILLs inside SFT, GRPO, the round's mining and validation, a checkpoint write and a RODS
    synthesis job; the session's run of configs/chaos.py, which mines a composite inside round 1,
    is the reference (``launch.chaos`` kills at every point the run passes)."""
    reference, report, trace = tiny_run
    assert report["per_round"][1]["inserted"], "the reference must mine a composite inside a round"
    points = ["sft/step", "grpo/iteration", "mining/proposed", "validation/candidate", "checkpoint/write",
              "rods/synthesis"]
    result = chaos.run(["--config=configs/chaos.py"], tmp_path, kills=5, seed=0, points=points,
                       reference=reference, trace=trace, log=lambda _: None)
    assert result["differences"] == []
    assert set(result["phases_killed"]) == set(points), result["kills"]
    for rel in ("report.json", "library/round_002.json", "rods"):
        assert (tmp_path / "chaos" / rel).exists()

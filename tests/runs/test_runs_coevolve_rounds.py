"""A co-evolution round on the path the tiny run never takes (its planner scores 0 throughout, so
every proposal passes): a refused proposal. The validation accuracies are scripted; everything else
is the real job."""

import dataclasses

import pytest

from cocoda_jax.report import read_metrics
from cocoda_jax.rl import loop
from cocoda_jax.runs import common, coevolve
from cocoda_jax.runs.progress import Outcome, RunProgress
from tests.runs.conftest import tiny_config

pytestmark = pytest.mark.filterwarnings("ignore:Some donated buffers were not usable")


def _scripted_evaluations(monkeypatch, accuracies):
    """``loop.evaluate`` runs as usual but reports the next of ``accuracies`` (then 0.0)."""
    real, script, seen = loop.evaluate, iter(accuracies), []

    def evaluate(*args, **kwargs):
        ev = dataclasses.replace(real(*args, **kwargs), accuracy=next(script, 0.0))
        seen.append(ev.accuracy)
        return ev

    monkeypatch.setattr(loop, "evaluate", evaluate)
    return seen


def test_a_refused_proposal_keeps_the_incumbent_pair_and_its_numbers(tmp_path, monkeypatch):
    # the SFT planner scores 0.5; round 1's proposal 0.0, below 0.5 - tolerance: refused
    seen = _scripted_evaluations(monkeypatch, [0.5, 0.0])
    report = coevolve.run(tiny_config(coevolve__rounds=1, rods__enabled=False), tmp_path, progress=False)
    assert seen[:2] == [0.5, 0.0]  # then the test split's
    assert [d["outcome"] for d in report["decisions"]] == [Outcome.REJECT]
    initial, refused = report["per_round"]
    assert refused["outcome"] == "reject" and refused["inserted"] == []
    for key in ("val_accuracy", "val_reward", "tool_calls_per_solved", "composite_share", "composite_uses",
                "library_size", "retrieval_tokens_per_query"):
        assert refused[key] == initial[key], key
    assert refused["val_accuracy"] == 0.5
    lib = tmp_path / "library"
    assert (lib / "round_001.json").read_bytes() == (lib / "round_000.json").read_bytes()
    progress = RunProgress.from_json(common.latest_checkpoint(tmp_path).payloads["progress"])
    assert progress.round == 1 and progress.last_record["proposal_val_accuracy"] == 0.0
    assert progress.incumbent.round == 0 and progress.incumbent.best_reward == 0.5
    assert progress.global_step == tiny_config().sft.steps + 1  # the GRPO step counts, though undone
    round_end = [r for r in read_metrics(tmp_path / "metrics.jsonl") if "round/accepted" in r]
    assert [r["round/accepted"] for r in round_end] == [0.0] and round_end[0]["val/accuracy"] == 0.5

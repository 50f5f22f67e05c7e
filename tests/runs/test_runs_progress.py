"""The jobs' typed progress records: frozen, JSON as the plain dicts earlier versions stored (so their
checkpoints resume), and the acceptance outcome as an enum that serialises to the same strings."""

import dataclasses
import json

import numpy as np
import pytest

from cocoda_jax import checkpoint as ckpt
from cocoda_jax.coevolve import acceptance
from cocoda_jax.report.rounds import Outcome, RoundRecord
from cocoda_jax.runs.progress import IncumbentRecord, Phase, RunProgress, TrainProgress, ValidationPoint

# A co-evolution "progress" payload as the plain-dict version of runs/coevolve.py wrote it (after
# round 1 of a tiny run; records and logs shortened).
OLD_RUN_PROGRESS = {
    "round": 1, "global_step": 5, "sft_accuracy": 0.25,
    "records": [
        {"round": 0, "outcome": "initial", "reason": "the SFT planner with the warm library", "library_size": 38,
         "primitives": 30, "composites": 8, "max_depth": 2, "val_accuracy": 0.25, "val_reward": 0.5,
         "train_accuracy": None, "tool_calls_per_solved": 2.0, "composite_share": 0.5,
         "retrieval_tokens_per_query": 2542.5, "inserted": ["ceil_div_multiply"], "composite_uses": {},
         "wall_s": 3.0},
        {"round": 1, "outcome": "reject", "reason": "validation reward 0 is below ...", "library_size": 38,
         "primitives": 30, "composites": 8, "max_depth": 2, "val_accuracy": 0.25, "val_reward": 0.5,
         "train_accuracy": 0.0, "tool_calls_per_solved": 2.0, "composite_share": 0.5,
         "retrieval_tokens_per_query": 2542.5, "inserted": [], "composite_uses": {}, "wall_s": 4.0,
         "proposal_val_accuracy": 0.0, "mining": {}},
    ],
    "warm": {"rounds": [{"round": 0, "proposed": []}], "seconds": 1.5, "demos": 48},
    "demo_programs": [["math-train-0-0", "x1 = add(n0, n1)\nanswer = x1\n"],
                      ["math-train-0-1", "x1 = ceil_div_multiply(n0, n1, n2)\nanswer = x1\n"]],
    "excluded": [{"kind": "dataflow", "nodes": [["add", [0, 1]]], "n_params": 2}, [[["sub", [0, 1]]], 2]],
    "incumbent": {"round": 0, "val_reward": 0.25, "best_reward": 0.25, "used_tools": ["add", "ceil_div_multiply"]},
    "decisions": [{"round": 1, "outcome": "reject", "reason": "validation reward 0 is below ...", "reward": 0.0,
                   "reference": 0.25, "tolerance": 0.04, "kept": "previous planner and library (round 0)",
                   "missing_tools": []}],
    "rods_metrics": [{"live": 16, "live_generated": 0, "injected": 0, "region_sizes": {"boundary": 0}}],
}

OLD_TRAIN_SFT = {"phase": "sft", "sft_accuracy": None, "evals": []}
OLD_TRAIN_GRPO = {"phase": "grpo", "sft_accuracy": 0.5, "sft_test_accuracy": 0.25, "iteration": 2,
                  "evals": [{"step": 4, "iteration": 0, "val_accuracy": 0.5},
                            {"step": 6, "iteration": 2, "val_accuracy": 0.75}]}


def _stored(payload, tmp_path):
    """``payload`` through a real checkpoint: saved as the "progress" payload, read back."""
    ckpt.save(tmp_path / "checkpoints", 3, {"x": np.zeros(2, np.float32)}, {"progress": payload}, {"seed": 0})
    return ckpt.restore(tmp_path / "checkpoints").payloads["progress"]


def test_a_run_progress_reads_the_plain_dict_payload_and_writes_it_back(tmp_path):
    stored = _stored(OLD_RUN_PROGRESS, tmp_path)
    p = RunProgress.from_json(stored)
    assert (p.round, p.global_step, p.sft_accuracy) == (1, 5, 0.25)
    assert p.incumbent == IncumbentRecord(0, 0.25, 0.25, ("add", "ceil_div_multiply"))
    assert p.demo_programs[1] == ("math-train-0-1", "x1 = ceil_div_multiply(n0, n1, n2)\nanswer = x1\n")
    assert p.last_record.round == 1 and isinstance(p.last_record, RoundRecord) and len(p.records) == 2 and len(p.decisions) == 1
    assert p.excluded == tuple(OLD_RUN_PROGRESS["excluded"]) and p.rods_metrics[0]["live"] == 16
    assert p.to_json() == OLD_RUN_PROGRESS == stored
    assert RunProgress.from_json(_stored(p.to_json(), tmp_path / "again")) == p


def test_a_run_progress_is_frozen_and_changes_by_replace():
    p = RunProgress.from_json(OLD_RUN_PROGRESS)
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.round = 2
    q = dataclasses.replace(p, round=2, records=(*p.records, p.last_record.replace(round=2)))
    assert (p.round, len(p.records)) == (1, 2) and (q.round, len(q.records)) == (2, 3)
    assert json.loads(json.dumps(q.to_json()))["records"][-1]["round"] == 2


def test_the_incumbent_record_rebuilds_the_acceptance_incumbent():
    library = frozenset({"add", "ceil_div_multiply", "sub"})
    inc = acceptance.initial("round-0", library, 0.25, {"ceil_div_multiply", "add"})
    rec = IncumbentRecord.of(inc)
    assert rec.to_json() == {"round": 0, "val_reward": 0.25, "best_reward": 0.25,
                             "used_tools": ["add", "ceil_div_multiply"]}
    assert rec.incumbent(library) == inc
    assert IncumbentRecord.from_json(rec.to_json()) == rec


def test_the_train_progress_reads_both_phases_of_the_plain_dict_payload(tmp_path):
    sft = TrainProgress.from_json(_stored(OLD_TRAIN_SFT, tmp_path / "sft"))
    assert sft == TrainProgress() and sft.phase is Phase.SFT
    grpo = TrainProgress.from_json(_stored(OLD_TRAIN_GRPO, tmp_path / "grpo"))
    assert grpo.phase is Phase.GRPO and grpo.iteration == 2 and grpo.sft_test_accuracy == 0.25
    assert grpo.evals == (ValidationPoint(4, 0, 0.5), ValidationPoint(6, 2, 0.75))
    assert grpo.to_json() == OLD_TRAIN_GRPO
    assert {k: v for k, v in sft.to_json().items() if k in OLD_TRAIN_SFT} == OLD_TRAIN_SFT
    assert TrainProgress.from_json(json.loads(json.dumps(sft.to_json()))) == sft


def test_every_acceptance_outcome_is_an_outcome_with_the_same_json():
    for outcome in (Outcome.ACCEPT, Outcome.ACCEPT_PLANNER, Outcome.REJECT):
        d = acceptance.Decision(1, outcome, "why", 0.5, 0.5, 0.0, "kept")
        assert d.to_record()["outcome"] == outcome.value and json.dumps(outcome) == json.dumps(outcome.value)
        assert outcome.keeps_new_planner == d.accepted
    with pytest.raises(ValueError):
        Outcome("maybe")

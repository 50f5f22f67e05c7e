"""Stage 1: rounds of abstraction over gold demonstrations grow a deeper, more compressive library,
deterministically."""

import json

import pytest

from cocoda_jax.coevolve.rounds import abstraction_round, warm_library


@pytest.fixture(scope="module")
def warm(gold_traces, math_library, sandbox):
    return warm_library(gold_traces[:150], math_library, sandbox, rounds=3)


def test_depth_grows_and_calls_fall(warm, math_library):
    records = [r.to_record() for r in warm.rounds]
    assert len(records) == 3
    calls = [r["calls"] for r in records]
    assert calls == sorted(calls, reverse=True) and len(set(calls)) == 3
    assert [r["max_depth"] for r in records][-1] >= 2
    assert records[-1]["library_size"] == len(warm.snapshot) > len(math_library)
    json.dumps(records)   # the run log is JSON


def test_rejected_patterns_are_not_proposed_again(warm):
    seen_rejected = set()
    for r in warm.rounds:
        names = {rej.name for rej in r.result.rejections}
        proposed = {c.pattern for c in r.candidates}
        assert not proposed & seen_rejected
        seen_rejected |= {c.pattern for c in r.candidates if c.name in names}


def test_same_inputs_same_library_json(warm, gold_traces, math_library, sandbox):
    again = warm_library(gold_traces[:150], math_library, sandbox, rounds=3)
    assert again.snapshot.to_json() == warm.snapshot.to_json()
    assert again.traces == warm.traces


def test_a_round_over_trajectories(gold_trajectories, math_library, sandbox):
    outcome = abstraction_round(gold_trajectories[:100], math_library, sandbox, index=4)
    assert outcome.index == 4 and outcome.result.accepted
    assert outcome.to_record()["round"] == 4

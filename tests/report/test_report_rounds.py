"""The round record: one schema, a lossless JSON round-trip, and typed errors for malformed records."""

import json

import pytest
from hypothesis import given, settings, strategies as st

from cocoda_jax.report.rounds import SCHEMA_KEYS, Outcome, ReportError, RoundRecord, read_rounds

measure = st.one_of(st.none(), st.floats(min_value=0, max_value=1e6, allow_nan=False, allow_infinity=False))
names = st.text(alphabet="abcdefgh_", min_size=1, max_size=6)


@st.composite
def records(draw):
    r = draw(st.integers(0, 50))
    outcome = Outcome.INITIAL if r == 0 else draw(st.sampled_from([o for o in Outcome if o is not Outcome.INITIAL]))
    prims, comps = draw(st.integers(0, 40)), draw(st.integers(0, 40))
    optional = draw(st.fixed_dictionaries({}, optional={
        "proposal_val_accuracy": measure, "dev_accuracy": measure,
        "mechanism": st.just({"entropy": 0.5, "composites": {"proposed": 2}}),
        "stage_s": st.dictionaries(names, st.floats(0, 100)), "val_per_category": st.just({"depth_1": {"n": 3}})}))
    return RoundRecord(round=r, outcome=outcome, reason=draw(st.text(max_size=20)), library_size=prims + comps,
                       primitives=prims, composites=comps, max_depth=draw(st.integers(0, 8)),
                       val_accuracy=draw(measure), val_reward=draw(measure), train_accuracy=draw(measure),
                       tool_calls_per_solved=draw(measure), composite_share=draw(measure),
                       retrieval_tokens_per_query=draw(measure), inserted=tuple(draw(st.lists(names, max_size=3))),
                       composite_uses=dict(sorted(draw(st.dictionaries(names, st.integers(0, 9))).items())),
                       wall_s=draw(measure), extra=draw(st.dictionaries(st.sampled_from(["note", "future_key"]),
                                                                         st.integers())), **optional)


@settings(max_examples=60, deadline=None)
@given(records())
def test_json_round_trip_is_lossless(rec):
    text = json.dumps(rec.to_json(), allow_nan=False)
    assert RoundRecord.from_json(json.loads(text)) == rec
    assert list(rec.to_json())[:len(SCHEMA_KEYS)] == list(SCHEMA_KEYS)


def test_absent_measurements_are_not_written_and_unknown_keys_are_kept():
    row = {"round": 0, "outcome": "initial", "reason": "sft", "library_size": 3, "primitives": 3, "composites": 0,
           "max_depth": 0, "val_accuracy": 0.5, "val_reward": None, "train_accuracy": None,
           "tool_calls_per_solved": None, "composite_share": 0.0, "retrieval_tokens_per_query": None,
           "inserted": [], "composite_uses": {}, "wall_s": 1.0, "from_a_newer_version": [1, 2]}
    rec = RoundRecord.from_json(row)
    assert rec.outcome is Outcome.INITIAL and rec.dev_accuracy is None
    assert rec.to_json() == row


@pytest.mark.parametrize("change, match", [
    ({"outcome": "maybe"}, "round 1: key 'outcome'"),
    ({"library_size": 9}, "primitives \\+ composites"),
    ({"round": 0}, "round 0 and only round 0"),
    ({"val_accuracy": float("nan")}, "'val_accuracy' must be a finite number"),
    ({"mechanism": [1]}, "'mechanism' must be a dict"),
])
def test_malformed_records_name_round_and_key(change, match):
    row = RoundRecord(round=1, outcome=Outcome.ACCEPT, reason="", library_size=2, primitives=1, composites=1,
                      max_depth=1, val_accuracy=0.5, val_reward=0.5, train_accuracy=None, tool_calls_per_solved=None,
                      composite_share=None, retrieval_tokens_per_query=None, inserted=("c",), composite_uses={},
                      wall_s=1.0).to_json()
    with pytest.raises(ReportError, match=match):
        RoundRecord.from_json({**row, **change})


def test_rounds_must_increase():
    row = RoundRecord(round=1, outcome=Outcome.REJECT, reason="", library_size=0, primitives=0, composites=0,
                      max_depth=0, val_accuracy=None, val_reward=None, train_accuracy=None, tool_calls_per_solved=None,
                      composite_share=None, retrieval_tokens_per_query=None, inserted=(), composite_uses={}, wall_s=None)
    with pytest.raises(ReportError, match="does not increase"):
        read_rounds([row, row.to_json()])

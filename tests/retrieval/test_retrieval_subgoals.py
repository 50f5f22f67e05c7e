"""Subgoal extraction from query text and the planner's JSON interface."""

import pytest

from cocoda_jax.retrieval.subgoals import (
    Subgoal, SubgoalFormatError, extract_subgoal, extract_values, subgoals_from_json, subgoals_to_json,
)
from cocoda_jax.types import parse_signature, parse_type


def test_extract_values_in_order_with_types():
    text = 'Loan 1200.5 at 3.5% for 6 years; flows [1, 2.5]; tag "late fee" on 2024-01-03; ' \
           'names ["a", "b"]; table {"rows": [{"q": 1}]}'
    sg = extract_subgoal(text, "float")
    assert sg.values == (1200.5, 3.5, 6, [1.0, 2.5], "late fee", "2024-01-03", ["a", "b"], {"rows": [{"q": 1}]})
    assert sg.signature == parse_signature("(float, float, int, list[float], str, str, list[str], Table) -> float")
    assert sg.description == text


def test_extract_ignores_digits_inside_words_and_has_none_without_values():
    assert extract_values("the v2 model and x86") == []
    sg = extract_subgoal("  count the rows  ", parse_type("int"))
    assert sg.inputs == () and sg.values == () and sg.description == "count the rows"


def test_json_round_trip_and_values_optional():
    sgs = (Subgoal("mean of xs", (parse_type("list[float]"),), parse_type("float"), ([1.0, 2.0],)),
           Subgoal("label", (parse_type("str"),), parse_type("str"), None, ("len(result) > 0",)))
    assert subgoals_from_json(subgoals_to_json(sgs)) == sgs


@pytest.mark.parametrize("text, where", [
    ("not json", "text"),
    ('{"goals": []}', "top level"),
    ('{"subgoals": [3]}', "subgoals[0]"),
    ('{"subgoals": [{"description": "", "output_type": "int"}]}', "subgoals[0].description"),
    ('{"subgoals": [{"description": "x", "input_types": ["lst[int"], "output_type": "int"}]}', "subgoals[0].input_types"),
    ('{"subgoals": [{"description": "x", "output_type": 3}]}', "subgoals[0].output_type"),
    ('{"subgoals": [{"description": "x", "output_type": "int", "values": [1]}]}', "subgoals[0].values"),
    ('{"subgoals": [{"description": "x", "output_type": "int", "extra": 1}]}', "subgoals[0]"),
    ('{"subgoals": [{"description": "x", "output_type": "int", "expect": ["result >"]}]}', "subgoals[0].expect"),
    ('{"subgoals": [{"description": "x", "output_type": "int", "expect": "result > 0"}]}', "subgoals[0].expect"),
])
def test_json_errors_name_the_field(text, where):
    with pytest.raises(SubgoalFormatError) as err:
        subgoals_from_json(text)
    assert err.value.where == where


def test_values_must_align_with_inputs():
    with pytest.raises(ValueError):
        Subgoal("x", (parse_type("int"),), parse_type("int"), (1, 2))

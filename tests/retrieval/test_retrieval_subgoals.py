"""Subgoal extraction from query text and the planner's JSON interface."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cocoda_jax.retrieval.subgoals import (
    Subgoal, SubgoalFormatError, clause_subgoals, extract_subgoal, extract_values, subgoals_from_json, subgoals_to_json,
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


def test_clause_subgoals_one_per_step_with_their_own_values():
    """A two-step question gives two subgoals, each with the values its sentence states; the trailing
    question joins the step before it, and only the last subgoal has the answer's type."""
    q = ("Over 320 km a motorbike burns one litre per 23 km, with fuel priced at $3.15 per litre. "
         "Next, that sum is parted between Olga and Quinn with proportions 7:6, Quinn holding the latter portion. "
         "What amount ends up with Quinn?")
    first, second = clause_subgoals(q, "float")
    assert first.description.endswith("$3.15 per litre.") and first.values == (320, 23, 3.15)
    assert second.description.startswith("Next,") and second.description.endswith("ends up with Quinn?")
    assert second.values == (7, 6)
    assert first.output == parse_type("Any") and second.output == parse_type("float")


def test_clause_subgoals_keep_one_sentence_and_quoted_sentences_whole():
    one = "What is 3 plus 4?"
    assert clause_subgoals(one, "float") == (extract_subgoal(one, "float"),)
    # a quote holding a sentence end would lose its value if split: the query stays one subgoal
    quoted = 'Label the file "Done. Now ship it" and count 3 rows. Then add 2.'
    assert clause_subgoals(quoted, "int") == (extract_subgoal(quoted, "int"),)


_WORDS = st.sampled_from(["a", "Sum", "the", "Then", "km", "3.15", "$3.10", "7:6", "[1, 2]", "2024-01-03", "'x. Y'",
                          "45%", "Next", "what", "bags", "12"])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(_WORDS, min_size=1, max_size=6), min_size=1, max_size=4),
       st.sampled_from([".", "?", "!"]))
def test_clause_subgoals_keep_the_words_and_values_in_order(sentences, end):
    """Whatever the sentences, the clauses hold the query's words in order and its values in order,
    and none is empty."""
    q = " ".join(" ".join(words) + end for words in sentences)
    subs = clause_subgoals(q, "float")
    assert all(s.description for s in subs)
    assert " ".join(s.description for s in subs).split() == q.split()
    assert [v for s in subs for v in s.values] == list(extract_subgoal(q, "float").values)
    assert subs[-1].output == parse_type("float")

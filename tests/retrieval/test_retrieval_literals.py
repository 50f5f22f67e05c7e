"""Question evidence for the optional-aware L1, enum literals, and the cascade's evidence mode."""

import dataclasses
import types as pytypes

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cocoda_jax.retrieval import baselines
from cocoda_jax.retrieval.cascade import CascadeConfig, required_params, retrieve
from cocoda_jax.retrieval.literals import (
    MAX_COUNTED_NUMBERS, enum_literals, file_names, literal_hits, question_evidence, value_shapes,
)
from cocoda_jax.retrieval.subgoals import extract_subgoal
from cocoda_jax.types import FLOAT, INT, STR, list_of, parse_signature
from tests.retrieval.test_retrieval_cascade import configs, subgoals


def test_values_become_union_readings_and_file_names_and_number_words_count():
    ev = question_evidence(extract_subgoal("Open report.txt and add 3 to 2.5 for three rows", "Any"))
    assert [a.types for a in ev.args] == [(INT, STR), (FLOAT, STR), (STR,), (INT, FLOAT)]
    assert ev.args[0].prices == (0.0, 0.3) and list_of(STR) in ev.free
    assert file_names("see 'a.txt' and data/b.csv") == ["data/b.csv"]


def test_a_question_quoted_whole_is_read_inside_its_quotes():
    ev = question_evidence(extract_subgoal('"Find the area of a circle with radius 5 and 10"', "Any"))
    assert [a.types[0] for a in ev.args] == [INT, INT]


def test_enum_literals_from_preconditions_and_hits_by_whole_word():
    tool = pytypes.SimpleNamespace(pre=("unit in ('celsius', 'fahrenheit')", "all(e in ('x', 'yy') for e in xs)",
                                        "n > 0"))
    assert enum_literals(tool) == {"celsius", "fahrenheit", "x", "yy"}
    assert literal_hits(enum_literals(tool), "Weather in Boston in Celsius, yy") == 2  # one-letter 'x' ignored
    assert literal_hits(enum_literals(tool), "celsiusly") == 0


def test_required_params_reads_defaults_from_the_source():
    src = "def f(a: int, b: str = 'x', *, c: int, d: int = 2) -> int:\n    return a\n"
    tool = pytypes.SimpleNamespace(name="f", source=src, signature=parse_signature("(a: int, b: str, c: int, d: int) -> int"))
    assert required_params(tool) == 2
    bad = pytypes.SimpleNamespace(name="g", source="def (", signature=parse_signature("(a: int) -> int"))
    assert required_params(bad) == 1


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(subgoal=subgoals, config=configs, extra=st.sampled_from([0.0, 0.5]))
def test_evidence_mode_keeps_survivor_sets_nested(synth, subgoal, config, extra):
    snap, _, index = synth
    cfg = dataclasses.replace(config, l1_mode="evidence", evidence_extra=extra)
    r = retrieve(index, subgoal, cfg)
    s1, s2, s3, s4 = (set(r.stage(n).survivors) for n in ("L1", "L2", "L3", "L4"))
    assert s4 <= s3 <= s2 <= s1 and len(s4) <= cfg.k and r.stage("L1").tokens == 0


def test_evidence_l1_never_prunes_more_than_the_signature_l1(shop):
    _, index = shop
    sg = extract_subgoal("Take 15 percent off a price of 80", "float")
    for cost in (0.0, 0.5, 1.5):
        sig = set(retrieve(index, sg, CascadeConfig(l1_max_cost=cost, l1_cap=10_000)).stage("L1").survivors)
        ev = set(retrieve(index, sg, CascadeConfig(l1_max_cost=cost, l1_cap=10_000, l1_mode="evidence"))
                 .stage("L1").survivors)
        assert sig <= ev


def test_stage_switches_and_bad_config(shop):
    _, index = shop
    sg = extract_subgoal("Divide 10 by 4", "float")
    off = retrieve(index, sg, CascadeConfig(l3=False, l4=False))
    assert off.stage("L3").tokens == 0 and off.stage("L4").tokens == 0
    assert retrieve(index, sg, CascadeConfig()).stage("L3").tokens > 0
    with pytest.raises(ValueError):
        CascadeConfig(l1_mode="words")
    with pytest.raises(ValueError):
        retrieve(index, sg, CascadeConfig(ranker="nope"))


def test_raptor_tree_reads_down_its_levels_and_counts_what_it_shows(synth):
    snap, specs, index = synth
    tree = baselines.RaptorTree(index, "bm25", branching=6, seed=1)
    assert tree.depth() >= 2 and len(tree.top) <= 6
    assert sorted(t for nd in tree.nodes if nd.layer == 1 for t in nd.children) == list(range(len(index.names)))
    sg = extract_subgoal("the average of a list of readings", "float")
    r = baselines.raptor(index, sg, 5, tree=tree, beam=2, keep_text=True)
    assert len(r.selected) <= 5 and set(r.selected) <= set(r.stage("leaves").survivors)
    for stage in ("summaries", "leaves", "cards"):
        texts = r.ledger.texts[stage]
        c = index.counter
        assert r.ledger.tokens[stage] == sum(c.count(t) for t in texts) + c.count("\n") * (len(texts) - 1)
    wide = baselines.raptor(index, sg, 5, tree=tree, beam=4)
    assert wide.total_tokens >= r.total_tokens
    again = baselines.RaptorTree(index, "bm25", branching=6, seed=1)
    assert [nd.tools for nd in again.nodes] == [nd.tools for nd in tree.nodes]
    with pytest.raises(ValueError):
        baselines.raptor(index, sg, 5, tree=tree, beam=0)


@pytest.mark.parametrize("text, shapes", [
    ("Split $3.35 between two with proportions 7:6.", ["colon_pair", "currency", "decimal", "numbers_3"]),
    ("What is 15% of 80?", ["percent", "numbers_2"]),
    ("Take 3/4 of the 12 pies.", ["slash_pair", "numbers_3"]),
    ("Open notes.txt and sum [1, 2, 3]", ["file", "list", "numbers_3"]),
    ("On 12/3/2024 version 1.2.3 shipped", ["numbers_3"]),  # a date is no fraction, a version no decimal
    ("no values here", ["numbers_0"]),
])
def test_value_shapes_name_how_values_are_written(text, shapes):
    assert value_shapes(text) == shapes


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(["Sami", "has", "per", "litre", "apples", "and", "each", "the"]), max_size=8),
       st.lists(st.integers(0, 10 ** 6), max_size=10))
def test_value_shapes_count_the_numbers_and_ignore_the_wording(words, numbers):
    text = " ".join(words + [str(n) for n in numbers]) + "."
    assert value_shapes(text) == [f"numbers_{min(len(numbers), MAX_COUNTED_NUMBERS)}"]
    assert value_shapes(text) == value_shapes(" ".join(w.upper() for w in words + [str(n) for n in numbers]) + ".")

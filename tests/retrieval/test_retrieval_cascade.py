"""The cascade: nested survivor sets, L1 soundness with why_not, the DAG moves, L3 filters, determinism."""

import dataclasses

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cocoda_jax.execution import Sandbox
from cocoda_jax.retrieval.cascade import (
    CascadeConfig, RetrievalIndex, complexity_rank, retrieve, retrieve_many, retrieve_query,
)
from cocoda_jax.retrieval.subgoals import Subgoal, extract_subgoal, subgoals_from_json
from cocoda_jax.retrieval.synthetic_library import make_queries
from cocoda_jax.types import match, parse_type, why_not

TYPES = ["float", "int", "str", "bool", "list[float]", "list[str]", "Table", "list[int]", "T"]
WORDS = ["invoice", "total", "average", "percent", "loan", "rows", "count", "words", "date", "days",
         "median", "growth", "sensor", "reading", "price", "ratio", "profit", "table", "slug", "year"]

subgoals = st.builds(
    lambda ins, out, words: Subgoal(" ".join(words), tuple(parse_type(t) for t in ins), parse_type(out)),
    st.lists(st.sampled_from(TYPES), max_size=4), st.sampled_from(TYPES), st.lists(st.sampled_from(WORDS), max_size=8))
configs = st.builds(
    CascadeConfig, k=st.integers(1, 8), l1_cap=st.integers(1, 400), l1_max_cost=st.sampled_from([0.0, 0.5, 1.5, 3.0]),
    l2_shortlist=st.integers(1, 12), l2_keep=st.integers(1, 16), climb=st.booleans(), descend=st.booleans(),
    complexity_bound=st.sampled_from([None, "O(1)", "O(n)"]), strict_result=st.booleans(),
    l4_max_examples=st.integers(0, 2), with_children=st.booleans())


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(subgoal=subgoals, config=configs)
def test_survivor_sets_are_nested(synth, subgoal, config):
    snap, _, index = synth
    r = retrieve(index, subgoal, config)
    s0 = set(snap.names())
    s1, s2, s3, s4 = (set(r.stage(n).survivors) for n in ("L1", "L2", "L3", "L4"))
    assert s4 <= s3 <= s2 <= s1 <= s0
    assert len(s1) <= config.l1_cap and len(s2) <= config.l2_keep and len(s4) <= config.k
    assert set(r.selected) == s4 and len(r.selected) == len(s4)
    assert r.stage("L1").tokens == 0
    for n in r.children:
        assert n not in s4 and any(n in snap.children(p) for p in s4)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(subgoal=subgoals, max_cost=st.sampled_from([0.0, 0.5, 1.5, 3.0]))
def test_l1_keeps_exactly_the_matching_tools_and_why_not_explains_the_rest(synth, subgoal, max_cost):
    snap, _, index = synth
    cfg = CascadeConfig(l1_cap=10_000, l1_max_cost=max_cost)
    s1 = set(retrieve(index, subgoal, cfg).stage("L1").survivors)
    expected = {n for n, _ in snap.signature_index.lookup(subgoal.signature, None, max_cost=max_cost)}
    assert s1 == expected
    for n in snap.names():
        reasons = why_not(snap.tool(n).signature, subgoal.signature, max_cost=max_cost)
        assert (n in s1) == (reasons == ())
    # one match per shape stands for every tool of that shape: same cost, same argument sources
    positions, costs, by_shape = index.l1(subgoal.signature, max_cost)
    for p, c in zip(positions.tolist()[:60], costs.tolist()[:60]):
        direct = match(subgoal.signature, snap.tool(index.names[p]).signature)
        assert direct.cost == c and direct.sources == by_shape[index.shape_key_of[p]].sources


def test_non_unifying_result_never_survives_and_why_not_says_why(shop):
    snap, index = shop
    sg = extract_subgoal('Upper-case the product name "tea pot".', "str")
    r = retrieve(index, sg, CascadeConfig(l1_max_cost=10.0))
    assert "divide" not in r.stage("L1").survivors and "label" in r.selected
    reasons = why_not(snap.tool("divide").signature, sg.signature, max_cost=10.0)
    assert reasons and "result" in reasons[0] and "float" in reasons[0]


def test_climb_adds_the_composite_that_calls_several_survivors(shop):
    snap, index = shop
    sg = Subgoal("take percent of the amount then subtract the amount", (parse_type("float"),) * 2, parse_type("float"))
    base = CascadeConfig(l2_shortlist=2, l2_keep=4, k=4, descend=False)
    assert "discount" not in retrieve(index, sg, dataclasses.replace(base, climb=False)).stage("L2").survivors
    r = retrieve(index, sg, base)
    assert {"percent_of", "subtract"} <= set(r.stage("L2").survivors)
    assert "discount" in r.stage("L2").survivors


def test_descend_adds_children_of_a_shortlisted_composite(shop):
    snap, index = shop
    sg = Subgoal("price after a percent off", (parse_type("float"),) * 2, parse_type("float"))
    base = CascadeConfig(l2_shortlist=1, l2_keep=4, k=4, climb=False)
    assert set(retrieve(index, sg, dataclasses.replace(base, descend=False)).stage("L2").survivors) == {"discount"}
    r = retrieve(index, sg, base)
    assert set(r.stage("L2").survivors) == {"discount", "percent_of", "subtract"}
    with_kids = retrieve(index, sg, dataclasses.replace(base, k=1, with_children=True))
    assert with_kids.selected == ("discount",) and set(with_kids.children) == {"percent_of", "subtract"}
    assert with_kids.stage("cards").records == 3


def test_complexity_bound_drops_slower_tools(shop):
    _, index = shop
    sg = Subgoal("prices sorted largest", (parse_type("list[float]"),), parse_type("list[float]"))
    assert {"sort_prices", "largest_prices"} <= set(retrieve(index, sg).selected)
    r = retrieve(index, sg, CascadeConfig(complexity_bound="O(n)"))
    assert "sort_prices" in r.stage("L2").survivors and "sort_prices" not in r.stage("L3").survivors
    assert complexity_rank("O(n log n)") > complexity_rank("O(n)") and complexity_rank("fast") is None
    with pytest.raises(ValueError):
        CascadeConfig(complexity_bound="quick")


def test_pre_conditions_run_in_the_sandbox_only(shop):
    _, index = shop
    sg = extract_subgoal("Divide an amount 12.5 by 0", "float")
    cfg = CascadeConfig(k=3)
    assert "divide" in retrieve(index, sg, cfg).stage("L3").survivors  # no sandbox: not evaluated
    with Sandbox(workers=1, timeout_s=30.0) as sb:
        dropped = retrieve(index, sg, cfg, sandbox=sb)
        kept = retrieve(index, extract_subgoal("Divide an amount 12.5 by 5", "float"), cfg, sandbox=sb)
    assert "divide" in dropped.stage("L2").survivors and "divide" not in dropped.stage("L3").survivors
    assert "divide" in kept.stage("L3").survivors


def test_l4_executes_tools_on_the_query_values_in_the_sandbox(shop):
    _, index = shop
    zero = extract_subgoal("Ratio of 12.5 over 0", "float")
    cfg = CascadeConfig(k=8, l4_execute=True)
    assert "safe_ratio" in retrieve(index, zero, cfg).selected  # no sandbox: nothing runs
    with Sandbox(workers=1, timeout_s=30.0) as sb:
        dropped = retrieve(index, zero, cfg, sandbox=sb)
        kept = retrieve(index, extract_subgoal("Ratio of 12.5 over 5", "float"), cfg, sandbox=sb)
        composite = retrieve(index, extract_subgoal("price 80 after 25 percent off", "float"), cfg, sandbox=sb)
        negative = retrieve(index, extract_subgoal("Ratio of -12.5 over 5", "float"), cfg, sandbox=sb)
        big = dataclasses.replace(extract_subgoal("Ratio of 12.5 over 5", "float"), expect=("result > 10",))
        expecting = retrieve(index, big, cfg, sandbox=sb)
    assert {"safe_ratio", "divide"} <= set(expecting.stage("L3").survivors)
    assert not {"safe_ratio", "divide"} & set(expecting.selected)  # 2.5 breaks the subgoal's expectation
    assert "safe_ratio" in dropped.stage("L3").survivors and "safe_ratio" not in dropped.selected
    assert "safe_ratio" in negative.stage("L3").survivors and "safe_ratio" not in negative.selected  # post broken
    assert "safe_ratio" in kept.selected
    assert "discount" in composite.selected  # runs with its children sent along


def test_lm_stages_control_what_is_counted(synth):
    _, specs, index = synth
    q = make_queries(specs, 1, seed=5)[0]
    sg = extract_subgoal(q.text, q.answer_type)
    full = retrieve(index, sg)
    mech = retrieve(index, sg, CascadeConfig(lm_stages=("L2",)))
    assert full.selected == mech.selected
    assert mech.stage("L3").tokens == 0 and mech.stage("L4").tokens == 0 and full.stage("L3").tokens > 0
    assert mech.total_tokens < full.total_tokens


def test_same_seed_same_result(synth):
    snap, specs, index = synth
    again = RetrievalIndex.build(snap)
    qs = make_queries(specs, 15, seed=9)
    assert qs == make_queries(specs, 15, seed=9) and qs != make_queries(specs, 15, seed=10)
    for q in qs:
        a = retrieve_query(index, q.text, q.answer_type)
        b = retrieve_query(again, q.text, q.answer_type)
        assert a.selected == b.selected and a.total_tokens == b.total_tokens
        assert [(s.stage, s.survivors, s.tokens) for s in a.stages] == [(s.stage, s.survivors, s.tokens) for s in b.stages]


def test_recall_on_the_synthetic_queries(synth):
    _, specs, index = synth
    qs = make_queries(specs, 40, seed=1)
    hits = sum(q.gold in retrieve_query(index, q.text, q.answer_type).selected for q in qs)
    assert hits / len(qs) >= 0.9


def test_retrieve_many_merges_subgoals(shop):
    _, index = shop
    sgs = subgoals_from_json('{"subgoals": [{"description": "divide an amount", "input_types": ["float", "float"],'
                             ' "output_type": "float"}, {"description": "upper-case label of a name",'
                             ' "input_types": ["str"], "output_type": "str"}]}')
    r = retrieve_many(index, sgs, CascadeConfig(k=2))
    assert set(r.selected) == {"divide", "label"}
    assert r.total_tokens == sum(s.tokens for s in r.stages)
    with pytest.raises(ValueError):
        retrieve_many(index, [])


def test_config_validation():
    with pytest.raises(ValueError):
        CascadeConfig(k=0)
    with pytest.raises(ValueError):
        CascadeConfig(lm_stages=("L5",))
    with pytest.raises(dataclasses.FrozenInstanceError):
        CascadeConfig().k = 3

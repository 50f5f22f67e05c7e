"""The BFCL retrieval benchmark on a small pool: gold labels, recall arithmetic, the split, the JSON schema."""

import math

import pytest

from cocoda_jax.retrieval import baselines
from third_party.benchmarks import bfcl_retrieval as bb
from cocoda_jax.retrieval.cascade import Retrieval, RetrievalIndex, StageReport, retrieve
from cocoda_jax.retrieval.tokens import default_counter

CATS = ("simple_python", "parallel_multiple")


@pytest.fixture(scope="module")
def pool():
    return bb.build_pool(CATS, ("MathAPI",))


def test_pool_and_gold_labels(pool):
    lib = pool.library
    assert len(pool.queries) == 600 and len(lib) == len({t.name for t in lib.tools})
    by_id = {q.id: q for q in pool.queries}
    q = by_id["simple_python_1"]
    assert q.text == "Calculate the factorial of 5 using math functions."
    assert q.gold == {"math_factorial"} and q.gold_bfcl == {"math.factorial"}
    assert bb.question_subgoal(q).values == (5,) and str(bb.question_subgoal(q).signature) == "(int) -> Any"
    q = by_id["parallel_multiple_0"]
    assert q.gold == {"math_toolkit_sum_of_multiples", "math_toolkit_product_of_primes"}
    assert all(g in lib.snapshot for q in pool.queries for g in q.gold)


def test_gold_scores_by_hand():
    gold = frozenset({"a", "b"})
    assert bb.gold_scores(("a", "c"), gold) == (False, 0.5)
    assert bb.gold_scores(("b", "x", "a"), gold) == (True, 1.0)
    assert bb.gold_scores((), gold) == (False, 0.0)


def test_evaluate_computes_recall_on_a_hand_checked_case(pool):
    by_id = {q.id: q for q in pool.queries}
    queries = [by_id["simple_python_1"], by_id["parallel_multiple_0"], by_id["simple_python_2"]]
    # a fixed answer: the factorial tool, one of parallel_multiple_0's two gold tools and a stranger
    selected = ("math_factorial", "math_toolkit_sum_of_multiples", "calculate_triangle_area")
    fixed = Retrieval("fixed", selected, (), (StageReport("cards", selected, 30, 3, 0.0),), 100, 0.0)
    m = bb.evaluate(lambda sg: fixed, queries, pool.library, default_counter())
    # simple_python_1 found (1, 1.0); parallel_multiple_0 half (0, 0.5); simple_python_2 missed (0, 0.0)
    assert m["all_gold_found"] == pytest.approx(1 / 3) and m["gold_recall"] == pytest.approx(1.5 / 3)
    assert m["tokens"] == 100 and m["tokens_mechanical"] == 30
    assert m["all_gold_found_by_category"] == {"parallel_multiple": 0.0, "simple_python": 0.5}
    assert set(m) >= {"all_gold_found", "gold_recall", "tokens", "tokens_mechanical", "prompt_bare_tokens", "p50_ms"}


def test_real_retrieval_finds_the_factorial(pool):
    index = RetrievalIndex.build(pool.library.snapshot)
    q = next(q for q in pool.queries if q.id == "simple_python_1")
    sg = bb.question_subgoal(q)
    for r in (baselines.flat(index, sg, 4), retrieve(index, sg, bb.cascade_config(4, math.inf, 0.3))):
        assert "math_factorial" in r.selected and len(r.selected) == 4
        assert bb.evaluate(lambda _: r, [q], pool.library, index.counter)["all_gold_found"] == 1.0


def test_split_is_deterministic_and_disjoint(pool):
    val, test = bb.split(pool.queries)
    assert len(val) + len(test) == len(pool.queries) and not {q.id for q in val} & {q.id for q in test}
    v2, t2 = bb.split(tuple(reversed(pool.queries)), cap=40)
    v3, t3 = bb.split(pool.queries, cap=40)
    assert {q.id for q in v2} == {q.id for q in v3} and len(v3) + len(t3) == 40
    assert {q.id for q in v3} <= {q.id for q in val}


def test_run_json_schema_small():
    grid = ((3.0, 1.0), (math.inf, 0.3))
    r = bb.run(k=4, n_queries=24, categories=CATS, classes=("MathAPI",), grid=grid, cost_model={"tokens": "b"})
    assert r["domain"] == "bfcl" and r["split"] == "test" and r["k"] == 4
    assert r["queries"] + r["validation_queries"] == 24 and r["queries"] == sum(r["queries_per_category"].values())
    for key in ("library_size", "full_bare_list_tokens", "full_card_list_tokens", "methods", "cost_model", "tuning",
                "goals"):
        assert key in r
    assert set(r["methods"]) == {"typed_dag", "typed_dag_default", "flat", "text_hier"}
    for m in r["methods"].values():
        assert set(m) >= {"all_gold_found", "gold_recall", "tokens", "tokens_mechanical", "prompt_bare_tokens",
                          "p50_ms", "all_gold_found_same_name"}
        assert 0 <= m["all_gold_found"] <= m["gold_recall"] <= 1
        assert m["all_gold_found"] <= m["all_gold_found_same_name"]
        assert 0 < m["tokens_mechanical"] <= m["tokens"]
    assert len(r["tuning"]["grid"]) == 2
    chosen = r["tuning"]["chosen"]
    assert (chosen["l1_max_cost"], chosen["l2_cost_weight"]) in {(3.0, 1.0), ("inf", 0.3)}
    flat = r["methods"]["flat"]  # flat reads every card, then shows its k
    assert flat["tokens"] == pytest.approx(r["full_card_list_tokens"] + flat["tokens_mechanical"])
    assert r["goals"]["flat_over_typed_tokens"] == pytest.approx(
        r["methods"]["flat"]["tokens"] / r["methods"]["typed_dag"]["tokens"])


def test_ranked_mode_adds_the_optional_aware_cascade_the_tree_and_the_ablation():
    from cocoda_jax.retrieval.encoder import EncoderConfig

    tiny = EncoderConfig(buckets=1024, max_len=32, width=8, steps=5, batch=32)
    r = bb.run(k=4, n_queries=40, categories=CATS, classes=("MathAPI",), grid=((math.inf, 0.3),),
               cost_model={"tokens": "b"}, ranker="hybrid", typed_grid=((math.inf, 1.0, 5.0, 2.0), (3.0, 0.3, 0.0, 0.0)),
               tree_grid=((4, 2),), ablation=True, encoder=tiny)
    m = r["methods"]
    assert {"typed_dag", "typed_dag_clauses", "typed_dag_signature", "flat", "text_hier", "flat_ranker",
            "flat_ranker_usage", "raptor"} <= set(m)
    # one retrieval per sentence: the LM-read stages are charged once per clause
    assert m["typed_dag_clauses"]["tokens"] >= m["typed_dag"]["tokens"]
    assert {f"ablate_{n}" for n in bb.ABLATIONS} <= set(m)
    assert r["usage_queries"] + r["tuning_queries"] == r["validation_queries"]
    assert len(r["typed_tuning"]["grid"]) == 2 and len(r["raptor_frontier"]) == 1
    assert r["encoder"]["steps"] == 5
    for v in m.values():
        assert 0 <= v["all_gold_found"] <= v["gold_recall"] <= 1 and 0 < v["tokens_mechanical"] <= v["tokens"]
    g = r["goals"]
    assert g["recall_over_flat_bm25_points"] == pytest.approx(
        100 * (m["typed_dag"]["all_gold_found"] - m["flat"]["all_gold_found"]))
    assert isinstance(g["goal_tree_recall_with_fewer_tokens"], bool)


def test_quarters_split_validation_apart(pool):
    val, _ = bb.split(pool.queries)
    usage, tuning = bb.quarters(val)
    assert not {q.id for q in usage} & {q.id for q in tuning} and len(usage) + len(tuning) == len(val)

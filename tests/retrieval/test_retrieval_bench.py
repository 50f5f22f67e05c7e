"""The synthetic libraries and the benchmark launcher's measurement on a small size."""

from collections import Counter

import pytest

from cocoda_jax.library import LibrarySnapshot
from cocoda_jax.retrieval import synthetic_library as sl
from cocoda_jax.retrieval.tokens import default_counter
from cocoda_jax.types import parse_type
from launch.bench import retrieval as bench_retrieval


def test_generated_library_is_valid_deep_and_seeded(synth):
    snap, specs, _ = synth
    assert len(snap) == 300 and [s.name for s in specs] == [s.name for s in sl.generate(300, 0)]
    assert [s.source for s in sl.generate(300, 1)] != [s.source for s in specs]
    domains = {sl.CONCEPTS_BY_KEY[s.concept].domain for s in specs if s.concept != "composite"}
    assert domains == {"arithmetic", "lists", "strings", "dates", "finance", "tables"}
    big = sl.generate(1600, 0)
    assert max(s.depth for s in big) == 4
    # the loaded snapshot derives the same depths from the code as the generator intended
    assert Counter(snap.depth(n) for n in snap.names()) == Counter(s.depth for s in specs)
    assert all(snap.tool(s.name).examples for s in specs if s.concept != "composite")


def test_queries_are_phrased_unlike_descriptions_and_typed_like_the_gold(synth):
    snap, specs, _ = synth
    from cocoda_jax.retrieval.subgoals import extract_subgoal
    from cocoda_jax.types import match

    from cocoda_jax.retrieval.rankers import words

    overlaps = []
    for q in sl.make_queries(specs, 30, seed=4):
        gold = snap.tool(q.gold)
        by = {s.name: s for s in specs}[q.gold]
        entity = set(words(by.entity))
        desc = set(words(gold.description.split(" Used for")[0].split(" A macro over")[0])) - entity
        overlaps.append(len(desc & (set(words(q.text)) - entity)) / max(1, len(desc)))
        sg = extract_subgoal(q.text, q.answer_type)
        m = match(sg.signature, gold.signature)
        assert m is not None and all(s is not None for s in m.sources)
        assert parse_type(q.answer_type) == gold.signature.result
    assert sum(overlaps) / len(overlaps) < 0.25  # other words than the description's (entity aside)


def test_cached_snapshot_round_trip(tmp_path):
    a, specs, _, cached = sl.cached_snapshot(120, 3, str(tmp_path))
    b, _, _, cached2 = sl.cached_snapshot(120, 3, str(tmp_path))
    assert not cached and cached2 and a == b
    assert a == LibrarySnapshot.from_json(sl.library_json(specs))


def test_run_size_and_goals(tmp_path):
    r = bench_retrieval.run_size(200, 8, 20, 0, default_counter(), str(tmp_path))
    m = r["methods"]
    assert set(m) == set(bench_retrieval.METHODS)
    for v in m.values():
        assert v["tokens"] > 0 and 0 <= v["recall"] <= 1 and v["p50_ms"] <= v["p95_ms"]
    assert m["typed_dag"]["tokens"] < m["flat"]["tokens"]
    assert m["typed_dag_mech"]["tokens"] < m["typed_dag"]["tokens"]
    fake = {"sizes": [1600, 102400], "methods": {
        n: {"tokens": [100.0, 150.0], "tokens_mechanical": [50.0, 50.0], "recall": [0.9, 0.9], "p95_ms": [1.0, 2.0]}
        for n in bench_retrieval.METHODS}}
    fake["methods"]["flat"]["tokens"] = [2000.0, 1e6]
    fake["methods"]["text_hier"]["tokens"] = [500.0, 900.0]
    g = bench_retrieval.goals(fake)
    assert g["at_1600"]["flat_goal_15x"] and not g["at_1600"]["text_hier_goal_6x"]
    assert g["growth_1600_to_max"]["goal_le_2x"] and g["max_p95_ms_typed_dag"] == 2.0
    assert g["at_1600"]["cost_model_a"]["flat_over_typed"] == 1.0
    # both cost models: mechanical rankers charge only the final cards
    for v in m.values():
        assert 0 < v["tokens_mechanical"] <= v["tokens"]


def test_domain_questions_recall_and_cost_models():
    """Recall of the gold program's tools on the default domain's held-out questions (a small
    training set here): the usage evidence finds more than descriptions alone, and model (a)
    charges less than model (b)."""
    r = bench_retrieval.domain_questions("synthetic_math", "val", 8, 24, 0, default_counter(), n_train=300)
    assert r["queries"] == 24 and set(r["cost_model"]) == {"tokens", "tokens_mechanical"}
    m = r["methods"]
    assert set(m) == {"typed_dag", "typed_dag_no_usage", "flat", "flat_usage", "text_hier"}
    for v in m.values():
        assert 0 <= v["all_gold_found"] <= v["gold_recall"] <= 1
        assert 0 < v["tokens_mechanical"] < v["tokens"]
    assert m["typed_dag"]["all_gold_found"] >= 0.8
    assert m["typed_dag"]["all_gold_found"] > m["typed_dag_no_usage"]["all_gold_found"]


def test_domain_questions_with_the_expanded_ranker():
    """``ranker="expanded"`` registers BM25 over the usage-expanded cards and every ranked row uses it;
    on training wording the expanded flat ranker finds at least what flat BM25 over the cards finds."""
    r = bench_retrieval.domain_questions("synthetic_math", "val", 8, 24, 0, default_counter(), n_train=300,
                                         ranker="expanded")
    m = r["methods"]
    assert r["ranker"] == "expanded" and "encoder" not in r
    assert {"typed_dag_ranked", "flat_ranker", "flat_ranker_usage", "raptor"} <= set(m)
    assert m["flat_ranker"]["all_gold_found"] >= m["flat"]["all_gold_found"]
    assert m["flat_ranker"]["gold_recall"] > m["flat"]["gold_recall"]


def test_domain_questions_with_the_expanded_ranker_plus_the_encoder():
    """``ranker="expanded_hybrid"`` trains the encoder and ranks by it plus the expanded BM25: on training
    wording its flat ranker finds more gold tools than flat BM25 over the cards."""
    r = bench_retrieval.domain_questions("synthetic_math", "val", 8, 24, 0, default_counter(), n_train=300,
                                         ranker="expanded_hybrid")
    m = r["methods"]
    assert r["ranker"] == "expanded_hybrid" and r["encoder"]["usage_pairs"] > 0
    assert {"typed_dag_ranked", "flat_ranker", "flat_ranker_usage", "raptor"} <= set(m)
    assert m["flat_ranker"]["gold_recall"] > m["flat"]["gold_recall"]


def test_domain_questions_with_one_retrieval_per_clause():
    """``subgoals="clauses"``: the ranked cascade's rows retrieve once per sentence and merge, so they
    charge the LM-read stages once per clause (more tokens under model b than one retrieval of the
    question); the question-level rows are unchanged; on held-out wording each step's own ranking finds
    more of the gold tools than one ranking of the whole question."""
    args = ("synthetic_math", "val", 8, 24, 0, default_counter())
    whole = bench_retrieval.domain_questions(*args, n_train=300, ranker="expanded", heldout="wording")
    clauses = bench_retrieval.domain_questions(*args, n_train=300, ranker="expanded", heldout="wording",
                                               subgoals="clauses")
    assert whole["subgoals"] == "question" and clauses["subgoals"] == "clauses"
    w, c = whole["methods"], clauses["methods"]
    for row in ("typed_dag", "flat", "flat_ranker", "raptor"):
        assert c[row] == {**w[row], "p50_ms": c[row]["p50_ms"]}
    assert c["typed_dag_ranked"]["tokens"] > w["typed_dag_ranked"]["tokens"]
    assert c["typed_dag_ranked"]["gold_recall"] > w["typed_dag_ranked"]["gold_recall"]
    both = bench_retrieval.domain_questions(*args, n_train=300, ranker="expanded", heldout="wording",
                                            subgoals="question_clauses")
    b = both["methods"]
    assert both["subgoals"] == "question_clauses"
    assert b["typed_dag"] == {**w["typed_dag"], "p50_ms": b["typed_dag"]["p50_ms"]}
    assert b["typed_dag_ranked"]["tokens"] > c["typed_dag_ranked"]["tokens"]
    assert b["typed_dag_ranked"]["gold_recall"] > w["typed_dag_ranked"]["gold_recall"]
    with pytest.raises(ValueError, match="subgoals"):
        bench_retrieval.domain_questions(*args, n_train=300, ranker="expanded", subgoals="clause")


def test_launcher_refuses_clauses_where_they_are_not_wired():
    from absl import app, flags

    argv = ["bench_retrieval", "--domain=bfcl", "--subgoals=clauses"]
    flags.FLAGS.unparse_flags()
    flags.FLAGS(argv)
    try:
        with pytest.raises(app.UsageError, match="subgoals=clauses"):
            bench_retrieval.main(argv[:1])
    finally:
        flags.FLAGS.unparse_flags()


def test_launcher_writes_aligned_json_and_plot(tmp_path):
    import json

    from absl import flags

    out, png = tmp_path / "bench.json", tmp_path / "bench.png"
    argv = ["bench_retrieval", "--sizes=60,120", "--k=4", "--queries=10", "--seed=2", f"--json_out={out}",
            f"--plot_out={png}", f"--cache_dir={tmp_path / 'cache'}"]
    flags.FLAGS.unparse_flags()
    flags.FLAGS(argv)
    try:
        bench_retrieval.main(argv[:1])
    finally:
        flags.FLAGS.unparse_flags()
    doc = json.loads(out.read_text())
    assert doc["k"] == 4 and doc["sizes"] == [60, 120]
    assert set(doc["methods"]) == set(bench_retrieval.METHODS)
    for m in doc["methods"].values():
        assert all(len(m[key]) == 2 for key in ("tokens", "tokens_mechanical", "tokens_p95", "recall", "p50_ms",
                                                "p95_ms"))
    assert set(doc["cost_model"]) == {"tokens", "tokens_mechanical"}
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

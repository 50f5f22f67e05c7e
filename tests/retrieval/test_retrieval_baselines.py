"""Flat and text-hierarchical baselines: same interface, same accounting, deterministic trees."""

import numpy as np

from cocoda_jax.retrieval import baselines
from cocoda_jax.retrieval.rankers import BM25Ranker, TfIdf, kmeans, words
from cocoda_jax.retrieval.subgoals import extract_subgoal
from cocoda_jax.retrieval.synthetic_library import make_queries


def _leaves(node):
    out = []
    for c in node.children:
        out += _leaves(c) if isinstance(c, baselines._Node) else [c]
    return out


def test_tree_covers_every_tool_once_and_is_deterministic(synth):
    _, _, index = synth
    a, b = baselines.TextTree(index, branching=4, leaf_size=5), baselines.TextTree(index, branching=4, leaf_size=5)
    leaves = _leaves(a.root)
    assert sorted(leaves) == list(range(len(index.names)))
    assert leaves == _leaves(b.root) and a.root.summary == b.root.summary
    assert a.depth() >= 3


def test_summaries_respect_their_budget(synth):
    _, _, index = synth
    tree = baselines.TextTree(index, summary_max_tokens=40)
    stack = [tree.root]
    while stack:
        node = stack.pop()
        body = node.summary.split("] ", 1)[1]
        parts = body.split(" | ")
        if len(parts) > 1:
            assert sum(index.counter.count(p) + 1 for p in parts) <= 40
        stack += [c for c in node.children if isinstance(c, baselines._Node)]


def test_methods_share_the_interface_and_final_cards(synth):
    _, specs, index = synth
    tree = baselines.TextTree(index)
    for q in make_queries(specs, 5, seed=2):
        sg = extract_subgoal(q.text, q.answer_type)
        for r in (baselines.flat(index, sg, 4), baselines.flat_summaries(index, sg, 4, shortlist=8),
                  baselines.text_hier(index, sg, 4, tree=tree)):
            assert len(r.selected) == 4 and len(set(r.selected)) == 4
            assert r.stage("cards").records == 4
            assert r.total_tokens == sum(s.tokens for s in r.stages)
        flat = baselines.flat(index, sg, 4)
        assert flat.stage("read").records == len(index.names)
        hier = baselines.text_hier(index, sg, 4, tree=tree)
        assert hier.total_tokens < flat.total_tokens
        assert set(hier.selected) <= set(hier.stage("leaves").survivors)


def test_rankers():
    assert words("Compounded growth_rate of 12 loans") == ["compound", "growth", "rate", "loan"]
    r = BM25Ranker(["b", "a", "c"], ["simple interest", "compound interest on loans", "median of a list"])
    assert [n for n, _ in r.rank("compounding interest")] [:2] == ["a", "b"]
    assert r.rank("interest", ["b", "c"], limit=1)[0][0] == "b"
    tied = BM25Ranker(["z", "y"], ["same words", "same words"])
    assert [n for n, _ in tied.rank("same")] == ["y", "z"]
    assert r.rank("nothing matches here", limit=2) == [("a", 0.0), ("b", 0.0)]
    t = TfIdf(["apple pie", "apple tart", "car engine", "car wheel"], dims=256)
    labels = kmeans(t.matrix, 2, seed=0)
    assert labels[0] == labels[1] and labels[2] == labels[3] and labels[0] != labels[2]
    assert np.allclose(np.linalg.norm(t.matrix, axis=1), 1.0)

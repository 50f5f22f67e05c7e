"""Probe: the usage votes from the encoder's neighbours (UsageIndex(embed=...): cosine of query-tower vectors) against
BM25 neighbours, and their mean; held-out wording, k = 8, the cascade without climb/descend, expanded_hybrid with
five encoders (seed ENCODER_SEED). Prints one JSON line.

    python docs/results/retrieval_2026-12-07/probes/encoder_votes.py SPLIT DOMAIN_SEED ENCODER_SEED
"""
import dataclasses, sys, json
import numpy as np
from launch.bench import retrieval as B
from cocoda_jax.coevolve.validate import gold_tool_sets
from cocoda_jax.rl.prompts import RetrievalConfig, question_subgoal
from cocoda_jax.retrieval.cascade import RetrievalIndex, retrieve
from cocoda_jax.retrieval.usage import UsageIndex
from cocoda_jax.retrieval.encoder import USAGE_ENCODER, add_usage_rankers
from cocoda_jax.retrieval.tokens import TokenCounter
split, seed, es = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
dom, warm, usage, _ = B.domain_library("synthetic_math", seed, "wording", 128, 2000, 0)
snap = warm.snapshot
index = RetrievalIndex.build(snap, TokenCounter.from_config("qwen3"))
add_usage_rankers(index, usage, "expanded_hybrid", members=5,  # as the bench builds it
                  config=dataclasses.replace(USAGE_ENCODER, seed=es))
members = [r for r, _ in index.rankers["encoder"].parts]
def embed(texts):
    v = np.concatenate([m.embed(list(texts)) for m in members], axis=1)
    return v / np.linalg.norm(v, axis=1, keepdims=True)
dense = UsageIndex(usage.records, embed=embed)
base = RetrievalConfig(k=8)
cfg = dataclasses.replace(base.cascade(lm_stages=("L2", "L3", "L4")), ranker="expanded_hybrid",
                          prior_weight=base.usage_weight, climb=False, descend=False)
tasks = list(dom.val if split == "val" else dom.test)[:128]
found = {}
for t in tasks:
    g = gold_tool_sets(t, snap)
    vb = usage.votes(t.question, base.neighbours, exclude=str(t.id))
    vd = dense.votes(t.question, base.neighbours, exclude=str(t.id))
    vm = {n: 0.5 * vb.get(n, 0) + 0.5 * vd.get(n, 0) for n in set(vb) | set(vd)}
    for name, prior in (("bm25_votes", vb), ("dense_votes", vd), ("mean_votes", vm)):
        w = retrieve(index, question_subgoal(t), cfg, prior=prior)
        found.setdefault(name, []).append(any(s <= set(w.selected) for s in g))
means = {k: float(np.mean(v)) for k, v in found.items()}
print(json.dumps({"split": split, "domain": seed, "encoder_seed": es, **means}))

"""Probe: the held-out-wording questions whose gold tools the cascade (question-level, no climb/descend,
expanded_hybrid with five encoders) leaves out of the top 8: each with its gold sets, the selection and the
missing tools' ranks by the ranker alone; then the count per missing tool, and the score parts (expanded BM25,
encoder, usage votes) of the top 12 for the first three misses. SHAPES=1: the encoders read the value shapes.

    python docs/results/retrieval_2026-12-07/probes/validation_misses.py SPLIT DOMAIN_SEED ENCODER_SEED

Domain 0's validation split, encoder seed 0: 22 misses of 128; ratio_part 16, floor_div 5, ceil_div 1 (with
SHAPES=1: 23; ratio_part 14, floor_div 8, ceil_div 1).
"""
import collections, dataclasses, os, sys
from launch.bench import retrieval as B
from cocoda_jax.coevolve.validate import gold_tool_sets
from cocoda_jax.rl.prompts import RetrievalConfig, question_subgoal
from cocoda_jax.retrieval.cascade import RetrievalIndex, retrieve
from cocoda_jax.retrieval.encoder import USAGE_ENCODER, add_usage_rankers
from cocoda_jax.retrieval.tokens import TokenCounter
split, seed, es = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
dom, warm, usage, _ = B.domain_library("synthetic_math", seed, "wording", 128, 2000, 0)
snap = warm.snapshot
index = RetrievalIndex.build(snap, TokenCounter.from_config("qwen3"))
add_usage_rankers(index, usage, "expanded_hybrid", members=5,  # as the bench builds it
                  config=dataclasses.replace(USAGE_ENCODER, seed=es, value_shapes=os.environ.get("SHAPES") == "1"))
base = RetrievalConfig(k=8)
cfg = dataclasses.replace(base.cascade(lm_stages=("L2", "L3", "L4")), ranker="expanded_hybrid",
                          prior_weight=base.usage_weight, climb=False, descend=False)
tasks = list(dom.val if split == "val" else dom.test)[:128]
missed_tool = collections.Counter(); n_miss = 0
print("library:", len(index.names), index.names)
for t in tasks:
    prior = usage.votes(t.question, base.neighbours, exclude=str(t.id))
    g = gold_tool_sets(t, snap)
    w = retrieve(index, question_subgoal(t), cfg, prior=prior)
    sel = list(w.selected)
    if not any(s <= set(sel) for s in g):
        n_miss += 1
        best = min(g, key=lambda s: len(s - set(sel)))
        for x in best - set(sel): missed_tool[x] += 1
        sc = index.rankers["expanded_hybrid"].scores(t.question)
        order = sorted(range(len(index.names)), key=lambda i: -sc[i])
        rank = {index.names[i]: r for r, i in enumerate(order)}
        print("Q:", t.question[:260]); print("   gold", [sorted(s) for s in g])
        print("   sel:", sel); print("   missing ranks (ranker only):", {x: rank.get(x) for x in best - set(sel)})
print("misses", n_miss, "of", len(tasks)); print(missed_tool.most_common())

# components for the first few misses
import numpy as np
shown = 0
for t in tasks:
    prior = usage.votes(t.question, base.neighbours, exclude=str(t.id))
    g = gold_tool_sets(t, snap)
    w = retrieve(index, question_subgoal(t), cfg, prior=prior)
    if any(s <= set(w.selected) for s in g): continue
    desc = question_subgoal(t).description
    ex = index.rankers["expanded"].scores(desc); en = index.rankers["encoder"].scores(desc)
    pv = index.prior_vector(prior, cfg.prior_weight)
    tot = ex + en + pv
    order = np.argsort(-tot)[:12]
    print("Q:", desc[:150])
    for i in order:
        print(f"   {index.names[i]:50s} exp {ex[i]:6.2f} enc {en[i]:6.2f} prior {pv[i]:6.2f} tot {tot[i]:6.2f}")
    shown += 1
    if shown >= 3: break

"""Post-hoc: the held-out-wording questions the whole-question cascade finds and the per-clause one misses.

The ranked cascade without climb/descend, `expanded_hybrid` with five encoders, as in this folder's runs:

    python docs/results/retrieval_2026-12-06b/probe_clauses_vs_question.py SPLIT DOMAIN_SEED ENCODER_SEED

Prints each such question with its gold tool sets, its clauses and the two rankings, then, per number
of clauses, [questions, found asked whole, found per clause]. Read after the test figures, to explain them.
"""
import dataclasses, sys
from launch.bench import retrieval as B
from cocoda_jax.coevolve.validate import gold_tool_sets
from cocoda_jax.rl.prompts import RetrievalConfig, question_subgoal
from cocoda_jax.retrieval.cascade import RetrievalIndex, retrieve, retrieve_many
from cocoda_jax.retrieval.rankers import BM25Ranker
from cocoda_jax.retrieval.subgoals import clause_subgoals
from cocoda_jax.retrieval.encoder import EncoderConfig, SumRanker, train_ensemble
from cocoda_jax.retrieval.tokens import TokenCounter
split, seed, es = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
dom, warm, usage, _ = B.domain_library("synthetic_math", seed, "wording", 128, 2000, 0)
snap = warm.snapshot
index = RetrievalIndex.build(snap, TokenCounter.from_config("qwen3"))
index.add_ranker("expanded", BM25Ranker(index.names, usage.expanded_texts(index.names, index.texts)))
pairs = [(r.question, n) for r in usage.records for n in sorted(r.tools)]
rk = train_ensemble(index.names, index.texts, pairs, EncoderConfig(steps=150, card_views=12, seed=es), 5)
index.add_ranker("encoder", rk)
index.add_ranker("expanded_hybrid", SumRanker([(index.rankers["expanded"], 1.0), (rk, 1.0)]))
base = RetrievalConfig(k=8)
cfg = dataclasses.replace(base.cascade(lm_stages=("L2", "L3", "L4")), ranker="expanded_hybrid",
                          prior_weight=base.usage_weight, climb=False, descend=False)
tasks = list(dom.val if split == "val" else dom.test)
nclauses = {}
for t in tasks:
    prior = usage.votes(t.question, base.neighbours, exclude=str(t.id))
    g = gold_tool_sets(t, snap)
    w = retrieve(index, question_subgoal(t), cfg, prior=prior)
    subs = clause_subgoals(t.question, "Any")
    c = retrieve_many(index, subs, cfg, prior=prior)
    fw = any(s <= set(w.selected) for s in g); fc = any(s <= set(c.selected) for s in g)
    nclauses.setdefault(len(subs), [0, 0, 0]); nclauses[len(subs)][0] += 1; nclauses[len(subs)][1] += fw; nclauses[len(subs)][2] += fc
    if fw and not fc:
        print("Q:", t.question[:200]); print("   gold", [sorted(s) for s in g]); print("   clauses:", [s.description[:60] for s in subs])
        print("   whole:", list(w.selected)); print("   merged:", list(c.selected))
print("clauses -> [n, whole found, clause found]", nclauses)

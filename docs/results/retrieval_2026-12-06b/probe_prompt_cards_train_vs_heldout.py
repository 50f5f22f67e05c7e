"""How often the prompt's cards hold a gold program on training questions against held-out-wording ones,
under each ``retrieval.ranker``: the planner learns from the first and is scored on the second.

    python docs/results/retrieval_2026-12-06b/probe_prompt_cards_train_vs_heldout.py [N]

Stage 1's warm library and usage records of the default config (domain seed 0, held-out wording), the
prompt's own ``PromptCards`` (k = 8, five encoders for the trained ranker); prints JSON: per ranker, the
share of the first N training questions and of N validation questions whose cards hold a gold program,
and the mean rank of the first gold tool in the cards.
"""

import json
import sys

from cocoda_jax.coevolve.validate import gold_tool_sets
from cocoda_jax.rl.prompts import PromptCards, RetrievalConfig
from launch.bench.retrieval import domain_library

n = int(sys.argv[1]) if len(sys.argv) > 1 else 128
dom, warm, usage, _ = domain_library("synthetic_math", 0, "wording", n, 2000, 0)
snap = warm.snapshot
out = {}
for ranker in ("bm25", "expanded_hybrid"):
    cards = PromptCards(snap, RetrievalConfig(k=8, ranker=ranker), usage)
    row = {}
    for name, tasks in (("train", list(dom.train[:n])), ("val_heldout_wording", list(dom.val[:n]))):
        found, first = 0, []
        for t in tasks:
            chosen = cards.tools(t)
            golds = gold_tool_sets(t, snap)
            found += any(g <= set(chosen) for g in golds)
            ranks = [chosen.index(x) for g in golds for x in g if x in chosen]
            first.append(min(ranks) if ranks else len(chosen))
        row[name] = {"all_gold_found": round(found / len(tasks), 3), "mean_rank_of_first_gold": round(sum(first) / len(first), 2)}
    out[ranker] = row
print(json.dumps(out, indent=1))

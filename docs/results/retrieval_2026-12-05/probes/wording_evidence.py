"""How much lexical evidence a held-out-wording question carries for its gold tools.

For each synthetic-math test question in the held-out wording (the generator's third template per
motif, new entities), and each gold tool of its program: does any content word of the question occur
in the tool's card text, or in a training question whose program called the tool (the usage records
the votes and the encoder learn from)? A gold tool with neither is one no ranker built from these
data can tie to the question by its words: only priors or chance put it in the top k.

    python docs/results/retrieval_2026-12-05/probes/wording_evidence.py [N_QUERIES]

Prints JSON: per question the gold tools with and without evidence, and the share of questions
whose every gold tool has some.
"""

import json
import re
import sys

from cocoda_jax.coevolve.validate import gold_tool_sets
from cocoda_jax.retrieval.cascade import RetrievalIndex
from cocoda_jax.retrieval.tokens import TokenCounter
from launch.bench.retrieval import domain_library

STOP = set("a an the of and at for in on to is that it its by with each every this how what many much does do "
           "are be as from per they them their then there he she his her was were has have had into out up "
           "one all more than so".split())


def words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z]+", text.lower()) if w not in STOP and len(w) > 1}


def main(n_queries: int = 128) -> None:
    dom, warm, usage, _ = domain_library("synthetic_math", 0, "wording", n_queries)
    snap = warm.snapshot
    index = RetrievalIndex.build(snap, TokenCounter.from_config(None))
    card_words = {n: words(t) for n, t in zip(index.names, index.texts)}
    usage_words: dict[str, set[str]] = {}
    for r in usage.records:
        for n in r.tools:
            usage_words.setdefault(n, set()).update(words(r.question))
    # by_source counts the tools of each question's last alternative (the refactored program when it differs)
    rows, all_covered, by_source = [], 0, {"card": 0, "usage": 0, "none": 0}
    for t in dom.test:
        q = words(t.question)
        alternatives = gold_tool_sets(t, snap)  # the gold program's tools, or the refactored program's
        per = {}
        for n in sorted(set().union(*alternatives)):
            per[n] = ("card" if q & card_words.get(n, set()) else "usage" if q & usage_words.get(n, set())
                      else "none")
        for n in alternatives[-1]:
            by_source[per[n]] += 1
        all_covered += any(all(per[n] != "none" for n in alt) for alt in alternatives)
        rows.append({"id": str(t.id), "question": t.question, "gold": [sorted(a) for a in alternatives],
                     "evidence": per})
    n_gold = sum(by_source.values())
    print(json.dumps({"queries": len(rows), "share_all_gold_with_evidence": round(all_covered / len(rows), 3),
                      "gold_tools": n_gold, "gold_evidence": {k: round(v / n_gold, 3) for k, v in by_source.items()},
                      "rows": rows}, indent=1))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 128)

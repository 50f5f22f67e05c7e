"""How much the optional-aware L1 type stage prunes on BFCL's real pool, and whether it keeps the gold.

On the pool of all 2,478 BFCL docs and the test half of the queries (the split the benchmark
reports on), each question's evidence (:func:`~cocoda_jax.retrieval.literals.question_evidence`) is
fitted against every tool once (:meth:`RetrievalIndex.l1_evidence`, no cost bound, the tuned
cascade's prices), and each tool's fit cost is then cut at several ``l1_max_cost`` values. Beside
it, the tuned cascade's L2 score without L1 (the ``ablate_no_L1`` row: the ranker, plus the usage
votes and the enum-literal term, no cost penalty) ranks the whole pool. Per query and bound
(``per_bound``: lists aligned with ``bounds``) we record how many tools survive the type cut,
whether every gold tool does, how many non-gold tools the ranker puts above the lowest gold tool
and how many of those the cut removes (only those can move a gold tool up), and whether the top k
of the ranking *restricted to the survivors* holds all gold (the most pure pruning can do for
recall, with no cost penalty); ``oracle_bound`` is the same at each query's tightest bound that
keeps all its gold (an upper limit no fixed bound reaches). The cascade itself (tuned,
and with L1 off) is also run per query, to check the setup against the committed benchmark row and
to give its real S1 size (after ``l1_cap``).

The ranker is the benchmark's own (``hybrid``: BM25 + the dual encoder trained by
:func:`~third_party.benchmarks.bfcl_retrieval.add_rankers` on the usage quarter); ``bm25`` is
cheaper and was the better ranker in the committed ablation. The tuned knobs are read from the
committed ``bfcl_k8_hybrid.json`` one directory up.

    python docs/results/retrieval_2026-12-05/probes/l1_pruning.py [--ranker=hybrid|bm25] [--every=N]

``--every=N`` keeps every Nth test query (in the benchmark's order). Prints JSON: the setup,
summaries per bound, and one row per query.
"""

import argparse
import dataclasses
import json
import math
import time
from pathlib import Path

import numpy as np

from cocoda_jax.retrieval.cascade import RetrievalIndex, evidence_costs, retrieve
from cocoda_jax.retrieval.literals import question_evidence
from cocoda_jax.retrieval.tokens import default_counter
from third_party.benchmarks import bfcl_retrieval as bench

BOUNDS = (0.0, 0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 5.0, math.inf)
FIELDS = ("pool", "gold_kept", "removed_above_gold", "removed_top_k", "found_filtered")
NEIGHBOURS = 10  # the votes' neighbours, as the benchmark's typed runner asks for them
COMMITTED = Path(__file__).resolve().parents[1] / "bfcl_k8_hybrid.json"


def committed() -> tuple[dict, dict]:
    """The tuned knobs as the committed benchmark chose them (so this probe cannot drift from it),
    and its test-half all_gold_found of the tuned cascade and of ``ablate_no_L1``."""
    doc = json.loads(COMMITTED.read_text())
    chosen = doc["typed_tuning"]["chosen"]
    knobs = {key: float(chosen[key]) for key in ("l1_max_cost", "l2_cost_weight", "usage_weight", "literal_weight")}
    return knobs, {m: doc["methods"][m]["all_gold_found"] for m in ("typed_dag", "ablate_no_L1")}


def key(bound: float) -> str:
    return "inf" if math.isinf(bound) else f"{bound:g}"


def probe_query(index, q, cfg, votes, knobs, k):
    """One query's row: fit costs of the gold, survivors per bound, and the no-L1 ranking's view."""
    sg = bench.question_subgoal(q)
    idx, cost, _ = index.l1_evidence(question_evidence(sg), math.inf, evidence_costs(cfg))
    fit_cost = np.full(len(index.names), math.inf)
    fit_cost[idx] = cost
    prior = votes.votes(sg.description, NEIGHBOURS)
    score = (index.ranker(cfg.ranker).scores(sg.description) + index.prior_vector(prior, knobs["usage_weight"])
             + index.literal_vector(sg.description, knobs["literal_weight"]))
    order = np.lexsort((np.arange(len(score)), -score))  # retrieve's order: score, then name
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    gold = sorted(index.position[g] for g in q.gold)
    worst = max(rank[g] for g in gold)
    gold_set = set(gold)
    above = np.array([i for i in order[:worst] if i not in gold_set], dtype=np.int64)
    top_k = order[:k]
    row = {"id": q.id, "category": q.category,
           "gold": [{"tool": index.names[g], "rank": int(rank[g]) + 1,
                     "fit_cost": None if math.isinf(fit_cost[g]) else round(float(fit_cost[g]), 3)} for g in gold],
           "found_no_l1": bool(worst < k), "nongold_above_lowest_gold": int(above.size)}
    per = row["per_bound"] = {f: [] for f in FIELDS}  # lists aligned with BOUNDS
    for b in BOUNDS:
        keep = fit_cost <= b
        kept_order = order[keep[order]]
        per["pool"].append(int(keep.sum()))
        per["gold_kept"].append(bool(all(keep[g] for g in gold)))
        per["removed_above_gold"].append(int((~keep[above]).sum()))
        per["removed_top_k"].append(int((~keep[top_k]).sum()))
        per["found_filtered"].append(bool(gold_set <= set(kept_order[:k].tolist())))
    oracle = max(fit_cost[g] for g in gold)  # the tightest bound that keeps every gold tool
    keep = fit_cost <= oracle
    row["oracle_bound"] = {"bound": None if math.isinf(oracle) else round(float(oracle), 3), "pool": int(keep.sum()),
                           "removed_above_gold": int((~keep[above]).sum()),
                           "found_filtered": bool(gold_set <= set(order[keep[order]][:k].tolist()))}
    for name, run_cfg in (("tuned", cfg), ("no_L1", dataclasses.replace(cfg, **bench.ABLATIONS["no_L1"][0]))):
        r = retrieve(index, sg, run_cfg, prior=prior)
        row[f"cascade_{name}"] = {"s1": len(r.stage("L1").survivors),
                                  "found": bool(q.gold <= set(r.selected) | set(r.children))}
    return row


def summarise(rows: list[dict], pool_size: int) -> dict:
    """Means and shares over the rows, per bound."""
    out = {}
    for i, b in enumerate(map(key, BOUNDS)):
        per = [{f: r["per_bound"][f][i] for f in FIELDS} for r in rows]
        share = np.array([p["pool"] / pool_size for p in per])
        contested = [p for r, p in zip(rows, per) if r["nongold_above_lowest_gold"] > 0]
        out[b] = {
            "pool_mean": round(float(np.mean([p["pool"] for p in per])), 1),
            "pool_median": float(np.median([p["pool"] for p in per])),
            "kept_share_mean": round(float(share.mean()), 4),
            "kept_share_median": round(float(np.median(share)), 4),
            "share_queries_gold_dropped": round(float(np.mean([not p["gold_kept"] for p in per])), 4),
            "share_queries_removes_nongold_above_gold": round(float(np.mean([p["removed_above_gold"] > 0
                                                                             for p in per])), 4),
            "share_queries_removes_nongold_above_gold_and_keeps_gold": round(float(np.mean(
                [p["removed_above_gold"] > 0 and p["gold_kept"] for p in per])), 4),
            "removed_above_gold_share_mean_when_contested": round(float(np.mean(
                [p["removed_above_gold"] / r["nongold_above_lowest_gold"]
                 for r, p in zip(rows, per) if r["nongold_above_lowest_gold"] > 0])), 4) if contested else None,
            "removed_from_top_k_mean": round(float(np.mean([p["removed_top_k"] for p in per])), 3),
            "all_gold_found_filtered": round(float(np.mean([p["found_filtered"] for p in per])), 4),
            "queries_gained_by_filter": sum(p["found_filtered"] and not r["found_no_l1"] for r, p in zip(rows, per)),
            "queries_lost_by_filter": sum(r["found_no_l1"] and not p["found_filtered"] for r, p in zip(rows, per)),
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranker", choices=("hybrid", "bm25"), default="hybrid")
    parser.add_argument("--every", type=int, default=1)
    parser.add_argument("--k", type=int, default=8)
    args = parser.parse_args()
    t_start = time.perf_counter()
    knobs, reported = committed()
    pool = bench.build_pool()
    index = RetrievalIndex.build(pool.library.snapshot, default_counter())
    val, test = bench.split(pool.queries)
    usage, _ = bench.quarters(val)
    encoder = bench.add_rankers(index, usage) if args.ranker == "hybrid" else None
    votes = bench._usage_index(usage)
    cfg = dataclasses.replace(bench.typed_config(args.k, knobs["l1_max_cost"], knobs["l2_cost_weight"],
                                                 knobs["literal_weight"], args.ranker),
                              prior_weight=knobs["usage_weight"])  # as the benchmark's typed runner sets it
    queries = test[::args.every]
    rows = [probe_query(index, q, cfg, votes, knobs, args.k) for q in queries]
    n_pool = len(index.names)
    gold_ranks = [g["rank"] for r in rows for g in r["gold"]]
    tuned = key(knobs["l1_max_cost"])
    dropped = [g for r in rows for g in r["gold"] if g["fit_cost"] is None or g["fit_cost"] > knobs["l1_max_cost"]]
    result = {
        "what": "optional-aware L1 pruning on BFCL's real pool, test half; ranks from the tuned cascade's L2 score "
                "without L1 (ranker + usage votes + enum literals, no cost penalty) over the whole pool",
        "ranker": args.ranker, "encoder": encoder, "k": args.k, "pool_size": n_pool,
        "test_queries": len(test), "every": args.every, "queries": len(rows), "tuned": knobs,
        "evidence_extra": cfg.evidence_extra, "evidence_inferred": cfg.evidence_inferred, "l1_cap": cfg.l1_cap,
        "bounds": [key(b) for b in BOUNDS],
        "cascade_check": {
            "all_gold_found_tuned": round(float(np.mean([r["cascade_tuned"]["found"] for r in rows])), 4),
            "all_gold_found_no_L1": round(float(np.mean([r["cascade_no_L1"]["found"] for r in rows])), 4),
            "committed_full_test_half": {m: round(v, 4) for m, v in reported.items()},
            "queries_found_only_tuned": sum(r["cascade_tuned"]["found"] and not r["cascade_no_L1"]["found"]
                                            for r in rows),
            "queries_found_only_no_L1": sum(r["cascade_no_L1"]["found"] and not r["cascade_tuned"]["found"]
                                            for r in rows),
            "s1_mean_tuned": round(float(np.mean([r["cascade_tuned"]["s1"] for r in rows])), 1),
            "s1_mean_no_L1": round(float(np.mean([r["cascade_no_L1"]["s1"] for r in rows])), 1),
        },
        "all_gold_found_no_l1_ranking": round(float(np.mean([r["found_no_l1"] for r in rows])), 4),
        "gold_rank_no_l1": {"median": float(np.median(gold_ranks)), "share_top_k": round(float(np.mean(
            [x <= args.k for x in gold_ranks])), 4)},
        "share_queries_with_nongold_above_a_gold": round(float(np.mean(
            [r["nongold_above_lowest_gold"] > 0 for r in rows])), 4),
        "gold_dropped_at_tuned_bound": {"tools": len(dropped), "rank_median": float(np.median(
            [g["rank"] for g in dropped])) if dropped else None, "in_top_k_without_l1": sum(
            g["rank"] <= args.k for g in dropped)},
        "per_bound": summarise(rows, n_pool),
        "oracle_bound": {  # per query, the tightest bound that keeps all its gold: the most L1 could prune
            "bound_median": float(np.median([r["oracle_bound"]["bound"] for r in rows])),
            "kept_share_mean": round(float(np.mean([r["oracle_bound"]["pool"] / n_pool for r in rows])), 4),
            "kept_share_median": round(float(np.median([r["oracle_bound"]["pool"] / n_pool for r in rows])), 4),
            "share_queries_removes_nongold_above_gold": round(float(np.mean(
                [r["oracle_bound"]["removed_above_gold"] > 0 for r in rows])), 4),
            "all_gold_found_filtered": round(float(np.mean([r["oracle_bound"]["found_filtered"] for r in rows])), 4),
            "queries_gained_by_filter": sum(r["oracle_bound"]["found_filtered"] and not r["found_no_l1"]
                                            for r in rows),
        },
        "tuned_bound": tuned,
        "wall_s": round(time.perf_counter() - t_start, 1),
        "rows": rows,
    }
    head = json.dumps({k: v for k, v in result.items() if k != "rows"}, indent=1)
    body = ",\n".join("  " + json.dumps(r) for r in rows)  # one query per line
    print(head[:-2] + ',\n "rows": [\n' + body + "\n ]\n}")


if __name__ == "__main__":
    main()

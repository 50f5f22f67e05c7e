r"""Token cost, recall and latency of typed DAG retrieval against flat and text-hierarchical retrieval.

    python -m launch.bench_retrieval --sizes=100,400,1600,6400,25600,102400 --k=8 --queries=200 \
        --seed=0 --json_out=/tmp/bench_retrieval.json --plot_out=/tmp/bench_retrieval.png

For each size: a synthetic library (``cocoda_jax.retrieval.synthetic_library``, loaded through
``LibrarySnapshot.from_json``; snapshots are pickled under ``--cache_dir`` because that load grows
faster than linearly, about 110 s at 25,600 tools on one core) and gold-labelled queries phrased
unlike the gold tool's description. Each query becomes a subgoal by the deterministic extractor;
every method answers it, and we record the prompt tokens it materialises to surface its top-k (all
stages plus the final cards, Qwen3 BPE), whether the gold tool is in the top-k, and the wall time of
the method's own work (token counts of full-library reads are cached per library, as a real system
would keep them; LM reading time is not simulated).

Methods: ``typed_dag`` (the cascade; the LM reads L2 one-liners, L3 specs, L4 examples and the final
cards), ``typed_dag_mech`` (L3/L4 checked mechanically, not shown to an LM), ``flat`` (every card),
``flat_summaries`` (every one-liner, then a shortlist's cards) and ``text_hier`` (RAPTOR-style tree).
Prints and writes JSON ``{"k", "sizes", "methods": {name: {"tokens", "tokens_p95", "recall",
"recall_at_1", "p50_ms", "p95_ms"}}, "per_size", "goals"}``, lists aligned with sizes (``recall`` is
recall@k of the gold tool; ``tokens`` the mean).
"""

from __future__ import annotations

import json
import time

import numpy as np
from absl import app, flags

from cocoda_jax.retrieval import baselines, synthetic_library
from cocoda_jax.retrieval.cascade import CascadeConfig, RetrievalIndex, retrieve
from cocoda_jax.retrieval.subgoals import extract_subgoal
from cocoda_jax.retrieval.tokens import TokenCounter

_SIZES = flags.DEFINE_list("sizes", ["100", "400", "1600", "6400", "25600", "102400"], "Library sizes.")
_K = flags.DEFINE_integer("k", 8, "Tools to surface.")
_QUERIES = flags.DEFINE_integer("queries", 200, "Queries per size.")
_SEED = flags.DEFINE_integer("seed", 0, "Library and query seed.")
_JSON_OUT = flags.DEFINE_string("json_out", None, "Write the JSON here.")
_PLOT_OUT = flags.DEFINE_string("plot_out", None, "Write a PNG of tokens against size (log axes) here.")
_CACHE = flags.DEFINE_string("cache_dir", "", "Pickle loaded snapshots here and reuse them ('': load from JSON every run).")
_TOKENIZER = flags.DEFINE_string("tokenizer", "qwen3", "'qwen3', a local HF tokenizer dir or a .tiktoken file.")
_SANDBOX = flags.DEFINE_boolean("sandbox", False, "Evaluate L3 pre-conditions in a Sandbox (else skipped).")

METHODS = ("typed_dag", "typed_dag_mech", "flat", "flat_summaries", "text_hier")


def run_size(size: int, k: int, n_queries: int, seed: int, counter, cache_dir: str, sandbox=None) -> dict:
    snap, specs, load_s, cached = synthetic_library.cached_snapshot(size, seed, cache_dir or None)
    t0 = time.perf_counter()
    index = RetrievalIndex.build(snap, counter)
    index_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    tree = baselines.TextTree(index, seed=seed)
    tree_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    baselines._all_cards_tokens(index), baselines._all_lines_tokens(index)
    count_s = time.perf_counter() - t0
    queries = synthetic_library.make_queries(specs, n_queries, seed)
    cfg = CascadeConfig(k=k)
    cfg_mech = CascadeConfig(k=k, lm_stages=("L2",))
    runners = {
        "typed_dag": lambda sg: retrieve(index, sg, cfg, sandbox=sandbox),
        "typed_dag_mech": lambda sg: retrieve(index, sg, cfg_mech, sandbox=sandbox),
        "flat": lambda sg: baselines.flat(index, sg, k),
        "flat_summaries": lambda sg: baselines.flat_summaries(index, sg, k, shortlist=3 * k),
        "text_hier": lambda sg: baselines.text_hier(index, sg, k, tree=tree),
    }
    out = {"size": size, "queries": len(queries), "snapshot_s": round(load_s, 2), "snapshot_from_cache": cached,
           "index_s": round(index_s, 2), "tree_s": round(tree_s, 2), "count_full_library_s": round(count_s, 2),
           "tree_depth": tree.depth(), "methods": {}}
    subgoals = [extract_subgoal(q.text, q.answer_type) for q in queries]
    for name, fn in runners.items():
        toks, hits, hits1, ms, stage_tokens = [], 0, 0, [], {}
        for q, sg in zip(queries, subgoals):
            t0 = time.perf_counter()
            r = fn(sg)
            ms.append((time.perf_counter() - t0) * 1000)
            toks.append(r.total_tokens)
            hits += q.gold in r.selected
            hits1 += r.selected[:1] == (q.gold,)
            for s in r.stages:
                stage_tokens[s.stage] = stage_tokens.get(s.stage, 0) + s.tokens
        out["methods"][name] = {
            "tokens": float(np.mean(toks)), "tokens_p95": float(np.percentile(toks, 95)),
            "recall": hits / len(queries), "recall_at_1": hits1 / len(queries), "p50_ms": float(np.percentile(ms, 50)), "p95_ms": float(np.percentile(ms, 95)),
            "stage_tokens_mean": {s: v / len(queries) for s, v in stage_tokens.items()},
        }
    return out


def goals(result: dict) -> dict:
    sizes = result["sizes"]
    m = result["methods"]
    g: dict = {}
    if 1600 in sizes:
        i = sizes.index(1600)
        t = m["typed_dag"]["tokens"][i]
        g["at_1600"] = {
            "flat_over_typed": m["flat"]["tokens"][i] / t, "flat_goal_15x": m["flat"]["tokens"][i] / t >= 15,
            "text_hier_over_typed": m["text_hier"]["tokens"][i] / t,
            "text_hier_goal_6x": m["text_hier"]["tokens"][i] / t >= 6,
            "recall_no_worse": m["typed_dag"]["recall"][i] >= max(m["flat"]["recall"][i], m["text_hier"]["recall"][i]),
            "mech_text_hier_over_typed": m["text_hier"]["tokens"][i] / m["typed_dag_mech"]["tokens"][i],
        }
    if 1600 in sizes and max(sizes) >= 102400:
        i, j = sizes.index(1600), sizes.index(max(sizes))
        growth = m["typed_dag"]["tokens"][j] / m["typed_dag"]["tokens"][i]
        g["growth_1600_to_max"] = {"factor": growth, "goal_le_2x": growth <= 2}
    g["max_p95_ms_typed_dag"] = max(m["typed_dag"]["p95_ms"])
    return g


def main(argv):
    del argv
    sizes = [int(s) for s in _SIZES.value]
    counter = TokenCounter.from_config(_TOKENIZER.value)
    sandbox = None
    if _SANDBOX.value:
        from cocoda_jax.execution import Sandbox
        sandbox = Sandbox(workers=2)
    result = {"k": _K.value, "sizes": sizes, "seed": _SEED.value, "tokenizer": counter.name,
              "methods": {m: {"tokens": [], "tokens_p95": [], "recall": [], "recall_at_1": [], "p50_ms": [], "p95_ms": []}
                          for m in METHODS},
              "per_size": []}
    try:
        for size in sizes:
            t0 = time.perf_counter()
            r = run_size(size, _K.value, _QUERIES.value, _SEED.value, counter, _CACHE.value, sandbox)
            r["wall_s"] = round(time.perf_counter() - t0, 1)
            for name, v in r["methods"].items():
                for key in ("tokens", "tokens_p95", "recall", "recall_at_1", "p50_ms", "p95_ms"):
                    result["methods"][name][key].append(round(v[key], 3))
            result["per_size"].append({k: v for k, v in r.items() if k != "methods"} |
                                      {"stage_tokens_mean": {n: v["stage_tokens_mean"] for n, v in r["methods"].items()}})
            print(json.dumps({"size": size, "wall_s": r["wall_s"],
                              **{n: [round(v["tokens"]), v["recall"], round(v["p50_ms"], 2)] for n, v in r["methods"].items()}}),
                  flush=True)
    finally:
        if sandbox is not None:
            sandbox.close()
    result["goals"] = goals(result)
    text = json.dumps(result, indent=1)
    print(text)
    if _JSON_OUT.value:
        with open(_JSON_OUT.value, "w") as f:
            f.write(text + "\n")
    if _PLOT_OUT.value:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(6, 4))
        for name in METHODS:
            ax.plot(sizes, result["methods"][name]["tokens"], marker="o", label=name)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("library size (tools)")
        ax.set_ylabel(f"prompt tokens to surface top-{_K.value}")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
        fig.tight_layout()
        fig.savefig(_PLOT_OUT.value, dpi=120)


if __name__ == "__main__":
    app.run(main)

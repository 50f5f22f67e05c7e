r"""Token cost, recall and latency of typed DAG retrieval against flat and text-hierarchical retrieval.

Two modes.

**On the questions the planner sees** (``--domain``)::

    python -m launch.bench.retrieval --domain=synthetic_math --split=val --k=8 --queries=128 --json_out=F
        [--grow_library_to=1600] [--heldout=wording]

Stage 1 of the main job (the warm library from the default config's 2,000 training programs), its
refactored programs as the usage evidence, then for each validation (or test) question the
candidate set of: ``typed_dag`` (the prompt's cascade, :func:`cocoda_jax.rl.prompts.candidate_tools`),
``typed_dag_no_usage`` (the same cascade without usage votes), ``flat`` (BM25 over every card),
``flat_usage`` (flat BM25 plus the same usage votes, no types or DAG) and ``text_hier`` (the RAPTOR-style
tree). A task counts as ``all_gold_found`` when the set holds every tool of its gold program or of the
same program refactored to call the library's composites; ``gold_recall`` is the mean share found.
Writes ``{"domain", "split", "k", "queries", "library_size", "full_bare_list_tokens", "methods":
{name: {"all_gold_found", "gold_recall", "tokens", "tokens_mechanical", "prompt_bare_tokens", "p50_ms"}},
"cost_model"}``; ``prompt_bare_tokens`` is what the default planner's prompt pays for the set (its
names, one per line, the ``bare`` card style), to hold against ``full_bare_list_tokens``.

``--ranker`` (default ``hybrid``: BM25 plus the dual encoder of :mod:`cocoda_jax.retrieval.encoder`,
trained here on the library's cards and the usage records; ``expanded``: BM25 over each card followed by
the words of the solved training questions that call the tool; ``expanded_hybrid``: that plus the
encoder; the expanded ones not for BFCL) adds ``typed_dag_ranked``, ``flat_ranker``,
``flat_ranker_usage`` and ``raptor`` (:class:`cocoda_jax.retrieval.baselines.RaptorTree`), every one
ranked by that ranker; ``--ablation`` adds one ``ablate_<stage>`` row per stage of the ranked cascade
switched off or changed (:data:`DOMAIN_ABLATIONS`); ``--ranker=none`` gives the rows above only. ``--subgoals=clauses``
makes the ranked cascade's rows retrieve once per sentence of the question and merge the rankings
round-robin (one step of a multi-step question per retrieval; the other rows stay question-level);
``--subgoals=question_clauses`` retrieves for the whole question and for each sentence, the question's ranking
first in the merge (a composite whose two steps straddle a sentence end is found by the question).

**On BFCL's function docs** (``--domain=bfcl``)::

    python -m launch.bench.retrieval --domain=bfcl --k=8 [--queries=N] --json_out=F

The pool is every distinct function doc of BFCL's single-turn categories (simple_python, multiple,
parallel, parallel_multiple, live_simple, live_multiple) plus the eight executable multi-turn
classes' docs, as tools (:mod:`third_party.benchmarks.bfcl_tools`); the queries are those categories'
questions with their ground-truth functions as gold; ``--queries`` caps them (default: all). The
cascade's two tuned knobs are chosen on a validation half and every method is reported on the other
half; the schema is the one above plus ``tuning``, ``goals`` and per-method extras (details in
:mod:`third_party.benchmarks.bfcl_retrieval`).

**On synthetic libraries of growing size** (``--sizes``)::

    python -m launch.bench.retrieval --sizes=100,400,1600,6400,25600,102400 --k=8 --queries=200 \
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
Prints and writes JSON ``{"k", "sizes", "methods": {name: {"tokens", "tokens_mechanical",
"tokens_p95", "recall", "recall_at_1", "p50_ms", "p95_ms"}}, "per_size", "goals", "cost_model"}``,
lists aligned with sizes (``recall`` is recall@k of the gold tool; ``tokens`` the mean).

**Cost models** (both in every JSON, key ``cost_model``): ``tokens`` charges every method for every
list a language model must read to rank (model b, "LM rankers": the cascade's L2 one-liners of all
of S1, L3 specs, L4 examples; flat's every card; flat_summaries' every one-liner and its shortlist's
cards; each level of the text tree) plus the final cards; ``tokens_mechanical`` (model a,
"mechanical rankers": BM25 and types cost nothing) charges only the final cards put in the prompt.
"""

from __future__ import annotations

import json
import time

import numpy as np
from absl import app, flags
from launch.output import emit_json

from cocoda_jax.retrieval import baselines, synthetic_library
from cocoda_jax.retrieval.cascade import CascadeConfig, RetrievalIndex, retrieve, retrieve_many
from cocoda_jax.retrieval.subgoals import clause_subgoals, extract_subgoal
from cocoda_jax.retrieval.tokens import TokenCounter

_SIZES = flags.DEFINE_list("sizes", ["100", "400", "1600", "6400", "25600", "102400"], "Library sizes.")
_K = flags.DEFINE_integer("k", 8, "Tools to surface.")
_QUERIES = flags.DEFINE_integer("queries", None, "Queries per size, or questions (--domain); default 200, "
                                 "and all of them for --domain=bfcl.")
_SEED = flags.DEFINE_integer("seed", 0, "Library and query seed (--domain mode: the domain seed, which draws new "
                             "questions).")
_JSON_OUT = flags.DEFINE_string("json_out", None, "Write the JSON here.")
_PLOT_OUT = flags.DEFINE_string("plot_out", None, "Write a PNG of tokens against size (log axes) here.")
_CACHE = flags.DEFINE_string("cache_dir", "", "Pickle loaded snapshots here and reuse them ('': load from JSON every run).")
_TOKENIZER = flags.DEFINE_string("tokenizer", "qwen3", "'qwen3', a local HF tokenizer dir or a .tiktoken file.")
_SANDBOX = flags.DEFINE_boolean("sandbox", False, "Evaluate L3 pre-conditions in a Sandbox (else skipped).")

METHODS = ("typed_dag", "typed_dag_mech", "flat", "flat_summaries", "text_hier")
COST_MODEL = {
    "tokens": "b, LM rankers: every candidate list an LM must read to rank (cascade L2 over S1, L3, L4; flat "
              "all cards; flat_summaries all one-liners + shortlist cards; every text-tree level) + final cards",
    "tokens_mechanical": "a, mechanical rankers: BM25 and type matching cost nothing; only the final cards "
                         "shown to the planner count",
}
_DOMAIN = flags.DEFINE_string("domain", None, "Measure on this domain's questions (synthetic_math, or bfcl) instead "
                              "of --sizes.")
_SPLIT = flags.DEFINE_enum("split", "val", ["val", "test"], "Which held-out questions (--domain mode).")
_HELDOUT = flags.DEFINE_enum("heldout", "instances", ["instances", "wording"], "config.domain.heldout (--domain mode).")
_GROW = flags.DEFINE_integer("grow_library_to", 0, "Grow the primitive library to this many tools with distractors.")
#: The rankers built from the domain's usage records (the BFCL pool bench has its own records: not wired there).
EXPANDED_RANKERS = ("expanded", "expanded_hybrid")
#: What the ranked cascade's rows retrieve for: the question, its sentences, or both (``--subgoals``).
SUBGOAL_MODES = ("question", "clauses", "question_clauses")
_RANKER = flags.DEFINE_enum("ranker", "hybrid", ["none", "bm25", "encoder", "hybrid", "expanded",
                                                     "expanded_hybrid"],
                            "--domain mode: the ranker that stands for the LM's choice in the optional-aware cascade, "
                            "flat_ranker and the RAPTOR tree (encoder: the dual encoder trained here on the cards and "
                            "usage records; hybrid: BM25 + encoder; expanded: BM25 over each card followed by the "
                            "words of the solved training questions that call the tool; expanded_hybrid: expanded + "
                            "encoder; the expanded ones not for --domain=bfcl); 'none': the signature cascade and BM25 only.")
_ABLATION = flags.DEFINE_boolean("ablation", False, "--domain mode: also one row per cascade stage switched off.")
_ENCODER_SEED = flags.DEFINE_integer("encoder_seed", 0, "--domain mode: the dual encoder's seed.")
_ENCODER_WEIGHT = flags.DEFINE_float("encoder_weight", 1.0, "--domain mode: the encoder's weight in the hybrid "
                                     "and expanded_hybrid sums (BM25's is 1).")
_SUBGOALS = flags.DEFINE_enum("subgoals", "question", list(SUBGOAL_MODES),
                               "--domain mode, the ranked cascade's rows (typed_dag_ranked, ablate_*): one retrieval "
                               "for the whole question, one per sentence (clause_subgoals), or the whole question and "
                               "one per sentence (question_clauses), merged round-robin with the question first "
                               "(retrieve_many); the other rows stay question-level.")
_ENCODER_MEMBERS = flags.DEFINE_integer("encoder_members", 1, "--domain mode: encoders averaged (seeds derived from "
                                        "--encoder_seed).")
_ENCODER_VALUE_SHAPES = flags.DEFINE_boolean("encoder_value_shapes", False, "--domain mode (synthetic math and "
                                             "bfcl): the encoders also read how a text writes its values "
                                             "(EncoderConfig.value_shapes).")


def _mechanical(r) -> int:
    """Model (a): the tokens of the final cards only."""
    return r.stage("cards").tokens


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
        toks, mech, hits, hits1, ms, stage_tokens = [], [], 0, 0, [], {}
        for q, sg in zip(queries, subgoals):
            t0 = time.perf_counter()
            r = fn(sg)
            ms.append((time.perf_counter() - t0) * 1000)
            toks.append(r.total_tokens)
            mech.append(_mechanical(r))
            hits += q.gold in r.selected
            hits1 += r.selected[:1] == (q.gold,)
            for s in r.stages:
                stage_tokens[s.stage] = stage_tokens.get(s.stage, 0) + s.tokens
        out["methods"][name] = {
            "tokens": float(np.mean(toks)), "tokens_mechanical": float(np.mean(mech)),
            "tokens_p95": float(np.percentile(toks, 95)),
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
            "cost_model_a": {"flat_over_typed": m["flat"]["tokens_mechanical"][i] / m["typed_dag"]["tokens_mechanical"][i],
                             "text_hier_over_typed": m["text_hier"]["tokens_mechanical"][i]
                             / m["typed_dag"]["tokens_mechanical"][i]},
        }
    if 1600 in sizes and max(sizes) >= 102400:
        i, j = sizes.index(1600), sizes.index(max(sizes))
        growth = m["typed_dag"]["tokens"][j] / m["typed_dag"]["tokens"][i]
        g["growth_1600_to_max"] = {"factor": growth, "goal_le_2x": growth <= 2}
    g["max_p95_ms_typed_dag"] = max(m["typed_dag"]["p95_ms"])
    return g


#: One stage of the ranked cascade off (or changed) at a time, in --domain mode.
DOMAIN_ABLATIONS = {
    "no_L1": {"l1_max_cost": 1e18, "l2_cost_weight": 0.0},
    "L1_evidence": {"l1_mode": "evidence"},
    "no_climb_descend": {"climb": False, "descend": False},
    "no_L3": {"l3": False},
    "no_L4": {"l4": False},
    "no_usage": {"prior_weight": 0.0},
    "ranker_bm25": {"ranker": "bm25"},
}


def domain_library(domain: str, seed: int, heldout: str = "instances", n_queries: int = 200, n_train: int = 2000,
                   grow_library_to: int = 0):
    """The ``--domain`` mode's setup: the default config's domain at ``seed`` (``n_queries`` validation and
    test questions), stage 1's warm library over its first ``sft.n_demos`` demonstrations, and the usage
    index of the refactored demonstrations. Returns ``(domain, warm, usage, warm seconds)``."""
    from configs import default
    from cocoda_jax.coevolve.abstractor import AbstractorConfig
    from cocoda_jax.coevolve.rounds import warm_library
    from cocoda_jax.coevolve.traces import gold_trace
    from cocoda_jax.execution import Sandbox
    from cocoda_jax.retrieval.usage import UsageIndex
    from cocoda_jax.runs import domains, settings

    config = default.get_config()
    config.seed = config.domain.seed = seed
    config.domain.update(dict(name=domain, heldout=heldout, n_train=n_train, n_val=n_queries, n_test=n_queries,
                              grow_library_to=grow_library_to))
    with Sandbox(workers=2) as sandbox:
        dom = domains.build_domain(config, sandbox)
        t0 = time.perf_counter()
        traces = [gold_trace(t) for t in dom.train[:int(config.sft.n_demos)]]
        warm = warm_library(traces, dom.library, sandbox, rounds=int(config.warm.rounds),
                            config=settings.section(config.coevolve, "abstractor", AbstractorConfig))
        warm_s = time.perf_counter() - t0
    usage = UsageIndex.from_programs([(tr.task_id, tr.program()) for tr in warm.traces],
                                     {str(t.id): t.question for t in dom.train})
    return dom, warm, usage, warm_s


def domain_questions(domain: str, split: str, k: int, n_queries: int, seed: int, counter, heldout: str = "instances",
                     grow_library_to: int = 0, n_train: int = 2000, ranker: str | None = None,
                     ablation: bool = False, encoder_seed: int = 0, encoder_members: int = 1,
                     encoder_weight: float = 1.0, subgoals: str = "question",
                     encoder_value_shapes: bool = False) -> dict:
    """The ``--domain`` mode (see the module doc). ``ranker`` adds ``typed_dag_ranked`` (the prompt's
    cascade with that ranker in L2), ``flat_ranker``, ``flat_ranker_usage`` and ``raptor``, all with
    the same ranker; ``ablation`` one ``ablate_*`` row per stage of ``typed_dag_ranked``; ``subgoals="clauses"``:
    those rows retrieve once per sentence of the question and merge (:func:`clause_subgoals`)."""
    from cocoda_jax.coevolve.validate import gold_tool_sets
    from cocoda_jax.rl.prompts import RetrievalConfig, question_subgoal

    if subgoals not in SUBGOAL_MODES:
        raise ValueError(f"subgoals must be one of {SUBGOAL_MODES}, got {subgoals!r}")

    dom, warm, usage, warm_s = domain_library(domain, seed, heldout, n_queries, n_train, grow_library_to)
    snap = warm.snapshot
    index = RetrievalIndex.build(snap, counter)
    tree = baselines.TextTree(index, seed=seed)
    tasks = list(dom.val if split == "val" else dom.test)
    base = RetrievalConfig(k=k)
    no_usage = RetrievalConfig(k=k, usage_weight=0.0)

    def cascade(cfg, u):
        """The prompt's own selection (:func:`cocoda_jax.rl.prompts.candidate_tools`), with every LM-read stage charged."""
        def run(t):
            return retrieve(index, question_subgoal(t), cfg.cascade(lm_stages=("L2", "L3", "L4")),
                            prior=u.votes(t.question, cfg.neighbours, exclude=str(t.id)) if u is not None else None)
        return run

    def flat_usage(t):
        return baselines.flat(index, question_subgoal(t), k, prior=usage.votes(t.question, base.neighbours,
                                                                                exclude=str(t.id)),
                              prior_weight=base.usage_weight)

    runners = {
        "typed_dag": cascade(base, usage),
        "typed_dag_no_usage": cascade(no_usage, None),
        "flat": lambda t: baselines.flat(index, question_subgoal(t), k),
        "flat_usage": flat_usage,
        "text_hier": lambda t: baselines.text_hier(index, question_subgoal(t), k, tree=tree),
    }
    extra: dict = {}
    if ranker is not None:
        import dataclasses

        from cocoda_jax.retrieval.encoder import USAGE_ENCODER, add_usage_rankers

        if ranker != "bm25":
            facts = add_usage_rankers(index, usage, ranker, members=encoder_members, weight=encoder_weight,
                                      config=dataclasses.replace(USAGE_ENCODER, seed=encoder_seed,
                                                                 value_shapes=encoder_value_shapes))
            if facts:
                extra["encoder"] = facts
        ranked = dataclasses.replace(base.cascade(lm_stages=("L2", "L3", "L4")), ranker=ranker,
                                     prior_weight=base.usage_weight)
        raptor_tree = baselines.RaptorTree(index, ranker, branching=6, seed=seed)

        def ranked_cascade(cfg):
            def run(t):
                prior = usage.votes(t.question, base.neighbours, exclude=str(t.id)) if cfg.prior_weight else None
                if subgoals == "question":
                    return retrieve(index, question_subgoal(t), cfg, prior=prior)
                clauses = clause_subgoals(t.question, "Any")
                if subgoals == "question_clauses":
                    clauses = (question_subgoal(t), *clauses) if len(clauses) > 1 else (question_subgoal(t),)
                return retrieve_many(index, clauses, cfg, prior=prior)
            return run

        runners["typed_dag_ranked"] = ranked_cascade(ranked)
        runners["flat_ranker"] = lambda t: baselines.flat(index, question_subgoal(t), k, ranker=ranker)
        runners["flat_ranker_usage"] = lambda t: baselines.flat(
            index, question_subgoal(t), k, ranker=ranker, prior=usage.votes(t.question, base.neighbours,
                                                                             exclude=str(t.id)),
            prior_weight=base.usage_weight)
        runners["raptor"] = lambda t: baselines.raptor(index, question_subgoal(t), k, tree=raptor_tree, beam=2)
        if ablation:
            for name, changes in DOMAIN_ABLATIONS.items():
                if name != "ranker_bm25" or ranker != "bm25":
                    runners[f"ablate_{name}"] = ranked_cascade(dataclasses.replace(ranked, **changes))
        extra["ranker"] = ranker
        extra["subgoals"] = subgoals
        extra["raptor"] = {"branching": 6, "beam": 2, "layers": raptor_tree.depth()}
    gold = [gold_tool_sets(t, snap) for t in tasks]
    out = {"domain": domain, "split": split, "heldout": heldout, "k": k, "queries": len(tasks), "seed": seed,
           "library_size": len(snap), "composites": sum(snap.is_composite(n) for n in snap.names()),
           "warm_s": round(warm_s, 1), "tokenizer": counter.name,
           "full_bare_list_tokens": counter.count("\n".join(snap.topological_order())),
           "full_card_list_tokens": baselines._all_cards_tokens(index)[1], "methods": {}, "cost_model": COST_MODEL,
           **extra}
    for name, fn in runners.items():
        found, share, toks, mech, bare, ms = [], [], [], [], [], []
        for t, sets in zip(tasks, gold):
            t0 = time.perf_counter()
            r = fn(t)
            ms.append((time.perf_counter() - t0) * 1000)
            chosen = set(r.selected) | set(r.children)
            found.append(any(g <= chosen for g in sets))
            share.append(max(len(g & chosen) / len(g) for g in sets))
            toks.append(r.total_tokens)
            mech.append(_mechanical(r))
            bare.append(counter.count("\n".join((*r.selected, *r.children))))
        out["methods"][name] = {"all_gold_found": float(np.mean(found)), "gold_recall": float(np.mean(share)),
                                "tokens": float(np.mean(toks)), "tokens_mechanical": float(np.mean(mech)),
                                "prompt_bare_tokens": float(np.mean(bare)), "p50_ms": float(np.percentile(ms, 50))}
    return out


def _write(result: dict) -> None:
    emit_json(result, _JSON_OUT.value, indent=1)


def main(argv):
    del argv
    counter = TokenCounter.from_config(_TOKENIZER.value)
    n_queries = _QUERIES.value if _QUERIES.value is not None else 200
    if _SUBGOALS.value != "question" and (_DOMAIN.value in (None, "bfcl") or _RANKER.value == "none"):
        raise app.UsageError(f"--subgoals={_SUBGOALS.value} changes the ranked cascade's rows of "
                             "--domain=synthetic_math; it needs a --ranker other than 'none' (not wired for "
                             "--domain=bfcl or --sizes)")
    if _DOMAIN.value == "bfcl":
        from third_party.benchmarks import bfcl_retrieval as bfcl_bench
        ranker = None if _RANKER.value == "none" else _RANKER.value
        if ranker in EXPANDED_RANKERS:
            raise app.UsageError(f"--ranker={ranker} is not wired for --domain=bfcl (its usage records live in the BFCL "
                                 "bench)")
        encoder = bfcl_bench.encoder_config(value_shapes=True) if _ENCODER_VALUE_SHAPES.value else None
        _write(bfcl_bench.run(_K.value, _QUERIES.value, counter, cost_model=COST_MODEL, ranker=ranker,
                              ablation=_ABLATION.value, encoder=encoder))
        return
    if _DOMAIN.value:
        ranker = None if _RANKER.value == "none" else _RANKER.value
        _write(domain_questions(_DOMAIN.value, _SPLIT.value, _K.value, n_queries, _SEED.value, counter,
                                _HELDOUT.value, _GROW.value, ranker=ranker, ablation=_ABLATION.value,
                                encoder_seed=_ENCODER_SEED.value, encoder_members=_ENCODER_MEMBERS.value,
                                subgoals=_SUBGOALS.value, encoder_weight=_ENCODER_WEIGHT.value,
                                encoder_value_shapes=_ENCODER_VALUE_SHAPES.value))
        return
    sizes = [int(s) for s in _SIZES.value]
    sandbox = None
    if _SANDBOX.value:
        from cocoda_jax.execution import Sandbox
        sandbox = Sandbox(workers=2)
    keys = ("tokens", "tokens_mechanical", "tokens_p95", "recall", "recall_at_1", "p50_ms", "p95_ms")
    result = {"k": _K.value, "sizes": sizes, "seed": _SEED.value, "tokenizer": counter.name,
              "methods": {m: {key: [] for key in keys} for m in METHODS}, "per_size": [], "cost_model": COST_MODEL}
    try:
        for size in sizes:
            t0 = time.perf_counter()
            r = run_size(size, _K.value, n_queries, _SEED.value, counter, _CACHE.value, sandbox)
            r["wall_s"] = round(time.perf_counter() - t0, 1)
            for name, v in r["methods"].items():
                for key in keys:
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
    _write(result)
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

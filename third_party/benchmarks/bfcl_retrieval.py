"""Retrieval on BFCL: the cascade against flat BM25 and the text tree, over BFCL's own function docs.

``launch/bench/retrieval.py --domain=bfcl --k=8 [--queries=N] --json_out=F`` runs :func:`run`.

**Pool.** Every distinct function doc (canonical JSON; :mod:`third_party.benchmarks.bfcl_tools`) of the
single-turn categories :data:`CATEGORIES` plus the docs of the eight executable multi-turn classes,
converted to documentation-only tools and inserted into one LibrarySnapshot (2,350 + 128 = 2,478
tools; one BFCL name can have several distinct docs -- ``get_current_weather`` has 33 -- and each
is its own tool, named apart by the pool's :class:`~third_party.benchmarks.bfcl_tools.NameMap`).

**Queries.** One per entry of those categories (2,311): the text of the user messages of its turn
(system messages left out). Gold: the tool of each function named in the entry's ground truth
(``possible_answer``), i.e. the doc of that name in the entry's own ``function`` list. A query
counts as ``all_gold_found`` when the top ``k`` hold all its gold tools; ``gold_recall`` is the mean
share found. The ``*_same_name`` variants also accept another doc of the same BFCL name (the pool
holds near-duplicate versions of one API that a planner could call equally well).

**Query signature** (L1 needs one; a question states no types): :func:`question_subgoal` takes the
literals the text states, in order, through the project's deterministic extractor
(:func:`~cocoda_jax.retrieval.subgoals.extract_values`): numbers (``int``, or ``float`` with a
decimal point or ``%``), quoted strings (``str``), bracketed lists (``list[float]``/``list[str]``),
ISO dates (``str``). The result type is ``Any``: nothing in a question says what a call returns.
Unquoted words (``Boston``) are not values, so most ``str`` parameters go unfed: the L1 match then
charges them as missing arguments.

**Methods** (same renderers and token accounting as the synthetic benchmarks, :mod:`.tokens`):

* ``typed_dag`` -- the cascade with the knobs chosen on the validation half (below);
* ``typed_dag_default`` -- the cascade with the planner prompt's defaults
  (:class:`cocoda_jax.rl.prompts.RetrievalConfig`: ``l1_max_cost=3``, shortlist 12, keep 16);
* ``flat`` -- BM25 over name + description of every tool; the LM reads every card;
* ``text_hier`` -- the RAPTOR-style tree (:class:`~.baselines.TextTree`).

The tools have no worked examples and the pool has no composites, so the cascade's L4 example
agreement and its DAG moves add nothing here; L3 pre-conditions are not evaluated (no sandbox, as
in the synthetic_math domain mode). There is no usage evidence either (no solved training programs).

**Validation and test.** The queries are split by ``crc32(id) % 2`` (0: validation). The only
knobs tuned -- :data:`TUNING_GRID`, ``l1_max_cost`` x ``l2_cost_weight`` -- are chosen on the
validation half (highest ``all_gold_found``, ties to fewer tokens, then grid order); every method
is reported on the test half. ``l1_cap`` (500) and the shortlist sizes stay at their defaults: the
cap keeps S1's best by the same LM-free score L2 ranks by, so it changes the tokens charged to L2,
not the selection, and shrinking it would only move cost out of the accounting. ``--queries=N``
first orders all queries by ``crc32(id)`` and keeps the first ``N``, then splits.

**Ranker mode** (``run(..., ranker=...)``; the launcher's default ``--ranker=hybrid``) adds, beside
the methods above (``typed_dag`` of the signature cascade is kept as ``typed_dag_signature``):

* ``typed_dag`` -- the optional-aware cascade (``l1_mode="evidence"``, :func:`~cocoda_jax.types.fit`:
  unfed optional parameters are free, values are unions of readings, words supply ``str``,
  ``bool`` and ``list[str]``), L2 ranked by ``ranker``, plus the usage votes and the enum-literal
  term; its knobs (:data:`TYPED_GRID`) chosen on the *tuning quarter*;
* ``typed_dag_clauses`` -- the same tuned cascade once per sentence of the question, merged
  round-robin (:func:`~cocoda_jax.retrieval.subgoals.clause_subgoals`; its knobs are ``typed_dag``'s);
* ``flat_ranker`` / ``flat_ranker_usage`` -- flat with the same ranker (and the same votes);
* ``raptor`` -- :class:`~cocoda_jax.retrieval.baselines.RaptorTree` with the same ranker, branching
  and beam (:data:`TREE_GRID`) chosen on the tuning quarter; ``raptor_frontier`` lists every grid
  point's test recall and tokens, so the tree is also judged at settings validation did not pick;
* with ``ablation``, ``ablate_<stage>`` rows: the tuned ``typed_dag`` with one stage off
  (:data:`ABLATIONS`).

The validation half is split again by ``crc32(id) % 4`` (:func:`quarters`): quarter 0 is the
*usage* data (its questions with their gold tools are the usage records the votes read and the
pairs the dual encoder trains on, with the pool's cards), quarter 2 tunes the knobs. The test
half is never seen by either.

Both cost models are in every method's entry: ``tokens`` (model b, LM rankers) and
``tokens_mechanical`` (model a, final cards only); see ``COST_MODEL`` in the launcher.

**Measured** (all queries; test half 1,153, validation 1,158; Qwen3 tokens; ``all_gold_found``):

=====  ==========================  ===========================  ==============  ==============
k      typed_dag (tuned)           typed_dag_default            flat            text_hier
=====  ==========================  ===========================  ==============  ==============
4      0.567, 12,693 tok           0.422, 11,618 tok            0.575, 269,747  0.360, 5,768
8      0.689, 14,313 tok           0.501, 11,975 tok            0.690, 270,228  0.430, 6,262
16     0.772, 14,312 tok           0.549, 12,816 tok            0.769, 271,198  0.470, 7,184
=====  ==========================  ===========================  ==============  ==============

Validation chose ``l1_max_cost = inf`` at every k (``l2_cost_weight`` 0.1, 0, 0.1): any finite bound
lost recall (k=8 validation: 1.5 -> 0.20, 3 -> 0.51, 6 -> 0.64, inf -> 0.67), because L1's match
charges every unfed parameter as missing, optional ones included, and a question's literals feed
few of them. So here the cascade is BM25 over a 500-tool shortlist read as one-liners: about 19x
fewer tokens than flat (model b) at flat's recall (k=8: one test query fewer, a tie among
near-duplicate docs of one BFCL name broken by L1 cost instead of by name); under model a all
methods pay about the same (the k cards).
"""

from __future__ import annotations

import dataclasses
import math
import time
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from third_party.benchmarks import bfcl as loader
from third_party.benchmarks import bfcl_tools as B
from cocoda_jax.retrieval import baselines
from cocoda_jax.retrieval.cascade import CascadeConfig, Retrieval, RetrievalIndex, retrieve, retrieve_many
from cocoda_jax.retrieval.subgoals import Subgoal, clause_subgoals, extract_subgoal
from cocoda_jax.retrieval.tokens import TokenCounter, default_counter

#: The single-turn categories whose questions are the queries.
CATEGORIES = ("simple_python", "multiple", "parallel", "parallel_multiple", "live_simple", "live_multiple")

#: Knobs tuned on the validation half: (l1_max_cost, l2_cost_weight). ``inf``: L1 prunes nothing.
TUNING_GRID: tuple[tuple[float, float], ...] = tuple(
    (c, w) for c in (1.5, 3.0, 6.0, math.inf) for w in (0.0, 0.1, 0.3, 1.0))


@dataclasses.dataclass(frozen=True)
class BfclQuery:
    id: str
    category: str
    text: str
    gold: frozenset[str]        # tool names
    gold_bfcl: frozenset[str]   # BFCL function names


@dataclasses.dataclass(frozen=True)
class Pool:
    library: B.BfclLibrary
    queries: tuple[BfclQuery, ...]


def question_text(entry: loader.BfclEntry) -> str:
    """The user messages of a single-turn entry's turn, joined by newlines."""
    return "\n".join(entry.turns[0])


def build_pool(categories: Sequence[str] = CATEGORIES, classes: Sequence[str] = B.MULTI_TURN_CLASSES) -> Pool:
    """The tool pool and the gold-labelled queries (see the module docstring)."""
    entries = {c: loader.load_category(c) for c in categories}
    docs = [d for c in categories for e in entries[c] for d in e.functions]
    docs += [d for c in classes for d in B.multi_turn_docs(c)]
    lib = B.library_from_docs(docs)
    queries = []
    for c in categories:
        for entry in entries[c]:
            gold, gold_bfcl = set(), set()
            for call in entry.ground_truth:
                (fn,) = call
                offered = [d for d in entry.functions if d["name"] == fn]
                if len(offered) != 1:
                    raise B.BfclError(f"{c}: entry {entry.id}: {len(offered)} offered docs named {fn!r}")
                gold.add(lib.tool_for(offered[0]))
                gold_bfcl.add(fn)
            queries.append(BfclQuery(entry.id, c, question_text(entry), frozenset(gold), frozenset(gold_bfcl)))
    return Pool(lib, tuple(queries))


def question_subgoal(query: BfclQuery) -> Subgoal:
    """The query's subgoal: the literals its text states as typed inputs, result ``Any``."""
    return extract_subgoal(query.text, "Any")


def _hash(text: str) -> int:
    return zlib.crc32(text.encode("utf-8"))


def split(queries: Sequence[BfclQuery], cap: int | None = None) -> tuple[tuple[BfclQuery, ...], tuple[BfclQuery, ...]]:
    """(validation, test): ``crc32(id) % 2`` 0 / 1, after keeping the first ``cap`` by ``crc32(id)``."""
    chosen = list(queries)
    if cap is not None:
        chosen = sorted(chosen, key=lambda q: (_hash(q.id), q.id))[:cap]
        order = {q.id: i for i, q in enumerate(queries)}
        chosen.sort(key=lambda q: order[q.id])
    val = tuple(q for q in chosen if _hash(q.id) % 2 == 0)
    test = tuple(q for q in chosen if _hash(q.id) % 2 == 1)
    return val, test


def gold_scores(selected: Iterable[str], gold: frozenset[str]) -> tuple[bool, float]:
    """(all gold found, share of the gold found) for one query."""
    chosen = set(selected)
    return gold <= chosen, len(gold & chosen) / len(gold)


def cascade_config(k: int, l1_max_cost: float = 3.0, l2_cost_weight: float = 1.0) -> CascadeConfig:
    """The cascade as the planner's prompt configures it (shortlist 12, keep 16, raised to ``k``),
    with every LM-read stage charged."""
    return CascadeConfig(k=k, l1_max_cost=l1_max_cost if math.isfinite(l1_max_cost) else 1e18,
                         l2_cost_weight=l2_cost_weight, l2_shortlist=max(12, k), l2_keep=max(16, k),
                         lm_stages=("L2", "L3", "L4"))


class _MemoL1(RetrievalIndex):
    """The same index with L1 lookups memoised per (query signature, max cost): used while tuning
    only (L1 is a pure function of them), so the reported latencies are the plain index's."""

    def __init__(self, base: RetrievalIndex):  # noqa: super().__init__ is not called: shares base's state
        self.__dict__.update(base.__dict__)
        self._memo: dict = {}

    def l1(self, query_sig, max_cost: float):
        key = (query_sig, max_cost)
        if key not in self._memo:
            self._memo[key] = RetrievalIndex.l1(self, query_sig, max_cost)
        return self._memo[key]


def evaluate(runner: Callable[[Subgoal], Retrieval], queries: Sequence[BfclQuery], lib: B.BfclLibrary,
             counter: TokenCounter) -> dict[str, Any]:
    """One method's metrics over ``queries`` (the launcher's per-method schema plus extras)."""
    found, share, found_n, share_n, toks, mech, bare, ms = [], [], [], [], [], [], [], []
    by_cat: dict[str, list[bool]] = {}
    for q in queries:
        sg = question_subgoal(q)
        t0 = time.perf_counter()
        r = runner(sg)
        ms.append((time.perf_counter() - t0) * 1000)
        chosen = (*r.selected, *r.children)
        f, s = gold_scores(chosen, q.gold)
        fn, sn = gold_scores({lib.names.bfcl(n) for n in chosen}, q.gold_bfcl)
        found.append(f), share.append(s), found_n.append(fn), share_n.append(sn)
        by_cat.setdefault(q.category, []).append(f)
        toks.append(r.total_tokens)
        mech.append(r.stage("cards").tokens)
        bare.append(counter.count("\n".join(chosen)))
    return {"all_gold_found": float(np.mean(found)), "gold_recall": float(np.mean(share)),
            "tokens": float(np.mean(toks)), "tokens_mechanical": float(np.mean(mech)),
            "prompt_bare_tokens": float(np.mean(bare)), "p50_ms": float(np.percentile(ms, 50)),
            "all_gold_found_same_name": float(np.mean(found_n)), "gold_recall_same_name": float(np.mean(share_n)),
            "all_gold_found_by_category": {c: float(np.mean(v)) for c, v in sorted(by_cat.items())}}


def tune(index: RetrievalIndex, queries: Sequence[BfclQuery], lib: B.BfclLibrary, k: int,
         grid: Sequence[tuple[float, float]] = TUNING_GRID) -> tuple[tuple[float, float], list[dict]]:
    """The grid point with the highest validation ``all_gold_found`` (ties: fewer tokens, then grid
    order), and every point's validation metrics."""
    memo = _MemoL1(index)
    rows = []
    for c, w in grid:
        cfg = cascade_config(k, c, w)
        m = evaluate(lambda sg: retrieve(memo, sg, cfg), queries, lib, index.counter)
        rows.append({"l1_max_cost": c if math.isfinite(c) else "inf", "l2_cost_weight": w,
                     "all_gold_found": m["all_gold_found"], "gold_recall": m["gold_recall"], "tokens": m["tokens"]})
    best = min(range(len(grid)), key=lambda i: (-rows[i]["all_gold_found"], rows[i]["tokens"], i))
    return grid[best], rows


#: The typed cascade's knobs tuned on the tuning quarter (``ranker`` mode): (l1_max_cost,
#: l2_cost_weight, usage weight, literal weight).
TYPED_GRID: tuple[tuple[float, float, float, float], ...] = tuple(
    (c, w, u, lw) for c in (1.5, 3.0, math.inf) for w in (0.3, 1.0) for u in (0.0, 5.0, 20.0) for lw in (0.0, 2.0))

#: RAPTOR tree settings tuned on the tuning quarter: (branching, beam).
TREE_GRID: tuple[tuple[int, int], ...] = tuple((b, m) for b in (6, 10) for m in (2, 4, 8, 16))


def quarters(validation: Sequence[BfclQuery]) -> tuple[tuple[BfclQuery, ...], tuple[BfclQuery, ...]]:
    """(usage, tuning): the validation half split by ``crc32(id) % 4`` (0: usage records, the
    encoder's and the votes' training data; 2: knob tuning), so no knob is tuned on questions the
    ranker was trained on, and the test half is never seen."""
    return (tuple(q for q in validation if _hash(q.id) % 4 == 0),
            tuple(q for q in validation if _hash(q.id) % 4 != 0))


def typed_config(k: int, l1_max_cost: float, l2_cost_weight: float, literal_weight: float, ranker: str,
                 **changes) -> CascadeConfig:
    """The optional-aware cascade (``l1_mode="evidence"``) as :func:`cascade_config` sets it up."""
    base = cascade_config(k, l1_max_cost, l2_cost_weight)
    return dataclasses.replace(base, l1_mode="evidence", evidence_extra=0.05, literal_weight=literal_weight,
                               ranker=ranker, **changes)


def encoder_config(**changes) -> Any:
    """The pool's encoder: :class:`~cocoda_jax.retrieval.encoder.EncoderConfig` at 600 steps (2,478 cards),
    with ``changes`` (e.g. ``value_shapes=True``)."""
    from cocoda_jax.retrieval.encoder import EncoderConfig

    return EncoderConfig(steps=600, **changes)


def add_rankers(index: RetrievalIndex, usage: Sequence[BfclQuery], config: Any = None) -> dict:
    """Trains the dual encoder on the pool's cards and the usage quarter's (question, gold tool)
    pairs and registers ``encoder`` and ``hybrid`` (BM25 + encoder) on ``index``
    (:func:`~cocoda_jax.retrieval.encoder.add_usage_rankers`, the planner's prompt's home); returns facts.
    ``config``: the encoder's (default :func:`encoder_config`)."""
    from cocoda_jax.retrieval.encoder import add_usage_rankers

    return add_usage_rankers(index, _usage_index(usage), "hybrid", config=config or encoder_config())


def _usage_index(usage: Sequence[BfclQuery]):
    from cocoda_jax.retrieval.usage import UsageIndex, UsageRecord

    return UsageIndex([UsageRecord(q.id, q.text, frozenset(q.gold)) for q in usage])


def _typed_runner(index: RetrievalIndex, cfg: CascadeConfig, votes: Any, usage_weight: float):
    def run_one(sg: Subgoal) -> Retrieval:
        prior = votes.votes(sg.description, 10) if (votes is not None and usage_weight) else None
        return retrieve(index, sg, dataclasses.replace(cfg, prior_weight=usage_weight or cfg.prior_weight), prior=prior)
    return run_one


def _clause_runner(index: RetrievalIndex, cfg: CascadeConfig, votes: Any, usage_weight: float):
    """:func:`_typed_runner` once per sentence of the question (:func:`clause_subgoals`), merged
    round-robin (:func:`retrieve_many`); the votes are the whole question's."""
    def run_one(sg: Subgoal) -> Retrieval:
        prior = votes.votes(sg.description, 10) if (votes is not None and usage_weight) else None
        return retrieve_many(index, clause_subgoals(sg.description, sg.output),
                             dataclasses.replace(cfg, prior_weight=usage_weight or cfg.prior_weight), prior=prior)
    return run_one


def run(k: int = 8, n_queries: int | None = None, counter: TokenCounter | None = None, *,
        categories: Sequence[str] = CATEGORIES, classes: Sequence[str] = B.MULTI_TURN_CLASSES,
        grid: Sequence[tuple[float, float]] = TUNING_GRID, cost_model: Mapping[str, str] | None = None,
        ranker: str | None = None, typed_grid: Sequence[tuple[float, float, float, float]] = TYPED_GRID,
        tree_grid: Sequence[tuple[int, int]] = TREE_GRID, ablation: bool = False, encoder: Any = None) -> dict:
    """The ``--domain=bfcl`` benchmark (see the module docstring); returns the JSON-ready result.
    ``ranker`` (``bm25``, ``encoder`` or ``hybrid``) adds the optional-aware cascade, the RAPTOR
    tree and flat retrieval with that ranker (:func:`run_ranked`); ``None``: the signature cascade
    only, as before. ``ablation``: one stage of the typed cascade off at a time."""
    t_start = time.perf_counter()
    counter = counter or default_counter()
    t0 = time.perf_counter()
    pool = build_pool(categories, classes)
    lib = pool.library
    snap = lib.snapshot
    index = RetrievalIndex.build(snap, counter)
    tree = baselines.TextTree(index)
    build_s = time.perf_counter() - t0
    val, test = split(pool.queries, n_queries)
    if not val or not test:
        raise ValueError(f"need queries in both halves, got {len(val)} validation and {len(test)} test")
    t0 = time.perf_counter()
    (c, w), rows = tune(index, val, lib, k, grid)
    tune_s = time.perf_counter() - t0
    tuned, default = cascade_config(k, c, w), cascade_config(k)
    runners = {
        "typed_dag": lambda sg: retrieve(index, sg, tuned),
        "typed_dag_default": lambda sg: retrieve(index, sg, default),
        "flat": lambda sg: baselines.flat(index, sg, k),
        "text_hier": lambda sg: baselines.text_hier(index, sg, k, tree=tree),
    }
    methods = {name: evaluate(fn, test, lib, counter) for name, fn in runners.items()}
    extra: dict[str, Any] = {}
    if ranker is not None:
        extra = run_ranked(index, val, test, lib, counter, k, ranker, typed_grid, tree_grid, ablation, encoder)
        methods["typed_dag_signature"] = methods["typed_dag"]
        methods.update(extra.pop("methods"))
    typed, flat = methods["typed_dag"], methods["flat"]
    goals = {
        "recall_no_worse_than_flat": typed["all_gold_found"] >= flat["all_gold_found"],
        "flat_over_typed_tokens": flat["tokens"] / typed["tokens"],
        "goal_10x_fewer_tokens": flat["tokens"] / typed["tokens"] >= 10,
        "cost_model_a_flat_over_typed_tokens": flat["tokens_mechanical"] / typed["tokens_mechanical"],
    }
    if ranker is not None:
        tree = methods["raptor"]
        goals.update({
            "recall_over_flat_bm25_points": 100 * (typed["all_gold_found"] - flat["all_gold_found"]),
            "goal_plus_5_points_over_flat_bm25": typed["all_gold_found"] >= flat["all_gold_found"] + 0.05,
            "recall_over_flat_same_ranker_points": 100 * (typed["all_gold_found"]
                                                          - methods["flat_ranker"]["all_gold_found"]),
            "raptor_over_typed_tokens": tree["tokens"] / typed["tokens"],
            "goal_tree_recall_with_fewer_tokens": typed["all_gold_found"] >= tree["all_gold_found"]
            and typed["tokens"] < tree["tokens"],
            "tree_frontier_dominated": not any(
                p["all_gold_found"] >= typed["all_gold_found"] and p["tokens"] <= typed["tokens"]
                for p in extra["raptor_frontier"]),
        })
    return {
        "domain": "bfcl", "split": "test", "k": k, "queries": len(test), "validation_queries": len(val),
        "queries_per_category": {cat: sum(q.category == cat for q in test) for cat in categories},
        "library_size": len(snap), "multi_turn_classes": list(classes), "categories": list(categories),
        "tokenizer": counter.name,
        "full_bare_list_tokens": counter.count("\n".join(snap.topological_order())),
        "full_card_list_tokens": baselines._all_cards_tokens(index)[1],
        "tuning": {"grid": rows, "chosen": {"l1_max_cost": c if math.isfinite(c) else "inf", "l2_cost_weight": w},
                   "selected_on": "validation half (crc32(id) % 2 == 0), highest all_gold_found, then fewer tokens",
                   "untuned": {"l1_cap": tuned.l1_cap, "l2_shortlist": tuned.l2_shortlist, "l2_keep": tuned.l2_keep}},
        "query_signature": "literals of the question text (extract_values) as inputs, result Any",
        "methods": methods, "goals": goals, "cost_model": dict(cost_model or {}),
        "build_s": round(build_s, 1), "tune_s": round(tune_s, 1), **extra,
        "wall_s": round(time.perf_counter() - t_start, 1),
    }


def run_ranked(index: RetrievalIndex, val: Sequence[BfclQuery], test: Sequence[BfclQuery], lib: B.BfclLibrary,
               counter: TokenCounter, k: int, ranker: str, typed_grid, tree_grid, ablation: bool,
               encoder: Any = None) -> dict:
    """The ranker-mode methods: ``typed_dag`` (the optional-aware cascade, knobs tuned on the
    tuning quarter), ``flat_ranker`` (flat with the same ranker), ``flat_ranker_usage`` (plus the
    same usage votes), ``raptor`` (the RAPTOR tree with the same ranker, branching and beam tuned
    on the tuning quarter), the tree's test frontier over its grid, and with ``ablation`` one row
    per stage switched off (:data:`ABLATIONS`)."""
    from cocoda_jax.retrieval.baselines import RaptorTree, flat as flat_fn, raptor

    usage, tuning = quarters(val)
    facts: dict[str, Any] = {"usage_queries": len(usage), "tuning_queries": len(tuning), "ranker": ranker}
    if ranker != "bm25" and ranker not in index.rankers:
        facts["encoder"] = add_rankers(index, usage, encoder)
    votes = _usage_index(usage)
    t0 = time.perf_counter()
    rows = []
    for c, w, u, lw in typed_grid:
        cfg = typed_config(k, c, w, lw, ranker)
        m = evaluate(_typed_runner(index, cfg, votes, u), tuning, lib, counter)
        rows.append({"l1_max_cost": c if math.isfinite(c) else "inf", "l2_cost_weight": w, "usage_weight": u,
                     "literal_weight": lw, "all_gold_found": m["all_gold_found"], "tokens": m["tokens"]})
    best = min(range(len(rows)), key=lambda i: (-rows[i]["all_gold_found"], rows[i]["tokens"], i))
    c, w, u, lw = typed_grid[best]
    cfg = typed_config(k, c, w, lw, ranker)
    trees: dict[int, RaptorTree] = {}
    tree_rows = []
    for br, beam in tree_grid:
        if br not in trees:
            trees[br] = RaptorTree(index, ranker, branching=br)
        m = evaluate(lambda sg: raptor(index, sg, k, tree=trees[br], beam=beam), tuning, lib, counter)
        tree_rows.append({"branching": br, "beam": beam, "layers": trees[br].depth(),
                          "all_gold_found": m["all_gold_found"], "tokens": m["tokens"]})
    tb = min(range(len(tree_rows)), key=lambda i: (-tree_rows[i]["all_gold_found"], tree_rows[i]["tokens"], i))
    br, beam = tree_grid[tb]
    facts["typed_tuning"] = {"grid": rows, "chosen": rows[best] | {"evidence_extra": cfg.evidence_extra},
                             "selected_on": "tuning quarter (crc32(id) % 4 == 2), highest all_gold_found, then "
                                            "fewer tokens"}
    facts["raptor_tuning"] = {"grid": tree_rows, "chosen": tree_rows[tb]}
    facts["ranked_tune_s"] = round(time.perf_counter() - t0, 1)
    runners = {
        "typed_dag": _typed_runner(index, cfg, votes, u),
        "typed_dag_clauses": _clause_runner(index, cfg, votes, u),
        "flat_ranker": lambda sg: flat_fn(index, sg, k, ranker=ranker),
        "flat_ranker_usage": lambda sg: flat_fn(index, sg, k, ranker=ranker, prior=votes.votes(sg.description, 10),
                                                 prior_weight=u or 20.0),
        "raptor": lambda sg: raptor(index, sg, k, tree=trees[br], beam=beam),
    }
    if ablation:
        for name, (changes, weight) in ABLATIONS.items():
            if name == "ranker_bm25" and ranker == "bm25":
                continue
            runners[f"ablate_{name}"] = _typed_runner(index, dataclasses.replace(cfg, **changes),
                                                      votes, u if weight is None else weight)
    methods = {name: evaluate(fn, test, lib, counter) for name, fn in runners.items()}
    frontier = []
    for br2, beam2 in tree_grid:
        m = evaluate(lambda sg: raptor(index, sg, k, tree=trees[br2], beam=beam2), test, lib, counter)
        frontier.append({"branching": br2, "beam": beam2, "all_gold_found": m["all_gold_found"],
                         "tokens": m["tokens"], "tokens_mechanical": m["tokens_mechanical"]})
    return facts | {"methods": methods, "raptor_frontier": frontier}


#: One stage of the tuned typed cascade off at a time: (config changes, usage weight or None to keep).
ABLATIONS: dict[str, tuple[dict, float | None]] = {
    "no_L1": ({"l1_max_cost": 1e18, "l2_cost_weight": 0.0}, None),
    "L1_signature": ({"l1_mode": "signature"}, None),
    "no_climb_descend": ({"climb": False, "descend": False}, None),
    "no_L3": ({"l3": False}, None),
    "no_L4": ({"l4": False}, None),
    "no_usage": ({}, 0.0),
    "no_literals": ({"literal_weight": 0.0}, None),
    "ranker_bm25": ({"ranker": "bm25"}, None),
}


__all__ = ["ABLATIONS", "BfclQuery", "CATEGORIES", "Pool", "TREE_GRID", "TUNING_GRID", "TYPED_GRID", "add_rankers",
           "build_pool", "cascade_config", "evaluate", "gold_scores", "quarters", "question_subgoal", "question_text",
           "run", "run_ranked", "split", "tune", "typed_config"]

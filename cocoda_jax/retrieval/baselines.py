"""Baselines with the cascade's interface and accounting (:class:`~.cascade.Retrieval`).

In every method the LM's choice among what it read is simulated by the same BM25 ranker over name +
description (:class:`~.rankers.BM25Ranker`), so the methods differ only in what is put in front of
the LM, which the shared renderers of :mod:`.tokens` define:

* :func:`flat` — the LM reads every tool's card (stage ``read``) and picks ``k``; the ``k`` cards go
  into the planner's prompt (stage ``cards``).
* :func:`flat_summaries` — the LM reads every one-line record (``L2``), shortlists ``shortlist``
  tools, reads their cards (``read``), picks ``k``; then ``cards``.
* :func:`text_hier` — RAPTOR-style: tool texts (name + description) are clustered recursively with
  seeded k-means on TF-IDF vectors (:class:`TextTree`, ``branching`` children per node, clusters of
  at most ``leaf_size`` tools are not split further; clusters are balanced to at most 1.25x their
  share, so the depth is logarithmic, as in RAPTOR's few-layer trees); each cluster has an extractive summary: the
  one-line records of its members nearest the centroid, up to ``summary_max_tokens`` tokens (RAPTOR's
  abstractive summaries average about 130 tokens). Reading goes down the tree: the LM reads the
  summaries of the frontier's child clusters (``summaries``) and the one-line records of tools that
  are direct children (``leaves``), keeps the ``beam`` clusters closest to the query (cosine of
  TF-IDF vectors), and descends; it then picks ``k`` of the tools it has seen; ``cards`` as above.
* :func:`raptor` — RAPTOR as its paper builds the tree (:class:`RaptorTree`): bottom-up, the tools
  clustered, each cluster summarised, the summaries embedded with the same ranker and clustered
  again; at query time the ranker chooses ``beam`` nodes at every level, top down. This is the
  fair peer: the same ranker as the cascade at every level, its branching and beam tuned.

Every method takes ``ranker`` (a name registered on the index, default BM25), so a comparison can
hold the ranker fixed and vary only what is put in front of the LM.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from cocoda_jax.retrieval.cascade import Retrieval, RetrievalIndex, StageReport
from cocoda_jax.retrieval.rankers import TfIdf, kmeans, words
from cocoda_jax.retrieval.subgoals import Subgoal
from cocoda_jax.retrieval.tokens import SEPARATOR, Ledger, render_card, render_line, render_summary


def _all_records_tokens(index: RetrievalIndex, render) -> tuple[int, int]:
    """(records, tokens) of every tool rendered by ``render`` and joined as one stage; cached on the
    index per renderer, since every query of a baseline reads the same whole library."""
    cache = index.__dict__.setdefault("_whole_library_tokens", {})
    if render not in cache:
        c = index.counter
        total = sum(c.count(render(index.tool(n))) for n in index.names)
        total += c.count(SEPARATOR) * max(0, len(index.names) - 1)
        cache[render] = (len(index.names), total)
    return cache[render]


def _all_cards_tokens(index: RetrievalIndex) -> tuple[int, int]:
    return _all_records_tokens(index, render_card)


def _all_lines_tokens(index: RetrievalIndex) -> tuple[int, int]:
    return _all_records_tokens(index, render_line)


def _finish(method: str, index: RetrievalIndex, ledger: Ledger, stages: list, selected: list[str], t_start: float,
            keep_text: bool) -> Retrieval:
    t0 = time.perf_counter()
    ledger.record("cards", [render_card(index.tool(n)) for n in selected])
    stages.append(StageReport("cards", tuple(selected), ledger.tokens["cards"], ledger.records["cards"],
                              time.perf_counter() - t0))
    return Retrieval(method, tuple(selected), (), tuple(stages), ledger.total, time.perf_counter() - t_start,
                     ledger if keep_text else None)


def flat(index: RetrievalIndex, subgoal: Subgoal, k: int = 8, *, keep_text: bool = False,
         prior: Mapping[str, float] | None = None, prior_weight: float = 1.0, ranker: str = "bm25") -> Retrieval:
    """``prior``: an LM-free score per tool added with ``prior_weight`` to BM25 (as the cascade's L2
    takes it), so a prior's worth can be measured without the types and the DAG. ``ranker``: which
    of the index's rankers stands for the LM's choice (the cascade's ``CascadeConfig.ranker``)."""
    t_start = time.perf_counter()
    ledger = Ledger(index.counter, keep_text=keep_text)
    if keep_text:
        ledger.record("read", [render_card(index.tool(n)) for n in index.names])
    else:
        ledger.record_counted("read", *_all_cards_tokens(index))
    rk = index.ranker(ranker)
    scores = rk.scores(subgoal.description)
    if prior:
        scores = scores + index.prior_vector(prior, prior_weight)
    selected = [n for n, _ in rk.rank("", limit=k, scores=scores)]
    stages = [StageReport("read", index.names, ledger.tokens["read"], ledger.records["read"], time.perf_counter() - t_start)]
    return _finish("flat", index, ledger, stages, selected, t_start, keep_text)


def flat_summaries(index: RetrievalIndex, subgoal: Subgoal, k: int = 8, shortlist: int = 24, *,
                   keep_text: bool = False, ranker: str = "bm25") -> Retrieval:
    t_start = time.perf_counter()
    ledger = Ledger(index.counter, keep_text=keep_text)
    if keep_text:
        ledger.record("L2", [render_line(index.tool(n)) for n in index.names])
    else:
        ledger.record_counted("L2", *_all_lines_tokens(index))
    rk = index.ranker(ranker)
    scores = rk.scores(subgoal.description)
    short = [n for n, _ in rk.rank("", limit=shortlist, scores=scores)]
    stages = [StageReport("L2", index.names, ledger.tokens["L2"], ledger.records["L2"], time.perf_counter() - t_start)]
    t0 = time.perf_counter()
    ledger.record("read", [render_card(index.tool(n)) for n in short])
    selected = [n for n, _ in rk.rank("", short, limit=k, scores=scores)]
    stages.append(StageReport("read", tuple(sorted(short)), ledger.tokens["read"], ledger.records["read"],
                              time.perf_counter() - t0))
    return _finish("flat_summaries", index, ledger, stages, selected, t_start, keep_text)


@dataclasses.dataclass
class _Node:
    members: np.ndarray            # tool positions under this node
    children: list[Any]            # _Node or int (tool position)
    summary: str
    centroid: np.ndarray


class TextTree:
    """The RAPTOR-style tree over one index (see the module docstring); deterministic in ``seed``."""

    def __init__(self, index: RetrievalIndex, branching: int = 8, leaf_size: int = 8,
                 summary_max_tokens: int = 100, seed: int = 0, slack: float = 1.25):
        if branching < 2 or leaf_size < 1:
            raise ValueError("TextTree needs branching >= 2 and leaf_size >= 1")
        self.index = index
        self.branching, self.leaf_size, self.summary_max_tokens, self.seed = branching, leaf_size, summary_max_tokens, seed
        self.slack = slack
        texts = [f"{n.replace('_', ' ')} {index.tool(n).description}" for n in index.names]
        self.tfidf = TfIdf(texts, seed=seed)
        self.vectors = self.tfidf.matrix
        self._lines = [render_line(index.tool(n)) for n in index.names]
        self.root = self._build(np.arange(len(index.names)), 0)

    def _summary(self, members: np.ndarray, centroid: np.ndarray) -> str:
        sims = self.vectors[members] @ centroid
        order = members[np.lexsort((members, -sims))]
        parts, used = [], 0
        c = self.index.counter
        for i in order[:32]:
            line = self._lines[int(i)]
            t = c.count(line) + 1
            if parts and used + t > self.summary_max_tokens:
                break
            parts.append(line)
            used += t
        return f"[{len(members)} tools] " + " | ".join(parts)

    def _build(self, members: np.ndarray, depth: int) -> _Node:
        centroid = self.vectors[members].mean(axis=0)
        norm = np.linalg.norm(centroid)
        centroid = centroid / norm if norm > 0 else centroid
        if len(members) <= self.leaf_size:
            return _Node(members, [int(i) for i in members], self._summary(members, centroid), centroid)
        labels = kmeans(self.vectors[members], self.branching, seed=self.seed * 1_000_003 + depth * 7919 + int(members[0]),
                        slack=self.slack)
        groups = [members[labels == j] for j in range(int(labels.max()) + 1)]
        groups = [g for g in groups if len(g)]
        if len(groups) <= 1:  # identical vectors: split by position to guarantee progress
            groups = [g for g in np.array_split(members, self.branching) if len(g)]
        children: list[Any] = [self._build(g, depth + 1) if len(g) > 1 else int(g[0]) for g in groups]
        return _Node(members, children, self._summary(members, centroid), centroid)

    def depth(self) -> int:
        def d(node):
            return 1 + max((d(c) for c in node.children if isinstance(c, _Node)), default=0)
        return d(self.root)


def text_hier(index: RetrievalIndex, subgoal: Subgoal, k: int = 8, *, tree: TextTree | None = None, beam: int = 3,
              keep_text: bool = False, ranker: str = "bm25") -> Retrieval:
    t_start = time.perf_counter()
    tree = tree or TextTree(index)
    ledger = Ledger(index.counter, keep_text=keep_text)
    q = tree.tfidf.transform([subgoal.description])[0]
    frontier = [tree.root]
    seen: list[int] = []
    while frontier:
        clusters = [c for node in frontier for c in node.children if isinstance(c, _Node)]
        tools = [c for node in frontier for c in node.children if not isinstance(c, _Node)]
        if clusters:
            ledger.record("summaries", [render_summary(c.summary) for c in clusters])
        if tools:
            ledger.record("leaves", [render_line(index.tool(index.names[t])) for t in tools])
            seen.extend(tools)
        order = sorted(range(len(clusters)), key=lambda j: (-float(clusters[j].centroid @ q), int(clusters[j].members[0])))
        frontier = [clusters[j] for j in order[:beam]]
    rk = index.ranker(ranker)
    scores = rk.scores(subgoal.description)
    selected = [n for n, _ in rk.rank("", [index.names[t] for t in seen], limit=k, scores=scores)]
    stages = [StageReport(s, tuple(sorted(index.names[t] for t in seen)) if s == "leaves" else (),
                          ledger.tokens.get(s, 0), ledger.records.get(s, 0), 0.0) for s in ("summaries", "leaves")]
    stages[0] = dataclasses.replace(stages[0], seconds=time.perf_counter() - t_start)
    return _finish("text_hier", index, ledger, stages, selected, t_start, keep_text)


# ---------------------------------------------------------------------------------------------
# RAPTOR as its paper builds it: bottom-up clustering, a summary per cluster, recursion; at query
# time the ranker chooses at every level.

def text_scorer(ranker: Any, texts: Sequence[str]) -> Callable[[str], np.ndarray]:
    """Scores of a query against arbitrary ``texts`` with the same kind of ranker as ``ranker``
    (BM25 re-indexed over the texts, the encoder's vectors of the texts, or a weighted sum)."""
    from cocoda_jax.retrieval.encoder import EncoderRanker, SumRanker
    from cocoda_jax.retrieval.rankers import BM25Ranker

    if isinstance(ranker, SumRanker):
        parts = [(text_scorer(r, texts), w) for r, w in ranker.parts]
        return lambda q: sum(w * f(q) for f, w in parts)
    if isinstance(ranker, EncoderRanker):
        mat = ranker.embed(list(texts))
        return lambda q: (mat @ ranker.query_vector(q) * ranker.scale).astype(np.float32)
    if isinstance(ranker, BM25Ranker):
        bm = BM25Ranker([str(i) for i in range(len(texts))], list(texts))
        return bm.scores
    raise TypeError(f"text_scorer: no text form of ranker {type(ranker).__name__}")


@dataclasses.dataclass(frozen=True)
class _RNode:
    layer: int                   # 1 = clusters of tools
    children: tuple[int, ...]    # tool positions (layer 1) or node ids of the layer below
    tools: tuple[int, ...]       # every tool position under the node
    summary: str


class RaptorTree:
    """RAPTOR's tree over a library (bottom-up, as in its paper): the tools are clustered (seeded,
    balanced k-means on the ranker's vectors, or TF-IDF for BM25) into groups of about ``branching``;
    each cluster gets a summary; the summaries are embedded with the same ranker and clustered again,
    until at most ``branching`` nodes remain (the top layer). Summaries are extractive (no LM here):
    the cluster's most frequent content words, then the one-line records of the tools nearest its
    centroid, up to ``summary_max_tokens`` tokens (RAPTOR's abstractive summaries average about 130).

    At query time (:func:`raptor`) the LM reads the top layer's summaries, keeps the ``beam`` the
    ranker scores best, reads their children's summaries (or, above tools, the tools' one-line
    records), and so on down; it then picks ``k`` of the tools it read with the ranker. Every level
    read is charged (cost model b); model a charges the final cards only. Deterministic in ``seed``."""

    def __init__(self, index: RetrievalIndex, ranker: str = "bm25", branching: int = 8,
                 summary_max_tokens: int = 100, seed: int = 0, keywords: int = 8):
        if branching < 2:
            raise ValueError("RaptorTree needs branching >= 2")
        self.index, self.ranker_name, self.branching, self.seed = index, ranker, branching, seed
        self.summary_max_tokens, self.keywords = summary_max_tokens, keywords
        rk = index.ranker(ranker)
        self._lines = [render_line(index.tool(n)) for n in index.names]
        base = _tree_vectors(rk, index)
        self.nodes: list[_RNode] = []
        layer_items = list(range(len(index.names)))  # tools, then node ids
        vectors = base
        layer = 0
        while len(layer_items) > branching:
            layer += 1
            n_clusters = int(np.ceil(len(layer_items) / branching))
            labels = kmeans(vectors, n_clusters, seed=seed * 1_000_003 + layer, slack=1.25)
            groups = [np.nonzero(labels == j)[0] for j in range(int(labels.max()) + 1)]
            groups = [g for g in groups if len(g)]
            new_items, texts = [], []
            for g in groups:
                children = tuple(layer_items[int(i)] for i in g)
                tools = children if layer == 1 else tuple(t for c in children for t in self.nodes[c].tools)
                summary = self._summary(np.asarray(tools), base)
                self.nodes.append(_RNode(layer, children, tools, summary))
                new_items.append(len(self.nodes) - 1)
                texts.append(summary)
            vectors = _text_vectors(rk, texts, base.shape[1]) if len(new_items) > branching else vectors
            layer_items = new_items
        self.top = tuple(layer_items)
        self.top_is_tools = layer == 0
        self.layers = layer
        self._scorer = text_scorer(rk, [nd.summary for nd in self.nodes]) if self.nodes else None

    def _summary(self, tools: np.ndarray, base: np.ndarray) -> str:
        centroid = base[tools].mean(axis=0)
        sims = base[tools] @ centroid
        order = tools[np.lexsort((tools, -sims))]
        counts: dict[str, int] = {}
        for t in tools.tolist():
            for w in dict.fromkeys(words(self.index.texts[t])):
                counts[w] = counts.get(w, 0) + 1
        kw = sorted(counts, key=lambda w: (-counts[w], w))[: self.keywords]
        head = f"[{len(tools)} tools] {', '.join(kw)}"
        c = self.index.counter
        used, parts = c.count(head), [head]
        for i in order[:32].tolist():
            line = self._lines[i]
            t = c.count(line) + 1
            if used + t > self.summary_max_tokens:
                break
            parts.append(line)
            used += t
        return " | ".join(parts)

    def depth(self) -> int:
        return self.layers


def _encoders(rk: Any) -> list:
    """The encoder rankers inside ``rk`` (itself, or the parts of a sum, recursively)."""
    from cocoda_jax.retrieval.encoder import EncoderRanker, SumRanker

    if isinstance(rk, EncoderRanker):
        return [rk]
    if isinstance(rk, SumRanker):
        return [e for r, _ in rk.parts for e in _encoders(r)]
    return []


def _tree_vectors(rk: Any, index: RetrievalIndex) -> np.ndarray:
    """Vectors of the tools to cluster: the encoders' (concatenated), else TF-IDF."""
    encs = _encoders(rk)
    if encs:
        return np.concatenate([e.matrix for e in encs], axis=1) / np.sqrt(len(encs))
    return TfIdf(list(index.texts)).matrix


def _text_vectors(rk: Any, texts: Sequence[str], width: int) -> np.ndarray:
    encs = _encoders(rk)
    if encs:
        return np.concatenate([e.embed(texts) for e in encs], axis=1) / np.sqrt(len(encs))
    return TfIdf(list(texts), dims=width).matrix if width else TfIdf(list(texts)).matrix


def raptor(index: RetrievalIndex, subgoal: Subgoal, k: int = 8, *, tree: RaptorTree, beam: int = 3,
           keep_text: bool = False) -> Retrieval:
    """Tree traversal over a :class:`RaptorTree` (see its docstring) with the tree's ranker."""
    if beam < 1:
        raise ValueError("raptor needs beam >= 1")
    t_start = time.perf_counter()
    ledger = Ledger(index.counter, keep_text=keep_text)
    rk = index.ranker(tree.ranker_name)
    query = subgoal.description
    node_scores = tree._scorer(query) if tree._scorer is not None else None
    seen: list[int] = []
    frontier: tuple[int, ...] = tree.top
    if tree.top_is_tools:
        ledger.record("leaves", [tree._lines[t] for t in frontier])
        seen.extend(frontier)
        frontier = ()
    while frontier:
        nodes = [tree.nodes[i] for i in frontier]
        ledger.record("summaries", [render_summary(nd.summary) for nd in nodes])
        order = sorted(range(len(frontier)), key=lambda j: (-float(node_scores[frontier[j]]), frontier[j]))
        chosen = [frontier[j] for j in order[:beam]]
        below: list[int] = []
        for i in chosen:
            nd = tree.nodes[i]
            if nd.layer == 1:
                ledger.record("leaves", [tree._lines[t] for t in nd.children])
                seen.extend(nd.children)
            else:
                below.extend(nd.children)
        frontier = tuple(below)
    scores = rk.scores(query)
    selected = [n for n, _ in rk.rank("", [index.names[t] for t in dict.fromkeys(seen)], limit=k, scores=scores)]
    stages = [StageReport(s, tuple(sorted(index.names[t] for t in seen)) if s == "leaves" else (),
                          ledger.tokens.get(s, 0), ledger.records.get(s, 0), 0.0) for s in ("summaries", "leaves")]
    stages[0] = dataclasses.replace(stages[0], seconds=time.perf_counter() - t_start)
    return _finish("raptor", index, ledger, stages, selected, t_start, keep_text)

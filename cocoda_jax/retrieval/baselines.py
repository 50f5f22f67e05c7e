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
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Mapping

import numpy as np

from cocoda_jax.retrieval.cascade import Retrieval, RetrievalIndex, StageReport
from cocoda_jax.retrieval.rankers import TfIdf, kmeans
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
         prior: Mapping[str, float] | None = None, prior_weight: float = 1.0) -> Retrieval:
    """``prior``: an LM-free score per tool added with ``prior_weight`` to BM25 (as the cascade's L2
    takes it), so a prior's worth can be measured without the types and the DAG."""
    t_start = time.perf_counter()
    ledger = Ledger(index.counter, keep_text=keep_text)
    if keep_text:
        ledger.record("read", [render_card(index.tool(n)) for n in index.names])
    else:
        ledger.record_counted("read", *_all_cards_tokens(index))
    if prior:
        scores = index.bm25.scores(subgoal.description) + index.prior_vector(prior, prior_weight)
        selected = [n for n, _ in index.bm25.rank("", limit=k, scores=scores)]
    else:
        selected = [n for n, _ in index.bm25.rank(subgoal.description, limit=k)]
    stages = [StageReport("read", index.names, ledger.tokens["read"], ledger.records["read"], time.perf_counter() - t_start)]
    return _finish("flat", index, ledger, stages, selected, t_start, keep_text)


def flat_summaries(index: RetrievalIndex, subgoal: Subgoal, k: int = 8, shortlist: int = 24, *,
                   keep_text: bool = False) -> Retrieval:
    t_start = time.perf_counter()
    ledger = Ledger(index.counter, keep_text=keep_text)
    if keep_text:
        ledger.record("L2", [render_line(index.tool(n)) for n in index.names])
    else:
        ledger.record_counted("L2", *_all_lines_tokens(index))
    scores = index.bm25.scores(subgoal.description)
    short = [n for n, _ in index.bm25.rank("", limit=shortlist, scores=scores)]
    stages = [StageReport("L2", index.names, ledger.tokens["L2"], ledger.records["L2"], time.perf_counter() - t_start)]
    t0 = time.perf_counter()
    ledger.record("read", [render_card(index.tool(n)) for n in short])
    selected = [n for n, _ in index.bm25.rank("", short, limit=k, scores=scores)]
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
              keep_text: bool = False) -> Retrieval:
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
    scores = index.bm25.scores(subgoal.description)
    selected = [n for n, _ in index.bm25.rank("", [index.names[t] for t in seen], limit=k, scores=scores)]
    stages = [StageReport(s, tuple(sorted(index.names[t] for t in seen)) if s == "leaves" else (),
                          ledger.tokens.get(s, 0), ledger.records.get(s, 0), 0.0) for s in ("summaries", "leaves")]
    stages[0] = dataclasses.replace(stages[0], seconds=time.perf_counter() - t_start)
    return _finish("text_hier", index, ledger, stages, selected, t_start, keep_text)

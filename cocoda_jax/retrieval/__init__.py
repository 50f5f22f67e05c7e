"""Typed DAG retrieval: the four-stage cascade over a LibrarySnapshot, its baselines, token accounting.

Quick tour::

    from cocoda_jax.retrieval import CascadeConfig, RetrievalIndex, extract_subgoal, retrieve
    index = RetrievalIndex.build(snapshot)                 # BM25 + per-shape type index + counters
    sg = extract_subgoal("What is the average of [3, 5, 9]?", "float")
    out = retrieve(index, sg, CascadeConfig(k=8), sandbox=None)
    out.selected, [(s.stage, len(s.survivors), s.tokens, s.seconds) for s in out.stages]
    flat(index, sg, 8); flat_summaries(index, sg, 8); text_hier(index, sg, 8, tree=TextTree(index))

What an LM reads at each stage is defined once in :mod:`.tokens`; the cascade's stages in
:mod:`.cascade`; the baselines in :mod:`.baselines`; synthetic benchmark libraries in
:mod:`.synthetic_library` (``launch/bench/retrieval.py`` measures).
"""

from cocoda_jax.retrieval.baselines import TextTree, flat, flat_summaries, text_hier
from cocoda_jax.retrieval.cascade import (
    CascadeConfig, Retrieval, RetrievalIndex, StageReport, complexity_rank, example_agreement,
    pre_condition_verdicts, retrieve, retrieve_many, retrieve_query,
)
from cocoda_jax.retrieval.rankers import BM25Ranker, TfIdf, kmeans, words
from cocoda_jax.retrieval.subgoals import (
    Subgoal, SubgoalFormatError, clause_subgoals, extract_subgoal, extract_values, subgoals_from_json,
    subgoals_to_json,
)
from cocoda_jax.retrieval.tokens import (
    Ledger, TokenCounter, default_counter, one_line, render_card, render_examples, render_line, render_spec,
    render_summary,
)

__all__ = [
    "TextTree", "flat", "flat_summaries", "text_hier",
    "CascadeConfig", "Retrieval", "RetrievalIndex", "StageReport", "complexity_rank", "example_agreement",
    "pre_condition_verdicts", "retrieve", "retrieve_many", "retrieve_query",
    "BM25Ranker", "TfIdf", "kmeans", "words",
    "Subgoal", "SubgoalFormatError", "clause_subgoals", "extract_subgoal", "extract_values", "subgoals_from_json",
    "subgoals_to_json",
    "Ledger", "TokenCounter", "default_counter", "one_line", "render_card", "render_examples", "render_line",
    "render_spec", "render_summary",
]

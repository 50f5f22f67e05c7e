"""Usage evidence for L2: which tools solved training questions like this one.

A tool's L2 record (name + description) is written in the library's words ("Subtract b from a"),
a word problem in the task's ("reserves $180 and converts what is left"): a text ranker over
descriptions alone finds all of a question's gold tools for only a few percent of the synthetic-math
validation questions (``launch/bench/retrieval.py --domain=synthetic_math``). The library has better
evidence of what a tool is for: the solved training questions whose programs call it. This module
indexes those questions (BM25, bm25s) and turns a query into one vote per tool: the share of the
query's ``neighbours`` most similar solved questions (weighted by their BM25 score) whose program
calls the tool. The cascade adds ``usage_weight x vote`` to the L2 score of the tools that survived
L1, so the types still prune first and the DAG moves still apply.

The evidence is data derived from the demonstrations (the stored, refactored training programs;
never a validation or test question) and rebuilt when they change; ``exclude`` leaves a question's
own record out, so a training question's candidate set is built the way a held-out one's is.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterable, Mapping, Sequence

import numpy as np

from cocoda_jax.retrieval.rankers import BM25Ranker, words

_CALL = re.compile(r"=\s*([A-Za-z_][A-Za-z_0-9]*)\s*\(")


def program_tools(program: str) -> frozenset[str]:
    """The tools an action-format program calls (``x = tool(...)`` lines)."""
    return frozenset(_CALL.findall(program))


@dataclasses.dataclass(frozen=True)
class UsageRecord:
    """One solved training question: its id, its text and the tools its program calls."""

    task_id: str
    question: str
    tools: frozenset[str]


class UsageIndex:
    """BM25 over solved questions; :meth:`votes` maps a query to per-tool votes in [0, 1].
    Deterministic in its records (equal scores break by record order)."""

    def __init__(self, records: Sequence[UsageRecord], embed: Callable[[Sequence[str]], np.ndarray] | None = None):
        """``embed``: unit vectors of texts (e.g. the dual encoder's query tower); when given, a
        record's likeness to a query is their cosine (clipped at 0) instead of BM25, so reworded
        questions still find their neighbours."""
        self.records = tuple(records)
        self._ranker = BM25Ranker([str(i) for i in range(len(self.records))], [r.question for r in self.records]) \
            if self.records else None
        self._embed = embed
        self._matrix = embed([r.question for r in self.records]) if (embed is not None and self.records) else None
        self._by_id: dict[str, list[int]] = {}
        for i, r in enumerate(self.records):
            self._by_id.setdefault(r.task_id, []).append(i)

    @classmethod
    def from_programs(cls, programs: Iterable[tuple[str, str]], questions: Mapping[str, str]) -> "UsageIndex":
        """From stored ``(task id, program)`` pairs and the questions by task id."""
        return cls([UsageRecord(str(i), questions[str(i)], program_tools(p)) for i, p in programs])

    def __len__(self) -> int:
        return len(self.records)

    def votes(self, query: str, neighbours: int = 10, exclude: str | None = None) -> dict[str, float]:
        """Per tool, the BM25-weighted share of the ``neighbours`` best-matching records that call
        it (records of task ``exclude`` left out); empty when nothing matches."""
        if self._ranker is None or neighbours < 1:
            return {}
        if self._matrix is not None:
            scores = np.maximum(self._matrix @ self._embed([query])[0], 0.0).astype(np.float64)
        else:
            scores = self._ranker.scores(query).astype(np.float64)
        for i in self._by_id.get(exclude, ()) if exclude is not None else ():
            scores[i] = 0.0
        order = np.lexsort((np.arange(len(scores)), -scores))[:neighbours]
        top = [int(i) for i in order if scores[i] > 0]
        total = float(sum(scores[i] for i in top))
        out: dict[str, float] = {}
        for i in top:
            for tool in self.records[i].tools:
                out[tool] = out.get(tool, 0.0) + float(scores[i]) / total
        return out

    def expanded_texts(self, names: Sequence[str], texts: Sequence[str]) -> list[str]:
        """Each tool's text followed by the distinct content words (sorted) of every record that calls
        it: document expansion from the same evidence the votes read. The votes need a question's
        *neighbours* to share its words; an expanded record lets one word of a new phrasing reach a tool
        whose solved questions used that word anywhere. Each word counts once per tool, so a tool called
        by many records does not outweigh one called by few (BM25's length term sees the vocabulary, not
        the call count). A tool no record calls keeps its text. For questions outside the records only:
        a training question's own words are already in its tools' texts (the votes' ``exclude`` has no
        counterpart here)."""
        vocab: dict[str, set[str]] = {}
        for r in self.records:
            seen = set(words(r.question))
            for tool in r.tools:
                vocab.setdefault(tool, set()).update(seen)
        return [t if n not in vocab else f"{t} {' '.join(sorted(vocab[n]))}" for n, t in zip(names, texts)]


__all__ = ["UsageIndex", "UsageRecord", "program_tools"]

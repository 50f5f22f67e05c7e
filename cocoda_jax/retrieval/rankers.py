"""Text rankers shared by the cascade and the baselines: a word tokenizer, BM25 (bm25s), an optional
dense ranker over a local sentence-encoder directory, and TF-IDF with k-means for the text tree.

Ranking is deterministic: equal scores are ordered by name. ``BM25Ranker`` indexes one document per
tool once (name words + description) and scores a query against any subset of tools by reading the
whole-corpus score vector (work proportional to the query terms' posting lists, in numpy).
"""

from __future__ import annotations

import functools
import re
from typing import Iterable, Sequence

import numpy as np

_WORD = re.compile(r"[a-z]+|\d+")
STOPWORDS = frozenset("""a an the of to in on for by with and or from into at as is are be was were it its this that
these those what which who how much many does do did will would should can could than then over under
per each every all any some give find show me please make get one two""".split())


@functools.lru_cache(maxsize=1 << 16)
def stem(word: str) -> str:
    """A light suffix stripper (enough to join 'compounded'/'compounding'/'compound')."""
    for suffix in ("ations", "ation", "ments", "ment", "ings", "ing", "ies", "edly", "ed", "es", "s", "ly"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)] + ("y" if suffix == "ies" else "")
    return word


def words(text: str) -> list[str]:
    """Lower-cased, stemmed content words; identifiers split on ``_`` and digits."""
    return [stem(w) for w in _WORD.findall(text.lower().replace("_", " ")) if w not in STOPWORDS and not w.isdigit()]


class _SubsetRanking:
    names: tuple[str, ...]
    position: dict[str, int]

    def scores(self, query: str) -> np.ndarray:
        raise NotImplementedError

    def rank(self, query: str, subset: Iterable[str] | None = None, limit: int | None = None,
             scores: np.ndarray | None = None) -> list[tuple[str, float]]:
        """``(name, score)`` best first (ties by name), over ``subset`` (default: all)."""
        s = self.scores(query) if scores is None else scores
        if subset is None:
            idx = np.arange(len(self.names))
        else:
            idx = np.fromiter((self.position[n] for n in subset), dtype=np.int64)
        if idx.size == 0:
            return []
        sub = s[idx]
        if limit is not None and limit < idx.size:
            # candidates: everything scoring at least the limit-th best (keeps ties for the name order)
            kth = np.partition(-sub, limit - 1)[limit - 1]
            keep = np.nonzero(-sub <= kth)[0]
            idx, sub = idx[keep], sub[keep]
        order = sorted(range(idx.size), key=lambda j: (-float(sub[j]), self.names[idx[j]]))
        out = [(self.names[idx[j]], float(sub[j])) for j in order]
        return out[:limit] if limit is not None else out


class BM25Ranker(_SubsetRanking):
    """BM25 over fixed documents (``names[i]`` -> ``texts[i]``) with subset scoring."""

    def __init__(self, names: Sequence[str], texts: Sequence[str], k1: float = 1.2, b: float = 0.75):
        import bm25s

        self.names = tuple(names)
        self.position = {n: i for i, n in enumerate(self.names)}
        corpus = [words(t) or ["_empty_"] for t in texts]
        self._bm25 = bm25s.BM25(k1=k1, b=b)
        self._bm25.index(corpus, show_progress=False)
        self._vocab = self._bm25.vocab_dict

    def scores(self, query: str) -> np.ndarray:
        toks = [w for w in words(query) if w in self._vocab]
        if not toks:
            return np.zeros(len(self.names), dtype=np.float32)
        return np.asarray(self._bm25.get_scores(toks), dtype=np.float32)


class DenseRanker(_SubsetRanking):
    """Cosine similarity of mean-pooled sentence embeddings from a local Hugging Face encoder
    directory (``AutoModel`` + ``AutoTokenizer``, ``local_files_only``: nothing is downloaded).
    Runs on CPU with PyTorch; document vectors are computed once."""

    def __init__(self, model_dir: str, names: Sequence[str], texts: Sequence[str], batch_size: int = 64,
                 max_length: int = 128):
        from transformers import AutoModel, AutoTokenizer

        self.names = tuple(names)
        self.position = {n: i for i, n in enumerate(self.names)}
        self.model_dir = str(model_dir)
        self._tok = AutoTokenizer.from_pretrained(self.model_dir, local_files_only=True)
        self._model = AutoModel.from_pretrained(self.model_dir, local_files_only=True).eval()
        self.batch_size, self.max_length = batch_size, max_length
        self.matrix = self.embed(list(texts))

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        import torch

        out = []
        with torch.no_grad():
            for start in range(0, len(texts), self.batch_size):
                enc = self._tok(list(texts[start:start + self.batch_size]), padding=True, truncation=True,
                                max_length=self.max_length, return_tensors="pt")
                hidden = self._model(**enc).last_hidden_state
                mask = enc["attention_mask"].unsqueeze(-1).to(hidden.dtype)
                pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1.0)
                out.append(torch.nn.functional.normalize(pooled, dim=-1).float().numpy())
        width = self._model.config.hidden_size
        return np.concatenate(out) if out else np.zeros((0, width), dtype=np.float32)

    def scores(self, query: str) -> np.ndarray:
        return (self.matrix @ self.embed([query])[0]).astype(np.float32)


class TfIdf:
    """TF-IDF vectors on numpy: a vocabulary of the ``max_features`` most frequent words (ties by
    word), l2-normalised rows, projected to ``dims`` with a seeded Gaussian matrix when the vocabulary
    is larger (keeps 100k-document clustering in memory)."""

    def __init__(self, texts: Sequence[str], max_features: int = 4096, dims: int = 256, seed: int = 0):
        docs = [words(t) for t in texts]
        df: dict[str, int] = {}
        for d in docs:
            for w in set(d):
                df[w] = df.get(w, 0) + 1
        vocab = sorted(df, key=lambda w: (-df[w], w))[:max_features]
        self.vocab = {w: i for i, w in enumerate(vocab)}
        n = max(1, len(docs))
        self.idf = np.array([np.log((1 + n) / (1 + df[w])) + 1.0 for w in vocab], dtype=np.float32)
        self.proj = None
        if len(vocab) > dims:
            rng = np.random.default_rng(seed)
            self.proj = (rng.standard_normal((len(vocab), dims)) / np.sqrt(dims)).astype(np.float32)
        self.matrix = self.transform_words(docs)

    def transform_words(self, docs: Sequence[Sequence[str]]) -> np.ndarray:
        width = self.proj.shape[1] if self.proj is not None else len(self.vocab)
        out = np.zeros((len(docs), width), dtype=np.float32)
        chunk = 4096
        for start in range(0, len(docs), chunk):
            part = docs[start:start + chunk]
            dense = np.zeros((len(part), len(self.vocab)), dtype=np.float32)
            for i, d in enumerate(part):
                for w in d:
                    j = self.vocab.get(w)
                    if j is not None:
                        dense[i, j] += 1.0
            dense *= self.idf
            if self.proj is not None:
                dense = dense @ self.proj
            norms = np.linalg.norm(dense, axis=1, keepdims=True)
            out[start:start + len(part)] = dense / np.maximum(norms, 1e-9)
        return out

    def transform(self, texts: Sequence[str]) -> np.ndarray:
        return self.transform_words([words(t) for t in texts])


def kmeans(x: np.ndarray, k: int, seed: int, iters: int = 12, slack: float | None = None) -> np.ndarray:
    """Labels of a seeded k-means (k-means++ seeding) on the rows of ``x``; deterministic.

    With ``slack``, clusters are balanced at the end: no cluster holds more than
    ``ceil(slack * n / k)`` rows (rows are placed, most confident first, in their nearest cluster
    that still has room), so a recursive clustering has logarithmic depth."""
    n = x.shape[0]
    k = min(k, n)
    rng = np.random.default_rng(seed)
    centers = [x[int(rng.integers(n))]]
    d2 = np.full(n, np.inf, dtype=np.float64)
    for _ in range(1, k):
        d2 = np.minimum(d2, ((x - centers[-1]) ** 2).sum(axis=1))
        total = d2.sum()
        if total <= 0:
            break
        centers.append(x[int(rng.choice(n, p=d2 / total))])
    c = np.stack(centers)
    labels = np.zeros(n, dtype=np.int64)
    for _ in range(iters):
        dist = (x * x).sum(1, keepdims=True) - 2 * x @ c.T + (c * c).sum(1)[None, :]
        new = dist.argmin(axis=1)
        if np.array_equal(new, labels) and _ > 0:
            break
        labels = new
        for j in range(c.shape[0]):
            members = x[labels == j]
            if len(members):
                c[j] = members.mean(axis=0)
    if slack is not None and n > 1:
        cap = int(np.ceil(slack * n / c.shape[0]))
        dist = (x * x).sum(1, keepdims=True) - 2 * x @ c.T + (c * c).sum(1)[None, :]
        prefs = np.argsort(dist, axis=1, kind="stable")
        room = np.full(c.shape[0], cap)
        balanced = np.empty(n, dtype=np.int64)
        for i in np.lexsort((np.arange(n), dist.min(axis=1))).tolist():
            for j in prefs[i].tolist():
                if room[j] > 0:
                    balanced[i] = j
                    room[j] -= 1
                    break
        labels = balanced
    return labels

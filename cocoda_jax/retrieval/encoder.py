"""A small dual encoder trained here, in JAX, on the library's own cards and usage records.

Why: BM25 and the usage votes match words; a question phrased in words no training question and no
description used (held-out wording, a new BFCL API) finds nothing. A dual encoder over hashed word
and character n-grams shares evidence across spellings ("compounded"/"compounding"), across words
seen together in the cards, and across the usage records' questions and their tools, so it ranks by
what the library says its tools are for rather than by exact words. Nothing is downloaded: the
featuriser is a deterministic hash, the model is trained from scratch in seconds on CPU.

    enc = train_encoder(tool_names, tool_texts, pairs=[(question, tool_name), ...], config=EncoderConfig())
    ranker = EncoderRanker(enc, tool_names, tool_texts)   # .scores(query) aligned with tool_names

**Features** (:class:`HashedFeaturizer`): stemmed content words (:func:`~.rankers.words`), word
bigrams and the character 3- and 4-grams of each word with boundary marks, each hashed with crc32
into ``buckets`` ids (0 is padding), at most ``max_len`` per text. With ``value_shapes``, also how the
text writes its values (:func:`~.literals.value_shapes`: ``7:6``, ``$``, ``%``, how many numbers), which
the words drop and a new phrasing keeps.

**Model** (:class:`DualEncoder`, Flax NNX): one shared embedding table, mean-pooled over a text's
features, then a per-tower residual linear map and l2 normalisation; the score of (query, tool) is
their cosine over ``temperature``.

**Training** (:func:`train_encoder`): pairs (text, tool) from the usage records (a solved question
and each tool its program calls) and from the cards themselves (the tool's name words, its
description's first sentence, its parameter lines, and random word subsets of its text, each as a
query for that tool), and with ``usage_views`` copies of each usage question with 40% of its words
dropped (so the model leans less on one template's exact words); ``feature_dropout`` of a query's
features masked at each step, for the same reason; in-batch softmax (InfoNCE) with every batch entry of the same tool counted as
a positive; optax AdamW; one ``jax.jit`` pure step over (graph, state). Batches are drawn with keys
split from ``seed``; the word subsets with a NumPy generator seeded by ``seed``: the same inputs and
seed give the same weights.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import zlib
from typing import Sequence

import numpy as np

from cocoda_jax.errors import CocodaError
from cocoda_jax.retrieval.literals import value_shapes
from cocoda_jax.retrieval.rankers import _SubsetRanking, words


class EncoderError(CocodaError, ValueError):
    """A bad encoder configuration or training input."""


@dataclasses.dataclass(frozen=True)
class EncoderConfig:
    buckets: int = 1 << 15
    max_len: int = 96
    width: int = 64
    steps: int = 300
    batch: int = 256
    learning_rate: float = 3e-3
    weight_decay: float = 1e-4
    temperature: float = 0.05
    card_views: int = 6
    usage_views: int = 0
    feature_dropout: float = 0.0
    value_shapes: bool = False
    seed: int = 0

    def __post_init__(self):
        for name in ("buckets", "max_len", "width", "steps", "batch", "card_views"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise EncoderError(f"EncoderConfig.{name} must be an int >= 1, got {v!r}")
        if self.buckets < 2:
            raise EncoderError("EncoderConfig.buckets must be >= 2")
        for name in ("learning_rate", "temperature"):
            if not getattr(self, name) > 0:
                raise EncoderError(f"EncoderConfig.{name} must be > 0, got {getattr(self, name)!r}")
        if isinstance(self.usage_views, bool) or not isinstance(self.usage_views, int) or self.usage_views < 0:
            raise EncoderError(f"EncoderConfig.usage_views must be an int >= 0, got {self.usage_views!r}")
        if not 0 <= self.feature_dropout < 1:
            raise EncoderError(f"EncoderConfig.feature_dropout must be in [0, 1), got {self.feature_dropout!r}")
        if not self.weight_decay >= 0:
            raise EncoderError(f"EncoderConfig.weight_decay must be >= 0, got {self.weight_decay!r}")
        if not isinstance(self.value_shapes, bool):
            raise EncoderError(f"EncoderConfig.value_shapes must be a bool, got {self.value_shapes!r}")


class HashedFeaturizer:
    """Text -> padded feature ids (see the module docstring); deterministic across processes."""

    def __init__(self, buckets: int, max_len: int, value_shapes: bool = False):
        self.buckets, self.max_len, self.value_shapes = buckets, max_len, value_shapes

    @functools.lru_cache(maxsize=1 << 16)
    def _hash(self, token: str) -> int:
        return 1 + zlib.crc32(token.encode("utf-8")) % (self.buckets - 1)

    def features(self, text: str) -> list[int]:
        ws = words(text)
        toks = [f"w:{w}" for w in ws] + [f"b:{a}_{b}" for a, b in zip(ws, ws[1:])]
        if self.value_shapes:
            toks += [f"v:{shape}" for shape in value_shapes(text)]
        for w in dict.fromkeys(ws):
            padded = f"<{w}>"
            toks += [f"c:{padded[i:i + n]}" for n in (3, 4) for i in range(len(padded) - n + 1)]
        return [self._hash(t) for t in toks[: self.max_len]]

    def __call__(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        ids = np.zeros((len(texts), self.max_len), dtype=np.int32)
        for i, t in enumerate(texts):
            f = self.features(t)
            ids[i, : len(f)] = f
        return ids, (ids > 0).astype(np.float32)


def _model_classes():
    """The NNX modules, defined on first use so that importing this package does not import Flax."""
    import jax
    import jax.numpy as jnp
    from flax import nnx

    class Tower(nnx.Module):
        def __init__(self, width: int, rngs: nnx.Rngs):
            self.linear = nnx.Linear(width, width, rngs=rngs)

        def __call__(self, pooled):
            h = pooled + self.linear(pooled)
            return h * jax.lax.rsqrt(jnp.sum(h * h, axis=-1, keepdims=True) + 1e-12)  # finite gradient at 0

    class DualEncoder(nnx.Module):
        """Shared hashed-feature embedding, one residual head per tower, unit-norm outputs."""

        def __init__(self, buckets: int, width: int, rngs: nnx.Rngs):
            self.embed = nnx.Embed(buckets, width, rngs=rngs)
            self.query = Tower(width, rngs)
            self.tool = Tower(width, rngs)

        def pool(self, ids, mask):
            e = self.embed(ids) * mask[..., None]
            return e.sum(axis=1) / jnp.maximum(mask.sum(axis=1, keepdims=True), 1.0)

        def encode_query(self, ids, mask):
            return self.query(self.pool(ids, mask))

        def encode_tool(self, ids, mask):
            return self.tool(self.pool(ids, mask))

    return Tower, DualEncoder


_PARAM_LINE = re.compile(r"Parameters?:\s*(.*)", re.S)


def card_views(name: str, text: str, rng: np.random.Generator, n: int) -> list[str]:
    """Pseudo-queries for one tool from its own card: name words, first sentence, parameter part,
    then random word subsets of the whole text (``n`` in all, at least the fixed ones that exist)."""
    first = re.split(r"(?<=[.!?])\s", text.strip(), maxsplit=1)[0]
    views = [name.replace("_", " "), first]
    m = _PARAM_LINE.search(text)
    if m and m.group(1).strip():
        views.append(m.group(1))
    toks = text.split()
    while len(views) < n and toks:
        keep = rng.random(len(toks)) < 0.4
        views.append(" ".join(t for t, k in zip(toks, keep) if k) or toks[int(rng.integers(len(toks)))])
    return views[:max(n, 1)]


@dataclasses.dataclass
class TrainedEncoder:
    """The trained model, its featuriser and training trace (``losses``: one per step)."""

    model: object
    featurizer: HashedFeaturizer
    config: EncoderConfig
    losses: tuple[float, ...]
    pairs: int

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._embed(texts, "query")

    def embed_tools(self, texts: Sequence[str]) -> np.ndarray:
        return self._embed(texts, "tool")

    def _embed(self, texts: Sequence[str], tower: str) -> np.ndarray:
        out = []
        fn = _encode_fn(tower)
        for start in range(0, len(texts), 1024):
            ids, mask = self.featurizer(list(texts[start:start + 1024]))
            out.append(np.asarray(fn(self.model, ids, mask)))
        return np.concatenate(out) if out else np.zeros((0, self.config.width), np.float32)


@functools.lru_cache(maxsize=2)
def _encode_fn(tower: str):
    from flax import nnx

    @nnx.jit
    def encode(model, ids, mask):
        return model.encode_query(ids, mask) if tower == "query" else model.encode_tool(ids, mask)
    return encode


def training_pairs(tool_names: Sequence[str], tool_texts: Sequence[str], pairs: Sequence[tuple[str, str]],
                   config: EncoderConfig) -> tuple[list[str], np.ndarray]:
    """(query texts, tool positions): the usage pairs first, then each tool's card views."""
    position = {n: i for i, n in enumerate(tool_names)}
    rng = np.random.default_rng(config.seed)
    queries, targets = [], []
    for text, tool in pairs:
        if tool in position:
            queries.append(text)
            targets.append(position[tool])
            toks = text.split()
            for _ in range(config.usage_views):  # the same question with words dropped: less template-bound
                keep = rng.random(len(toks)) < 0.6
                queries.append(" ".join(t for t, k in zip(toks, keep) if k) or text)
                targets.append(position[tool])
    for i, (n, t) in enumerate(zip(tool_names, tool_texts)):
        for v in card_views(n, t, rng, config.card_views):
            queries.append(v)
            targets.append(i)
    return queries, np.asarray(targets, dtype=np.int32)


def train_encoder(tool_names: Sequence[str], tool_texts: Sequence[str], pairs: Sequence[tuple[str, str]] = (),
                  config: EncoderConfig = EncoderConfig()) -> TrainedEncoder:
    """Trains the dual encoder (see the module docstring). ``pairs``: (question, tool name) usage
    records; names not among ``tool_names`` are skipped."""
    import jax
    import jax.numpy as jnp
    import optax
    from flax import nnx

    if len(tool_names) != len(tool_texts) or not tool_names:
        raise EncoderError(f"train_encoder needs one text per tool and at least one tool, got "
                           f"{len(tool_names)} names and {len(tool_texts)} texts")
    _, DualEncoder = _model_classes()
    feat = HashedFeaturizer(config.buckets, config.max_len, config.value_shapes)
    queries, targets = training_pairs(tool_names, tool_texts, pairs, config)
    q_ids, q_mask = feat(queries)
    t_ids, t_mask = feat(list(tool_texts))
    key = jax.random.key(config.seed)
    init_key, batch_key = jax.random.split(key)
    model = DualEncoder(config.buckets, config.width, nnx.Rngs(params=init_key))
    tx = optax.adamw(config.learning_rate, weight_decay=config.weight_decay)
    optimizer = nnx.Optimizer(model, tx, wrt=nnx.Param)
    graphdef, state = nnx.split((model, optimizer))
    data = tuple(jnp.asarray(a) for a in (q_ids, q_mask, targets, t_ids, t_mask))
    inv_t = 1.0 / config.temperature
    n = len(queries)
    batch = min(config.batch, n)

    keep = 1.0 - config.feature_dropout

    @jax.jit
    def step(state, k):
        m, opt = nnx.merge(graphdef, state)
        qi, qm, tg, ti, tm = data
        k_rows, k_drop = jax.random.split(k)
        rows = jax.random.choice(k_rows, n, (batch,), replace=False)
        tools = tg[rows]
        q_mask = qm[rows] * jax.random.bernoulli(k_drop, keep, qm[rows].shape) if keep < 1 else qm[rows]

        def loss_fn(m):
            q = m.encode_query(qi[rows], q_mask)
            t = m.encode_tool(ti[tools], tm[tools])
            logits = q @ t.T * inv_t
            pos = (tools[:, None] == tools[None, :]).astype(jnp.float32)
            log_p = jax.nn.log_softmax(logits, axis=-1)
            return -jnp.mean(jax.nn.logsumexp(jnp.where(pos > 0, log_p, -jnp.inf), axis=-1))

        loss, grads = nnx.value_and_grad(loss_fn)(m)
        opt.update(m, grads)
        return nnx.state((m, opt)), loss

    losses = []
    for k in jax.random.split(batch_key, config.steps):
        state, loss = step(state, k)
        losses.append(loss)
    model, _ = nnx.merge(graphdef, state)
    return TrainedEncoder(model, feat, config, tuple(float(x) for x in jax.device_get(losses)), n)


class EncoderRanker(_SubsetRanking):
    """Cosine of query and tool embeddings over the temperature (so its scale is comparable with
    BM25's and the usage prior keeps its weight); tool vectors computed once."""

    def __init__(self, encoder: TrainedEncoder, names: Sequence[str], texts: Sequence[str]):
        self.encoder = encoder
        self.names = tuple(names)
        self.position = {n: i for i, n in enumerate(self.names)}
        self.matrix = encoder.embed_tools(list(texts))
        if not np.isfinite(self.matrix).all():
            raise EncoderError("the encoder's tool vectors are not finite (training diverged)")
        self.scale = 1.0 / encoder.config.temperature

    @functools.lru_cache(maxsize=1 << 14)
    def _query(self, query: str) -> np.ndarray:
        return self.encoder.embed_queries([query])[0]

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Tool-tower vectors of any texts (e.g. a tree's summaries), comparable with queries."""
        return self.encoder.embed_tools(list(texts))

    def query_vector(self, query: str) -> np.ndarray:
        return self._query(query)

    def scores(self, query: str) -> np.ndarray:
        return (self.matrix @ self._query(query) * self.scale).astype(np.float32)


def member_seeds(seed: int, members: int) -> tuple[int, ...]:
    """Seeds of an ensemble's members, derived from one seed (NumPy's SeedSequence)."""
    return tuple(int(x) for x in np.random.SeedSequence(seed).generate_state(members) % (2 ** 31))


def train_ensemble(tool_names: Sequence[str], tool_texts: Sequence[str], pairs: Sequence[tuple[str, str]] = (),
                   config: EncoderConfig = EncoderConfig(), members: int = 3) -> "SumRanker":
    """The mean of ``members`` encoders trained with seeds derived from ``config.seed``: one small
    encoder's recall swings with its seed (measured on synthetic math's held-out wording: 0.60 to
    0.89 over three seeds), the mean of a few does not swing as much."""
    if isinstance(members, bool) or not isinstance(members, int) or members < 1:
        raise EncoderError(f"train_ensemble needs members >= 1, got {members!r}")
    rankers = [EncoderRanker(train_encoder(tool_names, tool_texts, pairs, dataclasses.replace(config, seed=s)),
                             tool_names, tool_texts) for s in member_seeds(config.seed, members)]
    return SumRanker([(r, 1.0 / members) for r in rankers])


class SumRanker(_SubsetRanking):
    """A weighted sum of rankers over the same names (e.g. BM25 plus the encoder)."""

    def __init__(self, parts: Sequence[tuple[_SubsetRanking, float]]):
        if not parts:
            raise EncoderError("SumRanker needs at least one part")
        self.names = parts[0][0].names
        if any(r.names != self.names for r, _ in parts):
            raise EncoderError("SumRanker parts must rank the same names")
        self.position = {n: i for i, n in enumerate(self.names)}
        self.parts = tuple(parts)

    def scores(self, query: str) -> np.ndarray:
        return sum(w * r.scores(query) for r, w in self.parts).astype(np.float32)


#: The encoder the usage-built rankers train (150 steps, 12 card views: chosen on synthetic math's validation split).
USAGE_ENCODER = EncoderConfig(steps=150, card_views=12)
#: The rankers :func:`add_usage_rankers` builds from the cards and a usage index, by the name the cascade's
#: ``CascadeConfig.ranker`` takes.
USAGE_RANKERS = ("encoder", "hybrid", "expanded", "expanded_hybrid")


def add_usage_rankers(index, usage, ranker: str, *, config: EncoderConfig = USAGE_ENCODER, members: int = 1,
                      weight: float = 1.0) -> dict:
    """Registers ``ranker`` on ``index`` (a :class:`~.cascade.RetrievalIndex`) with what it is built from:
    ``expanded`` (BM25 over each card followed by the words of the ``usage`` records that call the tool,
    :meth:`~.usage.UsageIndex.expanded_texts`), ``encoder`` (the mean of ``members`` dual encoders trained
    on the cards and the records' (question, tool) pairs, seeds derived from ``config.seed``), ``hybrid``
    (BM25 + encoder) and ``expanded_hybrid`` (expanded + encoder), the encoder at ``weight`` in each sum.
    One home for the planner's prompt (``retrieval.ranker``) and the retrieval bench, so both rank alike.
    Returns the encoder's facts (empty when ``ranker`` needs none; with one member also its training
    pairs and first and last loss)."""
    import time

    from cocoda_jax.retrieval.rankers import BM25Ranker

    if ranker not in USAGE_RANKERS:
        raise EncoderError(f"add_usage_rankers: ranker must be one of {USAGE_RANKERS}, got {ranker!r}")
    if ranker.startswith("expanded"):
        index.add_ranker("expanded", BM25Ranker(index.names, usage.expanded_texts(index.names, index.texts)))
    if ranker == "expanded":
        return {}
    t0 = time.perf_counter()
    pairs = tuple((r.question, n) for r in usage.records for n in sorted(r.tools))
    hits = _usage_encoder.cache_info().hits
    rk, single = _usage_encoder(tuple(index.names), tuple(index.texts), pairs, config, members)
    index.add_ranker("encoder", rk)
    index.add_ranker("hybrid", SumRanker([(index.bm25, 1.0), (rk, weight)]))
    if ranker == "expanded_hybrid":
        index.add_ranker("expanded_hybrid", SumRanker([(index.rankers["expanded"], 1.0), (rk, weight)]))
    return {"train_s": round(time.perf_counter() - t0, 1), "usage_pairs": len(pairs), "steps": config.steps,
            "card_views": config.card_views, "width": config.width, "buckets": config.buckets, "seed": config.seed,
            "members": members, "weight": weight,
            "value_shapes": config.value_shapes, "cached": _usage_encoder.cache_info().hits > hits, **single}


@functools.lru_cache(maxsize=4)
def _usage_encoder(names: tuple[str, ...], texts: tuple[str, ...], pairs: tuple[tuple[str, str], ...],
                   config: EncoderConfig, members: int) -> tuple[EncoderRanker | SumRanker, dict]:
    """The trained encoder ranker of :func:`add_usage_rankers` (and, with one member, its training
    facts), memoised on everything it is a function of: a run builds the prompts' index again for
    each library and demonstration set, and a pair it has seen (the incumbent's again after a
    refused round, an evaluation after training) must not pay the training twice."""
    if members > 1:
        return train_ensemble(names, texts, pairs, config, members), {}
    enc = train_encoder(names, texts, pairs, config)
    return EncoderRanker(enc, names, texts), {"pairs": enc.pairs, "loss_first": round(enc.losses[0], 4),
                                              "loss_last": round(enc.losses[-1], 4)}


__all__ = ["USAGE_ENCODER", "USAGE_RANKERS", "add_usage_rankers", "EncoderConfig", "EncoderError", "EncoderRanker",
           "HashedFeaturizer", "SumRanker", "TrainedEncoder", "card_views", "member_seeds", "train_encoder",
           "train_ensemble", "training_pairs"]

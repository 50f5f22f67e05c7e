"""The typed DAG retrieval cascade (the CoCoDA paper, §A.3 of the paper digest) as pure functions over a LibrarySnapshot.

    index = RetrievalIndex.build(snapshot)                       # derived, rebuildable, cached
    out = retrieve(index, subgoal, CascadeConfig(k=8))           # or retrieve_query(index, text, "float")
    out.selected, out.stages[i].survivors, out.stages[i].tokens, out.total_tokens

Nested survivor sets ``S0 ⊇ S1 ⊇ S2 ⊇ S3 ⊇ S4`` (S0 = the library):

* **L1** (symbolic, 0 tokens): type matching of the subgoal's signature against every tool through
  a :class:`~cocoda_jax.types.SignatureIndex`. Tools with the same :func:`shape_key` are
  interchangeable by type (a match's cost depends on types only), so the index holds one
  representative per shape and a lookup's answer is expanded to every tool of each matching shape:
  the same set as ``snapshot.signature_index.lookup(q, None, max_cost=...)``, with one match per
  shape instead of one per tool. A tool survives when its result fits and its cost is at most
  ``l1_max_cost`` (so :func:`~cocoda_jax.types.why_not` with that ``max_cost`` explains every tool
  that does not); at most ``l1_cap`` survive, chosen by L2's own zero-token, LM-free score (BM25
  index score minus the weighted L1 cost plus the weighted prior, then the name).
  With ``l1_mode="evidence"`` L1 instead prices what the question *supplies* against each tool
  with :func:`~cocoda_jax.types.fit`: optional parameters (those with defaults, read from the
  source) cost nothing when unfed, each stated value is a union of readings (``450`` is an ``int``
  or an id string), and ``str``/``bool``/``list[str]`` parameters can be filled from the words
  (:func:`~.literals.question_evidence`); one fit per (parameter types, required count, result),
  memoised per evidence. ``literal_weight`` adds, LM-free, that weight per enumerated value of a
  tool (its ``x in (...)`` pre-conditions) the question names.
* **L2** (reads one-line descriptions): the index's ranker ``ranker`` (default BM25, bm25s, over
  name + description; or one registered with :meth:`RetrievalIndex.add_ranker`, e.g. the dual
  encoder of :mod:`.encoder`, which the baselines then use too) ranks S1, minus
  ``l2_cost_weight`` x the L1 cost, plus ``dense_weight`` x the cosine of sentence embeddings when
  the index was built with a local encoder (``RetrievalIndex.build(snap, dense_model_dir=...)``),
  plus ``prior_weight`` x an optional LM-free prior per tool (``retrieve(..., prior=...)``: the
  usage votes of :mod:`.usage`); the top ``l2_shortlist`` are kept, then the DAG moves: *climb*
  adds a composite in S1 that calls at least ``climb_min`` shortlisted tools, *descend* adds the
  S1 children of a shortlisted composite; S2 is the best ``l2_keep`` of those. An LM ranker must
  read the one-line records of all of S1 to rank it: that is what L2 is charged.
* **L3** (reads specs): drops tools above ``complexity_bound``, tools whose result is looser than
  the subgoal wants (``strict_result``), and tools whose pre-conditions are false on the values the
  query supplies. Pre-conditions are untrusted code: they are evaluated only in the ``sandbox``
  given (one batch per retrieval, without library tools; a condition that raises counts as unknown
  and keeps the tool); with ``sandbox=None`` that check is skipped. The LM reads the specs of S2.
* **L4** (reads examples): re-ranks S3 by the L2 score plus ``l4_example_weight`` x how close the
  worked examples' argument values are to the query's values; ties go to the lower L1 cost, then
  the larger Phi (a composite that saves calls), then the name. S4 = the best ``k``. The LM reads
  up to ``l4_max_examples`` examples of each tool in S3. With ``l4_execute`` and a sandbox, each
  tool whose parameters the query all supplies is also run on those values (in the sandbox, with
  only the tools it needs), and one that raises, or whose result breaks its own post-conditions, is
  dropped, as is one whose result breaks an expectation the subgoal states (``Subgoal.expect``,
  e.g. ``result >= 0``); post-conditions need a result, so they are checked here rather than in L3.
* **cards**: the final cards of S4 (and, with ``with_children``, of each selected composite's direct
  children, as the paper's release does) go into the planner's prompt.

``l3=False`` / ``l4=False`` switch those stages off (no filter, no re-ranking, nothing read): the
per-stage ablation. Which stages count as read by an LM is ``lm_stages`` (default all three: the paper's setting); a
stage not listed runs its mechanical check and shows nothing. The final cards are always counted.
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Any, Mapping, Sequence

import numpy as np

from cocoda_jax.library import LibrarySnapshot, shape_key
from cocoda_jax.retrieval.rankers import BM25Ranker, DenseRanker
from cocoda_jax.retrieval.subgoals import Subgoal, extract_subgoal
from cocoda_jax.retrieval.tokens import (
    Ledger, TokenCounter, default_counter, render_card, render_examples, render_line, render_spec,
)
from cocoda_jax.retrieval.literals import enum_literals, literal_hits, question_evidence
from cocoda_jax.types import (
    Evidence, EvidenceCosts, Fit, MatchCosts, Param, Signature, SignatureIndex, Type, accepts, fit,
)

_COMPLEXITY_ORDER = ("O(1)", "O(log n)", "O(n)", "O(rows)", "O(n log n)", "O(n^2)", "O(n^3)", "O(2^n)")


def complexity_rank(note: str | None) -> int | None:
    """Position of a complexity note in :data:`_COMPLEXITY_ORDER` (``O(rows)`` counts as linear);
    ``None`` when it is absent or not one of those."""
    if not note:
        return None
    text = note.strip().replace(" ", "").replace("**", "^")
    for i, c in enumerate(_COMPLEXITY_ORDER):
        if text == c.replace(" ", ""):
            return i if c != "O(rows)" else _COMPLEXITY_ORDER.index("O(n)")
    return None


L1_MODES = ("signature", "evidence")


@dataclasses.dataclass(frozen=True)
class CascadeConfig:
    k: int = 8
    l1_cap: int = 500
    l1_max_cost: float = 1.5
    l2_shortlist: int = 10
    l2_keep: int = 12
    l2_cost_weight: float = 1.0
    dense_weight: float = 0.0
    prior_weight: float = 1.0
    climb: bool = True
    climb_min: int = 2
    descend: bool = True
    complexity_bound: str | None = None
    strict_result: bool = False
    l4_max_examples: int = 1
    l4_example_weight: float = 0.5
    l4_execute: bool = False
    with_children: bool = False
    lm_stages: tuple[str, ...] = ("L2", "L3", "L4")
    sandbox_timeout_s: float = 5.0
    ranker: str = "bm25"
    l1_mode: str = "signature"
    evidence_extra: float = 0.5
    evidence_inferred: float = 0.2
    literal_weight: float = 0.0
    l3: bool = True
    l4: bool = True

    def __post_init__(self):
        for field in ("k", "l1_cap", "l2_shortlist", "l2_keep", "climb_min"):
            v = getattr(self, field)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"CascadeConfig.{field} must be an int >= 1, got {v!r}")
        if self.l4_max_examples < 0:
            raise ValueError("CascadeConfig.l4_max_examples must be >= 0")
        if not self.l1_max_cost >= 0:
            raise ValueError(f"CascadeConfig.l1_max_cost must be >= 0, got {self.l1_max_cost!r}")
        bad = set(self.lm_stages) - {"L2", "L3", "L4"}
        if bad:
            raise ValueError(f"CascadeConfig.lm_stages: unknown stage(s) {sorted(bad)}")
        if self.l1_mode not in L1_MODES:
            raise ValueError(f"CascadeConfig.l1_mode must be one of {L1_MODES}, got {self.l1_mode!r}")
        for field in ("evidence_extra", "evidence_inferred"):
            if not getattr(self, field) >= 0:
                raise ValueError(f"CascadeConfig.{field} must be >= 0, got {getattr(self, field)!r}")
        if self.complexity_bound is not None and complexity_rank(self.complexity_bound) is None:
            raise ValueError(f"CascadeConfig.complexity_bound {self.complexity_bound!r} is not one of "
                             f"{_COMPLEXITY_ORDER}")


@dataclasses.dataclass(frozen=True)
class StageReport:
    stage: str
    survivors: tuple[str, ...]
    tokens: int
    records: int
    seconds: float


@dataclasses.dataclass(frozen=True)
class Retrieval:
    """What a method returns: the final ``selected`` tools (best first), the extra ``children``
    cards, per-stage reports and the total prompt tokens (every stage plus the final cards)."""

    method: str
    selected: tuple[str, ...]
    children: tuple[str, ...]
    stages: tuple[StageReport, ...]
    total_tokens: int
    seconds: float
    ledger: Ledger | None = None

    def stage(self, name: str) -> StageReport:
        for s in self.stages:
            if s.stage == name:
                return s
        raise KeyError(name)


class RetrievalIndex:
    """Everything derived from one snapshot that retrieval reads: a BM25 index over name +
    description, the per-shape signature index, and cached token counts of each tool's records.
    Deterministic in the snapshot; build it once per snapshot."""

    def __init__(self, snapshot: LibrarySnapshot, counter: TokenCounter | None = None,
                 dense_model_dir: str | None = None):
        self.snapshot = snapshot
        self.counter = counter or default_counter()
        self.names = snapshot.names()  # sorted: position order is name order
        self.position = {n: i for i, n in enumerate(self.names)}
        tools = [snapshot.tool(n) for n in self.names]
        texts = [f"{n.replace('_', ' ')} {t.description}" for n, t in zip(self.names, tools)]
        self.bm25 = BM25Ranker(self.names, texts)
        self.dense = DenseRanker(dense_model_dir, self.names, texts) if dense_model_dir else None
        shapes: dict[str, list[int]] = {}
        reps: dict[str, Any] = {}
        self.shape_key_of: list[str] = []
        for i, (n, t) in enumerate(zip(self.names, tools)):
            key = shape_key(t.signature)
            self.shape_key_of.append(key)
            if key not in shapes:
                shapes[key] = []
                reps[f"s{len(reps)}"] = (key, t.signature)
            shapes[key].append(i)
        self._shape_of_rep = {r: key for r, (key, _) in reps.items()}
        self.shape_members = {k: np.asarray(v, dtype=np.int64) for k, v in shapes.items()}
        self.shape_index = SignatureIndex.build({r: sig for r, (_, sig) in reps.items()})
        self._card_tokens: dict[str, int] = {}
        self.texts = tuple(texts)
        self.rankers: dict[str, Any] = {"bm25": self.bm25}
        self.required = tuple(required_params(t) for t in tools)
        groups: dict[tuple, list[int]] = {}
        for i, (t, r) in enumerate(zip(tools, self.required)):
            groups.setdefault((t.signature.param_types, r, t.signature.result), []).append(i)
        self.evidence_key_of: list[tuple] = [()] * len(self.names)
        for key, members in groups.items():
            for i in members:
                self.evidence_key_of[i] = key
        self.evidence_members = {k: np.asarray(v, dtype=np.int64) for k, v in groups.items()}
        self.literals = tuple(enum_literals(t) for t in tools)
        self._fits: dict[tuple, Any] = {}

    @classmethod
    def build(cls, snapshot: LibrarySnapshot, counter: TokenCounter | None = None,
              dense_model_dir: str | None = None) -> "RetrievalIndex":
        """``dense_model_dir``: a local sentence-encoder directory for the optional dense L2 ranker."""
        return cls(snapshot, counter, dense_model_dir)

    def tool(self, name: str):
        return self.snapshot.tool(name)

    def add_ranker(self, name: str, ranker: Any) -> None:
        """Registers a text ranker (``.scores(text)`` aligned with :attr:`names`) that L2 and the
        baselines select by name (``CascadeConfig.ranker``), so every method ranks alike."""
        if tuple(ranker.names) != tuple(self.names):
            raise ValueError(f"ranker {name!r} ranks other tools than this index")
        self.rankers[name] = ranker

    def ranker(self, name: str) -> Any:
        try:
            return self.rankers[name]
        except KeyError:
            raise ValueError(f"no ranker {name!r} on this index (have {sorted(self.rankers)}); "
                             f"register it with add_ranker") from None

    def l1_evidence(self, evidence: Evidence, max_cost: float, costs: EvidenceCosts
                    ) -> tuple[np.ndarray, np.ndarray, dict[tuple, Fit]]:
        """The optional-aware L1 (:func:`~cocoda_jax.types.fit`): (positions, costs, evidence key ->
        Fit) of every tool whose fit costs at most ``max_cost``; one fit per (parameter types,
        required count, result), memoised per evidence."""
        by_key: dict[tuple, Fit] = {}
        for key in self.evidence_members:
            memo = (evidence, costs, key)
            found = self._fits.get(memo, False)
            if found is False:
                types, required, result = key
                found = fit(evidence, Signature(tuple(Param("", t) for t in types), result), required, costs)
                if len(self._fits) > 2_000_000:
                    self._fits.clear()
                self._fits[memo] = found
            if found is not None and found.cost <= max_cost:
                by_key[key] = found
        if not by_key:
            return np.zeros(0, dtype=np.int64), np.zeros(0), by_key
        idx = np.concatenate([self.evidence_members[k] for k in by_key])
        cost = np.concatenate([np.full(len(self.evidence_members[k]), f.cost) for k, f in by_key.items()])
        return idx, cost, by_key

    def literal_vector(self, text: str, weight: float) -> np.ndarray:
        """``weight x`` the number of each tool's enumerated values the text names (0 without)."""
        out = np.zeros(len(self.names))
        if weight:
            for i, lits in enumerate(self.literals):
                if lits:
                    out[i] = weight * literal_hits(lits, text)
        return out

    def prior_vector(self, prior: Mapping[str, float] | None, weight: float) -> np.ndarray:
        """``weight x prior`` per tool position (0 where the prior is silent or names no tool here)."""
        out = np.zeros(len(self.names))
        for n, v in (prior or {}).items():
            if n in self.position:
                out[self.position[n]] = weight * float(v)
        return out

    def l1(self, query_sig, max_cost: float) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
        """(tool positions, costs, shape key -> Match) of every tool whose signature matches with
        cost <= max_cost; a Match's ``sources`` hold for every tool of its shape."""
        found = self.shape_index.lookup(query_sig, None, max_cost=max_cost)
        by_key = {self._shape_of_rep[r]: m for r, m in found}
        if not found:
            return np.zeros(0, dtype=np.int64), np.zeros(0), by_key
        idx = np.concatenate([self.shape_members[k] for k in by_key])
        cost = np.concatenate([np.full(len(self.shape_members[k]), m.cost) for k, m in by_key.items()])
        return idx, cost, by_key


def required_params(tool: Any) -> int:
    """How many of a tool's parameters have no default (read from its source; all when unreadable)."""
    import ast

    arity = len(tool.signature.params)
    try:
        tree = ast.parse(tool.source)
    except SyntaxError:
        return arity
    fns = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == tool.name]
    if not fns:
        return arity
    a = fns[-1].args
    positional = a.posonlyargs + a.args
    required = len(positional) - len(a.defaults)
    required += sum(d is None for d in a.kw_defaults)
    return max(0, min(arity, required))


def _value_closeness(a: Any, b: Any) -> float:
    """1 for equal values, towards 0 as they differ (numbers by log-magnitude, sizes for containers)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return float(a == b)
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        la, lb = math.log1p(abs(float(a))), math.log1p(abs(float(b)))
        return 1.0 / (1.0 + abs(la - lb)) * (1.0 if (a >= 0) == (b >= 0) else 0.5)
    if isinstance(a, str) and isinstance(b, str):
        return 1.0 if a == b else 1.0 / (1.0 + abs(math.log1p(len(a)) - math.log1p(len(b))))
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return 1.0 / (1.0 + abs(len(a) - len(b)))
    if isinstance(a, dict) and isinstance(b, dict):
        return 1.0 if set(a) == set(b) else 0.5
    return 0.0


def example_agreement(tool: Any, sources: Sequence[int | None], values: Sequence[Any] | None) -> float:
    """How close the tool's example arguments are to the query's values (0..1; 0 without either)."""
    if not values or not tool.examples:
        return 0.0
    params = tool.param_names
    best = 0.0
    for args, _ in tool.examples:
        scores = [_value_closeness(args[p], values[src]) for p, src in zip(params, sources) if src is not None]
        if scores:
            best = max(best, sum(scores) / len(params))
    return best


_PRE_PROGRAM = "_r = []\n{checks}answer = _r\n"
_PRE_CHECK = "try:\n    _r.append(bool({cond}))\nexcept Exception:\n    _r.append(None)\n"


def pre_condition_verdicts(index: RetrievalIndex, names: Sequence[str], sources: Mapping[str, tuple],
                           values: Sequence[Any] | None, sandbox: Any, timeout_s: float) -> dict[str, bool | None]:
    """Per tool: False when a pre-condition is false on the query's values, True when all hold,
    None when unknown (no sandbox, no values, an argument not supplied, a condition that raised or
    a run that failed). Conditions run only in ``sandbox``."""
    verdicts: dict[str, bool | None] = {n: None for n in names}
    if sandbox is None or values is None:
        return verdicts
    programs, inputs, owners = [], [], []
    for n in names:
        tool = index.tool(n)
        srcs = sources[n]
        if not tool.pre or any(s is None for s in srcs):
            continue
        checks = "".join(_PRE_CHECK.format(cond=c) for c in tool.pre)
        programs.append(_PRE_PROGRAM.format(checks=checks))
        inputs.append({p: values[s] for p, s in zip(tool.param_names, srcs)})
        owners.append(n)
    if not programs:
        return verdicts
    results = sandbox.run_many(programs, (), timeout_s, inputs=inputs)
    for n, r in zip(owners, results):
        if r.ok and isinstance(r.value, (list, tuple)):
            if any(v is False for v in r.value):
                verdicts[n] = False
            elif all(v is True for v in r.value):
                verdicts[n] = True
    return verdicts


def execution_failures(index: RetrievalIndex, names: Sequence[str], sources: Mapping[str, tuple],
                       values: Sequence[Any] | None, sandbox: Any, timeout_s: float,
                       expect: Sequence[str] = ()) -> set[str]:
    """Tools (of ``names``) that, called in ``sandbox`` on the query's values, raise or return a result
    that breaks one of their own post-conditions or one of the subgoal's ``expect`` expressions. Only tools whose every parameter the query supplies
    are run; the sandbox receives just those tools and what they call, in topological order. Empty
    without a sandbox or values."""
    if sandbox is None or values is None:
        return set()
    snap = index.snapshot
    runnable = [n for n in names if sources[n] and all(s is not None for s in sources[n])
                and "result" not in snap.tool(n).param_names]
    if not runnable:
        return set()
    needed = set(runnable)
    for n in runnable:
        needed |= snap.descendants(n)
    library = [snap.tool(n).source for n in sorted(needed, key=lambda n: (snap.depth(n), n))]
    programs, inputs = [], []
    for n in runnable:
        tool = snap.tool(n)
        checks = "".join(_PRE_CHECK.format(cond=c) for c in (*tool.post, *expect))
        programs.append(f"result = {n}({', '.join(tool.param_names)})\n" + _PRE_PROGRAM.format(checks=checks))
        inputs.append({p: values[s] for p, s in zip(tool.param_names, sources[n])})
    results = sandbox.run_many(programs, library, timeout_s, inputs=inputs)
    failed = set()
    for n, r in zip(runnable, results):
        if not r.ok and r.error is not None and r.error.kind == "runtime":
            failed.add(n)
        elif r.ok and isinstance(r.value, (list, tuple)) and any(v is False for v in r.value):
            failed.add(n)
    return failed


def evidence_costs(config: CascadeConfig) -> EvidenceCosts:
    """The optional-aware L1's prices under ``config`` (the match's, with its unused-value price)."""
    return EvidenceCosts(MatchCosts(extra=config.evidence_extra), inferred=config.evidence_inferred)


def retrieve(index: RetrievalIndex, subgoal: Subgoal, config: CascadeConfig = CascadeConfig(), *,
             sandbox: Any = None, keep_text: bool = False, prior: Mapping[str, float] | None = None,
             evidence: Evidence | None = None) -> Retrieval:
    """Runs the four stages for one subgoal (see the module docstring). ``prior``: an LM-free score
    per tool (e.g. :meth:`~.usage.UsageIndex.votes`), added to L2 with ``prior_weight``.
    ``evidence``: what the question supplies, for ``l1_mode="evidence"`` (default: read from the
    subgoal by :func:`~.literals.question_evidence`)."""
    t_start = time.perf_counter()
    ledger = Ledger(index.counter, keep_text=keep_text)
    snap = index.snapshot
    stages: list[StageReport] = []
    names = index.names
    query_sig = subgoal.signature

    # L1 ------------------------------------------------------------------------------------------
    t0 = time.perf_counter()
    text_scores = index.ranker(config.ranker).scores(subgoal.description)
    prior_scores = index.prior_vector(prior, config.prior_weight)
    if config.literal_weight:
        prior_scores = prior_scores + index.literal_vector(subgoal.description, config.literal_weight)
    if config.l1_mode == "evidence":
        ev = evidence if evidence is not None else question_evidence(subgoal)
        idx, cost, shape_matches = index.l1_evidence(ev, config.l1_max_cost, evidence_costs(config))
        key_of = index.evidence_key_of
        n_values = len(subgoal.values) if subgoal.values is not None else 0
    else:
        idx, cost, shape_matches = index.l1(query_sig, config.l1_max_cost)
        key_of = index.shape_key_of
        n_values = None
    if idx.size > config.l1_cap:  # keep the best by L2's own LM-free score (text - cost + prior)
        key = text_scores[idx] - config.l2_cost_weight * cost + prior_scores[idx]
        order = np.lexsort((idx, -key))[: config.l1_cap]
        idx, cost = idx[order], cost[order]
    s1 = {names[i]: float(c) for i, c in zip(idx.tolist(), cost.tolist())}
    stages.append(StageReport("L1", tuple(sorted(s1)), 0, 0, time.perf_counter() - t0))

    # L2 ------------------------------------------------------------------------------------------
    t0 = time.perf_counter()
    score = {n: float(text_scores[index.position[n]] + prior_scores[index.position[n]]) - config.l2_cost_weight * c
             for n, c in s1.items()}
    if config.dense_weight and s1:
        if index.dense is None:
            raise ValueError("CascadeConfig.dense_weight is set but the RetrievalIndex has no dense ranker "
                             "(build it with dense_model_dir=...)")
        dense = index.dense.scores(subgoal.description)
        for n in score:
            score[n] += config.dense_weight * float(dense[index.position[n]])
    ranked = sorted(s1, key=lambda n: (-score[n], n))
    shortlist = ranked[: config.l2_shortlist]
    pool = dict.fromkeys(shortlist)
    if config.climb:
        counts: dict[str, int] = {}
        for n in shortlist:
            for p in snap.parents(n):
                counts[p] = counts.get(p, 0) + 1
        for p in sorted(counts):
            if counts[p] >= config.climb_min and p in s1:
                pool[p] = None
                best_child = max(score[c] for c in set(snap.children(p)) if c in score and c in shortlist)
                score[p] = max(score[p], best_child + 1e-3)
    if config.descend:
        for n in shortlist:
            for c in dict.fromkeys(snap.children(n)):
                if c in s1:
                    pool[c] = None
    s2 = sorted(pool, key=lambda n: (-score[n], n))[: config.l2_keep]
    if "L2" in config.lm_stages:  # an LM ranker reads the one-liners of every L1 survivor to rank them
        ledger.record("L2", [render_line(index.tool(n)) for n in ranked])
    stages.append(StageReport("L2", tuple(sorted(s2)), ledger.tokens.get("L2", 0), ledger.records.get("L2", 0),
                              time.perf_counter() - t0))

    # L3 ------------------------------------------------------------------------------------------
    t0 = time.perf_counter()
    if "L3" in config.lm_stages and config.l3:
        ledger.record("L3", [render_spec(index.tool(n)) for n in s2])
    sources = {n: shape_matches[key_of[index.position[n]]].sources for n in s2}
    if n_values is not None:  # evidence beyond the subgoal's values (file names) has no value to test
        sources = {n: tuple(s if s is not None and s < n_values else None for s in src) for n, src in sources.items()}
    bound = complexity_rank(config.complexity_bound) if config.complexity_bound else None
    verdicts = pre_condition_verdicts(index, s2, sources, subgoal.values, sandbox, config.sandbox_timeout_s) \
        if config.l3 else {n: None for n in s2}
    s3 = []
    for n in s2:
        if not config.l3:
            s3.append(n)
            continue
        tool = index.tool(n)
        if bound is not None:
            r = complexity_rank(tool.complexity)
            if r is not None and r > bound:
                continue
        if config.strict_result and accepts(subgoal.output, tool.signature.result) is None:
            continue
        if config.strict_result and not _result_exact(subgoal.output, tool.signature.result):
            continue
        if verdicts[n] is False:
            continue
        s3.append(n)
    stages.append(StageReport("L3", tuple(sorted(s3)), ledger.tokens.get("L3", 0), ledger.records.get("L3", 0),
                              time.perf_counter() - t0))

    # L4 ------------------------------------------------------------------------------------------
    t0 = time.perf_counter()
    if "L4" in config.lm_stages and config.l4_max_examples and config.l4:
        texts = [render_examples(index.tool(n), config.l4_max_examples) for n in s3]
        ledger.record("L4", [t for t in texts if t])
    if config.l4_execute and config.l4:
        failed = execution_failures(index, s3, sources, subgoal.values, sandbox, config.sandbox_timeout_s,
                                    subgoal.expect)
        s3_kept = [n for n in s3 if n not in failed]
    else:
        s3_kept = s3
    l4_weight = config.l4_example_weight if config.l4 else 0.0
    final_score = {n: score[n] + (l4_weight * example_agreement(index.tool(n), sources[n], subgoal.values)
                                  if l4_weight else 0.0) for n in s3_kept}
    s4 = sorted(s3_kept, key=lambda n: (-round(final_score[n], 9), s1[n], -snap.phi(n), n))[: config.k]
    stages.append(StageReport("L4", tuple(sorted(s4)), ledger.tokens.get("L4", 0), ledger.records.get("L4", 0),
                              time.perf_counter() - t0))

    # final cards ---------------------------------------------------------------------------------
    t0 = time.perf_counter()
    children: list[str] = []
    if config.with_children:
        for n in s4:
            for c in dict.fromkeys(snap.children(n)):
                if c not in s4 and c not in children:
                    children.append(c)
    ledger.record("cards", [render_card(index.tool(n)) for n in (*s4, *children)])
    stages.append(StageReport("cards", tuple(s4) + tuple(children), ledger.tokens["cards"], ledger.records["cards"],
                              time.perf_counter() - t0))
    return Retrieval("typed_dag", tuple(s4), tuple(children), tuple(stages), ledger.total,
                     time.perf_counter() - t_start, ledger if keep_text else None)


def _result_exact(wanted: Type, got: Type) -> bool:
    """The tool's result serves the subgoal without widening it to Any or a bare type variable."""
    from cocoda_jax.types import TCon
    return isinstance(got, TCon) or not isinstance(wanted, TCon)


def retrieve_query(index: RetrievalIndex, query: str, answer_type: str | Type,
                   config: CascadeConfig = CascadeConfig(), **kwargs) -> Retrieval:
    """:func:`retrieve` on the deterministic subgoal of ``query`` (see :func:`extract_subgoal`)."""
    return retrieve(index, extract_subgoal(query, answer_type), config, **kwargs)


def retrieve_many(index: RetrievalIndex, subgoals: Sequence[Subgoal], config: CascadeConfig = CascadeConfig(),
                  **kwargs) -> Retrieval:
    """One retrieval per subgoal (e.g. a planner's JSON), merged: the final ``k`` are taken round-robin
    over the subgoals' rankings (duplicates once); stage reports and tokens are summed over subgoals,
    and the final cards are counted once for the merged set."""
    if not subgoals:
        raise ValueError("retrieve_many needs at least one subgoal")
    t0 = time.perf_counter()
    parts = [retrieve(index, s, config, **kwargs) for s in subgoals]
    merged: list[str] = []
    rank = 0
    while len(merged) < config.k and any(rank < len(p.selected) for p in parts):
        for p in parts:
            if rank < len(p.selected) and p.selected[rank] not in merged and len(merged) < config.k:
                merged.append(p.selected[rank])
        rank += 1
    children: list[str] = []
    if config.with_children:
        for n in merged:
            for c in dict.fromkeys(index.snapshot.children(n)):
                if c not in merged and c not in children:
                    children.append(c)
    ledger = Ledger(index.counter)
    ledger.record("cards", [render_card(index.tool(n)) for n in (*merged, *children)])
    stages = []
    for name in ("L1", "L2", "L3", "L4"):
        rs = [p.stage(name) for p in parts]
        surv = tuple(sorted(set().union(*(r.survivors for r in rs))))
        stages.append(StageReport(name, surv, sum(r.tokens for r in rs), sum(r.records for r in rs),
                                  sum(r.seconds for r in rs)))
    stages.append(StageReport("cards", tuple(merged) + tuple(children), ledger.tokens["cards"],
                              ledger.records["cards"], 0.0))
    total = sum(s.tokens for s in stages)
    return Retrieval("typed_dag", tuple(merged), tuple(children), tuple(stages), total, time.perf_counter() - t0)

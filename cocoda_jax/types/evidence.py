"""Matching what a question *supplies* against a tool's signature, aware of optional parameters.

:func:`~cocoda_jax.types.match` prices a query signature against a candidate as if every parameter
had to be fed. Real tools (BFCL's docs, Python functions with defaults) have optional parameters,
and a question states only some values: charging every unfed optional parameter as missing makes
L1 refuse the right tool (a finite cost bound lost recall on BFCL). :func:`fit` prices instead:

* the *required* parameters (the first ``required`` of the signature: Python and the BFCL
  converter put parameters without defaults first); an unfed optional parameter costs
  ``optional_missing`` (0 by default), so adding an optional parameter never removes a fit;
* query arguments that are *unions* of readings (:class:`Arg`): ``450`` may be an ``int``, a
  ``float`` or an id written as a ``str``; each reading carries its own price, and a pair is priced
  by its cheapest reading that the parameter accepts;
* types the question's words can always supply (:attr:`Evidence.free`, e.g. ``str`` for a city
  named in plain words, ``bool`` for a stated preference): a required parameter of such a type that
  no argument feeds costs ``inferred`` instead of ``missing``.

The price of a fed pair is the one :func:`~cocoda_jax.types.match` charges (coercions, generality,
specialisation); unused arguments cost ``extra``; the assignment is the Hungarian one of
:mod:`.match` with a per-parameter saving, then checked with one shared substitution. A result
that does not fit the evidence's result gives ``None``, as in :func:`~cocoda_jax.types.match`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from cocoda_jax.errors import CocodaError
from cocoda_jax.types.match import (
    CANDIDATE_PREFIX, DEFAULT_COSTS, QUERY_PREFIX, MatchCosts, _notes_cost, hungarian, prepare,
)
from cocoda_jax.types.terms import ANY, BOOL, STR, Param, Signature, TCon, Type
from cocoda_jax.types.unify import _Solver, rename_vars


class EvidenceError(CocodaError, ValueError):
    """Malformed evidence or an impossible ``required`` count."""


@dataclass(frozen=True, slots=True)
class EvidenceCosts:
    """Prices of :func:`fit` beyond :class:`~cocoda_jax.types.MatchCosts` (all >= 0)."""

    types: MatchCosts = DEFAULT_COSTS
    optional_missing: float = 0.0
    inferred: float = 0.2

    def __post_init__(self):
        for name in ("optional_missing", "inferred"):
            if not getattr(self, name) >= 0:
                raise EvidenceError(f"EvidenceCosts.{name} must be >= 0, got {getattr(self, name)!r}")


DEFAULT_EVIDENCE_COSTS = EvidenceCosts()


@dataclass(frozen=True, slots=True)
class Arg:
    """One value a question states, as a union of readings: ``types[r]`` at extra price ``prices[r]``."""

    types: tuple[Type, ...]
    prices: tuple[float, ...] = ()

    def __post_init__(self):
        if not self.types:
            raise EvidenceError("Arg needs at least one type")
        if self.prices and len(self.prices) != len(self.types):
            raise EvidenceError(f"Arg: {len(self.prices)} prices for {len(self.types)} types")
        if any(not p >= 0 for p in self.prices):
            raise EvidenceError(f"Arg prices must be >= 0, got {self.prices!r}")

    def price(self, r: int) -> float:
        return self.prices[r] if self.prices else 0.0


@dataclass(frozen=True, slots=True)
class Evidence:
    """What a question supplies: its stated values (in order), the types its words can always supply
    and the result it wants (``Any``: the question does not say)."""

    args: tuple[Arg, ...] = ()
    free: tuple[Type, ...] = (STR, BOOL)
    result: Type = ANY

    @classmethod
    def of_types(cls, types: Sequence[Type], free: Sequence[Type] = (), result: Type = ANY) -> "Evidence":
        """Plain evidence: one reading per argument, nothing free."""
        return cls(tuple(Arg((t,)) for t in types), tuple(free), result)


@dataclass(frozen=True, slots=True)
class Fit:
    """``cost`` of the best assignment; ``sources[j]``: the argument feeding parameter ``j``, ``None``
    when unfed; ``inferred[j]``: fed from the question's words (a free type)."""

    cost: float
    sources: tuple[int | None, ...]
    inferred: tuple[bool, ...]


_BIG = 1e9
_TIE = 1e-6


def _accepts_price(expected: Type, actual: Type, costs: MatchCosts) -> float | None:
    solver = _Solver(None, True)
    if not solver.accepts(expected, actual):
        return None
    return _notes_cost(solver.notes, False, costs)


def _free_fits(t: Type, free: Sequence[Type]) -> bool:
    """A parameter the question's words can fill: its type (or the inner type of an Optional)
    accepts one of the free types (``Any`` parameters count: they take a word)."""
    if isinstance(t, TCon) and t.name == "Optional":
        t = t.args[0]
    for f in free:
        solver = _Solver(None, True)
        if solver.accepts(t, f) and not any(note[0] == "coerce" for note in solver.notes):
            return True  # no widening: a word is not a number because bool <: int
    return False


def fit(evidence: Evidence, signature: Signature, required: int | None = None,
        costs: EvidenceCosts = DEFAULT_EVIDENCE_COSTS) -> Fit | None:
    """How well ``evidence`` can call ``signature`` (see the module docstring). ``required``: how
    many leading parameters have no default (``None``: all)."""
    if not isinstance(evidence, Evidence):
        raise EvidenceError(f"fit expects Evidence, got {type(evidence).__name__}")
    if not isinstance(signature, Signature):
        raise EvidenceError(f"fit expects a Signature, got {type(signature).__name__}")
    m = signature.arity
    required = m if required is None else required
    if isinstance(required, bool) or not isinstance(required, int) or not 0 <= required <= m:
        raise EvidenceError(f"required must be an int in [0, {m}], got {required!r}")
    tc = costs.types
    cand = prepare(signature, CANDIDATE_PREFIX)
    result_solver = _Solver(None, True)
    if not result_solver.accepts(rename_vars(evidence.result, QUERY_PREFIX), cand.result):
        return None
    result_cost = _notes_cost(result_solver.notes, True, tc)
    readings = [[(rename_vars(t, QUERY_PREFIX), a.price(r)) for r, t in enumerate(a.types)] for a in evidence.args]
    n = len(readings)
    unfed = []
    can_infer = []
    for j, ct in enumerate(cand.types):
        if j >= required:
            unfed.append(costs.optional_missing)
            can_infer.append(False)
        elif _free_fits(ct, evidence.free):
            unfed.append(min(tc.missing, costs.inferred))
            can_infer.append(costs.inferred < tc.missing)
        else:
            unfed.append(tc.missing)
            can_infer.append(False)
    # pair[i][j]: (price, reading) of feeding parameter j from argument i
    pair: list[list[tuple[float, int] | None]] = [[None] * m for _ in range(n)]
    for i, reads in enumerate(readings):
        for j, ct in enumerate(cand.types):
            best = None
            for r, (qt, extra_price) in enumerate(reads):
                p = _accepts_price(ct, qt, tc)
                if p is not None and (best is None or p + extra_price < best[0]):
                    best = (p + extra_price, r)
            pair[i][j] = best
    while True:
        assigned = _assign(pair, unfed, tc.extra, n, m)
        joint = _Solver(None, True)
        joint.accepts(rename_vars(evidence.result, QUERY_PREFIX), cand.result)
        conflict = None
        for i, j in assigned.items():
            r = pair[i][j][1]
            if not joint.accepts(cand.types[j], readings[i][r][0]):
                conflict = (i, j)
                break
        if conflict is None:
            break
        pair[conflict[0]][conflict[1]] = None
    total = result_cost
    sources: list[int | None] = [None] * m
    for i, j in assigned.items():
        total += pair[i][j][0]
        sources[j] = i
    inferred = []
    for j in range(m):
        fed = sources[j] is not None
        if not fed:
            total += unfed[j]
        inferred.append(not fed and can_infer[j])
    total += (n - len(assigned)) * tc.extra
    return Fit(round(total, 9), tuple(sources), tuple(inferred))


def _assign(pair, unfed: Sequence[float], extra: float, n: int, m: int) -> dict[int, int]:
    """Argument -> parameter minimising pair prices + unfed prices + unused-argument prices."""
    rows = [i for i in range(n) if any(p is not None for p in pair[i])]
    if not rows or m == 0:
        return {}
    mat = []
    for i in rows:
        line = [_BIG if pair[i][j] is None else pair[i][j][0] - unfed[j] - extra + _TIE * abs(i - j) for j in range(m)]
        mat.append(line + [0.0] * len(rows))
    sol = hungarian(mat)
    return {rows[a]: b for a, b in enumerate(sol)
            if b < m and pair[rows[a]][b] is not None and pair[rows[a]][b][0] - unfed[b] - extra < 0}


def required_signature(signature: Signature, required: int) -> Signature:
    """The signature cut to its first ``required`` parameters (what a call must supply)."""
    return Signature(tuple(Param(p.name, p.type) for p in signature.params[:required]), signature.result)


__all__ = ["Arg", "DEFAULT_EVIDENCE_COSTS", "Evidence", "EvidenceCosts", "EvidenceError", "Fit", "fit",
           "required_signature"]

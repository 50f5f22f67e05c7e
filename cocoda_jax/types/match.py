"""Hoogle-style partial matching of a query signature against a candidate, with explained costs.

A *query* ``(int, list[float]) -> float`` says: "I have an ``int`` and a ``list[float]`` and want a
``float``". A candidate matches when its result can be used as the query's result
(``accepts(query.result, candidate.result)``); everything else is a cost, never a refusal, so a
ranking can show near misses. The cost is a sum of the items below (:class:`MatchCosts` defaults):

==============  =====  ==========================================================================
item            cost   when
==============  =====  ==========================================================================
exact             0    a query argument feeds a candidate parameter of the same type (up to
                       renaming type variables)
coercion         0.3   each compatibility rule used: ``int -> float``, ``T -> Optional[T]``,
                       ``tuple[A, B] -> tuple[T, ...]``
more general     0.2   each candidate type variable bound to a concrete type, or a candidate
                       ``Any`` (the tool is generic; it fits, but says less about the task)
more specific    0.6   each *query* type variable bound to a concrete type (the query asked for
                       any ``T``; the tool only works for one)
reordered        0.25  per argument that must move: the number of assigned arguments minus the
                       longest run that keeps the query's order
missing          1.0   per candidate parameter that no query argument feeds (the tool needs an
                       input the query does not have)
extra            0.5   per query argument the candidate does not use
==============  =====  ==========================================================================

An ``Any`` in the *query* is "don't care" and costs nothing. Type variables of the query and the
candidate are renamed apart first, so ``T`` in one is unrelated to ``T`` in the other, and one
substitution is kept across the result and all arguments (a tool ``(T, T) -> T`` does not match
``(int, str) -> int`` with both arguments used).

Which query argument feeds which parameter is an assignment problem. Each (argument, parameter)
pair is priced with :func:`~cocoda_jax.types.unify.accepts` from the result's substitution; using a
pair saves ``extra + missing`` over leaving both unused, so the arguments that can feed something
are assigned to parameters (or to a zero-cost "unused" column) by the Hungarian algorithm in
O(n^2 (n + m)) — reordering at any arity is polynomial, never factorial. Ties in type cost prefer
the assignment that keeps positions; the reorder charge is computed on the chosen assignment (so
the total is optimal for type, missing and extra costs, and the reordering is the least for that
choice). The assignment is then re-checked with one shared substitution; a pair that conflicts
with the others (type variables bound two ways) is forbidden and the assignment solved again.
Pricing each pair on its own is exact for ground types; with type variables shared between
parameters it is a heuristic (a variable's binding is paid once in the joint check).

Costs are rounded to 9 decimals so that equal sums compare equal (ranking ties break by name).
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass
from typing import Sequence

from cocoda_jax.types.terms import Param, Signature, TCon, TVar, Type
from cocoda_jax.types.unify import _Solver, apply_subst, free_vars, rename_vars

QUERY_PREFIX = "q:"
CANDIDATE_PREFIX = "c:"


@dataclass(frozen=True, slots=True)
class MatchCosts:
    """The price of each kind of mismatch (see the module docstring). All must be >= 0."""

    coercion: float = 0.3
    more_general: float = 0.2
    more_specific: float = 0.6
    reorder: float = 0.25
    missing: float = 1.0
    extra: float = 0.5

    def __post_init__(self):
        for field in ("coercion", "more_general", "more_specific", "reorder", "missing", "extra"):
            if not getattr(self, field) >= 0:
                raise ValueError(f"MatchCosts.{field} must be >= 0, got {getattr(self, field)!r}")


DEFAULT_COSTS = MatchCosts()


@dataclass(frozen=True, slots=True)
class Match:
    """How a candidate fits a query.

    ``sources[j]`` is the index of the query argument that feeds candidate parameter ``j``
    (``None``: missing). ``explanation`` lists each cost item with its price.
    """

    cost: float
    explanation: tuple[str, ...]
    sources: tuple[int | None, ...]


@dataclass(frozen=True, slots=True)
class Prepared:
    """A signature with its variables renamed apart (``q:T`` or ``c:T``), ready for matching."""

    sig: Signature
    types: tuple[Type, ...]
    result: Type


def prepare(sig: Signature, prefix: str) -> Prepared:
    if not isinstance(sig, Signature):
        raise TypeError(f"expected a Signature, got {type(sig).__name__}")
    renamed = rename_vars(sig, prefix)
    return Prepared(sig, renamed.param_types, renamed.result)


# ---------------------------------------------------------------------------------------------
# Presentation helpers

def _strip(name: str) -> str:
    for prefix in (QUERY_PREFIX, CANDIDATE_PREFIX):
        if name.startswith(prefix):
            return name[len(prefix):]
    return name


def _plain(t: Type) -> str:
    """Prints a type with the renaming prefixes removed."""
    return str(apply_subst(t, {v: TVar(_strip(v)) for v in free_vars(t)}))


def _num(x: float) -> str:
    return f"{x:g}"


def _param_label(p: Param, j: int) -> str:
    return f"parameter {p.name}" if p.name else f"parameter #{j + 1}"


# ---------------------------------------------------------------------------------------------
# Costs of notes recorded by the solver

def _notes_cost(notes: Sequence[tuple], at_result: bool, costs: MatchCosts) -> float:
    """Price of one location's notes; a candidate ``Any`` counts once per location."""
    total = 0.0
    seen_any = False
    for note in notes:
        kind = note[0]
        if kind == "coerce":
            total += costs.coercion
        elif kind == "bind":
            if not isinstance(note[2], TVar):
                total += costs.more_general if note[1].startswith(CANDIDATE_PREFIX) else costs.more_specific
        elif kind == "any" and not seen_any and note[1] == ("actual" if at_result else "expected"):
            seen_any = True
            total += costs.more_general
    return total


def _notes_lines(notes: Sequence[tuple], where: str, at_result: bool, costs: MatchCosts) -> list[str]:
    lines = []
    seen_any = False
    for note in notes:
        kind = note[0]
        if kind == "coerce":
            lines.append(f"{where}: coerces {_plain(note[1])} to {_plain(note[2])} (+{_num(costs.coercion)})")
        elif kind == "bind" and not isinstance(note[2], TVar):
            var = note[1]
            if var.startswith(CANDIDATE_PREFIX):
                lines.append(f"{where}: more general than the query, candidate's {_plain(TVar(var))} = "
                             f"{_plain(note[2])} (+{_num(costs.more_general)})")
            else:
                lines.append(f"{where}: more specific than the query, query's {_plain(TVar(var))} = "
                             f"{_plain(note[2])} (+{_num(costs.more_specific)})")
        elif kind == "any" and not seen_any and note[1] == ("actual" if at_result else "expected"):
            seen_any = True
            what = "returns Any" if at_result else "takes Any"
            lines.append(f"{where}: more general than the query, candidate {what} (+{_num(costs.more_general)})")
    return lines


# ---------------------------------------------------------------------------------------------
# Assignment

_BIG = 1e9  # an impossible pair; finite so that the Hungarian potentials stay well defined
_TIE = 1e-6  # per position of displacement: prefers order-keeping assignments among equal costs


def hungarian(cost: Sequence[Sequence[float]]) -> list[int]:
    """Minimum-cost assignment of every row of a rows <= columns matrix to a distinct column:
    ``result[row] = column``. O(rows^2 * columns) (the shortest augmenting path form)."""
    n = len(cost)
    if n == 0:
        return []
    m = len(cost[0])
    if m < n:
        raise ValueError(f"hungarian: needs rows <= columns, got {n} x {m}")
    inf = float("inf")
    u = [0.0] * (n + 1)
    v = [0.0] * (m + 1)
    p = [0] * (m + 1)  # p[col] = row assigned to col (1-based; 0 = none)
    way = [0] * (m + 1)
    for i in range(1, n + 1):
        p[0] = i
        j0 = 0
        minv = [inf] * (m + 1)
        used = [False] * (m + 1)
        while True:
            used[j0] = True
            i0 = p[j0]
            row = cost[i0 - 1]
            delta, j1 = inf, 0
            ui0 = u[i0]
            for j in range(1, m + 1):
                if not used[j]:
                    cur = row[j - 1] - ui0 - v[j]
                    if cur < minv[j]:
                        minv[j], way[j] = cur, j0
                    if minv[j] < delta:
                        delta, j1 = minv[j], j
            for j in range(m + 1):
                if used[j]:
                    u[p[j]] += delta
                    v[j] -= delta
                else:
                    minv[j] -= delta
            j0 = j1
            if p[j0] == 0:
                break
        while j0:
            j1 = way[j0]
            p[j0] = p[j1]
            j0 = j1
    out = [0] * n
    for j in range(1, m + 1):
        if p[j]:
            out[p[j] - 1] = j - 1
    return out


def _solve_pairs(pair: list[list[float | None]], n: int, m: int, costs: MatchCosts) -> dict[int, int]:
    """Query argument -> candidate parameter, minimising pair costs + missing + extra.

    Using pair (i, j) saves ``extra + missing`` over leaving both unused, so the problem is an
    assignment of the arguments that can feed anything to the parameters they can feed, with costs
    ``pair - (extra + missing)``, plus one zero-cost "unused" column per argument.
    """
    if n == 0 or m == 0:
        return {}
    if n == m and all(pair[i][i] == 0.0 for i in range(n)):
        return {i: i for i in range(n)}  # zero-cost identity: optimal, and nothing moves
    worth = costs.extra + costs.missing
    rows = [i for i in range(n) if any(c is not None for c in pair[i])]
    cols = [j for j in range(m) if any(pair[i][j] is not None for i in rows)]
    if not rows:
        return {}
    if len(rows) == 1 or len(cols) == 1:  # one pair at most: the cheapest, if it saves anything
        c, i, j = min((pair[i][j] + _TIE * abs(i - j), i, j) for i in rows for j in cols if pair[i][j] is not None)
        return {i: j} if c < worth else {}
    r = len(rows)
    mat = []
    for i in rows:
        line = [_BIG if pair[i][j] is None else pair[i][j] - worth + _TIE * abs(i - j) for j in cols]
        mat.append(line + [0.0] * r)
    sol = hungarian(mat)
    return {rows[a]: cols[b] for a, b in enumerate(sol) if b < len(cols) and pair[rows[a]][cols[b]] is not None
            and pair[rows[a]][cols[b]] - worth < 0}


def _moves(order: list[int]) -> int:
    """Arguments to move so that the sequence is increasing: len - longest increasing subsequence."""
    tails: list[int] = []
    for x in order:
        k = bisect_left(tails, x)
        if k == len(tails):
            tails.append(x)
        else:
            tails[k] = x
    return len(order) - len(tails)


# ---------------------------------------------------------------------------------------------
# Matching

def _result_solver(q: Prepared, c: Prepared) -> _Solver | None:
    solver = _Solver(None, True)
    return solver if solver.accepts(q.result, c.result) else None


def result_cost(q: Prepared, c: Prepared, costs: MatchCosts = DEFAULT_COSTS) -> float | None:
    """The exact cost of the result's fit, as the full match will count it; ``None``: no match."""
    base = _result_solver(q, c)
    return None if base is None else _notes_cost(base.notes, True, costs)


@dataclass(frozen=True, slots=True)
class Scored:
    """A match before its explanation is written (ranking needs only the cost)."""

    cost: float
    assigned: tuple[tuple[int, int], ...]  # (query argument, candidate parameter), by argument
    result_notes: tuple[tuple, ...]
    pair_notes: tuple[tuple[tuple, ...], ...]  # aligned with ``assigned``
    moved: int


def score_prepared(q: Prepared, c: Prepared, costs: MatchCosts = DEFAULT_COSTS) -> Scored | None:
    """The cost of the best assignment (see the module docstring), or ``None`` (result does not fit)."""
    base = _result_solver(q, c)
    if base is None:
        return None
    result_notes = tuple(base.notes)
    n, m = len(q.types), len(c.types)

    # Pairwise costs, each from the result's substitution.
    pair: list[list[float | None]] = [[None] * m for _ in range(n)]
    for i, qt in enumerate(q.types):
        row = pair[i]
        for j, ct in enumerate(c.types):
            mark = base.mark()
            if base.accepts(ct, qt):
                row[j] = _notes_cost(base.notes[mark[1]:], False, costs) if len(base.notes) > mark[1] else 0.0
            base.undo(mark)

    # Assign, then check the assignment with one shared substitution; forbid conflicting pairs.
    while True:
        assigned = sorted(_solve_pairs(pair, n, m, costs).items())
        joint = _Solver(None, True)
        joint.accepts(q.result, c.result)
        pair_notes = []
        conflict = None
        for i, j in assigned:
            mark = joint.mark()
            if not joint.accepts(c.types[j], q.types[i]):
                conflict = (i, j)
                break
            pair_notes.append(tuple(joint.notes[mark[1]:]))
        if conflict is None:
            break
        pair[conflict[0]][conflict[1]] = None

    total = _notes_cost(result_notes, True, costs)
    for notes in pair_notes:
        total += _notes_cost(notes, False, costs)
    moved = _moves([j for _, j in assigned])
    k = len(assigned)
    total += moved * costs.reorder + (m - k) * costs.missing + (n - k) * costs.extra
    return Scored(round(total, 9), tuple(assigned), result_notes, tuple(pair_notes), moved)


def explain(scored: Scored, q: Prepared, c: Prepared, costs: MatchCosts = DEFAULT_COSTS) -> Match:
    """Turns a :class:`Scored` into a :class:`Match` with one line per cost item."""
    lines = _notes_lines(scored.result_notes, "result", True, costs)
    sources: list[int | None] = [None] * len(c.types)
    for (i, j), notes in zip(scored.assigned, scored.pair_notes):
        sources[j] = i
        lines += _notes_lines(notes, f"{_param_label(c.sig.params[j], j)} <- query argument {i + 1}", False, costs)
    if scored.moved:
        lines.append(f"arguments reordered: {scored.moved} argument{'s' if scored.moved > 1 else ''} must move "
                     f"(+{_num(scored.moved * costs.reorder)})")
    for j, src in enumerate(sources):
        if src is None:
            p = c.sig.params[j]
            lines.append(f"missing argument: the candidate also needs {_param_label(p, j)}: {p.type} "
                         f"(+{_num(costs.missing)})")
    used = {i for i, _ in scored.assigned}
    for i, p in enumerate(q.sig.params):
        if i not in used:
            lines.append(f"extra argument: query argument {i + 1} ({p.type}) is not used (+{_num(costs.extra)})")
    return Match(scored.cost, tuple(lines) or ("exact match",), tuple(sources))


def match_prepared(q: Prepared, c: Prepared, costs: MatchCosts = DEFAULT_COSTS) -> Match | None:
    """:func:`match` on signatures already renamed apart (the index keeps candidates prepared)."""
    scored = score_prepared(q, c, costs)
    return None if scored is None else explain(scored, q, c, costs)


def match(query: Signature, candidate: Signature, costs: MatchCosts = DEFAULT_COSTS) -> Match | None:
    """How well ``candidate`` serves ``query``: a :class:`Match`, or ``None`` when the candidate's
    result cannot be used as the query's result."""
    return match_prepared(prepare(query, QUERY_PREFIX), prepare(candidate, CANDIDATE_PREFIX), costs)


def why_not(signature: Signature, query: Signature, *, max_cost: float | None = None,
            costs: MatchCosts = DEFAULT_COSTS) -> tuple[str, ...]:
    """Why ``signature`` does not match ``query``: empty when it matches.

    Without ``max_cost`` a signature matches when its result fits and every one of its parameters
    can be fed from a query argument (reordering, coercions and unused query arguments allowed);
    with ``max_cost`` it must also cost at most that much."""
    q, c = prepare(query, QUERY_PREFIX), prepare(signature, CANDIDATE_PREFIX)
    if _result_solver(q, c) is None:
        reasons = [f"result: the candidate returns {signature.result}, which cannot be used where the query "
                   f"wants {query.result}"]
        reasons += _result_hints(query.result, signature.result)
        return tuple(reasons)
    found = match_prepared(q, c, costs)
    assert found is not None
    missing = any(src is None for src in found.sources)
    if (max_cost is None and not missing) or (max_cost is not None and found.cost <= max_cost):
        return ()
    if max_cost is None:
        reasons = [f"a parameter of the signature cannot be fed from the query (cost {_num(found.cost)}):"]
    else:
        reasons = [f"cost {_num(found.cost)} is above the limit {_num(max_cost)}:"]
    reasons += [f"  {line}" for line in found.explanation]
    for j, ct in enumerate(c.types):
        if found.sources[j] is None and not any(_Solver(None, True).accepts(ct, qt) for qt in q.types):
            reasons.append(f"no query argument has a type that fits {_param_label(signature.params[j], j)}: "
                           f"{signature.params[j].type}")
    return tuple(reasons)


def _result_hints(wanted: Type, got: Type) -> list[str]:
    if isinstance(got, TCon) and got.name == "Optional" and not (isinstance(wanted, TCon) and wanted.name == "Optional"):
        return ["  an Optional result may be None, and the query does not accept None"]
    if isinstance(got, TCon) and isinstance(wanted, TCon) and {got.name, wanted.name} <= {"int", "float", "bool"}:
        return [f"  {got.name} is wider than {wanted.name}: only bool -> int -> float coerce"]
    if isinstance(got, TCon) and isinstance(wanted, TCon) and got.name == wanted.name:
        return ["  the outer types agree but their arguments do not"]
    return []


"""Hoogle-style matching: golden costs and explanations, why_not, and the assignment's optimality."""

from __future__ import annotations

import itertools
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cocoda_jax.types import (
    BOOL, DEFAULT_COSTS, FLOAT, INT, NONE, STR, MatchCosts, Param, Signature, TCon, match, optional,
    parse_signature, why_not,
)
from cocoda_jax.types.match import hungarian
from tests.types.strategies import signatures

S = parse_signature
C = DEFAULT_COSTS


@pytest.mark.parametrize("query, candidate, cost, sources, lines", [
    ("(xs: list[float], k: int) -> float", "(xs: list[float], k: int) -> float", 0.0, (0, 1), ["exact match"]),
    ("(list[float], int) -> float", "(xs: list[float], k: int) -> float", 0.0, (0, 1), ["exact match"]),
    ("(int, list[float]) -> float", "(xs: list[float], k: int) -> float", C.reorder, (1, 0),
     ["arguments reordered: 1 argument must move (+0.25)"]),
    ("(list[int]) -> float", "(xs: list[float], k: int) -> float", C.coercion + C.missing, (0, None),
     ["parameter xs <- query argument 1: coerces int to float (+0.3)",
      "missing argument: the candidate also needs parameter k: int (+1)"]),
    ("(list[float], int, str) -> float", "(xs: list[float]) -> float", 2 * C.extra, (0,),
     ["extra argument: query argument 2 (int) is not used (+0.5)",
      "extra argument: query argument 3 (str) is not used (+0.5)"]),
    ("(list[int]) -> int", "(xs: list[T]) -> T", C.more_general, (0,),
     ["result: more general than the query, candidate's T = int (+0.2)"]),
    ("(list[T]) -> T", "(xs: list[int]) -> int", C.more_specific, (0,),
     ["result: more specific than the query, query's T = int (+0.6)"]),
    ("(list[U]) -> U", "(xs: list[T]) -> T", 0.0, (0,), ["exact match"]),  # renaming is free
    ("(int) -> Optional[int]", "(a: int) -> int", C.coercion, (0,), ["result: coerces int to Optional[int] (+0.3)"]),
    ("(int) -> int", "(a: Any) -> Any", 2 * C.more_general, (0,),
     ["result: more general than the query, candidate returns Any (+0.2)",
      "parameter a <- query argument 1: more general than the query, candidate takes Any (+0.2)"]),
    ("(Any) -> int", "(a: str) -> int", 0.0, (0,), ["exact match"]),  # the query's Any is "don't care"
    ("(tuple[int, str]) -> int", "(a: tuple[Any, ...]) -> int", C.more_general + C.coercion, (0,),
     ["parameter a <- query argument 1: more general than the query, candidate takes Any (+0.2)",
      "parameter a <- query argument 1: coerces tuple[int, str] to tuple[Any, ...] (+0.3)"]),
    ("() -> float", "(n: int) -> float", C.missing, (None,),
     ["missing argument: the candidate also needs parameter n: int (+1)"]),
])
def test_match_golden(query, candidate, cost, sources, lines):
    m = match(S(query), S(candidate))
    assert m is not None
    assert m.cost == pytest.approx(cost)
    assert m.sources == sources
    assert list(m.explanation) == lines
    # without a cost limit, a candidate matches when every one of its parameters is fed
    assert (why_not(S(candidate), S(query)) == ()) == (None not in m.sources)


def test_type_variables_stay_consistent_across_arguments():
    # (T, T) -> T cannot take an int and a str at once: one argument is used, the other is extra.
    m = match(S("(int, str) -> int"), S("(a: T, b: T) -> T"))
    assert m.sources == (0, None)
    assert m.cost == pytest.approx(C.more_general + C.missing + C.extra)
    # and the variables of query and candidate are unrelated even when they share a name
    # (sharing T would need T = str and T = int at once)
    m = match(S("(str) -> T"), S("(x: T) -> int"))
    assert m.sources == (0,)
    assert m.cost == pytest.approx(C.more_specific + C.more_general)
    # a query variable bound through the candidate's variable is still "more specific"
    assert match(S("(T) -> int"), S("(x: T) -> T")).cost == pytest.approx(C.more_general + C.more_specific)


def test_result_that_does_not_fit_is_no_match_and_why_not_says_so():
    assert match(S("(int) -> int"), S("(a: int) -> Optional[int]")) is None
    reasons = why_not(S("(a: int) -> Optional[int]"), S("(int) -> int"))
    assert reasons[0] == ("result: the candidate returns Optional[int], which cannot be used where the query "
                          "wants int")
    assert "may be None" in reasons[1]
    assert "only bool -> int -> float" in why_not(S("(a: int) -> float"), S("(int) -> int"))[1]
    assert "arguments do not" in why_not(S("(a: int) -> list[str]"), S("(int) -> list[int]"))[1]
    assert len(why_not(S("(a: int) -> str"), S("(int) -> Table"))) == 1


def test_why_not_with_a_cost_limit():
    sig, query = S("(s: str, t: str) -> float"), S("(int) -> float")
    unfed = why_not(sig, query)
    assert unfed[0] == "a parameter of the signature cannot be fed from the query (cost 2.5):"
    assert "no query argument has a type that fits parameter s: str" in unfed
    assert why_not(S("(x: float, k: int) -> float"), S("(k: int, xs: float, extra: str) -> float")) == ()
    reasons = why_not(sig, query, max_cost=1.0)
    assert reasons[0] == "cost 2.5 is above the limit 1:"
    assert "  missing argument: the candidate also needs parameter s: str (+1)" in reasons
    assert "no query argument has a type that fits parameter t: str" in reasons
    assert why_not(sig, query, max_cost=2.5) == ()


def test_costs_are_configurable_and_validated():
    cheap = MatchCosts(missing=0.1)
    assert match(S("() -> float"), S("(n: int) -> float"), cheap).cost == pytest.approx(0.1)
    with pytest.raises(ValueError, match="extra"):
        MatchCosts(extra=-1)


def test_reordering_at_high_arity_is_polynomial():
    # 12 distinct argument types in reverse order: 12! orders, solved by assignment in milliseconds.
    kinds = [INT, STR, BOOL, NONE, TCon("Table")] + [TCon("list", (t,)) for t in (INT, STR, BOOL, FLOAT)] + [
        TCon("dict", (STR, INT)), TCon("tuple", ()), optional(STR)]
    cand = Signature(tuple(Param(f"p{i}", t) for i, t in enumerate(kinds)), FLOAT)
    query = Signature(tuple(Param("", t) for t in reversed(kinds)), FLOAT)
    start = time.perf_counter()
    m = match(query, cand)
    assert time.perf_counter() - start < 1.0
    assert m.sources == tuple(reversed(range(12)))
    assert m.cost == pytest.approx(11 * C.reorder)  # all but one argument must move


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 5).flatmap(lambda n: st.integers(n, 7).flatmap(
    lambda m: st.lists(st.lists(st.integers(-5, 9), min_size=m, max_size=m), min_size=n, max_size=n))))
def test_hungarian_is_optimal(matrix):
    n, m = len(matrix), len(matrix[0])
    sol = hungarian(matrix)
    assert len(set(sol)) == n and all(0 <= j < m for j in sol)
    best = min(sum(matrix[i][p[i]] for i in range(n)) for p in itertools.permutations(range(m), n))
    assert sum(matrix[i][sol[i]] for i in range(n)) == best


def test_hungarian_needs_rows_at_most_columns():
    assert hungarian([]) == []
    with pytest.raises(ValueError):
        hungarian([[1], [2]])


# An oracle for ground scalar types: the number of coercions a value needs, or None.
_SCALARS = (INT, FLOAT, BOOL, STR, NONE, optional(INT), optional(STR))
_RANK = {"bool": 0, "int": 1, "float": 2}


def _coercions(expected, actual):
    if expected == actual:
        return 0
    if expected.name in _RANK and actual.name in _RANK:
        return 1 if _RANK[actual.name] < _RANK[expected.name] else None
    if expected.name == "Optional" and actual.name != "Optional":
        if actual == NONE:
            return 1
        inner = _coercions(expected.args[0], actual)
        return None if inner is None else inner + 1
    return None


def _moves(order):
    longest = max((len(c) for r in range(len(order) + 1) for c in itertools.combinations(order, r)
                   if list(c) == sorted(c)), default=0)
    return len(order) - longest


def _brute_force_cost(query, cand):
    """Min over all partial injective assignments of pair costs + missing + extra (no reorder)."""
    n, m = query.arity, cand.arity
    best = None
    for k in range(min(n, m) + 1):
        for args in itertools.permutations(range(n), k):
            for params in itertools.combinations(range(m), k):
                pair = [_coercions(cand.params[j].type, query.params[i].type) for i, j in zip(args, params)]
                if None in pair:
                    continue
                c = C.coercion * sum(pair) + C.missing * (m - k) + C.extra * (n - k)
                best = c if best is None else min(best, c)
    return best


ground_sigs = signatures(max_arity=4, type_strategy=st.sampled_from(_SCALARS))


@settings(max_examples=150, deadline=None)
@given(ground_sigs, ground_sigs)
def test_match_cost_is_the_optimal_assignment(query, cand):
    m = match(query, cand)
    result = _coercions(query.result, cand.result)
    if result is None:
        assert m is None
        return
    used = [(i, j) for j, i in enumerate(m.sources) if i is not None]
    for i, j in used:
        assert _coercions(cand.params[j].type, query.params[i].type) is not None
    k = len(used)
    pair = sum(_coercions(cand.params[j].type, query.params[i].type) for i, j in used)
    assigned_cost = C.coercion * pair + C.missing * (cand.arity - k) + C.extra * (query.arity - k)
    assert assigned_cost == pytest.approx(_brute_force_cost(query, cand))
    moved = _moves([j for i, j in sorted(used)])
    assert m.cost == pytest.approx(C.coercion * result + assigned_cost + C.reorder * moved)


@settings(max_examples=80, deadline=None)
@given(signatures(max_arity=3), signatures(max_arity=3))
def test_match_ignores_names_and_is_consistent_with_why_not(query, cand):
    m = match(query, cand)
    anonymous = Signature(tuple(Param("", p.type) for p in cand.params), cand.result)
    m2 = match(query, anonymous)
    assert (m is None) == (m2 is None)
    if m is not None:
        assert m.cost == m2.cost and m.sources == m2.sources
        assert m.cost >= 0 and m.explanation
        assert (why_not(cand, query) == ()) == (None not in m.sources)
        assert why_not(cand, query, max_cost=m.cost) == ()
    else:
        assert why_not(cand, query)[0].startswith("result:")

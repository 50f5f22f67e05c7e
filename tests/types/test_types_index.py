"""The signature index answers exactly like a linear scan, without scanning, and is a value."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cocoda_jax.types import (
    ANY, FLOAT, INT, STR, SignatureIndex, TVar, accepts, dict_of, linear_lookup, list_of, optional, parse_signature,
    type_key,
)
from cocoda_jax.types.synthetic import query_from, random_library, random_signature
from tests.types.strategies import signatures, types

S = parse_signature

small_libraries = st.lists(signatures(max_arity=3), max_size=25).map(
    lambda sigs: {f"f{i:02d}": s for i, s in enumerate(sigs)})

# few shapes, many type variables: where bounds are easiest to get wrong
_var_heavy_types = st.recursive(
    st.sampled_from([TVar("T"), TVar("U"), INT, FLOAT, STR, ANY]),
    lambda inner: st.one_of(inner.map(list_of), st.tuples(inner, inner).map(lambda kv: dict_of(*kv)),
                            inner.map(optional)),
    max_leaves=4)
var_heavy_signatures = signatures(max_arity=3, type_strategy=_var_heavy_types)
var_heavy_libraries = st.lists(var_heavy_signatures, max_size=25).map(
    lambda sigs: {f"f{i:02d}": s for i, s in enumerate(sigs)})


@settings(max_examples=60, deadline=None)
@given(st.one_of(small_libraries, var_heavy_libraries), st.one_of(signatures(max_arity=3), var_heavy_signatures),
       st.sampled_from([1, 3, 10, None]),
       st.sampled_from([None, 0.5, 2.0]))
def test_lookup_equals_linear_scan_on_random_libraries(library, query, limit, max_cost):
    index = SignatureIndex.build(library)
    assert index.lookup(query, limit, max_cost=max_cost) == linear_lookup(query, library, limit, max_cost=max_cost)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_lookup_equals_linear_scan_on_synthetic_libraries(seed):
    library = random_library(400, seed=seed)
    index = SignatureIndex.build(library)
    rng = random.Random(seed)
    names = sorted(library)
    for _ in range(15):
        query = query_from(library[rng.choice(names)], rng) if rng.random() < 0.7 else random_signature(rng)
        limit = rng.choice([1, 5, 20])
        assert index.lookup(query, limit) == linear_lookup(query, library, limit), str(query)


def test_lookup_does_not_scan_the_library():
    library = random_library(3000, seed=5)
    index = SignatureIndex.build(library)
    for text in ("(Table, str) -> Table", "(list[float], int) -> float", "(dict[str, int]) -> list[str]"):
        found, stats = index.lookup_with_stats(S(text), 5)
        assert found == linear_lookup(S(text), library, 5)
        assert stats["full_matches"] < len(library) / 10, stats
        assert stats["bounded_candidates"] < len(library) / 2, stats


def test_lookup_golden_ranking():
    index = SignatureIndex.build({
        "mean": S("(xs: list[float]) -> float"),
        "top_k_mean": S("(xs: list[float], k: int) -> float"),
        "first": S("(xs: list[T]) -> T"),
        "count": S("(xs: list[T]) -> int"),
        "upper": S("(s: str) -> str"),
        "maybe_mean": S("(xs: list[float]) -> Optional[float]"),
    })
    got = index.lookup(S("(list[float]) -> float"), limit=None)
    assert [(name, m.cost) for name, m in got] == [
        ("mean", 0.0), ("first", 0.2), ("count", 0.5), ("top_k_mean", 1.0)]
    assert got[0][1].explanation == ("exact match",)
    assert [n for n, _ in index.lookup(S("(list[float], int) -> float"), limit=2)] == ["top_k_mean", "mean"]
    assert index.lookup(S("(list[float]) -> float"), max_cost=0.25) == got[:2]
    assert [n for n, _ in index.lookup(S("(str) -> Table"))] == ["first"]  # only a generic result fits
    with pytest.raises(ValueError):
        index.lookup(S("() -> int"), limit=0)
    with pytest.raises(TypeError):
        index.lookup("() -> int")


def test_add_and_remove_return_new_values():
    empty = SignatureIndex()
    one = empty.add("mean", S("(xs: list[float]) -> float"))
    two = one.add("upper", S("(s: str) -> str"))
    assert len(empty) == 0 and len(one) == 1 and len(two) == 2
    assert "upper" in two and "upper" not in one
    assert list(two) == ["mean", "upper"]
    assert two.signature("upper") == S("(s: str) -> str")
    query = S("(str) -> str")
    assert one.lookup(query) == ()
    assert [n for n, _ in two.lookup(query)] == ["upper"]

    back = two.remove("upper")
    assert back.items() == one.items() and back.lookup(query) == ()
    assert [n for n, _ in two.lookup(query)] == ["upper"]  # the old value is untouched
    with pytest.raises(KeyError):
        back.remove("upper")

    replaced = two.add("upper", S("(s: str) -> int"))  # re-adding a name replaces its signature
    assert len(replaced) == 2 and replaced.lookup(query) == ()
    assert [n for n, _ in replaced.lookup(S("(str) -> int"))] == ["upper"]
    with pytest.raises(ValueError):
        SignatureIndex.build([("a", S("() -> int")), ("a", S("() -> str"))])
    with pytest.raises(ValueError):
        empty.add("", S("() -> int"))


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(0, 7), signatures(max_arity=2)), max_size=30),
       signatures(max_arity=2))
def test_incremental_index_equals_bulk_build(ops, query):
    index, library = SignatureIndex(), {}
    for is_add, k, sig in ops:
        name = f"t{k}"
        if is_add:
            index, library[name] = index.add(name, sig), sig
        elif name in library:
            index = index.remove(name)
            del library[name]
    assert index.items() == SignatureIndex.build(library).items()
    assert index.lookup(query, None) == linear_lookup(query, library, None)


@settings(max_examples=300, deadline=None)
@given(types(max_leaves=8), types(max_leaves=8))
def test_type_keys_are_sound(expected, actual):
    # keys only forget detail: whatever fits, fits by its keys too (the index never loses a match)
    if accepts(expected, actual) is not None:
        assert accepts(type_key(expected), type_key(actual)) is not None


def test_bounds_never_exceed_costs_when_query_variables_repeat():
    # dict[T, T] against dict[U, int]: T first meets the candidate's U (free), then U = int (+0.2),
    # although the key dict[Any, int] alone would suggest that T must become int (+0.6).
    library = {"b": S("(x: int) -> dict[int, int]"), "z_generic": S("(x: int) -> dict[U, int]")}
    query = S("(int) -> dict[T, T]")
    assert [(n, m.cost) for n, m in linear_lookup(query, library, 1)] == [("z_generic", 0.2)]
    assert SignatureIndex.build(library).lookup(query, 1) == linear_lookup(query, library, 1)


@settings(max_examples=150, deadline=None)
@given(st.one_of(small_libraries, var_heavy_libraries), st.one_of(signatures(max_arity=3), var_heavy_signatures))
def test_every_bound_is_a_lower_bound(library, query):
    # Exactness rests on this: the bound given to a signature never exceeds its real cost.
    from cocoda_jax.types import index as index_module
    from cocoda_jax.types.match import CANDIDATE_PREFIX, QUERY_PREFIX, prepare, score_prepared

    recorded: dict[str, float] = {}

    class Recording(index_module._Lookup):
        def push_candidate(self, name, bound):
            recorded[name] = round(bound, 9)
            super().push_candidate(name, bound)

        def push_refined(self, name, bound, refined):  # the assignment-level refinement, too
            recorded[name] = round(bound, 9)
            super().push_refined(name, bound, refined)

    idx = SignatureIndex.build(library)
    Recording(idx, prepare(query, QUERY_PREFIX), None, None).run()
    q = prepare(query, QUERY_PREFIX)
    for name, sig in library.items():
        scored = score_prepared(q, prepare(sig, CANDIDATE_PREFIX))
        if scored is not None:
            assert name in recorded
            assert recorded[name] <= scored.cost, (name, str(sig), str(query))

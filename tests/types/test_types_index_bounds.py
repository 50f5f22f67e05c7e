"""The pieces the index's exactness rests on: sound pair prices, sound outline filters, persistent
posting sets, and the whole lookup against a brute-force scan on small random libraries."""

from __future__ import annotations

import pickle

from hypothesis import given, settings
from hypothesis import strategies as st

from cocoda_jax.types import (
    ANY, FLOAT, INT, STR, Param, Signature, SignatureIndex, TVar, accepts, dict_of, linear_lookup, list_of,
    optional, parse_signature, type_key,
)
from cocoda_jax.types import index as index_module
from cocoda_jax.types.match import (
    CANDIDATE_PREFIX, DEFAULT_COSTS, QUERY_PREFIX, _notes_cost, prepare, result_cost, score_prepared,
)
from cocoda_jax.types.unify import _Solver, rename_vars
from tests.types.strategies import signatures, types

S = parse_signature

# few shapes, shared variables, repeated parameter types: where bounds are easiest to get wrong
_shared = st.recursive(
    st.sampled_from([TVar("T"), TVar("U"), INT, FLOAT, STR, ANY]),
    lambda inner: st.one_of(inner.map(list_of), st.tuples(inner, inner).map(lambda kv: dict_of(*kv)),
                            inner.map(optional)),
    max_leaves=3)


@st.composite
def _wide_signatures(draw, max_arity: int = 5) -> Signature:
    pool = draw(st.lists(_shared, min_size=1, max_size=3))  # a few types, reused: repeated forms
    arity = draw(st.integers(0, max_arity))
    return Signature(tuple(Param("", draw(st.sampled_from(pool))) for _ in range(arity)), draw(_shared))


_libraries = st.lists(st.one_of(_wide_signatures(), signatures(max_arity=4)), max_size=20).map(
    lambda sigs: {f"g{i:02d}": s for i, s in enumerate(sigs)})


@settings(max_examples=40, deadline=None)
@given(_libraries, st.one_of(_wide_signatures(), signatures(max_arity=5)), st.sampled_from([1, 4, None]),
       st.sampled_from([None, 1.0]))
def test_lookup_equals_brute_force_with_wide_queries_and_shared_variables(library, query, limit, max_cost):
    index = SignatureIndex.build(library)
    assert index.lookup(query, limit, max_cost=max_cost) == linear_lookup(query, library, limit, max_cost=max_cost)


@settings(max_examples=20, deadline=None)
@given(_libraries, st.one_of(_wide_signatures(), signatures(max_arity=5)))
def test_refined_bounds_are_lower_bounds(library, query):
    # the assignment-level refinement (pair prices, matching, reordering) never exceeds the cost
    recorded: dict[str, list[float]] = {}

    class Recording(index_module._Lookup):
        def push_candidate(self, name, bound):
            recorded.setdefault(name, []).append(round(bound, 9))
            super().push_candidate(name, bound)

        def push_refined(self, name, bound, refined):
            recorded.setdefault(name, []).append(round(bound, 9))
            super().push_refined(name, bound, refined)

    q = prepare(query, QUERY_PREFIX)
    Recording(SignatureIndex.build(library), q, None, None).run()
    for name, sig in library.items():
        scored = score_prepared(q, prepare(sig, CANDIDATE_PREFIX))
        if scored is not None:
            assert max(recorded[name]) <= scored.cost, (name, str(sig), str(query))


def _price(counts) -> float:
    c = DEFAULT_COSTS
    return c.coercion * counts[0] + c.more_general * counts[1] + c.more_specific * counts[2]


@settings(max_examples=150, deadline=None)
@given(_shared, _shared, _shared, _shared)
def test_relaxed_pair_price_is_a_lower_bound_after_any_prior_binding(e0, a0, e, a):
    # whatever an earlier pair bound (shared variables), the relaxed price never exceeds the real one
    e0, e = rename_vars(e0, CANDIDATE_PREFIX), rename_vars(e, CANDIDATE_PREFIX)
    a0, a = rename_vars(a0, QUERY_PREFIX), rename_vars(a, QUERY_PREFIX)
    solver = _Solver(None, True)
    if not solver.accepts(e0, a0):
        return
    mark = solver.mark()
    fits = solver.accepts(e, a)
    relaxed = index_module._pair_counts(index_module._relaxed(e, "c"), index_module._relaxed(a, "q"))
    if fits:
        assert relaxed is not None
        assert _price(relaxed) <= round(_notes_cost(solver.notes[mark[1]:], False, DEFAULT_COSTS), 9) + 1e-9


@settings(max_examples=100, deadline=None)
@given(_shared, _shared, _shared, _shared)
def test_exclusive_pair_price_is_exact(e0, a0, e, a):
    # variables used nowhere else cannot be bound by an earlier pair: the empty-substitution price holds
    e0, a0 = rename_vars(e0, "c:other"), rename_vars(a0, "q:other")
    e, a = rename_vars(e, CANDIDATE_PREFIX), rename_vars(a, QUERY_PREFIX)
    solver = _Solver(None, True)
    if not solver.accepts(e0, a0):
        return
    mark = solver.mark()
    fits = solver.accepts(e, a)
    exact = index_module._pair_counts(e, a)
    assert fits == (exact is not None)
    if fits:
        assert abs(_price(exact) - _notes_cost(solver.notes[mark[1]:], False, DEFAULT_COSTS)) < 1e-9


@settings(max_examples=150, deadline=None)
@given(types(max_leaves=8), types(max_leaves=8))
def test_outline_filters_never_drop_a_fit(expected, actual):
    if accepts(expected, actual) is not None:
        assert index_module._outline_filter(type_key(actual))(index_module._outline(expected))
    if accepts(type_key(expected), type_key(actual)) is not None:
        assert index_module._result_outline_filter(type_key(expected))(index_module._outline(type_key(actual)))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(0, 120)), max_size=250))
def test_bag_is_a_persistent_set(ops):
    bag, model, history = index_module._Bag(), set(), []
    for is_add, x in ops:
        if is_add:
            bag, model = bag.with_(x), model | {x}
        elif x in model:
            bag, model = bag.without(x), model - {x}
        history.append((bag, frozenset(model)))
    for value, expected in history:  # every earlier value is intact
        assert value.members() == expected and len(value) == len(expected)
        assert all(x in value for x in expected)
        if expected:
            assert value.smallest() == min(expected)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(0, 6), _wide_signatures(3)), max_size=20), _wide_signatures(3))
def test_every_intermediate_index_is_unchanged_by_later_updates(ops, query):
    index, library, history = SignatureIndex(), {}, []
    for is_add, k, sig in ops:
        name = f"t{k}"
        if is_add:
            index, library = index.add(name, sig), {**library, name: sig}
        elif name in library:
            index, library = index.remove(name), {n: s for n, s in library.items() if n != name}
        history.append((index, library))
    for value, lib in history:
        assert value.items() == tuple(sorted(lib.items()))
        assert value.lookup(query, None) == linear_lookup(query, lib, None)


def test_pickle_round_trip_keeps_answers_and_drops_caches():
    index = SignatureIndex.build({"mean": S("(xs: list[float]) -> float"), "first": S("(xs: list[T]) -> T"),
                                  "upper": S("(s: str) -> str")})
    query = S("(list[float]) -> float")
    before = index.lookup(query, None)
    back = pickle.loads(pickle.dumps(index))
    assert back._memo == {} and back._fed == {}
    assert back.lookup(query, None) == before and back.items() == index.items()
    grown = back.add("count", S("(xs: list[T]) -> int"))
    assert len(grown) == 4 and len(back) == 3


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(0, 5000), st.integers()), max_size=150))
def test_persistent_dict_matches_a_dict_and_keeps_old_versions(ops):
    value, model, history = index_module._PDict(), {}, []
    for is_set, key, v in ops:
        if is_set:
            value, model = value.set(key, v), {**model, key: v}
        elif key in model:
            value, model = value.remove(key), {k: x for k, x in model.items() if k != key}
        history.append((value, model))
    for version, expected in history:
        assert dict(version.items()) == expected and len(version) == len(expected)
        assert all(version[k] == x and k in version for k, x in expected.items())
        assert version.get(-1, "missing") == "missing"


def test_persistent_dict_pickles_by_items():
    # string hashes differ between processes, so a trie is rebuilt from its items when unpickled
    big = index_module._PDict.from_dict({f"k{i}": i for i in range(500)})
    changed = big.remove("k7").set("z", 1)
    assert dict(pickle.loads(pickle.dumps(changed)).items()) == {**{f"k{i}": i for i in range(500) if i != 7}, "z": 1}
    assert len(big) == 500 and big["k7"] == 7


@settings(max_examples=300, deadline=None)
@given(types(with_vars=False, max_leaves=8), types(with_vars=False, max_leaves=8), st.booleans())
def test_structural_prices_of_ground_types_equal_the_solver(expected, actual, as_key):
    # _ground_notes walks types without variables argument by argument; the solver is the reference
    if as_key:  # result keys are what it meets most: outlines with Any below depth 2
        actual = type_key(actual)
    for e in (expected, type_key(expected)):
        where = (str(e), str(actual))
        assert index_module._ground_fit(e, actual) == index_module._solver_fit(e, actual), where
        assert index_module._ground_pair_counts(e, actual) == index_module._pair_counts(e, actual), where


def _bare_or_shared_queries() -> st.SearchStrategy:
    # bare T / Any arguments and variables shared between arguments (and sometimes the result)
    arg = st.one_of(st.sampled_from([TVar("T"), TVar("U"), ANY]), _shared)
    return st.builds(lambda args, result: Signature(tuple(Param("", t) for t in args), result),
                     st.lists(arg, max_size=4), st.one_of(_shared, st.sampled_from([TVar("T"), ANY, INT])))


@settings(max_examples=80, deadline=None)
@given(_libraries, _bare_or_shared_queries(), st.sampled_from([1, 3, None]))
def test_learned_argument_parts_are_exact_and_keep_the_answer(library, query, limit):
    # a learned argument part stands for every candidate with the same argument key (parameter types
    # and result bindings): it must be exactly what the full match charges each of them, and the
    # answer must stay the linear scan's
    q = prepare(query, QUERY_PREFIX)
    lookup = index_module._Lookup(SignatureIndex.build(library), q, limit, None)
    found, _ = lookup.run()
    assert found == linear_lookup(query, library, limit)
    for sig in library.values():
        c = prepare(sig, CANDIDATE_PREFIX)
        refined, scored = lookup.refine(c), score_prepared(q, c)
        assert (refined is None) == (scored is None)
        if refined is None:
            continue
        assert refined.result_cost == result_cost(q, c)
        learned = lookup.argument_parts.get(refined.argument_key)
        if learned is not None:
            assert round(learned + refined.result_cost, 9) == scored.cost, (str(sig), str(query))

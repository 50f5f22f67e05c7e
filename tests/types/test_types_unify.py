"""Unification and the directional compatibility check."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cocoda_jax.types import (
    ANY, BOOL, FLOAT, INT, NONE, STR, TCon, TVar, accepts, apply_subst, dict_of, free_vars, list_of,
    optional, parse_signature, parse_type, rename_vars, tuple_of, unify, variadic_tuple,
)
from tests.types.strategies import ground_types, substitutions, types

T, U = TVar("T"), TVar("U")
P = parse_type


def no_any(t) -> bool:
    return t is not ANY and (not isinstance(t, TCon) or all(no_any(a) for a in t.args))


@settings(max_examples=300, deadline=None)
@given(types(with_any=False, max_leaves=6), types(with_any=False, max_leaves=6))
def test_syntactic_unifier_makes_both_sides_equal(a, b):
    s = unify(a, b, coerce=False)
    if s is not None:
        assert apply_subst(a, s) == apply_subst(b, s)
        # idempotent: applying twice changes nothing, and no bound variable is left
        assert apply_subst(apply_subst(a, s), s) == apply_subst(a, s)
        assert not (free_vars(apply_subst(a, s)) & s.keys())


@settings(max_examples=300, deadline=None)
@given(types(max_leaves=6), types(max_leaves=6), st.booleans())
def test_unify_is_symmetric(a, b, coerce):
    ab, ba = unify(a, b, coerce=coerce), unify(b, a, coerce=coerce)
    assert (ab is None) == (ba is None)
    if ab is not None and not coerce and no_any(a) and no_any(b):
        # both most general unifiers give the same instance, up to renaming variables
        left, right = apply_subst(a, ab), apply_subst(a, ba)
        assert unify(left, right, coerce=False) is not None
        assert len(free_vars(left)) == len(free_vars(right))


@settings(max_examples=100, deadline=None)
@given(types(with_any=False, max_leaves=6), substitutions())
def test_a_type_unifies_with_its_instances(t, sigma):
    instance = apply_subst(t, sigma)
    s = unify(t, instance, coerce=False)
    assert s is not None
    assert apply_subst(t, s) == instance
    assert accepts(t, instance) is not None


@settings(max_examples=300, deadline=None)
@given(types(max_leaves=6), types(max_leaves=6))
def test_accepts_implies_coercing_unify(expected, actual):
    if accepts(expected, actual) is not None:
        assert unify(expected, actual) is not None


@settings(max_examples=400, deadline=None)
@given(ground_types, ground_types)
def test_accepts_is_antisymmetric_on_ground_types(a, b):
    if a != b and accepts(a, b) is not None:
        assert accepts(b, a) is None


@pytest.mark.parametrize("a, b", [
    (T, list_of(T)),
    (list_of(T), T),
    (T, dict_of(STR, optional(T))),
    (dict_of(T, U), dict_of(list_of(U), T)),  # T = list[U], U = T: a cycle through two variables
])
def test_occurs_check(a, b):
    assert unify(a, b, coerce=False) is None
    assert unify(a, b, coerce=True) is None
    assert accepts(a, b) is None


def test_syntactic_unify_golden():
    assert unify(list_of(T), list_of(INT), coerce=False) == {"T": INT}
    assert unify(dict_of(T, U), dict_of(U, INT), coerce=False) == {"T": INT, "U": INT}
    assert unify(T, U, coerce=False) in ({"T": U}, {"U": T})
    assert unify(INT, FLOAT, coerce=False) is None
    assert unify(optional(INT), INT, coerce=False) is None
    assert unify(tuple_of(INT), tuple_of(INT, INT), coerce=False) is None
    assert unify(ANY, list_of(T), coerce=False) == {}  # Any is a wildcard and binds nothing
    assert unify(list_of(T), list_of(ANY), coerce=False) == {}
    assert unify(INT, INT) == {}


def test_coercing_unify_rules():
    assert unify(INT, FLOAT) == {}
    assert unify(FLOAT, INT) == {}
    assert unify(BOOL, FLOAT) == {}
    assert unify(STR, FLOAT) is None
    assert unify(optional(INT), INT) == {}
    assert unify(INT, optional(INT)) == {}
    assert unify(NONE, optional(STR)) == {}
    assert unify(optional(T), STR) == {"T": STR}
    assert unify(T, optional(T)) == {}  # rule 3, where the occurs check alone would refuse
    assert unify(variadic_tuple(T), tuple_of(INT, INT)) == {"T": INT}
    assert unify(variadic_tuple(INT), tuple_of(INT, STR)) is None
    assert unify(list_of(INT), list_of(FLOAT)) == {}
    assert unify(dict_of(T, T), dict_of(INT, STR)) is None


def test_unify_extends_a_given_substitution_without_mutating_it():
    given_s = {"T": INT}
    assert unify(list_of(T), list_of(STR), given_s, coerce=False) is None
    s = unify(list_of(U), list_of(T), given_s, coerce=False)
    assert s == {"T": INT, "U": INT}
    assert given_s == {"T": INT}


def test_unify_signatures():
    a = parse_signature("(xs: list[T], k: int) -> T")
    b = parse_signature("(ys: list[float], n: int) -> float")
    assert unify(a, b, coerce=False) == {"T": FLOAT}
    assert unify(a, parse_signature("(ys: list[float], n: int) -> str"), coerce=False) is None
    assert unify(a, parse_signature("(ys: list[float]) -> float")) is None
    with pytest.raises(TypeError):
        unify(a, INT)
    with pytest.raises(TypeError):
        unify("int", INT)


@pytest.mark.parametrize("expected, actual, ok", [
    ("float", "int", True),
    ("int", "float", False),
    ("int", "bool", True),
    ("float", "bool", True),
    ("bool", "int", False),
    ("Optional[int]", "int", True),
    ("Optional[int]", "None", True),
    ("Optional[float]", "int", True),
    ("int", "Optional[int]", False),
    ("None", "Optional[int]", False),
    ("list[float]", "list[int]", True),
    ("list[int]", "list[float]", False),
    ("tuple[float, ...]", "tuple[int, float]", True),
    ("tuple[int, float]", "tuple[float, ...]", False),
    ("Any", "dict[str, int]", True),
    ("dict[str, int]", "Any", True),
    ("list[T]", "list[int]", True),
    ("T", "Optional[int]", True),
    ("Table", "str", False),
])
def test_accepts_directionality(expected, actual, ok):
    assert (accepts(P(expected), P(actual)) is not None) == ok


def test_accepts_binds_variables_on_either_side():
    assert accepts(list_of(T), list_of(INT)) == {"T": INT}
    assert accepts(list_of(INT), list_of(T)) == {"T": INT}
    s = accepts(T, INT)
    assert accepts(T, STR, s) is None  # T is already int
    assert accepts(T, BOOL, s) == {"T": INT}  # a bool may go where an int is required
    with pytest.raises(TypeError):
        accepts(INT, "int")


def test_apply_subst_free_vars_and_renaming():
    t = dict_of(T, list_of(U))
    assert free_vars(t) == {"T", "U"}
    assert free_vars(parse_signature("(x: T) -> list[U]")) == {"T", "U"}
    assert apply_subst(t, {"T": U, "U": INT}) == dict_of(INT, list_of(INT))  # chains are followed
    assert apply_subst(parse_signature("(x: T) -> T"), {"T": STR}) == parse_signature("(x: str) -> str")
    assert rename_vars(t, "c:") == dict_of(TVar("c:T"), list_of(TVar("c:U")))
    assert rename_vars(INT, "c:") is INT
    with pytest.raises(ValueError, match="cyclic"):
        apply_subst(T, {"T": list_of(U), "U": T})

"""Hypothesis strategies for the type language (shared by the tests of cocoda_jax.types)."""

from __future__ import annotations

from hypothesis import strategies as st

from cocoda_jax.types import (
    ANY, BOOL, FLOAT, INT, NONE, STR, Param, Signature, TCon, TVar, dict_of, list_of, optional, tuple_of,
    variadic_tuple,
)

SCALARS = (INT, FLOAT, BOOL, STR, NONE, TCon("Table"))
VAR_NAMES = ("T", "U", "K", "V", "T1")


def types(*, with_vars: bool = True, with_any: bool = True, max_leaves: int = 8) -> st.SearchStrategy:
    leaves = [st.sampled_from(SCALARS)]
    if with_vars:
        leaves.append(st.sampled_from(VAR_NAMES).map(TVar))
    if with_any:
        leaves.append(st.just(ANY))
    base = st.one_of(*leaves)

    def extend(inner):
        return st.one_of(
            inner.map(list_of),
            st.tuples(inner, inner).map(lambda kv: dict_of(*kv)),
            st.lists(inner, max_size=3).map(lambda ts: tuple_of(*ts)),
            inner.map(variadic_tuple),
            inner.map(optional),
        )

    return st.recursive(base, extend, max_leaves=max_leaves)


ground_types = types(with_vars=False, with_any=False)

param_names = st.one_of(st.just(""), st.from_regex(r"[a-z_][a-z0-9_]{0,5}", fullmatch=True))


@st.composite
def signatures(draw, *, max_arity: int = 4, type_strategy: st.SearchStrategy | None = None) -> Signature:
    ts = type_strategy if type_strategy is not None else types(max_leaves=5)
    arity = draw(st.integers(0, max_arity))
    names = draw(st.lists(param_names, min_size=arity, max_size=arity,
                          unique_by=lambda n: n if n else object()))
    params = tuple(Param(n, draw(ts)) for n in names)
    return Signature(params, draw(ts))


@st.composite
def substitutions(draw, names=VAR_NAMES) -> dict:
    """A ground substitution for some of the variable names."""
    chosen = draw(st.lists(st.sampled_from(names), unique=True))
    return {n: draw(types(with_vars=False, with_any=False, max_leaves=4)) for n in chosen}

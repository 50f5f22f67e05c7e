"""Random signatures and queries, seeded: the workload of the index benchmark and tests.

Shapes follow what tool libraries look like: mostly scalars and lists of scalars, some dicts,
tuples, ``Optional`` and ``Table``, a few generic tools (type variables), arity 0-4. Queries are
made from library signatures the way a planner asks: arguments dropped, shuffled, or one extra
argument, sometimes with a type widened or made generic, so most queries have near matches.
"""

from __future__ import annotations

import random

from cocoda_jax.types.terms import (
    ANY, BOOL, FLOAT, INT, NONE, STR, Param, Signature, TCon, TVar, Type, dict_of, list_of, optional,
    tuple_of, variadic_tuple,
)

_SCALARS = (INT, FLOAT, BOOL, STR, TCon("Table"))
_SCALAR_WEIGHTS = (5, 6, 2, 4, 2)
_NAMES = ("xs", "ys", "k", "n", "x", "y", "table", "col", "key", "value", "rate", "items", "flag", "name")


def random_type(rng: random.Random, depth: int = 2, type_vars: tuple[str, ...] = ()) -> Type:
    """A random type; ``type_vars`` (names) may appear when given."""
    roll = rng.random()
    if type_vars and roll < 0.1:
        return TVar(rng.choice(type_vars))
    if depth <= 0 or roll < 0.55:
        return rng.choices(_SCALARS, _SCALAR_WEIGHTS)[0]
    kind = rng.choices(("list", "dict", "tuple", "vtuple", "opt", "none", "any"), (8, 3, 2, 1, 2, 1, 1))[0]
    sub = lambda: random_type(rng, depth - 1, type_vars)  # noqa: E731
    if kind == "list":
        return list_of(sub())
    if kind == "dict":
        return dict_of(rng.choice((STR, INT)), sub())
    if kind == "tuple":
        return tuple_of(*(sub() for _ in range(rng.randint(0, 3))))
    if kind == "vtuple":
        return variadic_tuple(sub())
    if kind == "opt":
        return optional(sub())
    return NONE if kind == "none" else ANY


def random_signature(rng: random.Random, max_arity: int = 4) -> Signature:
    type_vars = ("T",) if rng.random() < 0.15 else ()
    arity = rng.choices(range(max_arity + 1), (1, 6, 6, 3, 1)[: max_arity + 1])[0]
    names = rng.sample(_NAMES, arity)
    params = tuple(Param(nm, random_type(rng, 2, type_vars)) for nm in names)
    return Signature(params, random_type(rng, 2, type_vars))


def random_library(size: int, seed: int = 0) -> dict[str, Signature]:
    rng = random.Random(seed)
    return {f"tool_{i:06d}": random_signature(rng) for i in range(size)}


def query_from(sig: Signature, rng: random.Random) -> Signature:
    """A planner-like query derived from ``sig``: unnamed, perturbed arguments."""
    types = list(sig.param_types)
    rng.shuffle(types)
    roll = rng.random()
    if roll < 0.25 and types:
        types.pop(rng.randrange(len(types)))
    elif roll < 0.45:
        types.insert(rng.randrange(len(types) + 1), random_type(rng, 1))
    if rng.random() < 0.2 and types:
        i = rng.randrange(len(types))
        types[i] = INT if types[i] == FLOAT else types[i]
    result = sig.result
    if rng.random() < 0.1:
        result = optional(result)
    return Signature(tuple(Param("", t) for t in types), result)

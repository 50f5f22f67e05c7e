"""The L1 type of a concrete value: how a task's inputs and a query's values enter type checking."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from cocoda_jax.types.terms import ANY, BOOL, FLOAT, INT, NONE, STR, Type, dict_of, list_of


def type_of_value(value: Any) -> Type:
    """The L1 type of a concrete input value (``Any`` where a value alone cannot say, e.g. a dict
    that may be a ``Table``): how inputs ``n0, n1, ...`` enter the checker's environment."""
    if value is None:
        return NONE
    if isinstance(value, bool):
        return BOOL
    if isinstance(value, int):
        return INT
    if isinstance(value, float):
        return FLOAT
    if isinstance(value, str):
        return STR
    if isinstance(value, list):
        return list_of(join_types(type_of_value(v) for v in value))
    if isinstance(value, dict) and value and all(isinstance(k, str) for k in value) \
            and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value.values()):
        return dict_of(STR, join_types(type_of_value(v) for v in value.values()))
    return ANY


def join_types(types: Iterable[Type]) -> Type:
    """The element type of a list literal: one type if all agree, ``float`` for mixed numbers."""
    seen = list(dict.fromkeys(types))
    if not seen:
        return ANY
    if len(seen) == 1:
        return seen[0]
    if all(t in (INT, FLOAT, BOOL) for t in seen):
        return FLOAT if FLOAT in seen else INT
    return ANY

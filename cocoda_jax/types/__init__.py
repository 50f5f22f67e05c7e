"""The L1 layer: a small type language for tool signatures, unification, Hoogle-style matching
and a sublinear signature index.

Quick tour::

    sig = parse_signature("(xs: list[float], k: int) -> float")
    str(sig)                                  # '(xs: list[float], k: int) -> float'
    unify(parse_type("list[T]"), parse_type("list[int]"))   # {'T': int}
    accepts(FLOAT, INT)                       # {}  (an int may go where a float is required)
    match(parse_signature("(int, list[float]) -> float"), sig)   # Match(cost=..., explanation=...)
    SignatureIndex.build({"top_k_mean": sig}).lookup(query)
    fit(Evidence.of_types([INT]), sig, required=1)    # what a question supplies, optional params free
"""

from cocoda_jax.types.terms import (
    ANY, BOOL, BUILTIN_ARITY, DOMAIN_TYPES, FLOAT, INT, NONE, STR, VARIADIC_TUPLE, Param, Signature,
    TAnyType, TCon, TVar, Type, dict_of, is_ground, list_of, optional, register_domain_type, signature,
    tuple_of, variadic_tuple,
)
from cocoda_jax.types.parse import (
    TypeSyntaxError, parse_signature, parse_type, signature_from_ast, signature_from_source,
)
from cocoda_jax.types.unify import Subst, accepts, apply_subst, free_vars, rename_vars, unify
from cocoda_jax.types.match import DEFAULT_COSTS, Match, MatchCosts, match, why_not
from cocoda_jax.types.index import SignatureIndex, linear_lookup, type_key
from cocoda_jax.types.infer import join_types, type_of_value
from cocoda_jax.types.evidence import Arg, Evidence, EvidenceCosts, EvidenceError, Fit, fit, required_signature

__all__ = [
    "Arg", "Evidence", "EvidenceCosts", "EvidenceError", "Fit", "fit", "required_signature",
    "join_types", "type_of_value",
    "ANY", "BOOL", "BUILTIN_ARITY", "DOMAIN_TYPES", "FLOAT", "INT", "NONE", "STR", "VARIADIC_TUPLE",
    "Param", "Signature", "TAnyType", "TCon", "TVar", "Type", "dict_of", "is_ground", "list_of",
    "optional", "register_domain_type", "signature", "tuple_of", "variadic_tuple",
    "TypeSyntaxError", "parse_signature", "parse_type", "signature_from_ast", "signature_from_source",
    "Subst", "accepts", "apply_subst", "free_vars", "rename_vars", "unify",
    "DEFAULT_COSTS", "Match", "MatchCosts", "match", "why_not",
    "SignatureIndex", "linear_lookup", "type_key",
]

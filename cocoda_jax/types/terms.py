"""The terms of the type language: types, parameters, signatures, and how they print.

A type is one of three immutable, hashable values:

* ``TCon(name, args)`` — a constructor applied to arguments: ``int``, ``float``, ``bool``, ``str``,
  ``None``, ``list[T]``, ``dict[K, V]``, fixed-arity ``tuple[A, B]`` (``tuple[()]`` is the empty
  tuple), the variadic ``tuple[T, ...]`` (its own constructor, :data:`VARIADIC_TUPLE`),
  ``Optional[T]`` and the domain types of :data:`DOMAIN_TYPES` (``Table`` and whatever a domain
  registers with :func:`register_domain_type`).
* ``TVar(name)`` — a type variable, written as one capital letter optionally followed by digits
  (``T``, ``U``, ``K``, ``V``, ``T1``).
* ``ANY`` — the single value of ``TAnyType``: the wildcard ``Any``.

``str()`` of any term is its canonical text, and parsing that text gives the term back
(``parse_type(str(t)) == t``), so the text form can be stored and compared safely.
"""

from __future__ import annotations

import re
import types as _pytypes
from dataclasses import dataclass
from typing import Iterator, Mapping, Union

#: Constructor name of the variadic tuple ``tuple[T, ...]``; not an identifier, so no domain
#: type can clash with it.
VARIADIC_TUPLE = "tuple..."

#: Arity of the built-in constructors (``None`` means any number of arguments).
BUILTIN_ARITY: Mapping[str, int | None] = _pytypes.MappingProxyType({
    "int": 0, "float": 0, "bool": 0, "str": 0, "None": 0,
    "list": 1, "dict": 2, "Optional": 1, "tuple": None, VARIADIC_TUPLE: 1,
})

_TYPE_VAR_RE = re.compile(r"[A-Z][0-9]*\Z")
_DOMAIN_NAME_RE = re.compile(r"[A-Z][A-Za-z0-9_]*\Z")
_domain_types: dict[str, int] = {"Table": 0}

#: Domain types, name -> arity (read-only view; add with :func:`register_domain_type`).
DOMAIN_TYPES: Mapping[str, int] = _pytypes.MappingProxyType(_domain_types)


def register_domain_type(name: str, arity: int = 0) -> None:
    """Makes ``name`` a known type constructor for the parser (a domain's own data type).

    Domain names start with a capital letter and must not look like a type variable (``T1``) or
    shadow a built-in (``Any``, ``List``...). Registering the same name with the same arity again is
    a no-op, so domains can register at import time without coordination.
    """
    if not _DOMAIN_NAME_RE.match(name) or is_type_var_name(name):
        raise ValueError(f"domain type name {name!r} must be a capitalised identifier that is not a type variable")
    if name in BUILTIN_ARITY or name in _RESERVED_NAMES:
        raise ValueError(f"domain type name {name!r} is reserved by the type language")
    if arity < 0:
        raise ValueError(f"domain type {name!r}: arity must be >= 0, got {arity}")
    known = _domain_types.get(name)
    if known is not None and known != arity:
        raise ValueError(f"domain type {name!r} is already registered with arity {known}")
    _domain_types[name] = arity


# Names the parser understands as aliases; domain types may not take them.
_RESERVED_NAMES = frozenset({"Any", "List", "Dict", "Tuple", "Optional", "NoneType", "Union"})


def is_type_var_name(name: str) -> bool:
    return bool(_TYPE_VAR_RE.match(name))


def constructor_arity(name: str) -> int | None:
    """Arity of a known constructor; ``None`` for ``tuple`` (any); ``KeyError`` when unknown."""
    if name in BUILTIN_ARITY:
        return BUILTIN_ARITY[name]
    return _domain_types[name]


@dataclass(frozen=True, slots=True)
class TCon:
    """A type constructor applied to arguments (``list[int]`` is ``TCon("list", (TCon("int"),))``)."""

    name: str
    args: tuple["Type", ...] = ()

    def __str__(self) -> str:
        if self.name == VARIADIC_TUPLE:
            return f"tuple[{self.args[0]}, ...]"
        if not self.args:
            return "tuple[()]" if self.name == "tuple" else self.name
        return f"{self.name}[{', '.join(str(a) for a in self.args)}]"


@dataclass(frozen=True, slots=True)
class TVar:
    """A type variable; the same name within one signature is the same (unknown) type."""

    name: str

    def __str__(self) -> str:
        return self.name


class TAnyType:
    """The wildcard ``Any``: compatible with every type, binds nothing. A singleton (:data:`ANY`)."""

    __slots__ = ()
    _instance: "TAnyType | None" = None

    def __new__(cls) -> "TAnyType":
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "ANY"

    def __str__(self) -> str:
        return "Any"

    def __reduce__(self):  # pickling/copying keeps the singleton
        return (TAnyType, ())


ANY = TAnyType()
Type = Union[TCon, TVar, TAnyType]

INT = TCon("int")
FLOAT = TCon("float")
BOOL = TCon("bool")
STR = TCon("str")
NONE = TCon("None")


def list_of(t: Type) -> TCon:
    return TCon("list", (t,))


def dict_of(k: Type, v: Type) -> TCon:
    return TCon("dict", (k, v))


def optional(t: Type) -> TCon:
    return TCon("Optional", (t,))


def tuple_of(*ts: Type) -> TCon:
    return TCon("tuple", tuple(ts))


def variadic_tuple(t: Type) -> TCon:
    return TCon(VARIADIC_TUPLE, (t,))


@dataclass(frozen=True, slots=True)
class Param:
    """A named parameter. The name may be empty in queries (``(int, str) -> bool``)."""

    name: str
    type: Type

    def __str__(self) -> str:
        return f"{self.name}: {self.type}" if self.name else str(self.type)


@dataclass(frozen=True, slots=True)
class Signature:
    """A function signature: ordered parameters and a result type."""

    params: tuple[Param, ...]
    result: Type

    @property
    def arity(self) -> int:
        return len(self.params)

    @property
    def param_types(self) -> tuple[Type, ...]:
        return tuple(p.type for p in self.params)

    def __str__(self) -> str:
        return f"({', '.join(str(p) for p in self.params)}) -> {self.result}"


def signature(result: Type, *params: tuple[str, Type] | Type) -> Signature:
    """Convenience constructor: ``signature(FLOAT, ("xs", list_of(FLOAT)), INT)``."""
    ps = tuple(Param(*p) if isinstance(p, tuple) else Param("", p) for p in params)
    return Signature(ps, result)


def subterms(t: Type) -> Iterator[Type]:
    """All subterms of ``t``, itself first (pre-order)."""
    stack = [t]
    while stack:
        cur = stack.pop()
        yield cur
        if isinstance(cur, TCon):
            stack.extend(reversed(cur.args))


def is_ground(t: Type) -> bool:
    """True when ``t`` has no type variables and no ``Any``."""
    return all(isinstance(s, TCon) for s in subterms(t))

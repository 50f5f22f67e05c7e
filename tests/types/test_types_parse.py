"""Printing and parsing of types and signatures: round trips, conveniences, positioned errors."""

from __future__ import annotations

import ast

import pytest
from hypothesis import given, settings

from cocoda_jax.types import (
    ANY, DOMAIN_TYPES, FLOAT, INT, NONE, STR, Param, Signature, TCon, TVar, TypeSyntaxError, dict_of, list_of,
    optional, parse_signature, parse_type, register_domain_type, signature_from_ast, signature_from_source,
    tuple_of, variadic_tuple,
)
from tests.types.strategies import signatures, types


@settings(max_examples=300, deadline=None)
@given(types())
def test_type_round_trip(t):
    assert parse_type(str(t)) == t


@settings(max_examples=100, deadline=None)
@given(signatures())
def test_signature_round_trip(sig):
    assert parse_signature(str(sig)) == sig


@pytest.mark.parametrize("text, expected", [
    ("int", INT),
    ("None", NONE),
    ("Any", ANY),
    ("T1", TVar("T1")),
    ("list[float]", list_of(FLOAT)),
    ("dict[str, list[T]]", dict_of(STR, list_of(TVar("T")))),
    ("tuple[()]", tuple_of()),
    ("tuple[int, str]", tuple_of(INT, STR)),
    ("tuple[int, str,]", tuple_of(INT, STR)),
    ("tuple[int, ...]", variadic_tuple(INT)),
    ("Optional[Table]", optional(TCon("Table"))),
    ("int | None", optional(INT)),
    ("None | list[int]", optional(list_of(INT))),
    ("Union[str, None]", optional(STR)),
    ("List[int]", list_of(INT)),
    ("Dict[str, int]", dict_of(STR, INT)),
    ("Tuple[int, ...]", variadic_tuple(INT)),
    ("typing.Optional[int]", optional(INT)),
    ("list", list_of(ANY)),
    ("dict", dict_of(ANY, ANY)),
    ("tuple", variadic_tuple(ANY)),
    ("  list [ int ]  ", list_of(INT)),
])
def test_parse_type_golden(text, expected):
    assert parse_type(text) == expected


@pytest.mark.parametrize("t, text", [
    (list_of(FLOAT), "list[float]"),
    (dict_of(STR, optional(INT)), "dict[str, Optional[int]]"),
    (tuple_of(), "tuple[()]"),
    (variadic_tuple(TVar("T")), "tuple[T, ...]"),
    (ANY, "Any"),
    (NONE, "None"),
])
def test_print_type_golden(t, text):
    assert str(t) == text


def test_signature_print_and_parse():
    sig = parse_signature("(xs: list[float], k: int) -> float")
    assert sig == Signature((Param("xs", list_of(FLOAT)), Param("k", INT)), FLOAT)
    assert str(sig) == "(xs: list[float], k: int) -> float"
    assert parse_signature("() -> None") == Signature((), NONE)
    unnamed = parse_signature("(int, xs: list[str],) -> bool")
    assert [p.name for p in unnamed.params] == ["", "xs"]
    assert str(unnamed) == "(int, xs: list[str]) -> bool"


@pytest.mark.parametrize("text, position, reason", [
    ("list[int", 8, "expected ',' or ']'"),
    ("dict[int]", 0, "dict takes 2 type arguments"),
    ("Foo", 0, "unknown type name 'Foo'"),
    ("list[Foo]", 5, "unknown type name 'Foo'"),
    ("int | str", 4, "only 'X | None'"),
    ("int | None | None", 11, "two-way union"),
    ("list[int]]", 9, "after the end"),
    ("int $", 4, "unexpected character '$'"),
    ("tuple[int, ..., str]", 14, "expected ',' or ']'"),
    ("list[int, ...]", 0, "only allowed in tuple"),
    ("Any[int]", 0, "takes no type arguments"),
    ("T[int]", 0, "takes no type arguments"),
    ("int[str]", 0, "int takes no type arguments"),
    ("list[int, str]", 10, "list takes 1 type argument"),
    ("Optional", 0, "Optional needs 1 type argument"),
    ("", 0, "expected a type"),
    ("list[()]", 5, "'()' is only allowed in tuple"),
    ("numpy.ndarray", 0, "unknown type name"),
    ("Union[int, str]", 0, "only Union[X, None]"),
])
def test_parse_type_errors_point_at_position(text, position, reason):
    with pytest.raises(TypeSyntaxError) as info:
        parse_type(text)
    err = info.value
    assert err.position == position
    assert reason in err.reason
    assert err.text == text
    caret_line = str(err).splitlines()[-1]
    assert caret_line.index("^") - 2 == position  # two spaces of indentation


@pytest.mark.parametrize("text, position, reason", [
    ("(x: int, x: int) -> int", 9, "duplicate parameter name 'x'"),
    ("(x: int) ->", 11, "expected a type"),
    ("(x: int) int", 9, "expected '->'"),
    ("x: int -> int", 0, "expected '('"),
    ("(x: int -> int", 8, "expected ',' or ')'"),
    ("(x: Flaot) -> int", 4, "unknown type name 'Flaot'"),
    ("(x: int) -> int extra", 16, "after the end"),
])
def test_parse_signature_errors(text, position, reason):
    with pytest.raises(TypeSyntaxError) as info:
        parse_signature(text)
    assert info.value.position == position
    assert reason in info.value.reason


def test_type_syntax_error_is_a_value_error_and_multiline_caret():
    with pytest.raises(ValueError):
        parse_type("list[")
    with pytest.raises(TypeSyntaxError) as info:
        parse_type("dict[str,\n  Foo]")
    assert info.value.position == 12
    assert str(info.value).splitlines()[1:] == ["    Foo]", "    ^"]


def test_parse_rejects_non_strings():
    with pytest.raises(TypeError):
        parse_type(3)
    with pytest.raises(TypeError):
        parse_signature(None)


SOURCE = '''
import typing

def top_k_mean(xs: list[float], k: int = 3, /, *, weights: "Optional[list[float]]" = None) -> float:
    """Mean of the k largest."""
    return sum(sorted(xs)[-k:]) / k

async def fetch(table: Table, col: str | None) -> typing.List[dict[str, T]]:
    return []
'''


def test_signature_from_source():
    sig = signature_from_source(SOURCE, "top_k_mean")
    assert str(sig) == "(xs: list[float], k: int, weights: Optional[list[float]]) -> float"
    fetch = signature_from_source(SOURCE, "fetch")
    assert fetch == Signature((Param("table", TCon("Table")), Param("col", optional(STR))),
                              list_of(dict_of(STR, TVar("T"))))
    fn = ast.parse(SOURCE).body[1]
    assert signature_from_ast(fn) == sig
    assert signature_from_source("def f() -> None:\n    pass\n") == Signature((), NONE)


@pytest.mark.parametrize("source, name, position, reason", [
    ("def f(a, b: int) -> int:\n    return b\n", None, (1, 6), "parameter 'a' of 'f' has no type annotation"),
    ("def f(a: int):\n    return a\n", None, (1, 0), "function 'f' has no return annotation"),
    ("def f(a: int, b: Foo) -> int:\n    return a\n", None, (1, 17), "unknown type name 'Foo'"),
    ("def f(a: int, b: 'list[Foo]') -> int:\n    return a\n", None, (1, 23), "unknown type name 'Foo'"),
    ("def f(*xs: int) -> int:\n    return 0\n", None, (1, 7), "variadic parameter *xs"),
    ("def f(**kw: int) -> int:\n    return 0\n", None, (1, 8), "variadic parameter **kw"),
    ("def f(a: int) -> int | str:\n    return a\n", None, (1, 17), "only 'X | None'"),
    ("def f(a: int) -> dict[int]:\n    return a\n", None, (1, 17), "dict takes 2 type arguments"),
    ("def f(a: int) -> list[1]:\n    return a\n", None, (1, 22), "a constant 1 is not a type"),
    ("def f(a: int) -> int\n    return a\n", None, (1, 20), "invalid Python source"),
    ("x = 1\n", None, (1, 0), "expected exactly one top-level function"),
    ("def f() -> int: pass\ndef g() -> int: pass\n", None, (1, 0), "expected exactly one"),
    ("def f() -> int: pass\n", "g", (1, 0), "no top-level function named 'g'"),
    ("# é\ndef f(é: int, b) -> int: pass\n", None, (2, 14), "parameter 'b'"),
])
def test_signature_from_source_errors(source, name, position, reason):
    with pytest.raises(TypeSyntaxError) as info:
        signature_from_source(source, name)
    err = info.value
    assert err.position == position, str(err)
    assert reason in err.reason
    line, col = position
    rendered = str(err).splitlines()
    assert rendered[1] == "  " + source.split("\n")[line - 1]
    assert rendered[2].index("^") - 2 == col


def test_signature_from_ast_without_source_still_names_the_argument():
    fn = ast.parse("def f(a, b: int) -> int:\n    return b\n").body[0]
    with pytest.raises(TypeSyntaxError, match="parameter 'a' of 'f'"):
        signature_from_ast(fn)


def test_register_domain_type():
    register_domain_type("TestOnlyFrame", 1)
    register_domain_type("TestOnlyFrame", 1)  # idempotent
    assert DOMAIN_TYPES["TestOnlyFrame"] == 1
    t = parse_type("TestOnlyFrame[int]")
    assert t == TCon("TestOnlyFrame", (INT,)) and parse_type(str(t)) == t
    with pytest.raises(TypeSyntaxError, match="TestOnlyFrame takes 1 type argument"):
        parse_type("TestOnlyFrame[int, str]")
    for bad in ("T2", "lower", "Any", "List", "int"):
        with pytest.raises(ValueError):
            register_domain_type(bad)
    with pytest.raises(ValueError, match="already registered"):
        register_domain_type("TestOnlyFrame", 2)
    assert "Table" in DOMAIN_TYPES
    with pytest.raises(TypeError):
        DOMAIN_TYPES["Other"] = 0  # read-only view

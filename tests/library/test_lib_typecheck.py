"""The static type check of calls to library tools (INSERTTOOL's ``ill_typed_call``)."""

import pytest

from cocoda_jax.library import InsertRejected, LibrarySnapshot
from tests.library.library_corpus import bare


@pytest.fixture(scope="module")
def lib() -> LibrarySnapshot:
    snap = LibrarySnapshot.empty()
    for source in (
        "def add(a: float, b: float) -> float:\n    return a + b\n",
        "def count(xs: list[str]) -> int:\n    return len(xs)\n",
        "def first(xs: list[T]) -> T:\n    return xs[0]\n",
        "def pair(a: T, b: T) -> list[T]:\n    return [a, b]\n",
        "def scale(x: float, k: float = 2.0) -> float:\n    return x * k\n",
        "def label(n: int) -> str:\n    return str(n)\n",
        "def maybe(x: Optional[int]) -> int:\n    return 0 if x is None else x\n",
    ):
        snap = snap.insert(bare(source))
    return snap


def check(lib, body: str, params: str = "x: float, n: int, s: str, words: list[str]", result: str = "float"):
    lines = "".join(f"    {line}\n" for line in body.splitlines())
    return lib.insert(bare(f"def probe({params}) -> {result}:\n{lines}"))


def rejected(lib, body: str, **kwargs) -> str:
    with pytest.raises(InsertRejected) as info:
        check(lib, body, **kwargs)
    assert info.value.reason == "ill_typed_call", str(info.value)
    return info.value.detail


@pytest.mark.parametrize("body", [
    "return add(x, 1)",                 # int literal where float is expected
    "return add(n, True)",              # int and bool widen to float
    "return add(-3, 2.5)",              # negated literal
    "return add(b=x, a=x)",             # keywords in any order
    "return add(float(s), x)",          # an unknown expression is Any
    "return add(count(words), x)",      # a nested call's result type (int) widens to float
    "c = count(words)\nreturn add(c, c)",        # a local assigned once from a call
    "return add(first([1.5, 2.5]), x)",         # a generic result instantiated by a literal list
    "y = first(words)\nreturn label(len(y))",  # builtins are Any
    "return scale(x)",                   # a defaulted parameter may be left out
    "return scale(x, k=3)",
    "return maybe(n) + maybe(None)",     # Optional accepts T and None
    "v = x\nv = 's'\nreturn add(v, v)",  # a local assigned twice is Any
    "k = count([s])\ns = add(k, 1)\nreturn s",  # a reassigned parameter is Any (str, then float)
    "return add(*[x, x])",               # starred arguments: arity unknown, not refused
])
def test_well_typed_calls_are_accepted(lib, body):
    assert "probe" in check(lib, body)


@pytest.mark.parametrize("body, fragment", [
    ("return add(x, 'two')", "argument 'b' of add expects float, but 'two' has type str"),
    ("return add(s, x)", "argument 'a' of add expects float, but s has type str"),
    ("return add(x, None)", "None"),
    ("return count([1, 2])", "argument 'xs' of count expects list[str], but [1, 2] has type list[int]"),
    ("return label(x)", "expects int, but x has type float"),
    ("y = label(n)\nreturn add(y, 1)", "argument 'a' of add expects float, but y has type str"),
    ("return add(label(n), x)", "has type str"),
    ("return add(first(words), x)", "expects float"),
    ("return add(x)", "missing argument(s) ['b']"),
    ("return add(x, x, x)", "takes 2 argument(s)"),
    ("return add(x, c=1)", "has no parameter 'c'"),
    ("return add(x, a=1)", "given twice"),
    ("return pair(x, s)", "pair"),
    ("return label(maybe(x))", "argument 'x' of maybe expects"),
])
def test_ill_typed_calls_are_rejected_with_the_place(lib, body, fragment):
    detail = rejected(lib, body)
    assert detail.startswith("line "), detail
    assert fragment in detail, detail


def test_nested_scopes_still_check_literals_and_nested_calls(lib):
    assert "probe" in check(lib, "return sum([add(v, 1) for v in [x]])")
    rejected(lib, "return sum([add(v, 'one') for v in [x]])")


def test_callers_type_variables_are_rigid(lib):
    generic = "xs: list[T]"
    assert "probe" in check(lib, "return first(xs)", params=generic, result="T")
    assert "probe" in check(lib, "return pair(first(xs), first(xs))", params=generic, result="list[T]")
    detail = rejected(lib, "return add(first(xs), 1.0)", params=generic)
    assert "expects float" in detail and "has type T" in detail


def test_each_call_site_gets_fresh_type_variables(lib):
    # first(...) is used at str and at float in the same body
    assert "probe" in check(lib, "a = first(words)\nb = first([1.0])\nreturn add(b, count([a]))")

"""Call-edge extraction from code (execution order, multiplicity, scoping) and the content id."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cocoda_jax.library import MalformedTool, analyse
from cocoda_jax.library.analysis import parse_function


def calls(body: str, params: str = "x: float") -> tuple[str, ...]:
    lines = "".join(f"    {line}\n" for line in body.splitlines())
    return analyse(f"def f({params}) -> float:\n{lines}").calls


def test_arguments_run_before_the_call_that_takes_them():
    assert calls("return add(square(x), square(neg(x)))") == ("square", "neg", "square", "add")


def test_statements_in_order_and_assignment_values_before_targets():
    assert calls("a = g(x)\nb[h(a)] = k(a)\nreturn m(b)") == ("g", "k", "h", "m")


def test_multiplicity_counts_call_sites_once_each():
    body = "t = 0\nfor i in seq(x):\n    t = add(t, i)\nif t > 0:\n    t = add(t, 1)\nelse:\n    t = sub(t, 1)\nreturn t"
    assert calls(body) == ("seq", "add", "add", "sub")


def test_comprehension_iterable_first_then_conditions_then_element():
    assert calls("return [f1(v) for v in src(x) if keep(v)]") == ("src", "keep", "f1")
    assert calls("return {k1(v): v1(v) for v in src(x)}") == ("src", "k1", "v1")


def test_dict_display_interleaves_keys_and_values():
    assert calls("return {ka(): va(), kb(): vb()}") == ("ka", "va", "kb", "vb")


def test_params_locals_imports_and_builtins_are_not_library_calls():
    body = ("import math\n"
            "def helper(q):\n    return q\n"
            "g = lambda z: z\n"
            "total = sum([abs(x), math.sqrt(x), helper(x), g(x), len([1])])\n"
            "return total")
    assert calls(body, params="x: float, fn: float") == ()
    assert calls("return x(1)", params="x: float") == ()


def test_nested_scopes_see_enclosing_bindings_and_shadowing():
    # `add` is a comprehension variable inside, a library call outside
    assert calls("ys = [add for add in range(3)]\nreturn add(x, 1)") == ("add",)
    # calls in a nested function count where it is defined, resolving through the enclosing scope
    assert calls("def inner(v):\n    return mul(v, scale(v))\nreturn inner(x)") == ("scale", "mul")
    assert calls("k = lambda v: neg(v)\nreturn k(x)") == ("neg",)


def test_top_level_imports_bind_names_and_count_in_the_id():
    source = "from math import sqrt\nimport statistics as st\ndef f(x: float) -> float:\n    return sqrt(st.mean([x]))\n"
    facts = analyse(source)
    assert facts.calls == () and facts.references == ()
    moved = "def f(x: float) -> float:\n    return sqrt(st.mean([x]))\n"
    assert analyse(moved).calls == ("sqrt",) and analyse(moved).references == ("st",)
    assert analyse(source.replace("sqrt", "floor")).code_id != facts.code_id


def test_non_call_uses_of_free_names_are_references():
    facts = analyse("def f(x: float) -> float:\n    return apply(add, x) + pi\n")
    assert facts.calls == ("apply",)
    assert facts.references == ("add", "pi")


def test_call_sites_know_whether_they_are_in_the_tools_own_scope():
    facts = analyse("def f(x: float) -> float:\n    y = [g(v) for v in h(x)]\n    return k(x)\n")
    assert [(s.name, s.top_level) for s in facts.call_sites] == [("h", True), ("g", False), ("k", True)]


def test_self_call_is_extracted():
    assert analyse("def f(x: int) -> int:\n    return f(x - 1) if x else 0\n").calls == ("f",)


def test_id_ignores_docstring_comments_formatting_and_name():
    base = analyse("def f(a: float, b: float) -> float:\n    return a + b\n")
    variants = [
        'def f(a: float, b: float) -> float:\n    """Adds."""\n    return a + b  # sum\n',
        "def f(a: float,\n      b: float) -> float:\n\n    return (a + b)\n",
        "def g(a: float, b: float) -> float:\n    return a + b\n",
    ]
    for source in variants:
        assert analyse(source).code_id == base.code_id, source
    assert len(base.code_id) == 16 and int(base.code_id, 16) >= 0


def test_id_changes_with_the_code():
    base = analyse("def f(a: float, b: float) -> float:\n    return a + b\n").code_id
    for source in ("def f(a: float, b: float) -> float:\n    return b + a\n",
                   "def f(a: float, c: float) -> float:\n    return a + c\n",
                   "def f(a: float, b: int) -> float:\n    return a + b\n",
                   "def f(a: float, b: float) -> float:\n    '''doc'''\n    x = 1\n    return a + b\n"):
        assert analyse(source).code_id != base, source


@settings(max_examples=30, deadline=None)
@given(st.lists(st.sampled_from(["p", "q", "r"]), min_size=1, max_size=6))
def test_straight_line_calls_come_back_in_written_order(names):
    body = "".join(f"    v{i} = {n}(x)\n" for i, n in enumerate(names))
    assert analyse(f"def f(x: float) -> float:\n{body}    return x\n").calls == tuple(names)


@pytest.mark.parametrize("source, fragment", [
    ("def f(x: float) -> float\n    return x\n", "syntax error at line 1"),
    ("x = 1\n", "one function definition"),
    ("import math\nk = 2\ndef f(x: float) -> float:\n    return x\n", "one function definition (plus imports)"),
    ("def f(x: float) -> float:\n    return x\ndef g(x: float) -> float:\n    return x\n", "found FunctionDef, FunctionDef"),
    ("from math import f\ndef f(x: float) -> float:\n    return x\n", "also imported"),
    ("async def f(x: float) -> float:\n    return x\n", "async"),
    ("@deco\ndef f(x: float) -> float:\n    return x\n", "decorators"),
    ("def f(*xs: float) -> float:\n    return 0.0\n", "*args"),
    ("def f(x: float, *, k: int) -> float:\n    return x\n", "keyword-only"),
    ("def _f(x: float) -> float:\n    return x\n", "may not start with '_'"),
    ("def sum(x: float) -> float:\n    return x\n", "shadow a Python builtin"),
    ("def f(x: float) -> float:\n    global y\n    return x\n", "'global'"),
    (b"def f(): pass", "must be a str"),
])
def test_malformed_sources_name_the_problem(source, fragment):
    with pytest.raises(MalformedTool) as info:
        parse_function(source)
    assert info.value.reason == "malformed"
    assert fragment in str(info.value)

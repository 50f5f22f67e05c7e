"""The static checker: what the program format allows and what it refuses, with the place."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cocoda_jax.execution.guard import ALLOWED_MODULES, attribute_allowed, check_source

ALLOWED = [
    "x0 = add(n0, n1)\nanswer = round(x0, 2)",
    "import math\nanswer = math.sqrt(2)",
    "from collections import Counter\nanswer = Counter('abca').most_common(1)",
    "import statistics as st\nanswer = st.mean([1, 2, 3])",
    "def f(x):\n    return [y * 2 for y in x]\nanswer = f([1, 2])",
    "_pre = []\ntry:\n    _pre.append(bool(1 > 0))\nexcept Exception as _e:\n    _pre.append(repr(_e))\nanswer = _pre",
    "xs = [3, 1, 2]\nxs.sort()\nanswer = getattr(xs, 'count')(1)",
    "input = 3\nanswer = input + 1",  # a forbidden builtin's name, bound by the program itself
    "g = (i for i in range(3))\nanswer = next(g)",
    "match [1, 2]:\n    case [a, b]:\n        answer = a + b",
]

REFUSED = [
    ("import os", 1, "import of module 'os'"),
    ("import subprocess", 1, "import of module 'subprocess'"),
    ("x = 1\nimport ctypes", 2, "import of module 'ctypes'"),
    ("from os import path", 1, "import from module 'os'"),
    ("from . import values", 1, "relative imports"),
    ("from math import *", 1, "'import *'"),
    ("from random import _os", 1, "importing '_os'"),
    ("import math as __m", 1, "'__m'"),
    ("answer = ().__class__", 1, "attribute '__class__'"),
    ("answer = add.__globals__", 1, "attribute '__globals__'"),
    ("import random\nanswer = random._os", 2, "attribute '_os'"),
    ("g = (i for i in [1])\nanswer = g.gi_frame", 2, "attribute 'gi_frame'"),
    ("answer = f.f_back", 1, "attribute 'f_back'"),
    ("answer = int.mro()", 1, "attribute 'mro'"),
    ("answer = __builtins__", 1, "name '__builtins__'"),
    ("answer = __import__('os')", 1, "name '__import__'"),
    ("answer = eval('1')", 1, "'eval' is not available"),
    ("exec('x = 1')", 1, "'exec' is not available"),
    ("answer = open('/etc/passwd').read()", 1, "'open' is not available"),
    ("answer = globals()", 1, "'globals' is not available"),
    ("answer = vars()", 1, "'vars' is not available"),
    ("breakpoint()", 1, "'breakpoint' is not available"),
    ("answer = input()", 1, "'input' is not available"),
    ("answer = compile('1', 'f', 'eval')", 1, "'compile' is not available"),
    ("answer = getattr((), '__class__')", 1, "getattr(..., '__class__')"),
    ("answer = hasattr(f, 'gi_frame')", 1, "hasattr(..., 'gi_frame')"),
    ("import math\nmath.pi = 3", 2, "assigning or deleting attribute 'pi'"),
    ("import math\ndel math.pi", 2, "assigning or deleting attribute 'pi'"),
    ("class A:\n    pass", 1, "a class definition"),
    ("def f():\n    global x\n    x = 1", 2, "a 'global' statement"),
    ("async def f():\n    pass", 1, "an async function"),
    ("def f(__x):\n    return __x", 1, "parameter '__x'"),
    ("f(__kw=1)", 1, "keyword argument '__kw'"),
    ("match x:\n    case object(__class__=c):\n        pass", 2, "attribute '__class__'"),
    ("try:\n    pass\nexcept Exception as __e:\n    pass", 3, "name '__e'"),
]


@pytest.mark.parametrize("source", ALLOWED)
def test_allowed_programs_pass(source):
    assert check_source(source) == ()


@pytest.mark.parametrize("source, line, fragment", REFUSED)
def test_refused_constructs_are_named_with_their_line(source, line, fragment):
    violations = check_source(source)
    assert violations, source
    assert any(v.line == line and fragment in v.message for v in violations), violations
    assert str(violations[0]).startswith(f"line {violations[0].line}: ")


def test_syntax_errors_raise():
    with pytest.raises(SyntaxError):
        check_source("answer = (1,")


def test_tool_sources_may_only_define_functions_and_import():
    assert check_source("import math\ndef f(x: float) -> float:\n    '''Doc.'''\n    return math.floor(x)\n",
                        tool=True) == ()
    (violation,) = check_source("CACHE = {}\ndef f(x):\n    return x\n", tool=True)
    assert violation.line == 1 and "top-level Assign" in violation.message
    assert any("must define a function" in v.message for v in check_source("import math\n", tool=True))
    # The same text is a fine program.
    assert check_source("CACHE = {}\ndef f(x):\n    return x\n") == ()


def test_every_allowed_module_imports_cleanly():
    for name in ALLOWED_MODULES:
        assert check_source(f"import {name}") == ()


@settings(max_examples=60, deadline=None)
@given(st.from_regex(r"\A_[A-Za-z0-9_]{0,12}\Z"))
def test_no_underscore_attribute_passes(attr):
    assert not attribute_allowed(attr)
    assert check_source(f"answer = x.{attr}")


@settings(max_examples=60, deadline=None)
@given(st.from_regex(r"\A[a-z][a-z0-9_]{0,10}\Z"))
def test_plain_attributes_pass_unless_frame_like(attr):
    frame_like = attr.startswith(("gi_", "cr_", "ag_", "f_", "tb_", "co_")) or attr in ("mro", "register")
    assert attribute_allowed(attr) == (not frame_like)

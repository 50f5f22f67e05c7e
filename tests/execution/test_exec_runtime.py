"""The worker's runtime, exercised in-process on benign code: tracing, values, module copies, limits.

(Hostile code is only ever run through a real Sandbox, in test_exec_hostile.py.)
"""

import builtins
import collections
import json
import types

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cocoda_jax import values
from cocoda_jax.execution import guard
from cocoda_jax.execution.runtime import Limits, Runtime, SandboxViolation, build_modules, encode_bounded


@pytest.fixture(scope="module")
def rt():
    return Runtime(Limits(max_stdout=100, max_values=5, max_value_chars=50))


@pytest.fixture(scope="module")
def lib(rt, tools):
    return rt.library("tools", list(tools))


def run(rt, lib, source, inputs=None):
    reply = rt.run(lib, source, inputs)
    return json.loads(json.dumps(reply))  # what crosses the pipe is plain JSON


def test_module_copies_hand_over_no_module_and_no_escape_hatch():
    dangerous = {id(getattr(builtins, n)) for n in ("eval", "exec", "open", "compile", "__import__", "getattr",
                                                    "setattr", "globals", "vars", "input", "breakpoint")}
    for name, proxy in build_modules().items():
        assert name in guard.ALLOWED_MODULES
        for attr, value in vars(proxy).items():
            if attr.startswith("__"):
                continue  # the ModuleType's own __name__/__doc__ etc., unreachable by the attribute rule
            assert guard.attribute_allowed(attr), (name, attr)
            assert not isinstance(value, types.ModuleType), (name, attr)
            assert id(value) not in dangerous, (name, attr)
            assert attr not in guard.HIDDEN_ATTRIBUTES.get(name, ()), (name, attr)
    modules = build_modules()
    assert not hasattr(modules["operator"], "attrgetter") and not hasattr(modules["string"], "Formatter")
    assert not hasattr(modules["functools"], "update_wrapper") and not hasattr(modules["functools"], "wraps")
    with pytest.raises(SandboxViolation, match="read-only"):
        setattr(modules["math"], "pi", 3)
    with pytest.raises(SandboxViolation, match="read-only"):
        delattr(modules["math"], "pi")
    assert modules["math"].pi > 3.14
    assert set(vars(modules["typing"])) - {"__name__", "__doc__", "__package__", "__loader__", "__spec__"} \
        <= guard.TYPING_NAMES


def test_nothing_a_program_is_handed_leads_to_a_module_frame_or_unsafe_builtin(rt, lib):
    """The closure of public attributes (the only ones the guard lets code read) over the builtins,
    the module copies, the traced tools and typical instances contains no escape hatch."""
    modules = rt.modules
    samples = [modules["random"].Random(1), modules["collections"].Counter("ab"), modules["re"].compile("a+"),
               modules["re"].match("a", "a"), modules["decimal"].Decimal(1), modules["decimal"].getcontext(),
               modules["json"].JSONDecoder(), modules["fractions"].Fraction(1, 3), modules["datetime"].datetime(2000, 1, 1),
               modules["collections"].namedtuple("T", "x")(1), modules["functools"].partial(abs), (i for i in ()),
               ValueError("x"), modules["typing"].Optional[int], modules["statistics"].NormalDist()]
    frontier = [*rt.builtins.values(), *modules.values(), *lib.namespace.values(), *samples]
    unsafe = {id(getattr(builtins, n)) for n in ("eval", "exec", "open", "compile", "__import__", "getattr", "setattr",
                                                "delattr", "globals", "locals", "vars", "input", "breakpoint")}
    copies = {id(m) for m in modules.values()}
    seen, per_type, alive = set(), collections.Counter(), []
    while frontier:
        obj = frontier.pop()
        plain = not callable(obj) and not isinstance(obj, (type, types.ModuleType))
        if id(obj) in seen or (plain and per_type[type(obj)] >= 50):  # Fraction.real: a new Fraction each time
            continue
        seen.add(id(obj))
        per_type[type(obj)] += plain
        alive.append(obj)  # holding every visited object keeps ids unique during the walk
        assert not (isinstance(obj, types.ModuleType) and id(obj) not in copies), obj
        assert not isinstance(obj, (types.FrameType, types.CodeType, types.TracebackType)), obj
        assert id(obj) not in unsafe or obj is rt.builtins["__import__"], obj
        for name in dir(obj):
            if guard.attribute_allowed(name):
                try:
                    frontier.append(getattr(obj, name))
                except Exception:
                    pass
    assert len(seen) > 1000  # the walk did cover the environment


def test_top_level_calls_are_traced_in_order_with_repeats(rt, lib):
    reply = run(rt, lib, "a = add(1, 2)\nb = sum_sq(a, 1)\nc = add(add(1, 1), b)\nanswer = c")
    assert reply["ok"] and reply["value"] == 12
    # sum_sq calls square/add/mul inside itself: those are not top-level. add(add(..)) calls the inner first.
    assert reply["calls"] == ["add", "sum_sq", "add", "add"]


def test_a_tool_passed_into_a_tool_is_not_a_top_level_call(rt, lib):
    reply = run(rt, lib, "answer = apply_twice(square, 3)")
    assert reply["value"] == 81 and reply["calls"] == ["apply_twice"]
    reply = run(rt, lib, "answer = list(map(square, [1, 2]))")
    assert reply["value"] == [1, 4] and reply["calls"] == ["square", "square"]


def test_values_are_top_level_assignments_in_order_as_they_were(rt, lib):
    reply = run(rt, lib, "xs = [1]\nxs.append(2)\na, (b, *c) = 1, (2, 3, 4)\na += 10\nfor i in range(2):\n"
                         "    t = i\nanswer = xs")
    assert reply["values"] == [["xs", [1]], ["a", 1], ["b", 2], ["c", [3, 4]], ["a", 11]]
    # max_values=5: the sixth (answer) is not kept; the answer itself still is.
    assert reply["value"] == [1, 2]


def test_large_intermediate_values_are_elided_not_fatal(rt, lib):
    reply = run(rt, lib, "big = list(range(1000))\nanswer = len(big)")
    assert reply["ok"] and reply["value"] == 1000
    assert reply["values"][0] == ["big", {"__repr__": "<value too large to record>"}]


def test_inputs_are_bound_and_not_recorded(rt, lib):
    reply = run(rt, lib, "x0 = mul(n0, n1)\nanswer = x0", {"n0": 6, "n1": values.encode(0.5)})
    assert reply["value"] == 3.0 and reply["values"] == [["x0", 3.0], ["answer", 3.0]]


def test_print_is_captured_and_bounded(rt, lib):
    reply = run(rt, lib, "print('a', 1, sep='-')\nprint('x' * 500)\nanswer = 0")
    assert reply["stdout"].startswith("a-1\nxxx") and "more characters of output truncated" in reply["stdout"]
    assert len(reply["stdout"]) < 200


def test_failures_are_typed_and_located(rt, lib):
    assert run(rt, lib, "x = 1")["error"] == ["no_answer", "the program finished without binding 'answer'"]
    kind, message = run(rt, lib, "a = 1\nanswer = add(a, 'x')")["error"]
    assert kind == "runtime" and message.startswith("TypeError") and "(in tool add, line 2)" in message
    kind, message = run(rt, lib, "a = 1\nanswer = a / 0")["error"]
    assert kind == "runtime" and message.endswith("(line 2)")
    assert run(rt, lib, "answer = (")["error"][0] == "syntax"
    assert run(rt, lib, "import os")["error"][0] == "forbidden"


def test_library_errors_name_the_tool(rt):
    bad = rt.library("bad-syntax", ["def f(x):\n    return x +\n"])
    assert bad.error[0] == "syntax" and "tool #0" in bad.error[1]
    bad = rt.library("bad-import", ["import os\ndef g(x):\n    return os.getcwd()\n"])
    assert bad.error[0] == "forbidden" and "tool 'g'" in bad.error[1]
    bad = rt.library("bad-top", ["CACHE = {}\ndef h(x):\n    return x\n"])
    assert bad.error[0] == "forbidden" and "top-level" in bad.error[1]
    reply = rt.run(bad, "answer = 1")
    assert reply["error"] == ["forbidden", bad.error[1]]


def test_library_cache_is_an_lru(rt):
    small = Runtime(library_cache=2)
    for key in ("a", "b", "c"):
        assert small.library(key, ["def f(x):\n    return x\n"]) is not None
    assert small.library("a", None) is None  # evicted: the trainer must resend the sources
    assert small.library("c", None) is not None


@settings(max_examples=80, deadline=None)
@given(st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4)
    | st.tuples(inner, inner),
    max_leaves=20))
def test_bounded_encoding_is_the_codec_when_it_fits(value):
    text = json.dumps(values.encode(value))
    assert encode_bounded(value, 3 * len(text) + 16) == values.encode(value)
    small = encode_bounded(value, 8)
    assert small is None or len(json.dumps(small)) <= 12 * 8 + 2  # \uXXXX escapes: up to 12 per char


def test_bounded_encoding_refuses_huge_cyclic_and_deep_values():
    cyclic = []
    cyclic.append(cyclic)
    deep = []
    for _ in range(200):
        deep = [deep]
    assert encode_bounded(list(range(10**6)), 1000) is None
    assert encode_bounded(cyclic, 10**6) is None
    assert encode_bounded(deep, 10**6) is None
    assert encode_bounded(10**5000, 10**6) is None


def test_a_none_answer_or_value_is_a_value_not_an_output_limit(rt, lib):
    """``None`` encodes to ``None``, which the bounded encoder also uses for "too large": a tool that
    returns None (BFCL's ``mkdir``) must still give an ok run."""
    reply = rt.run(lib, "x = None\nanswer = x")
    assert reply["ok"], reply["error"]
    assert reply["value"] is None and reply["values"] == [["x", None], ["answer", None]]

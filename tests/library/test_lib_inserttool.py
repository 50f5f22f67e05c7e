"""INSERTTOOL's behavioural checks, run through the real sandbox: examples, pre/post-conditions,
duplicate behaviour, and untrusted code in any of them."""

import pytest

from cocoda_jax.library import InsertRejected, LibrarySnapshot, Tool
from tests.library.library_corpus import EXPECTED


def rejected(snap, tool, reason, runner, **kwargs) -> str:
    before = snap.to_json()
    with pytest.raises(InsertRejected) as info:
        snap.insert(tool, runner=runner, **kwargs)
    assert info.value.reason == reason, str(info.value)
    assert info.value.tool_name == tool.name
    assert snap.to_json() == before
    return info.value.detail


def test_the_corpus_passes_every_check_and_keeps_its_facts(checked_library):
    for name, (depth, children, flat) in EXPECTED.items():
        assert (checked_library.depth(name), checked_library.children(name), checked_library.flat(name)) \
            == (depth, children, flat)


def test_the_library_runs_in_the_sandbox(checked_library, sandbox):
    result = sandbox.run("answer = spread(3, 4)", checked_library)
    assert result.ok and result.value == 21.5 and result.calls == ("spread",)


# -- example_failed ---------------------------------------------------------------------------------

def test_wrong_expected_value(checked_library, sandbox):
    tool = Tool.from_source("def cube(x: float) -> float:\n    return mul(square(x), x)\n", "x cubed.",
                            examples=[({"x": 2}, 8), ({"x": 3}, 28)])
    detail = rejected(checked_library, tool, "example_failed", sandbox)
    assert detail == "examples[1] cube(x=3) returned 27, expected 28"


def test_example_that_raises_inside_a_child(checked_library, sandbox):
    tool = Tool.from_source("def inverse(x: float) -> float:\n    return div(1, x)\n", "1 / x.",
                            examples=[({"x": 4}, 0.25), ({"x": 0}, 0.0)])
    detail = rejected(checked_library, tool, "example_failed", sandbox)
    assert detail.startswith("examples[1] inverse(x=0) raised ZeroDivisionError")


def test_example_that_times_out(checked_library, sandbox):
    tool = Tool.from_source("def spin(x: float) -> float:\n    while x == x:\n        x = add(x, 1)\n    return x\n",
                            "Never returns.", examples=[({"x": 1}, 1)])
    detail = rejected(checked_library, tool, "example_failed", sandbox, timeout_s=0.5)
    assert "did not run: timeout" in detail


def test_tool_that_fails_to_load(checked_library, sandbox):
    tool = Tool.from_source("def shift(x: float, k: float = div(1, 0)) -> float:\n    return add(x, k)\n",
                            "Its default raises when the library is loaded.", examples=[({"x": 1, "k": 2}, 3)])
    detail = rejected(checked_library, tool, "example_failed", sandbox)
    assert "did not run: runtime" in detail and "ZeroDivisionError" in detail


# -- spec_violated ----------------------------------------------------------------------------------

def test_precondition_false_on_an_example(checked_library, sandbox):
    tool = Tool.from_source("def root(x: float) -> float:\n    return x ** 0.5\n", "Square root.",
                            pre=["x >= 0"], examples=[({"x": 4}, 2.0), ({"x": -4}, 0)])
    detail = rejected(checked_library, tool, "spec_violated", sandbox)
    assert detail == "pre[0] 'x >= 0' is false on examples[1] root(x=-4)"


def test_postcondition_false_on_an_example(checked_library, sandbox):
    tool = Tool.from_source("def diff(a: float, b: float) -> float:\n    return sub(a, b)\n", "a minus b.",
                            post=["result <= a", "result >= 0"], examples=[({"a": 5, "b": 3}, 2), ({"a": 1, "b": 3}, -2)])
    detail = rejected(checked_library, tool, "spec_violated", sandbox)
    assert detail == "post[1] 'result >= 0' is false on examples[1] diff(a=1, b=3) (result -2)"


def test_condition_that_raises(checked_library, sandbox):
    tool = Tool.from_source("def diff(a: float, b: float) -> float:\n    return sub(a, b)\n", "a minus b.",
                            post=["len(result) > 0"], examples=[({"a": 5, "b": 3}, 2)])
    detail = rejected(checked_library, tool, "spec_violated", sandbox)
    assert "post[0] 'len(result) > 0' raised TypeError" in detail


def test_conditions_may_call_library_tools(checked_library, sandbox):
    tool = Tool.from_source("def gap(a: float, b: float) -> float:\n    return sub(max(a, b), min(a, b))\n",
                            "Distance between a and b.", pre=["mul(a, b) == a * b"],
                            post=["add(result, min(a, b)) == max(a, b)"],
                            examples=[({"a": 5, "b": 3}, 2), ({"a": 1, "b": 3}, 2)])
    assert checked_library.insert(tool, runner=sandbox).children("gap") == ("sub",)


def test_conditions_see_fresh_arguments(checked_library, sandbox):
    # the tool mutates its argument; the post-condition still sees the example's value
    tool = Tool.from_source("def pop_last(xs: list[float]) -> float:\n    return xs.pop()\n", "Last element.",
                            post=["len(xs) == 3", "result == xs[-1]"], examples=[({"xs": [1, 2, 3]}, 3)])
    assert "pop_last" in checked_library.insert(tool, runner=sandbox)


def test_forbidden_code_in_a_condition_is_malformed(checked_library, sandbox):
    tool = Tool.from_source("def diff(a: float, b: float) -> float:\n    return sub(a, b)\n", "a minus b.",
                            post=["result.__class__ is float"], examples=[({"a": 5, "b": 3}, 2)])
    assert "post[0]" in rejected(checked_library, tool, "malformed", sandbox)


# -- duplicate_behaviour ----------------------------------------------------------------------------

def test_same_behaviour_under_other_code_and_parameter_names(checked_library, sandbox):
    tool = Tool.from_source("def plus(p: float, q: float) -> float:\n    return q + p\n", "Sum.",
                            examples=[({"p": 10, "q": 1}, 11)])
    detail = rejected(checked_library, tool, "duplicate_behaviour", sandbox)
    assert "'add'" in detail and "all 3 examples" in detail


def test_only_candidates_that_agree_replay_the_new_tools_examples(checked_library, sandbox):
    batches = []

    class Counting:
        """Forwards to the real sandbox and records the batches."""

        def run_many(self, programs, library, timeout_s):
            batches.append(list(programs))
            return sandbox.run_many(programs, library, timeout_s)

    tool = Tool.from_source("def plus(p: float, q: float) -> float:\n    return q + p\n", "Sum.",
                            examples=[({"p": 10, "q": 1}, 11)])
    rejected(checked_library, tool, "duplicate_behaviour", Counting())
    first, second = batches
    # round one: plus's own example and plus on the 8 example inputs of the 7 tools of its signature,
    # where sum_sq's and spread's (3, 4) run once
    assert all("plus(" in p for p in first)
    assert len(first) == 1 + 8 - 1 and first.count("answer = plus(3, 4)\n") == 1
    # round two: only add agreed with plus, so only add replays plus's example
    assert second == ["answer = add(10, 1)\n"]


def test_behaviour_is_compared_on_the_union_of_both_tools_examples(checked_library, sandbox):
    # `almost` differs from add only where neither tool has an example: a duplicate as far as known
    almost = "def almost(a: float, b: float) -> float:\n    return 0.0 if a > 99 else a + b\n"
    tool = Tool.from_source(almost, "Sum below 100.", examples=[({"a": 1, "b": 2}, 3)])
    rejected(checked_library, tool, "duplicate_behaviour", sandbox)
    # one example where they differ (add(100, 1) = 101) makes it a different tool
    tool = Tool.from_source(almost, "Sum below 100.", examples=[({"a": 1, "b": 2}, 3), ({"a": 100, "b": 1}, 0.0)])
    assert "almost" in checked_library.insert(tool, runner=sandbox)


def test_other_signatures_are_not_compared(checked_library, sandbox):
    tool = Tool.from_source("def iadd(a: int, b: int) -> int:\n    return a + b\n", "Integer sum.",
                            examples=[({"a": 2, "b": 3}, 5)])
    assert "iadd" in checked_library.insert(tool, runner=sandbox)


def test_a_composite_can_duplicate_another_composite(checked_library, sandbox):
    tool = Tool.from_source("def squares(x: float, y: float) -> float:\n    return add(mul(x, x), mul(y, y))\n",
                            "Sum of squares, inlined.", examples=[({"x": 1, "y": 2}, 5)])
    assert "'sum_sq'" in rejected(checked_library, tool, "duplicate_behaviour", sandbox)


def test_no_examples_on_either_side_is_not_a_duplicate(sandbox):
    snap = LibrarySnapshot.empty().insert(Tool.from_source("def f(x: int) -> int:\n    return x\n", "F."))
    snap = snap.insert(Tool.from_source("def g(x: int) -> int:\n    return x + 0\n", "G."), runner=sandbox)
    assert len(snap) == 2


# -- the default runner -----------------------------------------------------------------------------

def test_runner_none_uses_the_process_wide_default_sandbox():
    from cocoda_jax.execution import default_sandbox

    snap = LibrarySnapshot.empty().insert(Tool.from_source(
        "def twice(x: float) -> float:\n    return x * 2\n", "Twice.", examples=[({"x": 2}, 4)]))
    with pytest.raises(InsertRejected) as info:
        snap.insert(Tool.from_source("def thrice(x: float) -> float:\n    return x * 3\n", "Thrice.",
                                     examples=[({"x": 2}, 5)]))
    assert info.value.reason == "example_failed"
    assert not default_sandbox().closed

"""The Tool record: what from_source derives, normalises and refuses."""

import dataclasses
import fractions

import pytest

from cocoda_jax.library import MalformedTool, Tool
from cocoda_jax.types import parse_signature

ADD = "def add(a: float, b: float) -> float:\n    '''Adds.'''\n    return a + b\n"


def test_from_source_reads_name_signature_and_id():
    tool = Tool.from_source(ADD, "Add two numbers.", pre=["a == a"], post="result == a + b",
                            examples=[({"b": 3, "a": 2}, 5)], complexity="O(1)")
    assert tool.name == "add"
    assert tool.signature == parse_signature("(a: float, b: float) -> float")
    assert tool.pre == ("a == a",) and tool.post == ("result == a + b",)
    assert tool.examples == (({"a": 2, "b": 3}, 5),)
    assert list(tool.examples[0][0]) == ["a", "b"]  # parameter order, whatever the caller's order
    assert tool.complexity == "O(1)"
    assert len(tool.id) == 16
    assert tool.param_names == ("a", "b")


def test_records_are_frozen_hashable_values():
    one = Tool.from_source(ADD, "Add.", examples=[({"a": 1, "b": 2}, 3)])
    two = Tool.from_source(ADD, "Add.", examples=[({"a": 1, "b": 2}, 3)])
    assert one == two and hash(one) == hash(two) and len({one, two}) == 1
    assert one != Tool.from_source(ADD, "Add.", examples=[({"a": 1, "b": 2}, 4)])
    with pytest.raises(dataclasses.FrozenInstanceError):
        one.name = "plus"


def test_example_values_are_copied_into_codec_types():
    xs = [1, 2]
    tool = Tool.from_source("def first(xs: list[int], s: Any) -> int:\n    return xs[0]\n", "First.",
                            examples=[({"xs": xs, "s": {1, 2}}, fractions.Fraction(1, 3))])
    xs.append(3)  # the caller's list is not shared with the record
    args, expected = tool.examples[0]
    assert args == {"xs": [1, 2], "s": frozenset({1, 2})}
    assert expected == fractions.Fraction(1, 3)


@pytest.mark.parametrize("kwargs, fragment", [
    (dict(examples=[({"a": 1}, 1)]), "must bind exactly the parameters ['a', 'b'] (missing ['b']"),
    (dict(examples=[({"a": 1, "b": 2, "c": 3}, 1)]), "unknown ['c']"),
    (dict(examples=[({"a": 1, "b": 2},)]), "must be a pair"),
    (dict(examples=[([1, 2], 3)]), "must be a dict"),
    (dict(examples=[({"a": object(), "b": 2}, 3)]), "cannot encode"),
    (dict(pre=["a >"]), "pre[0] is not a Python expression"),
    (dict(post=["result ="]), "post[0] is not a Python expression"),
    (dict(pre=["result > 0"]), "only post-conditions"),
    (dict(pre=[""]), "non-empty str"),
    (dict(description=None), "description must be a str"),
    (dict(complexity=3), "complexity must be a str"),
])
def test_bad_records_are_malformed(kwargs, fragment):
    kwargs = {"description": "Add.", **kwargs}
    with pytest.raises(MalformedTool) as info:
        Tool.from_source(ADD, **kwargs)
    assert info.value.reason == "malformed" and info.value.tool_name == "add"
    assert fragment in str(info.value)


def test_missing_annotation_names_the_argument():
    with pytest.raises(MalformedTool) as info:
        Tool.from_source("def f(x, y: int) -> int:\n    return y\n", "F.")
    assert "'x'" in str(info.value) and "bad signature" in str(info.value)


def test_unknown_type_name_is_malformed():
    with pytest.raises(MalformedTool, match="unknown type name 'Frame'"):
        Tool.from_source("def f(x: Frame) -> int:\n    return 1\n", "F.")


def test_param_called_result_clashes_with_post_conditions():
    src = "def f(result: int) -> int:\n    return result\n"
    assert Tool.from_source(src, "F.").name == "f"
    with pytest.raises(MalformedTool, match="'result'"):
        Tool.from_source(src, "F.", post=["result > 0"])

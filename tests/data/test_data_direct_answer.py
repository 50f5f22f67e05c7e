"""cocoda_jax.data.direct_answer: the direct baseline's one-tool library and its demonstrations."""

import types

import pytest
from hypothesis import given, settings, strategies as st

from cocoda_jax.coevolve.validate import play_programs
from cocoda_jax.data import direct_answer as D
from cocoda_jax.data import synthetic_math as sm
from cocoda_jax.rl import actions


def test_the_library_is_one_tool_that_returns_its_argument(sandbox):
    lib = D.library(sandbox)
    assert lib.names() == (D.TOOL_NAME,)
    assert str(lib.tool(D.TOOL_NAME).signature) == "(value: T) -> T"


@settings(max_examples=60, deadline=None)
@given(st.one_of(st.integers(-10**12, 10**12), st.floats(allow_nan=False, allow_infinity=False),
                 st.text(alphabet="abc xyz", max_size=8), st.booleans()))
def test_the_program_states_the_answer_exactly_and_passes_the_checker(answer):
    text = D.program(types.SimpleNamespace(id="t", answer=answer)).strip()
    step = actions.parse_step(text)
    assert isinstance(step, actions.Step) and step.target == actions.ANSWER and step.tool == D.TOOL_NAME
    (arg,) = step.args
    assert arg.kind == "literal" and arg.value == answer and type(arg.value) is type(answer)


@pytest.mark.parametrize("answer", [float("nan"), float("inf"), [1, 2], None])
def test_an_answer_that_is_no_literal_is_refused(answer):
    with pytest.raises(ValueError, match="literal"):
        D.program(types.SimpleNamespace(id="t", answer=answer))


def test_played_demonstrations_are_one_step_and_verified(sandbox):
    lib = D.library(sandbox)
    tasks = sm.generate(24, seed=3, split="train", max_depth=4)
    played = play_programs(tasks, [D.program(t) for t in tasks], lib, sandbox)
    assert all(len(t.steps) == 1 and t.answered and t.correct for t in played)
    # a different number is a wrong answer, not a pass
    wrong = play_programs(tasks[:4], [f"answer = {D.TOOL_NAME}({t.answer * 2 + 1!r})" for t in tasks[:4]], lib, sandbox)
    assert all(t.answered and not t.correct for t in wrong)

"""Traces: reading trajectories and programs as dataflow graphs, and rewriting them."""

import pytest

from cocoda_jax.coevolve.traces import (
    Call, Ref, Replacement, Trace, TraceError, apply_replacements, parse_inputs_line, trace_from_program,
    trace_from_trajectory,
)


def test_trajectory_and_program_give_the_same_trace(tasks, gold_trajectories, gold_traces):
    for task, traj, trace in list(zip(tasks, gold_trajectories, gold_traces))[:40]:
        assert traj.correct
        assert trace == trace_from_program(task.id, task.program, task.inputs, task.intermediates)
        assert trace.program() == task.program
        assert trace.answer_value == task.answer


def test_inputs_are_read_back_from_the_prompt(tasks, gold_trajectories):
    task, traj = tasks[0], gold_trajectories[0]
    assert parse_inputs_line(traj.prompt) == tuple((n, v) for n, v in task.inputs)


def test_keyword_arguments_are_put_in_parameter_order(math_library, sandbox):
    from cocoda_jax.data import synthetic_math
    from cocoda_jax.coevolve.validate import play_programs

    task = synthetic_math.generate(1, seed=0)[0]   # x0 = minutes_to_hours(n1); x1 = multiply(n0, x0); ...
    lines = task.program.splitlines()
    lines[1] = "x1 = multiply(b=x0, a=n0)"
    traj = play_programs([task], ["\n".join(lines)], math_library, sandbox)[0]
    assert traj.correct
    assert trace_from_trajectory(traj, math_library, task.inputs) == \
        trace_from_program(task.id, task.program, task.inputs, task.intermediates)


def test_graph_facts_and_literals():
    t = trace_from_program("t", "x0 = add(n0, 2)\nx1 = mean([x0, n0, 1.5])\nx2 = add(x0, x1)\nanswer = x2\n",
                           {"n0": 1}, {"x0": 3, "x1": 11 / 6, "x2": 3 + 11 / 6})
    assert t.producers(1) == (0,) and t.producers(2) == (0, 1)
    assert t.consumers() == ((1, 2), (2,), ())
    assert t.calls[1].args == (Ref("list", (Ref("node", 0), Ref("var", "n0"), Ref("lit", 1.5))),)
    assert t.answer_node() == 2
    assert Ref("lit", 1).key() != Ref("lit", 1.0).key() != Ref("lit", True).key()


def test_rewriting_keeps_targets_and_reindexes():
    t = trace_from_program("t", "x0 = add(n0, n1)\nx1 = multiply(x0, n0)\nx2 = subtract(x1, n1)\nanswer = x2\n",
                           {"n0": 2, "n1": 3}, {"x0": 5, "x1": 10, "x2": 7})
    new = apply_replacements(t, [Replacement(frozenset({0, 1}), 1, "mul_sum", (Ref("var", "n0"), Ref("var", "n1")))])
    assert new.program() == "x1 = mul_sum(n0, n1)\nx2 = subtract(x1, n1)\nanswer = x2\n"
    assert new.values == (10, 7) and new.answer_value == 7
    with pytest.raises(ValueError, match="overlapping"):
        apply_replacements(t, [Replacement(frozenset({0, 1}), 1, "f", ()), Replacement(frozenset({1, 2}), 2, "g", ())])


def test_bad_inputs_are_typed_errors():
    with pytest.raises(TraceError, match="never binds"):
        trace_from_program("t", "x0 = add(n0, n0)\n", {"n0": 1}, {"x0": 2})
    with pytest.raises(TraceError, match="keyword"):
        trace_from_program("t", "x0 = add(a=n0, b=n0)\nanswer = x0\n", {"n0": 1}, {"x0": 2})
    with pytest.raises(ValueError, match="values"):
        Trace("t", (), (Call("x0", "add", ()),), (), Ref("node", 0))

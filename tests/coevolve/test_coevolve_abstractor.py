"""The symbolic abstractor: canonical patterns, the single-output and input limits, compression
scoring, the four layers of a proposal, and what it finds on real synthetic-math trajectories."""

import dataclasses
import random

import pytest

from cocoda_jax.coevolve.abstractor import (
    Abstractor, AbstractorConfig, SymbolicAbstractor, canonical, find_uses, occurrences, propose, rewrite, score,
)
from cocoda_jax.coevolve.traces import trace_from_program
from cocoda_jax.data.math_primitives import local_functions
from cocoda_jax.library import Tool
from cocoda_jax.types import parse_signature

DISCOUNT = ("x0 = percent_of(n1, n0)\nx1 = subtract(n0, x0)\nx2 = percent_of(n2, x1)\nx3 = add(x1, x2)\n"
            "answer = x3\n")


def _trace(task_id, program, inputs):
    """A trace with values computed by the trusted local primitives."""
    fns, env, values = local_functions(), dict(inputs), {}
    for line in program.strip().splitlines():
        target, expr = (s.strip() for s in line.split("=", 1))
        if "(" in expr:
            values[target] = env[target] = eval(expr, {**fns}, env)  # noqa: S307 - our own test text
    return trace_from_program(task_id, program, inputs, values)


def _eval_pattern(pattern, args, fns):
    """What the composite computes, evaluated with the trusted primitives (depth-1 patterns)."""
    out = []

    def val(a):
        if a[0] == "p":
            return args[a[1]]
        if a[0] == "n":
            return out[a[1]]
        return [val(x) for x in a[1]]

    for tool, pargs in pattern.nodes:
        out.append(fns[tool](*(val(a) for a in pargs)))
    return out[-1]


def test_canonical_form_ignores_order_and_names():
    a = _trace("a", DISCOUNT, {"n0": 80, "n1": 10, "n2": 5})
    b = _trace("b", "y = percent_of(q, p0)\nz = subtract(p0, y)\nw = percent_of(r, z)\nv = add(z, w)\nanswer = v\n",
               {"p0": 50, "q": 20, "r": 8})
    pa, order_a, bind_a = canonical(a, frozenset(range(4)), 3)
    pb, _, bind_b = canonical(b, frozenset(range(4)), 3)
    assert pa == pb and pa.n_params == 3
    assert pa.tools == ("percent_of", "subtract", "percent_of", "add")
    assert [r.value for r in bind_a] == ["n0", "n1", "n2"] and [r.value for r in bind_b] == ["p0", "q", "r"]
    # Two independent branches written in either order: one pattern.
    c = _trace("c", "x0 = add(n0, n1)\nx1 = add(n2, n3)\nx2 = divide(x0, x1)\nanswer = x2\n",
               {"n0": 1, "n1": 2, "n2": 3, "n3": 4})
    d = _trace("d", "x0 = add(n2, n3)\nx1 = add(n0, n1)\nx2 = divide(x1, x0)\nanswer = x2\n",
               {"n0": 1, "n1": 2, "n2": 3, "n3": 4})
    assert canonical(c, frozenset({0, 1, 2}), 2)[0] == canonical(d, frozenset({0, 1, 2}), 2)[0]
    # A repeated input is one parameter, distinct inputs are two: different patterns.
    e = _trace("e", "x0 = add(n0, n0)\nx1 = km_to_miles(x0)\nanswer = x1\n", {"n0": 3})
    f = _trace("f", "x0 = add(n0, n1)\nx1 = km_to_miles(x0)\nanswer = x1\n", {"n0": 3, "n1": 4})
    pe, pf = canonical(e, frozenset({0, 1}), 1)[0], canonical(f, frozenset({0, 1}), 1)[0]
    assert pe.n_params == 1 and pf.n_params == 2 and pe != pf


def test_only_single_output_subgraphs_with_few_inputs():
    # x0 is read by x1 and by the answer's producer x2: {x0, x1} has two outputs.
    t = _trace("t", "x0 = add(n0, n1)\nx1 = multiply(x0, n2)\nx2 = subtract(x1, x0)\nanswer = x2\n",
               {"n0": 1, "n1": 2, "n2": 3})
    cfg = AbstractorConfig(max_inputs=3)
    sets = {frozenset(u.nodes) for _, u in occurrences(t, 0, cfg)}
    assert frozenset({0, 1}) not in sets
    assert frozenset({1, 2}) in sets and frozenset({0, 1, 2}) in sets
    # The answer node can only be an output; max_inputs bounds the parameters.
    few = {frozenset(u.nodes) for _, u in occurrences(t, 0, AbstractorConfig(max_inputs=2))}
    assert frozenset({0, 1, 2}) not in few        # n0, n1, n2: three inputs
    assert all(p.n_params <= 2 for p, _ in occurrences(t, 0, AbstractorConfig(max_inputs=2)))


def test_recurrence_in_two_distinct_tasks_is_required(math_library):
    one = _trace("only", DISCOUNT, {"n0": 80, "n1": 10, "n2": 5})
    again = dataclasses.replace(one)               # the same task twice is still one task
    assert propose([one, again], math_library) == []
    two = _trace("other", DISCOUNT, {"n0": 120, "n1": 25, "n2": 7})
    cands = propose([one, two], math_library, AbstractorConfig(tool_cost=0.0))
    assert cands and all(c.score.tasks == 2 for c in cands)


def test_compression_score():
    one = _trace("a", DISCOUNT, {"n0": 80, "n1": 10, "n2": 5})
    pattern, order, _ = canonical(one, frozenset(range(4)), 3)
    uses = find_uses(one, pattern)
    assert len(uses) == 1 and uses[0].nodes == order
    s = score(uses * 5, 4, AbstractorConfig(tool_cost=2.0, body_cost=1.5))
    assert s.saved_calls == 15 and s.compression == 15 - 6 - 2


def test_rewrite_replaces_non_overlapping_uses():
    t = _trace("t", "x0 = percent_of(n1, n0)\nx1 = add(n0, x0)\nx2 = percent_of(n1, x1)\nx3 = add(x1, x2)\n"
                    "answer = x3\n", {"n0": 100, "n1": 10})
    pattern = canonical(t, frozenset({0, 1}), 1)[0]
    new, n = rewrite(t, pattern, "grow")
    assert n == 2
    assert new.program() == "x1 = grow(n0, n1)\nx3 = grow(x1, n1)\nanswer = x3\n"
    assert new.answer_value == t.answer_value


@pytest.fixture(scope="module")
def first(gold_traces, math_library):
    return propose(gold_traces, math_library)


def test_discovers_the_known_motifs(first):
    shapes = {c.pattern.tools for c in first}
    assert ("percent_of", "add") in shapes                 # a tax / a year of compound growth
    assert ("percent_of", "subtract") in shapes            # a discount
    assert ("ceil_div", "multiply") in shapes              # boxes needed times their price
    assert ("ratio_part", "subtract") in shapes            # the second share of a ratio split
    assert ("floor_div", "remainder", "add") in shapes     # split evenly and keep the remainder
    shift = next(c for c in first if c.pattern.size == 4)  # hours worked minus breaks
    assert sorted(shift.pattern.tools) == ["minutes_to_hours", "multiply", "multiply", "subtract"]
    assert len(first) == AbstractorConfig().max_candidates


def test_proposal_sizes_and_scores(first, math_library):
    for c in first:
        assert c.depth == 1 and c.flat == c.pattern.size and c.phi == c.flat - 1 > 0
        assert c.score.tasks >= 2 and c.score.uses == len(c.uses)
        assert c.score.saved_calls == c.score.uses * c.phi
        assert c.score.compression == c.score.saved_calls - c.pattern.size - 1.0 > 0
        assert c.name not in math_library and c.children == c.pattern.tools
    ranked = [c.score.compression for c in first]
    assert ranked == sorted(ranked, reverse=True)   # greedy: each pick the best on what is left
    covered = [(u.trace, n) for c in first for u in c.uses for n in u.nodes]
    assert len(covered) == len(set(covered))        # no call is claimed by two proposals


def test_proposal_layers(first, math_library, gold_traces):
    fns = local_functions()
    grow = next(c for c in first if c.pattern.tools == ("percent_of", "add"))
    assert grow.source == ("def percent_of_add(x: float, p: float) -> float:\n"
                           "    v0 = percent_of(p, x)\n    return add(x, v0)\n")
    tool = grow.tool()
    assert isinstance(tool, Tool) and tool.signature == parse_signature("(x: float, p: float) -> float")
    assert "percent_of" in grow.description and "add" in grow.description and "x is the x of step 1" in grow.description
    assert grow.post[0] == "result == x + percent_of(p, x)"        # add's post, substituted
    budget = next(c for c in first if c.pattern.tools == ("subtract", "floor_div"))
    assert budget.source.splitlines()[0] == "def subtract_floor_div(a: float, b: float, b2: float) -> float:"
    assert budget.pre == ("b2 > 0",)                                  # floor_div's 'b > 0', renamed
    assert budget.post[0] == "result <= subtract(a, b) / b2"          # floor_div's post, inlined
    discount = next(c for c in first if c.pattern.tools == ("percent_of", "subtract"))
    assert not any("==" in p for p in discount.post)   # subtract's '(a - b) + b == a' is not exact in floats
    for c in first:
        assert 1 <= len(c.examples) <= 3 and len(c.observed) >= len(c.examples)
        assert "observed over" in c.complexity
        params = c.tool().param_names
        for args, out in c.observed:
            assert list(args) == list(params)
            assert _eval_pattern(c.pattern, [args[p] for p in params], fns) == out


def test_deterministic_and_order_independent(gold_traces, math_library, first):
    again = propose(gold_traces, math_library)
    assert again == first
    shuffled = list(gold_traces)
    random.Random(0).shuffle(shuffled)
    other = propose(shuffled, math_library)
    assert [(c.name, c.source, c.score) for c in other] == [(c.name, c.source, c.score) for c in first]


def test_protocol_and_trajectories_as_input(gold_trajectories, math_library, first):
    abstractor = SymbolicAbstractor()
    assert isinstance(abstractor, Abstractor)
    from_trajectories = abstractor.propose(gold_trajectories, math_library)   # inputs read from prompts
    assert [c.source for c in from_trajectories] == [c.source for c in first]


def test_existing_composites_are_not_proposed_again(round1, gold_traces):
    _, result = round1
    again = propose(gold_traces, result.snapshot)
    existing = {result.snapshot.tool(n).id for n in result.snapshot.names()}
    from cocoda_jax.library import analyse
    assert all(analyse(c.source).code_id not in existing for c in again)
    assert ("percent_of", "add") not in {c.pattern.tools for c in again}


def test_config_is_validated():
    with pytest.raises(ValueError):
        AbstractorConfig(min_nodes=1)
    with pytest.raises(ValueError):
        AbstractorConfig(min_nodes=5, max_nodes=4)

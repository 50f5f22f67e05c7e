"""The DAG-induced reward: golden values, options, the compositional advantage (property and a real
verified pair of rollouts)."""

import dataclasses
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cocoda_jax.rl import rewards as R
from cocoda_jax.rl import trajectory as T

PRIMS = ("add", "subtract", "percent_of", "multiply", "divide", "km_to_miles")


def O(r_res=1.0, calls=(), kinds=None, progress=0.0):
    kinds = ("ok",) * (len(calls) + 1) if kinds is None else kinds
    return R.Outcome(r_res=r_res, calls=tuple(calls), step_kinds=tuple(kinds), progress=progress)


# ------------------------------------------------------------------------------------------------
# golden values


@pytest.mark.parametrize("calls, r_res, total, saved", [
    (("percent_of", "subtract", "percent_of", "add"), 1.0, 1.0, 0),
    (("discount_tax",), 1.0, 1.6, 3),
    (("twice_discount_tax",), 1.0, 2.4, 7),
    (("discount_tax", "round_trip_miles", "add"), 1.0, 1.8, 4),
    (("discount_tax",), 0.0, 0.6, 3),
    ((), 0.0, 0.0, 0),
])
def test_golden_default_reward(composite_library, calls, r_res, total, saved):
    out = R.reward(O(r_res, calls), composite_library)
    assert out.total == pytest.approx(total, abs=1e-12)
    assert out.saved_calls == saved and out.n_calls == len(calls)
    assert out.r_res == r_res and out.credit == pytest.approx(0.2 * saved) and out.penalty == 0.0
    assert out.n_composite_calls == sum(composite_library.phi(c) >= 1 for c in calls)


def test_options(composite_library):
    lib = composite_library
    wrong = O(0.0, ("discount_tax",))
    right = O(1.0, ("discount_tax", "add"))
    assert R.reward(wrong, lib, R.RewardConfig(credit_requires_success=True)).total == 0.0
    assert R.reward(right, lib, R.RewardConfig(credit_requires_success=True)).total == pytest.approx(1.6)
    # cap on the credit term
    capped = R.reward(O(1.0, ("twice_discount_tax",)), lib, R.RewardConfig(credit_cap=0.5))
    assert capped.credit == 0.5 and capped.total == 1.5 and capped.saved_calls == 7
    # normalisation by the number of credited calls: lambda * mean Phi per call
    norm = R.reward(right, lib, R.RewardConfig(normalize_by_calls=True))
    assert norm.credit == pytest.approx(0.2 * 3 / 2)
    assert R.reward(O(1.0, ()), lib, R.RewardConfig(normalize_by_calls=True)).credit == 0.0
    # penalties per refused step, by kind; runtime failures are not penalised
    kinds = ("malformed", "unknown_tool", "ill_typed", "runtime", "bad_arguments", "unbound_name", "bad_target", "ok")
    pen = R.reward(O(1.0, ("add",), kinds), lib, R.RewardConfig(malformed_penalty=0.1, ill_typed_penalty=0.05))
    assert pen.penalty == pytest.approx(5 * 0.1 + 0.05) and pen.total == pytest.approx(1.0 - 0.55)
    # lambda
    assert R.reward(right, lib, R.RewardConfig(lam=0.5)).total == pytest.approx(2.5)


def test_registered_alternatives(composite_library):
    lib = composite_library
    assert set(R.registered_rewards()) >= {"dag", "result", "progress"}
    o = O(1.0, ("discount_tax",), progress=0.25)
    assert R.reward(o, lib, R.RewardConfig(name="result")).total == 1.0
    prog = R.reward(o, lib, R.RewardConfig(name="progress"))
    assert prog.r_res == 0.25 and prog.total == pytest.approx(0.25 + 0.6)
    assert R.group_rewards([o, O(0.0, ("add",))], lib) == pytest.approx((1.6, 0.0))


def test_config_validation_and_registry():
    for bad in (dict(lam=-0.1), dict(credit_cap=-1.0), dict(malformed_penalty=-0.1), dict(ill_typed_penalty=-1),
                dict(name="nope"), dict(lam=float("nan"))):
        with pytest.raises(ValueError):
            R.RewardConfig(**bad)
    with pytest.raises(ValueError, match="already registered"):
        R.register_reward("dag")(lambda o, s, c: None)
    with pytest.raises(KeyError, match="unknown reward"):
        R.get_reward("nope")
    with pytest.raises(ValueError, match="r_res"):
        R.dag_reward(O(1.5, ()), None, R.RewardConfig())


def test_unknown_tool_in_calls_is_an_error_not_zero_credit(composite_library):
    from cocoda_jax.library import UnknownTool
    with pytest.raises(UnknownTool):
        R.reward(O(1.0, ("not_a_tool",)), composite_library)


def test_primitive_expansion_has_flat_many_leaves(composite_library):
    lib = composite_library
    for name in lib.names():
        leaves = R.primitive_expansion(name, lib)
        assert len(leaves) == lib.flat(name) and all(not lib.is_composite(p) for p in leaves)
    assert R.primitive_expansion("twice_discount_tax", lib) == ("percent_of", "subtract", "percent_of", "add") * 2


# ------------------------------------------------------------------------------------------------
# the compositional advantage


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_compositional_advantage_property(composite_library, data):
    """Replacing a primitive run that is a composite's expansion by one call to that composite (same
    verified result) raises R by exactly lambda * Phi and lowers the call count by Phi."""
    lib = composite_library
    composite = data.draw(st.sampled_from([n for n in lib.names() if lib.is_composite(n)]))
    others = st.sampled_from(sorted(set(PRIMS) | {"discount_tax", "round_trip_miles"}))
    prefix = data.draw(st.lists(others, max_size=6))
    suffix = data.draw(st.lists(others, max_size=6))
    lam = data.draw(st.sampled_from([0.2, 0.0, 0.05, 0.5, 1.0, 0.3333]))
    config = R.RewardConfig(lam=lam, credit_requires_success=data.draw(st.booleans()),
                            malformed_penalty=data.draw(st.sampled_from([0.0, 0.1])))
    kinds = data.draw(st.lists(st.sampled_from(["ok", "malformed", "ill_typed", "runtime"]), max_size=4))
    phi = lib.phi(composite)
    primitive = O(1.0, prefix + list(R.primitive_expansion(composite, lib)) + suffix, kinds)
    composed = O(1.0, prefix + [composite] + suffix, kinds)
    a, b = R.reward(primitive, lib, config), R.reward(composed, lib, config)
    assert math.isclose(b.total - a.total, lam * phi, rel_tol=0, abs_tol=1e-12)
    assert a.n_calls - b.n_calls == phi and b.saved_calls - a.saved_calls == phi
    if lam > 0:
        assert b.total > a.total  # Phi >= 1 for every composite here


def test_compositional_advantage_on_real_verified_rollouts(composite_library, sandbox):
    """Two real rollouts through the checker and sandbox: the gold primitive program and the same
    computation with one composite call; both verified correct, R differs by lambda * Phi."""
    lib = composite_library

    @dataclasses.dataclass(frozen=True)
    class Task:
        id: str
        question: str
        inputs: tuple
        answer: float
        intermediates: tuple

    prim = ("x0 = percent_of(n1, n0)", "x1 = subtract(n0, x0)", "x2 = percent_of(n2, x1)", "x3 = add(x1, x2)",
            "x4 = add(x3, x3)", "answer = x4")
    comp = ("x0 = discount_tax(n0, n1, n2)", "x1 = add(x0, x0)", "answer = x1")
    price, d, t = 80, 25, 10
    sale = price - d * price / 100
    final = sale + t * sale / 100
    task = Task("demo", "A coat costs $80, is 25% off, then 10% tax; what do two cost?",
                (("n0", price), ("n1", d), ("n2", t)), 2 * final,
                (("x0", d * price / 100), ("x1", sale), ("x2", t * sale / 100), ("x3", final), ("x4", 2 * final)))
    cards = T.tool_cards(lib)
    runs = [T.run_episode(T.ScriptedPolicy(T.render_prompt(task, cards), script), task, lib, sandbox, cards=cards)
            for script in (prim, comp)]
    assert [r.correct for r in runs] == [True, True] and runs[0].answer == runs[1].answer == 132.0
    a, b = (R.reward(r, lib) for r in runs)
    assert math.isclose(b.total - a.total, 0.2 * lib.phi("discount_tax"), abs_tol=1e-12)
    assert len(runs[0].calls) - len(runs[1].calls) == lib.phi("discount_tax") == 3
    assert runs[1].calls == ("discount_tax", "add")
    # the composite hides gold intermediates from the trace; a verified answer is still full progress
    assert runs[0].progress == runs[1].progress == 1.0


def test_rollout_metrics_golden(composite_library):
    outs = [O(1.0, ("discount_tax", "add")), O(0.0, ("add", "add")), O(1.0, ("twice_discount_tax",), ("malformed", "ok"))]
    cfg = R.RewardConfig(malformed_penalty=0.1)
    bds = [R.reward(o, composite_library, cfg) for o in outs]
    m = R.rollout_metrics(bds)
    totals = [1.6, 0.0, 1.0 + 1.4 - 0.1]
    mean = sum(totals) / 3
    assert m["reward_mean"] == pytest.approx(mean)
    assert m["reward_std"] == pytest.approx(math.sqrt(sum((t - mean) ** 2 for t in totals) / 3))
    assert m["r_res_mean"] == pytest.approx(2 / 3) and m["credit_mean"] == pytest.approx((0.6 + 1.4) / 3)
    assert m["penalty_mean"] == pytest.approx(0.1 / 3) and m["calls_per_trajectory"] == pytest.approx(5 / 3)
    assert m["saved_calls_per_trajectory"] == pytest.approx(10 / 3) and m["composite_call_share"] == pytest.approx(2 / 5)
    with pytest.raises(ValueError):
        R.rollout_metrics([])

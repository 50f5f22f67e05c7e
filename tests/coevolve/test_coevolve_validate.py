"""Validation before INSERTTOOL: rewritten programs give identical outputs in the sandbox with
fewer calls, specs hold on every observed use, INSERTTOOL accepts; typed rejections otherwise;
depth grows over rounds; refactored programs become verified demonstrations."""

import dataclasses

import pytest

from cocoda_jax.coevolve.abstractor import rewrite
from cocoda_jax.coevolve.validate import ValidationConfig, play_programs, refactored_demonstrations, validate
from cocoda_jax.rl.rewards import RewardConfig, reward


def test_round_one_inserts_every_candidate(round1, math_library):
    cands, result = round1
    assert [t.name for t in result.accepted] == [c.name for c in cands] and not result.rejections
    snap = result.snapshot
    assert len(snap) == len(math_library) + len(cands)
    for c in cands:
        assert snap.is_composite(c.name) and snap.children(c.name) == c.children
        assert snap.flat(c.name) == c.flat == c.pattern.size and snap.phi(c.name) == c.phi > 0
        assert snap.depth(c.name) == 1


def test_rewritten_programs_are_identical_and_shorter(round1, gold_traces, sandbox):
    cands, result = round1
    assert len(result.traces) == len(gold_traces)
    saved = sum(r.uses * r.phi for r in result.refactorings)
    assert sum(len(t.calls) for t in gold_traces) - sum(len(t.calls) for t in result.traces) == saved
    for r, c in zip(result.refactorings, cands):
        assert r.uses == c.score.uses and r.calls_before - r.calls_after == r.uses * c.phi
    changed = [(old, new) for old, new in zip(gold_traces, result.traces) if old != new]
    assert len(changed) > 200
    runs = sandbox.run_many([new.program() for _, new in changed], result.snapshot,
                            inputs=[new.input_dict for _, new in changed])
    for (old, new), run in zip(changed, runs):
        assert run.ok and run.value == old.answer_value
        composites = [c for c in run.calls if result.snapshot.is_composite(c)]
        assert len(run.calls) == len(old.calls) - sum(result.snapshot.phi(c) for c in composites)


def test_refactored_demonstrations_are_verified_and_earn_the_dag_reward(round1, tasks, gold_trajectories, sandbox):
    _, result = round1
    demos = refactored_demonstrations(result, tasks[:60], sandbox)
    assert len(demos) == 60 and all(d.correct for d in demos)
    cfg = RewardConfig(lam=0.2)
    for demo, gold in zip(demos, gold_trajectories[:60]):
        saved = len(gold.calls) - len(demo.calls)
        assert reward(demo, result.snapshot, cfg).total == pytest.approx(1.0 + 0.2 * saved)
    assert any(len(d.calls) < len(g.calls) for d, g in zip(demos, gold_trajectories))


def test_round_two_builds_composites_over_composites(round1, round2):
    _, first = round1
    cands, second = round2
    deep = [c for c in cands if c.depth == 2]
    assert deep and all(any(first.snapshot.is_composite(ch) for ch in c.children) for c in deep)
    # discount then tax, found as (discount composite, tax composite): subtract -> percent_of -> add
    discount_tax = next(c for c in deep if c.children == ("percent_of_subtract", "percent_of_add"))
    assert discount_tax.flat == 4 and discount_tax.phi == 3 and discount_tax.pattern.size == 2
    accepted = {t.name for t in second.accepted}
    assert discount_tax.name in accepted
    assert second.snapshot.depth(discount_tax.name) == 2 and second.snapshot.flat(discount_tax.name) == 4
    # The flat size (primitive calls) of every trace is unchanged by refactoring; top-level calls fall.
    flat = lambda snap, traces: sum(snap.flat(c.tool) for t in traces for c in t.calls)  # noqa: E731
    assert flat(second.snapshot, second.traces) == flat(first.snapshot, first.traces)
    report = next(r for r in second.refactorings if r.name == discount_tax.name)
    assert report.calls_before - report.calls_after == report.uses * (discount_tax.pattern.size - 1)


def test_round_two_rejects_a_behavioural_duplicate(round2):
    _, second = round2
    dup = [r for r in second.rejections if r.stage == "insert"]
    # multiply(count, cents) then cents_to_dollars computes c * x / 100: percent_of under another name
    assert any(r.reason == "duplicate_behaviour" and "percent_of" in r.detail for r in dup)
    assert all(r.name not in second.snapshot for r in second.rejections)


def _grow(round1):
    cands, _ = round1
    return next(c for c in cands if c.pattern.tools == ("percent_of", "add"))


def test_a_wrong_body_is_caught_by_the_rewrite_check(round1, gold_traces, math_library, sandbox):
    good = _grow(round1)
    bad = dataclasses.replace(good, source=good.source.replace("return add(x, v0)", "return add(x, v0) + 0.001"),
                              examples=(), observed=())
    result = validate([bad], gold_traces[:40], math_library, sandbox)
    assert not result.accepted and result.snapshot is math_library and result.traces == tuple(gold_traces[:40])
    (rej,) = result.rejections
    assert (rej.stage, rej.reason) == ("rewrite", "output_mismatch")


def test_a_false_condition_is_caught_on_the_observed_uses(round1, gold_traces, math_library, sandbox):
    good = _grow(round1)
    # true on the three L4 examples (all below 1000), false on a later observed use
    assert all(out < 1000 for _, out in good.examples) and any(out >= 1000 for _, out in good.observed)
    bad = dataclasses.replace(good, post=good.post + ("result < 1000",))
    (rej,) = validate([bad], gold_traces, math_library, sandbox).rejections
    assert (rej.stage, rej.reason) == ("spec", "spec_violated")


def test_build_and_no_use_rejections(round1, gold_traces, math_library, sandbox):
    good = _grow(round1)
    broken = dataclasses.replace(good, source=good.source.replace("def percent_of_add(", "def sum("), name="sum")
    unused = good
    result = validate([broken, unused], [t for t in gold_traces if not rewrite(t, good.pattern, "g")[1]][:20],
                      math_library, sandbox)
    assert [(r.stage, r.reason) for r in result.rejections] == [("build", "malformed"), ("rewrite", "no_use")]
    assert result.to_record()["accepted"] == []


def test_candidates_of_a_round_chain_in_order(round1, gold_traces, math_library, sandbox):
    """A candidate is validated against the library and programs its predecessors produced."""
    cands, full = round1
    result = validate(cands[:2], gold_traces, math_library, sandbox, ValidationConfig(exact=False))
    assert [t.name for t in result.accepted] == [c.name for c in cands[:2]]
    assert result.refactorings == full.refactorings[:2]


def test_gold_programs_play_back_identically(tasks, gold_trajectories, math_library, sandbox):
    again = play_programs(tasks[:5], [t.program for t in tasks[:5]], math_library, sandbox)
    assert [a.text for a in again] == [g.text for g in gold_trajectories[:5]]
    with pytest.raises(ValueError):
        play_programs(tasks[:2], [tasks[0].program], math_library, sandbox)


TEACHER = ("def discount_then_tax(tax: float, price: float, off: float) -> float:\n"
           "    sale = subtract(price, percent_of(off, price))\n"
           "    return add(sale, percent_of(tax, sale))\n")


def test_a_teacher_written_composite_passes_the_same_validation(gold_traces, math_library, sandbox):
    from cocoda_jax.coevolve.abstractor import candidate_from_tool
    from cocoda_jax.library import Tool

    tool = Tool.from_source(TEACHER, "A price after an off percent discount, then a tax percent tax.")
    cand = candidate_from_tool(tool, gold_traces, math_library)
    assert cand.pattern.tools == ("percent_of", "subtract", "percent_of", "add") and cand.arg_order == (2, 0, 1)
    assert cand.score.uses >= 20 and cand.phi == 3 and cand.proposer == "teacher"
    result = validate([cand], gold_traces, math_library, sandbox)
    assert [t.name for t in result.accepted] == ["discount_then_tax"] and not result.rejections
    rewritten = next(t for t, old in zip(result.traces, gold_traces) if t != old)
    # a chain that opens with the motif: price n0, discount n1, tax n2 -> the tool's (tax, price, off) order
    assert any(t.program().startswith("x3 = discount_then_tax(n2, n0, n1)\n") for t in result.traces)
    run = sandbox.run(rewritten.program(), result.snapshot, inputs=rewritten.input_dict)
    assert run.ok and run.value == rewritten.answer_value


def test_non_straight_line_bodies_are_refused(math_library):
    from cocoda_jax.coevolve.abstractor import NotStraightLine, pattern_from_source

    for source in ("def f(x: float) -> float:\n    return add(x, 1)\n",
                   "def f(x: float) -> float:\n    if x > 0:\n        return add(x, x)\n    return x\n",
                   "def f(x: float, y: float) -> float:\n    return add(x, x)\n",
                   "def f(x: float) -> float:\n    a = add(x, x)\n    return km_to_miles(x)\n"):
        with pytest.raises(NotStraightLine):
            pattern_from_source(source, math_library)


def test_excluded_patterns_are_not_proposed_again(round2, round1):
    from cocoda_jax.coevolve.abstractor import SymbolicAbstractor

    cands, second = round2
    _, first = round1
    rejected = {c.pattern for c in cands if c.name in {r.name for r in second.rejections}}
    assert rejected
    again = SymbolicAbstractor(exclude=frozenset(rejected)).propose(first.traces, first.snapshot)
    assert not rejected & {c.pattern for c in again}

"""Composites of stateful tools: runs of calls mined from BFCL gold programs, validated by replaying
every rewritten program against its own environment (same backend calls, same values)."""

from __future__ import annotations

import dataclasses

import pytest

from cocoda_jax.coevolve.abstractor import AbstractorConfig, Pattern
from cocoda_jax.coevolve.sequences import (
    SequenceAbstractor, SequencePattern, pattern_from_json, pattern_to_json, runs,
)
from cocoda_jax.coevolve.traces import Call, Ref, Trace, gold_trace
from cocoda_jax.coevolve.validate import play_programs, validate
from cocoda_jax.execution import Sandbox
from third_party.benchmarks import bfcl as loader
from third_party.benchmarks import bfcl_domain as D


def _trace(*calls: tuple[str, str, tuple[Ref, ...]], answer: int = -1) -> Trace:
    cs = tuple(Call(t, tool, args) for t, tool, args in calls)
    return Trace("t", (), cs, tuple(range(len(cs))), Ref("node", len(cs) + answer if answer < 0 else answer))


def lit(v):
    return Ref("lit", v)


def test_runs_are_contiguous_stop_at_barriers_and_keep_read_values_outside():
    tr = _trace(("x0", "cd", (lit("a"),)), ("x1", "mkdir", (lit("b"),)), ("t0", "end_turn", ()),
                ("x2", "cd", (lit("a"),)), ("x3", "mkdir", (lit("b"),)), ("x4", "echo", (Ref("node", 4),)),
                ("answer", "end_turn", ()))
    cfg = AbstractorConfig(min_nodes=2, max_nodes=3, max_inputs=3)
    found = [(p.tools, u.nodes) for p, u in runs(tr, 0, cfg, barriers={"end_turn"})]
    assert (("cd", "mkdir"), (0, 1)) in found and (("cd", "mkdir"), (3, 4)) in found
    assert all("end_turn" not in tools for tools, _ in found)
    # x3 (index 4) is read by x4: runs may end at x3 or contain x4 too
    assert (("cd", "mkdir", "echo"), (3, 4, 5)) in found and (("mkdir", "echo"), (4, 5)) in found
    # a run that leaves a reader of an inner value outside is not a run: make x4 read x2 instead
    tr2 = dataclasses.replace(tr, calls=tr.calls[:5] + (Call("x4", "echo", (Ref("node", 3),)),) + tr.calls[6:])
    found2 = [(p.tools, u.nodes) for p, u in runs(tr2, 0, cfg, barriers={"end_turn"})]
    assert (("cd", "mkdir"), (3, 4)) not in found2 and (("cd", "mkdir", "echo"), (3, 4, 5)) in found2
    patterns = {tools: p for p, u in runs(tr, 0, cfg, barriers={"end_turn"}) for tools in [p.tools]}
    assert patterns[("cd", "mkdir")] == SequencePattern((("cd", (("p", 0),)), ("mkdir", (("p", 1),))), 2)


def test_equal_arguments_share_a_parameter_and_inner_values_stay_inside():
    tr = _trace(("x0", "cd", (lit("d"),)), ("x1", "mv", (lit("f"), lit("d"))), ("x2", "echo", (Ref("node", 1),)))
    (p, u), = [(p, u) for p, u in runs(tr, 0, AbstractorConfig(min_nodes=3, max_nodes=3, max_inputs=3))]
    assert p.nodes == (("cd", (("p", 0),)), ("mv", (("p", 1), ("p", 0))), ("echo", (("n", 1),)))
    assert u.bindings == (lit("d"), lit("f"))


def test_patterns_of_both_kinds_round_trip_through_json():
    seq = SequencePattern((("cd", (("p", 0),)), ("ls", (("l", (("p", 1),)),))), 2)
    flow = Pattern((("add", (("p", 0), ("p", 1))), ("mul", (("n", 0), ("p", 0)))), 2)
    for p in (seq, flow):
        back = pattern_from_json(pattern_to_json(p))
        assert back == p and type(back) is type(p)
    assert pattern_from_json([[["add", [["p", 0], ["p", 1]]]], 2]) == Pattern((("add", (("p", 0), ("p", 1))),), 2)


@pytest.fixture(scope="module")
def bfcl():
    library = D.primitive_library()
    with Sandbox(workers=2, timeout_s=20.0, environment=D.plugin()) as sb:
        entries = [e for e in loader.load_category("multi_turn_base")[:60]]
        tasks, _ = D.build_tasks(entries, library, sb)
        yield library, sb, tasks


def test_a_mined_composite_of_real_stateful_tools_is_validated_inserted_and_scores(bfcl):
    library, sb, tasks = bfcl
    traces = [gold_trace(t) for t in tasks]
    abstractor = SequenceAbstractor(AbstractorConfig(min_tasks=2, max_inputs=4, max_candidates=3),
                                    barriers=frozenset({"end_turn"}))
    candidates = abstractor.propose(traces, library)
    assert candidates and all(c.examples == () for c in candidates)
    assert all("end_turn" not in c.children for c in candidates)
    result = validate(candidates, traces, library, sb)
    assert result.accepted, result.rejections
    tool = result.accepted[0]
    assert tool.name in result.snapshot and result.snapshot.depth(tool.name) == 1
    by_id = {t.id: t for t in tasks}
    changed = [tr for tr, old in zip(result.traces, traces) if tr.program() != old.program()]
    assert changed
    played = play_programs([by_id[tr.task_id] for tr in changed], [tr.program() for tr in changed],
                           result.snapshot, sb)
    assert [p.r_res for p in played] == [1.0] * len(changed)  # BFCL's checker accepts the refactored programs
    assert any(tool.name in p.calls for p in played)


def test_a_composite_that_does_something_else_is_rejected(bfcl):
    library, sb, tasks = bfcl
    traces = [gold_trace(t) for t in tasks]
    abstractor = SequenceAbstractor(AbstractorConfig(min_tasks=2, max_inputs=4, max_candidates=1),
                                    barriers=frozenset({"end_turn"}))
    cand = abstractor.propose(traces, library)[0]
    # the same pattern, a body that skips its first call: values may agree, backend calls cannot
    lines = cand.source.splitlines()
    broken = "\n".join([lines[0]] + [ln for ln in lines[1:] if not ln.strip().startswith("v0 =")]) + "\n"
    bad = dataclasses.replace(cand, source=broken)
    result = validate([bad], traces, library, sb)
    assert not result.accepted
    assert result.rejections[0].stage in ("rewrite", "build")

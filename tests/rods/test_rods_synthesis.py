"""Variant synthesis: skeleton kept (checked on the call graph), rule critique, repairs, background."""

import dataclasses
import threading
import time

import networkx as nx
import pytest

from cocoda_jax.data import synthetic_math as sm
from cocoda_jax.execution import RunResult
from cocoda_jax.rods.config import RodsConfig
from cocoda_jax.rods.synthesis import (ERROR_TYPES, BackgroundSynthesizer, CritiqueError, Job, Outcome,
                                       Synthesizer, check_rules, library_names, propose, rejection_counts,
                                       stated_numbers)
from cocoda_jax.rods.tasks import call_graph, content_keys, task_from_dict, task_to_dict

CFG = RodsConfig()


@pytest.fixture(scope="module")
def seeds():
    tasks = sm.generate(60, seed=3)
    by_depth = {}
    for t in tasks:
        by_depth.setdefault(t.depth, t)
    return [by_depth[d] for d in sorted(by_depth)]  # one seed per depth 1..5


def _graph(program):
    g = call_graph(program)
    G = nx.MultiDiGraph()
    for i, tool in enumerate(g.tools):
        G.add_node(i, tool=tool, inputs=sum(1 for a in g.args[i] if a == "n"))
    for i, args in enumerate(g.args):
        for pos, a in enumerate(args):
            if isinstance(a, int):
                G.add_edge(a, i, pos=pos)
    return G, g.depth


def test_variants_keep_the_seed_call_graph_and_change_the_content(seeds, sandbox, library):
    syn = Synthesizer(sandbox, library, CFG, run_seed=11)
    assert {s.depth for s in seeds} == {1, 2, 3, 4, 5}
    for seed in seeds:
        out = syn.run(Job(seed, 0, frozenset(content_keys(seed))))
        assert out.accepted, out.rounds
        v = out.task
        gs, ds = _graph(seed.program)
        gv, dv = _graph(v.program)
        assert nx.is_isomorphic(gs, gv, node_match=lambda a, b: a == b, edge_match=lambda a, b: a == b)
        assert ds == dv and len(v.motifs) == len(seed.motifs) and v.answer_type == seed.answer_type
        assert v.question != seed.question and v.inputs != seed.inputs and v.id != seed.id
        assert not set(content_keys(v)) & set(content_keys(seed))


def test_proposals_are_pure_in_seed_task_and_attempt(seeds):
    seed = seeds[2]
    a = propose(seed, 0, 0, run_seed=5, max_draws=CFG.max_draws)
    assert a == propose(seed, 0, 0, run_seed=5, max_draws=CFG.max_draws)
    others = {propose(seed, k, r, run_seed=s, max_draws=CFG.max_draws).question
              for k, r, s in [(1, 0, 5), (0, 1, 5), (0, 0, 6)]}
    assert a.question not in others and len(others) == 3


def test_an_impossible_skeleton_is_a_sample_failure(seeds, sandbox, library):
    odd = dataclasses.replace(seeds[0], skeleton=(("add", ("n", "n")),) * 9)
    out = Synthesizer(sandbox, library, RodsConfig(max_draws=30, k_max=2)).run(Job(odd, 0))
    assert not out.accepted and len(out.rounds) == 3
    assert rejection_counts([out])["sample_failed"] == 3


def test_task_records_round_trip_through_json(seeds):
    import json
    from cocoda_jax.data import tables
    for s in list(seeds) + tables.generate(40, seed=2):
        back = task_from_dict(json.loads(json.dumps(task_to_dict(s))))
        assert back == s and type(back) is type(s) and content_keys(back) == content_keys(s)
    with pytest.raises(ValueError, match="task"):
        task_from_dict({"kind": "math", "id": "x"})
    with pytest.raises(TypeError):
        task_to_dict(object())


def test_table_variants_keep_the_call_graph(sandbox):
    from cocoda_jax.data import tables
    lib = tables.primitive_library(sandbox)
    syn = Synthesizer(sandbox, lib, CFG, run_seed=3)
    parents = {}
    for t in tables.generate(80, seed=4):
        parents.setdefault(t.motifs, t)
    outs = [syn.run(Job(p, 0, frozenset(content_keys(p)))) for p in list(parents.values())[:6]]
    accepted = [o for o in outs if o.accepted]
    assert len(accepted) >= 5, [o.rounds for o in outs]
    for o in accepted:
        p = parents[o.task.motifs]
        gp, dp = _graph(p.program)
        gv, dv = _graph(o.task.program)
        assert nx.is_isomorphic(gp, gv, node_match=lambda a, b: a == b, edge_match=lambda a, b: a == b)
        assert dp == dv and o.task.answer_type == p.answer_type and o.task.question != p.question


# -- the rules, one by one -----------------------------------------------------------------------

def _ok_run(task):
    return RunResult(ok=True, value=task.answer, values=task.intermediates + (("answer", task.answer),))


def _kinds(task, parent, run=None, **kw):
    return {e.kind for e in check_rules(task, parent, run or _ok_run(task), **kw)}


def test_a_generated_task_passes_every_rule(seeds, library):
    tools, params = library_names(library)
    for s in seeds:
        v = propose(s, 0, 0, run_seed=1, max_draws=CFG.max_draws)
        assert _kinds(v, s, tool_names=tools, param_names=params) == set()


def test_each_rule_reports_its_error_type(seeds, library):
    tools, params = library_names(library)
    s = seeds[2]
    v = propose(s, 0, 0, run_seed=1, max_draws=CFG.max_draws)
    kw = dict(tool_names=tools, param_names=params)
    assert _kinds(v, s, RunResult.failure("runtime", "boom"), **kw) == {"exec_failed"}
    assert "answer_mismatch" in _kinds(v, s, dataclasses.replace(_ok_run(v), value=v.answer + 1), **kw)
    assert "intermediate_mismatch" in _kinds(v, s, dataclasses.replace(_ok_run(v), values=()), **kw)
    assert _kinds(dataclasses.replace(v, question=v.question + " Use percent_of."), s, **kw) == {"names_tool"}
    assert _kinds(dataclasses.replace(v, question=v.question + " Call add(2, 3)."), s, **kw) >= {"names_tool"}
    assert _kinds(dataclasses.replace(v, question=v.question + " Bind x0 first."), s, **kw) == {"names_parameter"}
    assert _kinds(dataclasses.replace(v, question=v.question + " with total=3"), s, **kw) >= {"names_parameter"}
    assert _kinds(dataclasses.replace(v, question="Step 1: " + v.question), s, **kw) >= {"artefact"}
    name, value = v.inputs[0]
    assert "missing_number" in _kinds(dataclasses.replace(v, inputs=((name, value + 0.123),) + v.inputs[1:]), s, **kw)
    for written in (f"{v.answer}", f"{v.answer:.2f}"):
        q_with_answer = v.question + f" (It is {written}.)"
        assert "answer_in_question" in _kinds(dataclasses.replace(v, question=q_with_answer), s, **kw)
    assert _kinds(v, s, pool_keys=frozenset(content_keys(v)[1:]), **kw) == {"duplicate"}
    assert _kinds(v, seeds[3], **kw) == {"skeleton_mismatch"}
    assert _kinds(dataclasses.replace(v, answer_type="str"), s, **kw) == {"skeleton_mismatch"}
    # English words that are also tool names are not flagged outside call syntax.
    assert _kinds(dataclasses.replace(v, question=v.question + " Add the mean total."), s, **kw) == set()
    with pytest.raises(ValueError):
        CritiqueError("not_a_kind", "")


def test_table_rules_check_constants_and_string_answers(sandbox):
    from cocoda_jax.data import tables
    t = next(t for t in tables.generate(80, seed=4)
             if isinstance(t.answer, str) and any(a == "c" for _, args in t.skeleton for a in args)
             and t.answer.lower() not in t.question.lower())
    v = propose(t, 0, 0, run_seed=0, max_draws=CFG.max_draws)
    assert _kinds(v, t) == set()
    assert _kinds(dataclasses.replace(v, question=f"{v.question} Is it {v.answer}?"), t) == {"answer_in_question"}
    numeric = next(u for u in tables.generate(200, seed=4) if stated_numbers(u))
    assert _kinds(numeric, dataclasses.replace(numeric, question="other")) <= {"answer_in_question"}
    stripped = " ".join(w for w in numeric.question.split() if not any(ch.isdigit() for ch in w))
    assert "missing_number" in _kinds(dataclasses.replace(numeric, question=stripped), numeric)


def test_repairs_stop_at_k_max_and_are_counted(seeds, sandbox, library):
    class FlakyRunner:
        """Fails the first ``n`` runs, then runs for real: each failure forces one repair."""

        def __init__(self, n):
            self.n = n

        def run_many(self, programs, library, inputs=None):
            if self.n > 0:
                self.n -= 1
                return [RunResult.failure("runtime", "injected")]
            return sandbox.run_many(programs, library, inputs=inputs)

    cfg = RodsConfig(k_max=3)
    out = Synthesizer(FlakyRunner(2), library, cfg).run(Job(seeds[1], 0))
    assert out.accepted and out.repairs == 2 and len(out.rounds) == 3
    bad = Synthesizer(FlakyRunner(10), library, cfg).run(Job(seeds[1], 1))
    assert not bad.accepted and len(bad.rounds) == cfg.k_max + 1
    counts = rejection_counts([out, bad])
    assert counts["exec_failed"] == 6 and set(counts) == set(ERROR_TYPES)
    # a repaired candidate is a different draw from the failed ones
    assert out.task.id != Synthesizer(sandbox, library, cfg).run(Job(seeds[1], 0)).task.id


# -- beside training -----------------------------------------------------------------------------

def test_background_results_do_not_depend_on_timing(seeds, sandbox, library):
    syn = Synthesizer(sandbox, library, CFG, run_seed=2)
    jobs = [Job(s, a) for s in seeds[:3] for a in range(2)]
    direct = tuple(sorted((syn.run(j) for j in jobs), key=lambda o: o.key))
    import random
    rng = random.Random(0)
    delays = {j.key: rng.random() * 0.02 for j in jobs}

    def jittery(job):
        time.sleep(delays[job.key])
        return syn.run(job)

    with BackgroundSynthesizer(jittery, capacity=16) as bg:
        assert bg.submit(reversed(jobs)) == ()
        got = bg.collect([j.key for j in jobs], timeout_s=60)
    assert got == direct


def test_submit_never_blocks_and_the_queue_is_bounded(seeds):
    release = threading.Event()

    def slow(job):
        release.wait(10)
        return Outcome(job.parent.id, job.attempt, None, ())

    with BackgroundSynthesizer(slow, capacity=3) as bg:
        start = time.perf_counter()
        refused = bg.submit([Job(seeds[0], a) for a in range(5)])
        assert time.perf_counter() - start < 0.5
        assert [j.attempt for j in refused] == [3, 4]
        assert bg.poll() == ()
        assert bg.submit([Job(seeds[0], 0)]) == (Job(seeds[0], 0),)  # full (and a duplicate key)
        with pytest.raises(TimeoutError):
            bg.collect([(seeds[0].id, 0)], timeout_s=0.05)
        release.set()
        got = bg.collect([(seeds[0].id, a) for a in range(3)], timeout_s=10)
        assert [o.attempt for o in got] == [0, 1, 2]
        assert bg.submit([Job(seeds[0], 7)]) == ()  # room again


def test_a_failing_job_is_reported_not_swallowed(seeds):
    def broken(job):
        raise KeyError("no such tool")

    with BackgroundSynthesizer(broken, capacity=2) as bg:
        bg.submit([Job(seeds[0], 0)])
        with pytest.raises(RuntimeError, match="no such tool"):
            bg.collect([(seeds[0].id, 0)], timeout_s=10)

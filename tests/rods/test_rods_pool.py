"""The replay pool's lifecycle: invariants as hypothesis properties, and each rule on its own."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cocoda_jax.rods.config import RodsConfig
from cocoda_jax.rods.errors import RodsStateError
from cocoda_jax.rods.pool import (Candidate, PoolState, admit_found, advance_epoch, check_invariants, decisions_at,
                                  epoch_metrics, initial_pool, plan_synthesis, pool_hash)
from cocoda_jax.rods.tracker import Tracker


class T:
    """A minimal task: the pool only reads ``id`` and the content keys' fields."""

    def __init__(self, i):
        self.id, self.question, self.program, self.inputs = f"s{i}", f"question {i}", f"x0 = add(n0, n{i})\n", ()


def seeds(n):
    return [T(i) for i in range(n)]


def cand(i, parent="s0", phi=0.5, key=None):
    return Candidate(f"g{i}", parent, (f"q:{key if key is not None else i}", f"p:{key if key is not None else i}"), phi)


def test_initial_pool_skips_duplicate_seeds_and_logs_everything():
    s = seeds(3) + [T(1)]
    p = initial_pool(s, RodsConfig())
    assert p.live_ids() == ("s0", "s1", "s2")
    assert [(d.action, d.reason) for d in p.log] == [("add", "seed")] * 3 + [("skip", "duplicate_seed")]


def test_injection_is_capped_at_beta_and_the_rest_waits_in_the_queue():
    cfg = RodsConfig(beta=0.2)
    p = initial_pool(seeds(10), cfg)
    p2 = advance_epoch(p, Tracker(cfg), [cand(i) for i in range(5)], cfg)
    assert len(p2.live_generated()) == 2 and len(p2.queue) == 3 and p2.epoch == 1
    assert all(it.status == "burn_in" and it.added_epoch == 1 for it in p2.live_generated())
    p3 = advance_epoch(p2, Tracker(cfg), [cand(9)], cfg)
    assert [it.task_id for it in p3.live_generated()][2:] == ["g2", "g3"]  # queued first
    assert [c.task_id for c in p3.queue] == ["g4", "g9"]


def test_duplicates_are_skipped_by_id_and_by_content_key():
    cfg = RodsConfig(beta=1.0)
    p = advance_epoch(initial_pool(seeds(4), cfg), Tracker(cfg), [cand(1), cand(2, key=1), cand(1)], cfg)
    skips = [d for d in p.log if d.action == "skip"]
    assert [it.task_id for it in p.live_generated()] == ["g1"] and len(skips) == 2


def _observe(tracker, ids, mean, epoch, n=10):
    k = round(mean * n)
    return tracker.observe_groups({i: [1.0] * k + [0.0] * (n - k) for i in ids}, epoch)


def test_retirement_rules_mastered_hard_stale_and_seed_protection():
    cfg = RodsConfig(min_groups=2, hard_patience=2, stale_epochs=3, window=4)
    p = initial_pool(seeds(4), cfg)
    t = Tracker(cfg)
    for e in range(2):
        t = _observe(t, ["s0"], 1.0, e)
        t = _observe(t, ["s1"], 0.0, e)
        t = _observe(t, ["s2"], 0.5, e)
        p = advance_epoch(p, t, [], cfg)
    reasons = {d.task_id: d.reason for d in p.log if d.action == "retire"}
    assert reasons == {"s0": "mastered", "s1": "hard"}  # s3 unobserved for 2 < stale_epochs epochs
    p = advance_epoch(p, _observe(t, ["s2"], 0.5, 2), [], cfg)
    reasons = {d.task_id: d.reason for d in p.log if d.action == "retire"}
    assert reasons == {"s0": "mastered", "s1": "hard", "s3": "stale"} and p.live_ids() == ("s2",)
    keep = RodsConfig(min_groups=2, hard_patience=2, stale_epochs=3, retire_seeds=False)
    q = initial_pool(seeds(2), keep)
    tq = Tracker(keep)
    for e in range(4):
        tq = _observe(tq, ["s0"], 1.0, e)
        q = advance_epoch(q, tq, [], keep)
    assert q.live_ids() == ("s0", "s1")


def test_burn_in_promotes_boundary_items_and_rejects_the_others():
    cfg = RodsConfig(beta=1.0, burn_in_epochs=1, burn_in_low=0.1, burn_in_high=0.9)
    p = advance_epoch(initial_pool(seeds(3), cfg), Tracker(cfg), [cand(0), cand(1), cand(2)], cfg)
    t = _observe(Tracker(cfg), ["g0"], 0.5, 1)
    t = _observe(t, ["g1"], 1.0, 1)
    p2 = advance_epoch(p, t, [], cfg)
    status = {it.task_id: (it.status, it.reason) for it in p2.items if it.origin == "generated"}
    assert status == {"g0": ("active", None), "g1": ("retired", "burn_in"), "g2": ("burn_in", None)}


def test_p_max_keeps_the_highest_phi():
    cfg = RodsConfig(beta=1.0, p_max=3, burn_in_epochs=0)
    p = initial_pool(seeds(10), cfg)
    phis = [0.1, 0.9, 0.5, 0.7, 0.3]
    p = advance_epoch(p, Tracker(cfg), [cand(i, phi=f) for i, f in enumerate(phis)], cfg)
    assert sorted(it.task_id for it in p.live_generated()) == ["g1", "g2", "g3"]
    assert {d.task_id for d in p.log if d.action == "evict"} == {"g0", "g4"}
    # once observed, the tracked phi counts, not the prior
    t = _observe(Tracker(cfg), ["g1"], 1.0, 1)  # phi 0
    p = advance_epoch(p, _observe(t, ["g2", "g3"], 0.5, 1), [cand(7, phi=0.6)], cfg)
    assert sorted(it.task_id for it in p.live_generated()) == ["g2", "g3", "g7"]


def test_plan_synthesis_takes_boundary_parents_with_fresh_attempts():
    cfg = RodsConfig(synth_per_epoch=2, variants_per_seed=2)
    p = initial_pool(seeds(5), cfg)
    t = _observe(Tracker(cfg), ["s0"], 0.5, 0)
    t = _observe(t, ["s1"], 0.3, 0)
    t = _observe(t, ["s2"], 0.6, 0)
    t = _observe(t, ["s3"], 1.0, 0)
    p, jobs = plan_synthesis(p, t, cfg)
    assert jobs == (("s0", 0), ("s0", 1), ("s2", 0), ("s2", 1))
    p, jobs = plan_synthesis(p, t, cfg)
    assert jobs == (("s0", 2), ("s0", 3), ("s2", 2), ("s2", 3))
    assert sum(d.action == "synthesize" for d in p.log) == 4


def test_state_round_trips_and_rejects_malformed_json():
    cfg = RodsConfig(beta=0.5)
    p = advance_epoch(initial_pool(seeds(6), cfg), _observe(Tracker(cfg), ["s0"], 0.5, 0), [cand(i) for i in range(5)], cfg)
    back = PoolState.from_json(p.to_json())
    assert back == p and pool_hash(back) == pool_hash(p)
    with pytest.raises(RodsStateError):
        PoolState.from_json(p.to_json().replace('"status": "active"', '"status": "zombie"', 1))
    with pytest.raises(RodsStateError, match="twice"):
        PoolState.from_json(p.to_json().replace('"g1"', '"g0"'))
    with pytest.raises(RodsStateError, match="JSON"):
        PoolState.from_json(p.to_json()[:-5])


# -- invariants under random histories -----------------------------------------------------------

epoch_st = st.tuples(
    st.lists(st.tuples(st.integers(0, 40), st.sampled_from([0.0, 0.1, 0.3, 0.5, 0.8, 0.9, 1.0])), max_size=25),
    st.lists(st.tuples(st.integers(0, 60), st.floats(0, 1, allow_nan=False), st.integers(0, 45)), max_size=15),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(epoch_st, min_size=1, max_size=6), st.integers(0, 6), st.sampled_from([0.0, 0.2, 0.5]),
       st.integers(1, 20))
def test_pool_invariants_hold_over_any_history(history, p_max, beta, n_seeds):
    cfg = RodsConfig(p_max=p_max, beta=beta, stale_epochs=2, hard_patience=2, min_groups=1, queue_capacity=5)
    p = initial_pool(seeds(n_seeds), cfg)
    t = Tracker(cfg)
    retired = set()
    next_id = 0
    for obs, cands in history:
        e = p.epoch
        live = p.live_ids()
        if live:
            t = t.observe_groups({live[j % len(live)]: [m] * 4 for j, m in obs}, e)
        new = []
        for parent, phi_, key in cands:
            new.append(Candidate(f"g{next_id}", f"s{parent % n_seeds}", (f"q:{key}", f"p:{key}"), phi_))
            next_id += 1
        before = p
        p = advance_epoch(p, t, new, cfg)
        check_invariants(p, cfg)  # no duplicate ids or keys; live generated <= p_max
        assert len(p.live_generated()) <= p_max
        injected = [d for d in decisions_at(p, e) if d.action == "inject"]
        live_after_retire = sum(it.live for it in before.items) - sum(
            d.action == "retire" for d in decisions_at(p, e))
        assert len(injected) <= math.floor(beta * live_after_retire + 1e-9)
        assert len(p.queue) <= cfg.queue_capacity
        now_retired = {it.task_id for it in p.items if not it.live}
        assert retired <= now_retired  # never revived
        retired = now_retired
        assert all(it.reason is not None for it in p.items if not it.live)
        m = epoch_metrics(p, t, e)
        assert m["live"] == len(p.live_ids()) and m["injected"] == len(injected)


@given(st.lists(st.integers(0, 12), max_size=10), st.integers(1, 6), st.integers(0, 4))
@settings(max_examples=60, deadline=None)
def test_found_tasks_are_admitted_once_and_planned_as_parents_once(found, n_seeds, synth):
    """``admit_found`` adds each task not already in the pool (by id or content) once, live and unobserved;
    ``plan_synthesis`` makes the found items parents before any boundary item, each only until it has
    had its variants; the pool's invariants hold throughout."""
    cfg = RodsConfig(synth_per_epoch=synth, variants_per_seed=1)
    p = admit_found(initial_pool(seeds(n_seeds), cfg), [T(i) for i in found])
    check_invariants(p, cfg)
    added = list(dict.fromkeys(f"s{i}" for i in found if i >= n_seeds))
    assert [it.task_id for it in p.items if it.origin == "found"] == added
    assert all(p.item(t).live and p.item(t).added_epoch == 0 for t in added)
    assert PoolState.from_json(p.to_json()) == p
    t = Tracker(cfg).observe_groups({"s0": [1.0, 0.0, 1.0, 0.0]}, 0)  # one boundary seed
    p = advance_epoch(p, t, [], cfg)
    p, jobs = plan_synthesis(p, t, cfg)
    assert [j for j, _ in jobs] == (added + ["s0"])[:synth]
    _, again = plan_synthesis(p, t, cfg)
    assert [j for j, _ in again] == (added[synth:] + ["s0"])[:synth]

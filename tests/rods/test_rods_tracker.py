"""The RODS tracker: windowed statistics, regions, phi, JSON, and detection on a simulated policy."""

import json
import math
import statistics

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cocoda_jax.rl.rewards import Outcome
from cocoda_jax.rods.config import RodsConfig
from cocoda_jax.rods.errors import RodsStateError
from cocoda_jax.rods.simulate import SimulatedPolicy
from cocoda_jax.rods.tracker import Tracker, phi, region, tracking_reward

CFG = RodsConfig()


@pytest.mark.parametrize("kwargs", [
    {"hard": 0.9}, {"mastered": 1.5}, {"retire_mastered": 0.5}, {"beta": -0.1}, {"window": 0},
    {"hard_patience": 9, "window": 4}, {"burn_in_low": 0.9, "burn_in_high": 0.1}, {"p_max": -1},
    {"k_max": 1.5}, {"hard": float("nan")}, {"retire_seeds": 1},
])
def test_config_rejects_inconsistent_thresholds(kwargs):
    with pytest.raises(ValueError, match="RodsConfig"):
        RodsConfig(**kwargs)


def test_config_is_frozen_and_round_trips():
    cfg = RodsConfig(window=6, p_max=50)
    with pytest.raises(Exception):
        cfg.window = 3
    assert RodsConfig.from_dict(cfg.to_dict()) == cfg
    with pytest.raises(ValueError, match="unknown"):
        RodsConfig.from_dict({"windw": 3})


def test_regions_and_phi_at_the_thresholds():
    assert region(0.2, CFG) == "boundary" and region(0.85, CFG) == "boundary"
    assert region(0.19999, CFG) == "hard" and region(0.85001, CFG) == "mastered"
    assert phi(0.5) == 1.0 and phi(0.0) == 0.0 and phi(1.0) == 0.0
    assert math.isclose(phi(0.25), 0.75)
    # a training reward with saved-call credit can pass 1: clipped, never a negative priority
    assert phi(1.4) == 0.0 and phi(-0.2) == 0.0


def test_tracking_reward_uses_progress_only_with_gold_intermediates():
    o = Outcome(r_res=0.0, progress=0.6)
    assert tracking_reward(o, True) == 0.6
    assert tracking_reward(o, False) == 0.0
    assert tracking_reward(o, True, "progress") == 0.6


def test_tracking_the_training_reward():
    """The default of the co-evolution loop: what GRPO trains on, so an all-wrong group whose
    progress varies is not a boundary task (its advantages are all zero)."""
    wrong = [Outcome(r_res=0.0, progress=p) for p in (0.2, 0.5, 0.8)]
    assert [tracking_reward(o, True, "reward", 0.0) for o in wrong] == [0.0, 0.0, 0.0]
    assert tracking_reward(Outcome(r_res=1.0, progress=1.0), True, "reward", 1.6) == 1.6
    with pytest.raises(ValueError, match="training_reward"):
        tracking_reward(wrong[0], True, "reward")
    with pytest.raises(ValueError, match="signal"):
        tracking_reward(wrong[0], True, "vibes", 0.0)


def test_observe_is_pure_and_keeps_a_window():
    t0 = Tracker(RodsConfig(window=2, min_groups=1, hard_patience=1))
    t1 = t0.observe("a", [1, 0, 1, 1], 0)
    t2 = t1.observe("a", [0, 0, 0, 0], 1).observe("a", [1, 1, 1, 1], 2)
    assert t0.get("a") is None and t1.get("a").mean == 0.75
    s = t2.get("a")
    assert len(s.groups) == 2 and s.total_groups == 3 and s.first_epoch == 0 and s.last_epoch == 2
    assert s.mean == 0.5 and s.variance == 0.25 and s.group_variance == 0.0
    with pytest.raises(RodsStateError, match="before"):
        t2.observe("a", [1], 1)
    with pytest.raises(RodsStateError, match="finite"):
        t0.observe("a", [float("nan")], 0)
    with pytest.raises(RodsStateError, match="at least one"):
        t0.observe("a", [], 0)


def test_observe_batch_splits_consecutive_groups():
    t = Tracker(CFG).observe_batch(["a", "b"], [1, 1, 0, 0, 0, 1], 3, 0)
    assert math.isclose(t.get("a").mean, 2 / 3) and math.isclose(t.get("b").mean, 1 / 3)
    with pytest.raises(RodsStateError):
        Tracker(CFG).observe_batch(["a", "b"], [1, 1, 0], 3, 0)


groups_st = st.lists(st.lists(st.floats(0, 1, allow_nan=False), min_size=1, max_size=8), min_size=1, max_size=7)


@settings(max_examples=60, deadline=None)
@given(groups_st, st.integers(1, 5))
def test_window_statistics_equal_a_direct_computation(groups, window):
    t = Tracker(RodsConfig(window=window, min_groups=1, hard_patience=1))
    for e, g in enumerate(groups):
        t = t.observe("task", g, e)
    kept = [r for g in groups[-window:] for r in g]
    s = t.get("task")
    assert math.isclose(s.mean, statistics.fmean(kept), abs_tol=1e-12)
    assert math.isclose(s.variance, statistics.pvariance(kept), abs_tol=1e-12)
    assert math.isclose(s.group_variance, statistics.fmean(statistics.pvariance(g) for g in groups[-window:]),
                        abs_tol=1e-12)
    back = Tracker.from_json(t.to_json())
    assert back == t and back.to_json() == t.to_json()


def test_from_json_gives_typed_errors():
    good = json.loads(Tracker(CFG).observe("a", [1, 0], 0).to_json())
    with pytest.raises(RodsStateError, match="JSON"):
        Tracker.from_json("{not json")
    with pytest.raises(RodsStateError, match="format"):
        Tracker.from_json(json.dumps({**good, "format": "other"}))
    bad = json.loads(json.dumps(good))
    bad["tasks"]["a"]["groups"] = [[0, 0, 0.5, 0.0]]
    with pytest.raises(RodsStateError, match=r"tasks\['a'\]"):
        Tracker.from_json(json.dumps(bad))
    bad["tasks"]["a"] = {"groups": "x"}
    with pytest.raises(RodsStateError, match=r"tasks\['a'\]"):
        Tracker.from_json(json.dumps(bad))


def _simulated_tracker(n_tasks=300, epochs=4, group_size=16):
    policy = SimulatedPolicy(seed=7, rate=0.0, group_size=group_size)
    ids = [f"t{i}" for i in range(n_tasks)]
    t = Tracker(RodsConfig(window=4))
    for e in range(epochs):
        t = t.observe_groups([(i, policy.rewards(i, e)) for i in ids], e)
    return t, {i: policy.prob(i, 0) for i in ids}


def test_detection_picks_the_boundary_tasks_of_a_simulated_policy():
    """Tasks whose true success probability is clearly inside the boundary are detected, and clearly
    outside are not (64 rewards per task; a margin of 0.08 around the thresholds)."""
    t, p = _simulated_tracker()
    found = set(t.boundary())
    inside = {i for i, q in p.items() if 0.28 <= q <= 0.77}
    outside = {i for i, q in p.items() if q < 0.12 or q > 0.93}
    assert len(inside) > 50 and len(outside) > 50
    recall = len(found & inside) / len(inside)
    false_pos = len(found & outside) / len(outside)
    assert recall >= 0.95 and false_pos <= 0.02
    truly = {i for i, q in p.items() if 0.2 <= q <= 0.85}
    accuracy = sum((i in found) == (i in truly) for i in p) / len(p)
    assert accuracy >= 0.85
    ranked = t.boundary()
    assert all(t.get(a).phi >= t.get(b).phi for a, b in zip(ranked, ranked[1:]))


def test_boundary_variance_ratio_on_the_simulated_policy():
    """The paper sees boundary variance about 2x that of the other regions; Bernoulli rewards with
    probabilities spread over the logit range give a ratio well above 1."""
    t, _ = _simulated_tracker()
    ratio = t.boundary_variance_ratio()
    v = t.region_variances()
    assert v["boundary"] > v["mastered"] and v["boundary"] > v["hard"]
    assert 1.5 < ratio < 20
    assert Tracker(CFG).boundary_variance_ratio() is None


def test_boundary_variance_ratio_is_none_when_the_other_regions_never_vary():
    """Boundary tasks against mastered/hard ones whose groups all agree: the ratio is unbounded, so
    it is None (an infinity broke the run's JSON checkpoint payload; found by a chaos-config run)."""
    t = Tracker(CFG)
    for epoch in range(CFG.window):
        t = t.observe_groups({"always": [1.0] * 4, "never": [0.0] * 4, "half": [1.0, 0.0, 1.0, 0.0]}, epoch)
    regions = t.by_region()
    assert "always" in regions["mastered"] and "never" in regions["hard"] and "half" in regions["boundary"]
    assert t.boundary_variance_ratio() is None

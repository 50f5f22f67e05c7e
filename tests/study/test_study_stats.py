"""cocoda_jax.study.stats: bootstrap intervals, paired deltas, per-depth accuracy (pure numpy)."""

import numpy as np
import pytest

from cocoda_jax.study import stats as S


def _outcomes(p, n, seeds=(13, 42, 2026), rng_seed=0):
    rng = np.random.default_rng(rng_seed)
    return {s: {f"t{i:04d}": int(rng.random() < p) for i in range(n)} for s in seeds}


def test_interval_contains_point_estimate():
    for p in (0.1, 0.5, 0.9):
        e = S.accuracy_ci(_outcomes(p, 300), b=500)
        assert e.lo <= e.point <= e.hi
        assert 0.0 <= e.lo and e.hi <= 1.0


def test_point_is_mean_of_seed_means():
    o = {1: {"a": 1, "b": 1}, 2: {"a": 0, "b": 1, "c": 0, "d": 0}}
    e = S.accuracy_ci(o, b=200)
    assert e.per_seed == (1.0, 0.25)
    assert e.point == pytest.approx(0.625)
    assert e.n_pairs == 6


def test_interval_shrinks_with_n():
    widths = [S.accuracy_ci(_outcomes(0.5, n), b=1000).hi - S.accuracy_ci(_outcomes(0.5, n), b=1000).lo
              for n in (30, 300, 3000)]
    assert widths[0] > widths[1] > widths[2]


def test_one_seed_task_level_width_matches_binomial():
    e = S.accuracy_ci(_outcomes(0.5, 1000, seeds=(0,)), b=2000)
    width = e.hi - e.lo
    assert width == pytest.approx(2 * 1.96 * np.sqrt(0.25 / 1000), rel=0.15)


def test_deterministic_for_a_seed():
    o = _outcomes(0.4, 200)
    assert S.accuracy_ci(o, b=300, seed=7) == S.accuracy_ci(o, b=300, seed=7)
    ref = _outcomes(0.5, 200, rng_seed=1)
    assert S.paired_delta(o, ref, b=300, seed=7) == S.paired_delta(o, ref, b=300, seed=7)
    assert S.accuracy_ci(o, b=300, seed=7).ci != S.accuracy_ci(o, b=300, seed=8).ci


def test_identical_arms_give_zero_delta_and_zero_interval():
    o = _outcomes(0.4, 200)
    d = S.paired_delta(o, o, b=500)
    assert d.point == 0.0 and d.ci == [0.0, 0.0]
    assert not S.distinguishable(d.ci)
    assert S.verdict(d.ci) == "not distinguishable"


def test_known_shift_is_detected():
    base = _outcomes(0.4, 500)
    rng = np.random.default_rng(3)
    better = {s: {t: (1 if rng.random() < 0.2 else v) for t, v in tasks.items()} for s, tasks in base.items()}
    d = S.paired_delta(better, base, b=1000)
    expected = np.mean([np.mean([better[s][t] - base[s][t] for t in base[s]]) for s in base])
    assert d.point == pytest.approx(expected)
    assert d.lo > 0 and S.distinguishable(d.ci) and S.verdict(d.ci) == "better"
    worse = S.paired_delta(base, better, b=1000)
    assert worse.hi < 0 and S.verdict(worse.ci) == "worse"


def test_noise_alone_is_not_distinguishable():
    a, b = _outcomes(0.5, 100, rng_seed=1), _outcomes(0.5, 100, rng_seed=2)
    d = S.paired_delta(a, b, b=1000)
    assert d.lo < 0 < d.hi and not S.distinguishable(d.ci)


def test_paired_delta_refuses_different_tasks():
    a = {13: {"t1": 1, "t2": 0}}
    b = {13: {"t1": 1, "t3": 0}}
    with pytest.raises(ValueError, match="paired"):
        S.paired_delta(a, b)
    with pytest.raises(KeyError):
        S.paired_delta(a, {42: {"t1": 1}})


def test_seed_order_and_subset():
    o = {1: {"a": 1}, 2: {"a": 0}}
    assert S.accuracy_ci(o, seeds=[2, 1], b=50).per_seed == (0.0, 1.0)
    assert S.accuracy_ci(o, seeds=[1], b=50).point == 1.0


def test_bad_inputs():
    with pytest.raises(ValueError):
        S.bootstrap_mean([])
    with pytest.raises(ValueError):
        S.bootstrap_mean([[1.0], []])
    with pytest.raises(ValueError):
        S.bootstrap_mean([[1.0]], b=0)
    with pytest.raises(ValueError):
        S.bootstrap_mean([[1.0]], level=1.0)


def test_per_depth_pools_seeds():
    o = {1: {"a": 1, "b": 0}, 2: {"a": 1, "c": 1}}
    depths = {1: {"a": 1, "b": 2}, 2: {"a": 2, "c": 2}}
    assert S.per_depth(o, depths) == {"1": 1.0, "2": pytest.approx(2 / 3)}
    assert S.per_depth(o, {}) == {}


def test_distinguishable_edges():
    assert S.distinguishable([0.01, 0.2]) and S.distinguishable([-0.2, -0.01])
    assert not S.distinguishable([0.0, 0.2]) and not S.distinguishable([-0.1, 0.1])
    assert S.verdict(None) == "n/a"


def test_per_depth_delta_finds_the_depth_where_arms_differ():
    rng = np.random.default_rng(0)
    seeds = (1, 2)
    depths = {s: {f"t{i}": 1 + i % 2 for i in range(400)} for s in seeds}
    ref = {s: {t: int(rng.random() < 0.5) for t in depths[s]} for s in seeds}
    # the arm equals the reference on depth 1 and solves every depth-2 task
    arm = {s: {t: (1 if depths[s][t] == 2 else o) for t, o in ref[s].items()} for s in seeds}
    per = S.per_depth_delta(arm, ref, depths, seeds, b=500)
    assert per["1"] == {"delta": 0.0, "ci95": [0.0, 0.0], "n": 400}
    assert per["2"]["n"] == 400 and per["2"]["ci95"][0] > 0.3
    assert abs(per["2"]["delta"] - np.mean([1 - ref[s][t] for s in seeds for t in ref[s] if depths[s][t] == 2])) < 1e-12


def test_per_group_pools_seeds_and_its_delta_is_paired_on_the_groups_tasks():
    from cocoda_jax.study import stats as S
    arm = {1: {"a": 1, "b": 0, "c": 1}, 2: {"a": 1, "b": 1, "c": 0}}
    ref = {1: {"a": 0, "b": 0, "c": 1}, 2: {"a": 0, "b": 1, "c": 0}}
    groups = {1: {"a": "unseen", "b": "seen", "c": "seen"}, 2: {"a": "unseen", "b": "seen"}}
    assert S.per_group(arm, groups) == {"seen": 2 / 3, "unseen": 1.0}
    d = S.per_group_delta(arm, ref, groups, [1, 2], b=200)
    assert d["unseen"]["delta"] == 1.0 and d["unseen"]["n"] == 2
    assert d["seen"]["delta"] == 0.0 and d["seen"]["n"] == 3


def test_seed_t_interval_is_the_student_interval_over_seeds():
    lo, hi = S.seed_t_interval([1.0, 2.0, 3.0])  # mean 2, sd 1, t(0.975, 2) = 4.3027
    assert lo == pytest.approx(2.0 - 4.302653 / np.sqrt(3), abs=1e-5)
    assert hi == pytest.approx(2.0 + 4.302653 / np.sqrt(3), abs=1e-5)
    assert S.seed_t_interval([0.02, 0.02, 0.02]) == [0.02, 0.02]  # no spread between runs
    assert S.seed_t_interval([0.5]) is None  # one run: nothing to measure the spread with
    with pytest.raises(ValueError, match="non-finite"):
        S.seed_t_interval([0.1, float("nan")])


def test_seed_t_interval_is_wider_than_the_bootstrap_when_runs_disagree():
    """Three runs that disagree by a few points with 1,000 tasks each: the bootstrap's seed level sees
    ten resamples and its interval excludes 0; the t interval over the runs does not."""
    rng = np.random.default_rng(0)
    deltas = [0.035, 0.004, 0.015]
    per_seed = [np.where(rng.random(1000) < abs(d) * 10, np.sign(d) * 0.1, 0.0) for d in deltas]
    boot = S.bootstrap_mean(per_seed)
    t = S.seed_t_interval(boot.per_seed)
    assert S.distinguishable(boot.ci) and not S.distinguishable(t)
    assert t[1] - t[0] > boot.hi - boot.lo

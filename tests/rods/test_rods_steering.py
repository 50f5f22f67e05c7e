"""The priority draw follows the tracker: boundary tasks are redrawn, unobserved variants get tracked,
exploration and re-checks keep a share, and the draw stays a pure function of (pool, tracker, seed)."""

import collections
import dataclasses
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cocoda_jax.data import synthetic_math as sm
from cocoda_jax.rods import Curriculum
from cocoda_jax.rods.config import RodsConfig
from cocoda_jax.rods.curriculum import DRAW_REGIONS, draw_weight, priority_order, uniform_order
from cocoda_jax.rods.errors import RodsStateError
from cocoda_jax.rods.synthesis import Outcome, derived_seed

CFG = RodsConfig(window=3, hard_patience=2, stale_epochs=20)
GROUP = 8


@pytest.fixture(scope="module")
def tasks():
    return [t for t in sm.generate(400, seed=11) if t.depth <= 3][:200]


def _rejecting(job):
    return Outcome(job.parent.id, job.attempt, None, ())


def _cur(directory, seeds, config=CFG, selection="priority", synthesize=_rejecting):
    return Curriculum(seeds, config, directory, run_seed=0, synthesize=synthesize, background=False,
                      selection=selection)


def _ids(batch):
    return [t.id for t in batch]


# -- the knobs -------------------------------------------------------------------------------------

def test_draw_knobs_have_defaults_and_are_validated():
    c = RodsConfig()
    assert (c.explore_weight, c.variant_weight, c.recheck_weight) == (0.5, 10.0, 0.05)
    old = {k: v for k, v in c.to_dict().items() if k not in ("explore_weight", "variant_weight", "recheck_weight")}
    assert RodsConfig.from_dict(old) == c  # a config saved before the knobs existed still loads
    assert RodsConfig(explore_weight=0, variant_weight=1, recheck_weight=0.0).explore_weight == 0
    for name in ("explore_weight", "variant_weight", "recheck_weight"):
        for bad in (-0.1, math.inf, math.nan, "1", True, None):
            with pytest.raises(ValueError, match=f"RodsConfig.{name}"):
                RodsConfig(**{name: bad})


def test_draw_weight_per_region():
    c = RodsConfig(explore_weight=0.3, variant_weight=5.0, recheck_weight=0.02)
    assert draw_weight("boundary", 1.0, c) == 1.0 and draw_weight("boundary", 0.64, c) == 0.64
    assert draw_weight("boundary", 0.0, c) == 0.02  # floored: never below a settled task
    assert draw_weight("unobserved", 0.0, c) == 0.3 and draw_weight("variant", 0.0, c) == 5.0
    assert draw_weight("mastered", 0.0, c) == draw_weight("hard", 0.6, c) == 0.02
    with pytest.raises(ValueError, match="region"):
        draw_weight("retired", 0.0, c)


# -- the rule --------------------------------------------------------------------------------------

def _observed(cur, groups):
    cur.observe(groups)
    return cur


def test_draw_probabilities_follow_the_weights(tmp_path, tasks):
    """One draw picks a task with probability proportional to its weight (the exponential race):
    boundary tasks at phi = 1 get twice an unobserved task's chance, settled ones a small share."""
    seeds = tasks[:30]
    with _cur(tmp_path, seeds) as cur:
        ids = _ids(cur.tasks())
        boundary, settled, unobserved = ids[:5], ids[5:10], ids[10:]
        cur.observe({t: [1.0, 0.0] * 2 for t in boundary} | {t: [1.0] * 4 for t in settled})
        regions = cur.regions_of(ids)
        assert {regions[t] for t in boundary} == {"boundary"} and {regions[t] for t in settled} == {"mastered"}
        assert {regions[t] for t in unobserved} == {"unobserved"}
        seeds_n = 3000
        first = collections.Counter(regions[cur.sample(1, seed=s)[0].id] for s in range(seeds_n))
        mass = {"boundary": 5 * 1.0, "unobserved": 20 * CFG.explore_weight, "mastered": 5 * CFG.recheck_weight}
        total = sum(mass.values())
        for r, m in mass.items():
            p = m / total
            assert abs(first[r] / seeds_n - p) < 4 * math.sqrt(p * (1 - p) / seeds_n) + 1e-3, (r, first)
        # Per task, a boundary task is drawn more often than any unobserved one, for any batch size.
        for n in (1, 5, 10):
            counts = collections.Counter(t.id for s in range(400) for t in cur.sample(n, seed=s))
            assert min(counts[t] for t in boundary) > max(counts[t] for t in unobserved)
            assert max(counts[t] for t in unobserved) > max(counts[t] for t in settled)


def test_higher_phi_boundary_tasks_are_drawn_first_more_often(tmp_path, tasks):
    seeds = tasks[:12]
    with _cur(tmp_path, seeds) as cur:
        ids = _ids(cur.tasks())
        half, edge = ids[:4], ids[4:8]  # phi 1 and phi 0.51 (mean 0.85, still boundary)
        cur.observe({t: [1.0, 0.0] * 4 for t in half} | {t: [1.0] * 17 + [0.0] * 3 for t in edge})
        pos = collections.defaultdict(list)
        for s in range(300):
            for i, t in enumerate(_ids(cur.sample(len(ids), seed=s))):
                pos[t].append(i)
        mean = {t: sum(v) / len(v) for t, v in pos.items()}
        assert max(mean[t] for t in half) < min(mean[t] for t in edge)


def test_sample_is_deterministic_and_resumes_exactly(tmp_path, tasks):
    """The same state and seed give the same draw: in another object, another directory, and in a
    curriculum restored from the directory after boundaries."""
    seeds = tasks[:40]
    with _cur(tmp_path / "a", seeds) as a, _cur(tmp_path / "b", seeds) as b:
        for e in range(3):
            batch = a.sample(15, seed=e)
            assert batch == a.sample(15, seed=e) == b.sample(15, seed=e)
            groups = {t.id: _rewards(t.id, e) for t in batch}
            a.observe(groups)
            b.observe(groups)
            a.end_epoch()
            b.end_epoch()
        draws = [a.sample(n, seed=s) for n in (1, 15, 40, 95) for s in (0, 7)]
        assert any(a.sample(15, seed=s) != draws[1] for s in range(1, 5))  # the seed matters
    with _cur(tmp_path / "a", seeds) as resumed:
        assert resumed.epoch == 3
        assert [resumed.sample(n, seed=s) for n in (1, 15, 40, 95) for s in (0, 7)] == draws


def _rewards(task_id, epoch):
    """A fixed policy: a third of the tasks solved half the time (boundary), a third always
    (mastered), a third never (hard)."""
    kind = derived_seed("kind", task_id) % 3
    if kind == 0:
        return [1.0, 0.0] * (GROUP // 2)
    return [1.0 if kind == 1 else 0.0] * GROUP


@settings(max_examples=40, deadline=None)
@given(st.lists(st.sampled_from([None, (1.0,), (0.0,), (1.0, 0.0), (1.0, 1.0, 1.0, 0.0)]), min_size=1, max_size=12),
       st.integers(0, 40), st.integers(0, 2**31), st.sampled_from([0.0, 0.05]), st.sampled_from([0.0, 0.5]))
def test_sample_as_a_property(tmp_path_factory, tasks, observed, n, seed, recheck, explore):
    """Any tracker state: ``n`` tasks, no duplicates up to the live size, then the order cycles;
    zero-weight tasks only after every positive one."""
    config = dataclasses.replace(CFG, recheck_weight=recheck, explore_weight=explore)
    seeds = tasks[: len(observed)]
    with _cur(tmp_path_factory.mktemp("prop"), seeds, config) as cur:
        cur.observe({t.id: list(r) for t, r in zip(seeds, observed) if r is not None})
        out = _ids(cur.sample(n, seed))
        live = len(seeds)
        assert len(out) == n and out == _ids(cur.sample(n, seed))
        assert out[:live] == list(priority_order(cur.pool, cur.tracker, config, seed))[:n]
        counts = collections.Counter(out)
        assert all(n // live <= c <= n // live + 1 for c in counts.values())
        if n <= live:
            assert len(counts) == n
        order = priority_order(cur.pool, cur.tracker, config, seed)
        assert out == [order[i % live] for i in range(n)]
        regions = cur.regions_of(order)
        weights = [draw_weight(regions[t], (cur.tracker.get(t).phi if cur.tracker.get(t) else 0.0), config)
                   for t in order]
        positive = [w > 0 for w in weights]
        assert positive == sorted(positive, reverse=True)


def test_uniform_selection_is_unchanged(tmp_path, tasks):
    """The ablation keeps its seeded uniform permutation, blind to the tracker."""
    seeds = tasks[:30]
    with _cur(tmp_path, seeds, selection="uniform") as cur:
        ids = _ids(cur.tasks())
        cur.observe({t: [1.0, 0.0] for t in ids[:10]} | {t: [1.0] * 4 for t in ids[10:20]})
        for s in (0, 3, 99):
            expected = sorted(ids, key=lambda t: (derived_seed("rods-sample", s, cur.epoch, t), t))
            assert list(uniform_order(cur.pool, s)) == expected
            assert _ids(cur.sample(len(ids) + 4, seed=s)) == expected + expected[:4]


# -- regions_of --------------------------------------------------------------------------------------

def test_regions_of_names_the_region_at_draw_time_and_changes_nothing(tmp_path, tasks):
    seeds = tasks[:10]
    with _cur(tmp_path, seeds) as cur:
        ids = _ids(cur.tasks())
        cur.observe({ids[0]: [1.0, 0.0], ids[1]: [1.0] * 4, ids[2]: [0.0] * 4})
        h = cur.state_hash()
        got = cur.regions_of([ids[0], ids[1], ids[2], ids[3], ids[0]])
        assert got == {ids[0]: "boundary", ids[1]: "mastered", ids[2]: "hard", ids[3]: "unobserved"}
        assert cur.regions_of([]) == {} and cur.state_hash() == h
        assert set(cur.regions_of(ids).values()) <= set(DRAW_REGIONS)
        with pytest.raises(RodsStateError, match="not in the pool"):
            cur.regions_of(["no-such-task"])


# -- over epochs -----------------------------------------------------------------------------------

def _play(cur, n, seed):
    """One epoch: draw ``n``, note each draw's region, observe one group each."""
    e = cur.epoch
    batch = cur.sample(n, seed=seed * 1000 + e)
    regions = cur.regions_of(t.id for t in batch)
    cur.observe([(t.id, _rewards(t.id, e)) for t in batch])
    cur.end_epoch()
    return [(t.id, regions[t.id]) for t in batch]


def test_boundary_tasks_are_redrawn_across_epochs(tmp_path, tasks):
    """60 seeds, 15 draws per epoch (a run's proportions): under the priority draw a task known to be
    at the boundary is drawn again in the next epoch about half the time, twice the uniform sweep's
    rate, and boundary tasks take a far larger share of the draws."""
    seeds = tasks[:60]
    epochs, runs, n = 6, 4, 15
    stats = {}
    for selection in ("priority", "uniform"):
        share, redrawn = [], []
        for run in range(runs):
            with _cur(tmp_path / f"{selection}{run}", seeds, selection=selection) as cur:
                for _ in range(epochs):
                    known = {t for t in cur.pool.live_ids() if cur.tracker.region_of(t) == "boundary"}
                    draws = _play(cur, n, run)
                    share.append(sum(r == "boundary" for _, r in draws) / n)
                    if known:
                        redrawn.append(len(known & {t for t, _ in draws}) / len(known))
        stats[selection] = (sum(share) / len(share), sum(redrawn) / len(redrawn))
    (p_share, p_redrawn), (u_share, u_redrawn) = stats["priority"], stats["uniform"]
    assert p_share > 1.8 * u_share, stats
    assert p_redrawn > 0.4 and p_redrawn > 1.8 * u_redrawn, stats


def _variant_synthesizer(reserve):
    """Accepts every job with a task of ``reserve`` under a fresh id (which one: a hash of the job)."""
    def run(job):
        base = reserve[derived_seed("variant", job.parent.id, job.attempt) % len(reserve)]
        return Outcome(job.parent.id, job.attempt,
                       dataclasses.replace(base, id=f"var-{job.parent.id}-{job.attempt}"), ())
    return run


def test_unobserved_variants_are_drawn_soon_and_then_tracked(tmp_path, tasks):
    """Variants injected among many unobserved seeds, drawn as a run does (several iterations per
    epoch, each observed before the next draw): each variant is tracked by the end of the epoch
    after its injection, and its first draw shows as ``variant`` in regions_of."""
    seeds, reserve = tasks[:100], tasks[100:]
    config = dataclasses.replace(CFG, synth_per_epoch=4, variants_per_seed=2, beta=0.2)
    injected_at, first_drawn = {}, {}
    with _cur(tmp_path, seeds, config, synthesize=_variant_synthesizer(reserve)) as cur:
        for e in range(7):
            for it in cur.pool.items:
                if it.origin == "generated":
                    injected_at.setdefault(it.task_id, it.added_epoch)
            for i in range(3):
                batch = cur.sample(5, seed=100 * e + i)
                regions = cur.regions_of(t.id for t in batch)
                for t in batch:
                    if t.id in injected_at and t.id not in first_drawn:
                        first_drawn[t.id] = e
                        assert regions[t.id] == "variant"
                cur.observe([(t.id, _rewards(t.id, e)) for t in batch])
            cur.end_epoch()
    judged = {t: e for t, e in injected_at.items() if e <= 5}  # injected with two epochs left
    assert len(judged) >= 10
    late = {t: (e, first_drawn.get(t)) for t, e in judged.items() if first_drawn.get(t, 99) > e + 1}
    assert not late, late
    assert all(first_drawn[t] >= e for t, e in judged.items())

"""RODS as a step-wise task source: sampling, epoch boundaries, metrics and exact restart."""

import collections
import dataclasses
import json

import pytest

from cocoda_jax import storage
from cocoda_jax.data import synthetic_math as sm
from cocoda_jax.rods import Curriculum, persistence
from cocoda_jax.rods.config import RodsConfig
from cocoda_jax.rods.errors import CorruptStateError, RodsStateError
from cocoda_jax.rods.synthesis import Outcome, derived_seed
from cocoda_jax.rods.tracker import REGIONS
from tests.rods.conftest import memoised_synthesizer

CFG = RodsConfig(p_max=10, beta=0.25, synth_per_epoch=4, variants_per_seed=2, stale_epochs=3, window=3,
                 hard_patience=2)
EPOCHS = 6
RUN_SEED = 9
GROUP = 8


@pytest.fixture(scope="module")
def seed_tasks():
    return [t for t in sm.generate(120, seed=5) if t.depth <= 3][:30]


@pytest.fixture(scope="module")
def synth(sandbox, library):
    return memoised_synthesizer(sandbox, library, CFG, RUN_SEED)


def _unit(*parts):
    return (derived_seed(*parts) % (1 << 53)) / float(1 << 53)


def fake_rewards(task_id, epoch):
    """A deterministic stand-in policy: task skill from a hash of its id, improving per epoch."""
    p = min(1.0, _unit("skill", task_id) * 1.1 + 0.06 * epoch)
    return [1.0 if _unit("roll", task_id, epoch, i) < p else 0.0 for i in range(GROUP)]


def play_epoch(cur):
    """One round of the loop: sample 80 % of the live pool, observe one group per sampled task."""
    e = cur.epoch
    batch = cur.sample(max(1, (len(cur.tasks()) * 4) // 5), seed=1000 + e)
    cur.observe({t.id: fake_rewards(t.id, e) for t in batch})
    return cur.end_epoch()


def tree(directory):
    return {name: p.read_bytes() for name, p in storage.list_files(persistence.rods_dir(directory)).items()}


@pytest.fixture(scope="module")
def reference(tmp_path_factory, seed_tasks, synth):
    """The uninterrupted run, without a background thread: state hash and files after each epoch."""
    d = tmp_path_factory.mktemp("reference")
    hashes, trees, metrics = [], [], []
    with Curriculum(seed_tasks, CFG, d, run_seed=RUN_SEED, synthesize=synth, background=False) as cur:
        hashes.append(cur.state_hash())
        trees.append(tree(d))
        while cur.epoch < EPOCHS:
            metrics.append(play_epoch(cur))
            hashes.append(cur.state_hash())
            trees.append(tree(d))
        final = cur
    return d, hashes, trees, metrics, final


def test_the_reference_run_exercises_the_lifecycle(reference):
    _, _, _, metrics, cur = reference
    actions = {k.split(":")[0] for m in metrics for k in m["decisions"]}
    assert {"inject", "retire", "promote", "synthesize"} <= actions
    assert sum(m["synthesis"]["accepted"] for m in metrics) > 0
    assert cur.epoch == EPOCHS and len(cur.pool.live_generated()) <= CFG.p_max


def test_restart_after_every_epoch_gives_the_uninterrupted_state(tmp_path, reference, seed_tasks, synth):
    """A new Curriculum per epoch (background thread on, unlike the reference): the same state hash
    and byte-identical files after every boundary."""
    _, hashes, trees, _, _ = reference
    for e in range(EPOCHS):
        with Curriculum(seed_tasks, CFG, tmp_path, run_seed=RUN_SEED, synthesize=synth, background=True) as cur:
            assert cur.epoch == e and cur.state_hash() == hashes[e]
            play_epoch(cur)
            assert cur.state_hash() == hashes[e + 1]
        assert tree(tmp_path) == trees[e + 1]


def test_background_and_foreground_give_identical_states(tmp_path, reference, seed_tasks, synth):
    _, hashes, trees, metrics, _ = reference
    with Curriculum(seed_tasks, CFG, tmp_path, run_seed=RUN_SEED, synthesize=synth, background=True) as cur:
        got = [cur.state_hash()]
        got_metrics = []
        while cur.epoch < EPOCHS:
            got_metrics.append(play_epoch(cur))
            got.append(cur.state_hash())
    assert got == hashes and got_metrics == metrics
    assert tree(tmp_path) == trees[-1]


def test_a_stopped_mid_epoch_run_redoes_that_epoch(tmp_path, reference, seed_tasks, synth):
    """Observations not followed by end_epoch are not saved: the resumed run redoes the epoch."""
    _, hashes, _, _, _ = reference
    with Curriculum(seed_tasks, CFG, tmp_path, run_seed=RUN_SEED, synthesize=synth) as cur:
        play_epoch(cur)
        play_epoch(cur)
        cur.observe({t.id: [0.5] * GROUP for t in cur.tasks()})  # then "killed"
    with Curriculum(seed_tasks, CFG, tmp_path, run_seed=RUN_SEED, synthesize=synth) as cur:
        assert cur.epoch == 2 and cur.state_hash() == hashes[2]
        play_epoch(cur)
        assert cur.state_hash() == hashes[3]


def test_end_epoch_metrics(reference, seed_tasks):
    _, _, _, metrics, _ = reference
    # plan_synthesis logs at the new epoch, so the jobs planned at boundary e - 1 show in epoch e's decisions
    planned = [CFG.variants_per_seed * m["decisions"].get("synthesize:boundary", 0) for m in metrics]
    assert planned[0] == 0 and sum(planned) > 0
    for e, m in enumerate(metrics):
        assert m["epoch"] == e
        assert set(m["region_sizes"]) == set(REGIONS) | {"unobserved"}
        assert sum(m["region_sizes"].values()) == m["live"] and m["region_sizes"]["unobserved"] == m["unobserved"]
        assert set(m["region_variance"]) == set(REGIONS)
        for r, v in m["region_variance"].items():
            assert (v is None) == (m["region_sizes"][r] == 0)
            assert v is None or 0.0 <= v <= 0.25
        ratio = m["boundary_variance_ratio"]
        assert ratio is None or ratio >= 0.0
        s = m["synthesis"]
        assert set(s) == {"jobs", "accepted", "acceptance_rate", "rejections"}
        assert s["jobs"] == planned[e] and 0 <= s["accepted"] <= s["jobs"]
        assert (s["acceptance_rate"] is None) == (s["jobs"] == 0)
        assert s["acceptance_rate"] is None or 0.0 <= s["acceptance_rate"] <= 1.0
        assert m["injected_mean_reward"] is None or 0.0 <= m["injected_mean_reward"] <= 1.0
        json.dumps(m, allow_nan=True)  # plain data, loggable as is
    assert metrics[0]["injected_mean_reward"] is None  # nothing injected before the first boundary
    assert any(m["injected_mean_reward"] is not None for m in metrics)
    assert any(m["boundary_variance_ratio"] is not None for m in metrics)


def test_injected_mean_reward_is_the_mean_over_observed_injected_items(tmp_path, reference, seed_tasks, synth):
    """Recomputed by hand from a restart at each epoch: the generated items injected earlier that
    were sampled in the epoch, each item's group mean, averaged."""
    _, _, _, metrics, _ = reference
    for e in range(EPOCHS):
        with Curriculum(seed_tasks, CFG, tmp_path / "r", run_seed=RUN_SEED, synthesize=synth,
                        background=False) as cur:
            injected = {it.task_id for it in cur.pool.items if it.origin == "generated" and it.live}
            batch = cur.sample(max(1, (len(cur.tasks()) * 4) // 5), seed=1000 + e)
            means = [sum(fake_rewards(t.id, e)) / GROUP for t in batch if t.id in injected]
            cur.observe({t.id: fake_rewards(t.id, e) for t in batch})
            m = cur.end_epoch()
        assert m == metrics[e]
        expected = sum(means) / len(means) if means else None
        assert m["injected_mean_reward"] == pytest.approx(expected)


# -- sample -----------------------------------------------------------------------------------------

def _rejecting(job):
    return Outcome(job.parent.id, job.attempt, None, ())


def test_sample_prefers_boundary_tasks_and_is_deterministic(tmp_path, seed_tasks):
    """The rule itself is tested in test_rods_steering; here: the boundary outweighs the rest, the
    draw is seeded, and beyond the live size the order cycles."""
    with Curriculum(seed_tasks, CFG, tmp_path, run_seed=0, synthesize=_rejecting, background=False) as cur:
        ids = [t.id for t in cur.tasks()]
        assert ids == list(cur.pool.live_ids()) and len(ids) == len(seed_tasks)
        mastered, hard, half, unobserved = ids[0:6], ids[6:10], ids[10:14], ids[14:]
        cur.observe({t: [1.0] * 4 for t in mastered} | {t: [0.0] * 4 for t in hard}
                    | {t: [1.0, 0.0, 1.0, 0.0] for t in half})
        a = cur.sample(len(half), seed=3)
        assert a == cur.sample(len(half), seed=3)
        hits = collections.Counter(t.id for s in range(200) for t in cur.sample(len(half), seed=s))
        assert min(hits[t] for t in half) > max(hits[t] for t in unobserved) > max(hits[t] for t in mastered + hard)
        assert any(cur.sample(len(half), seed=s) != a for s in range(4, 10))  # the seed matters
        full = cur.sample(len(ids), seed=3)
        assert full[: len(half)] == a and sorted(t.id for t in full) == sorted(ids)
        more = cur.sample(2 * len(ids) + 5, seed=3)
        assert more == full + full + full[:5]
        assert cur.sample(0, seed=3) == ()
        with pytest.raises(ValueError):
            cur.sample(-1, seed=3)


def test_uniform_selection_ignores_the_regions_and_is_seeded(tmp_path, seed_tasks):
    """``selection="uniform"`` (the rods_random ablation): the same pool, any region equally likely."""
    with Curriculum(seed_tasks, CFG, tmp_path, run_seed=0, synthesize=_rejecting, background=False,
                    selection="uniform") as cur:
        ids = [t.id for t in cur.tasks()]
        cur.observe({t: [1.0] * 4 for t in ids[:10]})  # mastered: priority order would put them last
        n = len(ids) // 2
        picks = [{t.id for t in cur.sample(n, seed=s)} for s in range(40)]
        assert cur.sample(n, seed=7) == cur.sample(n, seed=7) and all(len(p) == n for p in picks)
        share = sum(len(p & set(ids[:10])) for p in picks) / (40 * n)
        assert abs(share - 10 / len(ids)) < 0.1  # mastered tasks drawn at their share of the pool
    with pytest.raises(ValueError, match="selection"):
        Curriculum(seed_tasks, CFG, tmp_path / "x", run_seed=0, synthesize=_rejecting, background=False,
                   selection="random")


# -- errors and lifetime ---------------------------------------------------------------------------

def test_a_corrupt_state_raises_and_is_not_overwritten(tmp_path, seed_tasks, synth):
    with Curriculum(seed_tasks, CFG, tmp_path, run_seed=RUN_SEED, synthesize=synth) as cur:
        play_epoch(cur)
        play_epoch(cur)
    root = persistence.rods_dir(tmp_path)
    manifest = json.loads((root / persistence.MANIFEST).read_text())
    pool_file = root / manifest["pool"]["file"]
    pool_file.write_bytes(pool_file.read_bytes()[:-20])
    before = tree(tmp_path)
    for background in (True, False):
        with pytest.raises(CorruptStateError, match="pool"):
            Curriculum(seed_tasks, CFG, tmp_path, run_seed=RUN_SEED, synthesize=synth, background=background)
        assert tree(tmp_path) == before
    (root / persistence.MANIFEST).write_text("{not json")
    before = tree(tmp_path)
    with pytest.raises(CorruptStateError, match="MANIFEST"):
        Curriculum(seed_tasks, CFG, tmp_path, run_seed=RUN_SEED, synthesize=synth)
    assert tree(tmp_path) == before


def test_resume_with_another_config_or_seeds_is_refused(tmp_path, seed_tasks, synth):
    with Curriculum(seed_tasks, CFG, tmp_path, run_seed=RUN_SEED, synthesize=synth) as cur:
        play_epoch(cur)
    before = tree(tmp_path)
    with pytest.raises(RodsStateError, match="config"):
        Curriculum(seed_tasks, RodsConfig(), tmp_path, run_seed=RUN_SEED, synthesize=synth)
    with pytest.raises(RodsStateError, match="seeds"):
        Curriculum(seed_tasks[1:], CFG, tmp_path, run_seed=RUN_SEED, synthesize=synth)
    assert tree(tmp_path) == before


def test_observe_takes_only_live_tasks(tmp_path, seed_tasks):
    with Curriculum(seed_tasks, CFG, tmp_path, run_seed=0, synthesize=_rejecting, background=False) as cur:
        h = cur.state_hash()
        with pytest.raises(RodsStateError, match="not live"):
            cur.observe({seed_tasks[0].id: [1.0], "no-such-task": [0.0]})
        assert cur.state_hash() == h
        cur.observe([(seed_tasks[0].id, [1.0]), (seed_tasks[0].id, [0.0])])  # two groups, one task
        assert cur.tracker.get(seed_tasks[0].id).total_groups == 2


def test_a_failed_boundary_leaves_the_saved_state_and_refuses_more(tmp_path, seed_tasks, synth):
    def flaky(job):
        if job.attempt == 0 and job.parent.id == boom[0]:
            raise OSError("sandbox gone")
        return synth(job)

    with Curriculum(seed_tasks, CFG, tmp_path, run_seed=RUN_SEED, synthesize=synth) as cur:
        play_epoch(cur)
        boom = [cur.pending[0][0]]
        saved = cur.state_hash()
    for background in (True, False):
        with Curriculum(seed_tasks, CFG, tmp_path, run_seed=RUN_SEED, synthesize=flaky, background=background) as cur:
            batch = cur.sample(5, seed=0)
            cur.observe({t.id: fake_rewards(t.id, 1) for t in batch})
            with pytest.raises((OSError, RuntimeError)):
                cur.end_epoch()
            with pytest.raises(RuntimeError, match="resume"):
                cur.observe({batch[0].id: [1.0]})
        with Curriculum(seed_tasks, CFG, tmp_path, run_seed=RUN_SEED, synthesize=synth) as cur:
            assert cur.epoch == 1 and cur.state_hash() == saved


def test_the_built_in_synthesizer_and_set_library(tmp_path, reference, seed_tasks, sandbox, library, synth):
    _, hashes, _, _, _ = reference
    with pytest.raises(ValueError):
        Curriculum(seed_tasks, CFG, tmp_path / "x", run_seed=RUN_SEED)
    with Curriculum(seed_tasks, CFG, tmp_path, run_seed=RUN_SEED, library=library, sandbox=sandbox) as cur:
        play_epoch(cur)
        cur.set_library(library)  # the same snapshot: nothing changes
        play_epoch(cur)
        play_epoch(cur)
        assert cur.state_hash() == hashes[3]
    with Curriculum(seed_tasks, CFG, tmp_path, run_seed=RUN_SEED, synthesize=synth) as cur:
        with pytest.raises(ValueError, match="set_library"):
            cur.set_library(library)
        cur.close()
        cur.close()  # idempotent
        with pytest.raises(RuntimeError, match="closed"):
            cur.end_epoch()


class _Tagged:
    """The same library under another identity, to see which one a synthesis job ran with."""

    def __init__(self, library):
        self._library = library

    def __getattr__(self, name):
        return getattr(self._library, name)


@pytest.mark.parametrize("background", [False, True])
def test_set_library_applies_to_jobs_planned_after_it(tmp_path, reference, seed_tasks, sandbox, library, background):
    _, hashes, _, _, _ = reference
    lib_a, lib_b = _Tagged(library), _Tagged(library)
    seen = []

    class Runner:
        def run_many(self, programs, lib, **kw):
            seen.append(lib)
            return sandbox.run_many(programs, lib, **kw)

    with Curriculum(seed_tasks, CFG, tmp_path, run_seed=RUN_SEED, library=lib_a, sandbox=Runner(),
                    background=background) as cur:
        play_epoch(cur)
        planned = len(cur.pending)
        cur.set_library(lib_b)  # mid-epoch: the jobs already planned keep lib_a
        play_epoch(cur)
        # every round of those jobs but a failed draw executed the gold program once
        calls = sum(1 for o in cur.last_outcomes for r in o.rounds if [e.kind for e in r] != ["sample_failed"])
        assert len(cur.last_outcomes) == planned > 0 and calls >= planned
        play_epoch(cur)
        assert cur.state_hash() == hashes[3]
    assert all(lib is lib_a for lib in seen[:calls]) and all(lib is lib_b for lib in seen[calls:])
    assert len(seen) > calls


def test_found_tasks_join_the_pool_are_drawn_first_and_become_synthesis_parents(tmp_path, seed_tasks, synth):
    """``admit``: tasks found outside GRPO's draw (the rounds' search) join the live pool as ``found`` items,
    outweigh the unobserved seeds in the draw, are the first synthesis parents at the boundary, and a
    curriculum resumed from the directory knows them (the tasks are saved with the state)."""
    seeds, outside = seed_tasks[:20], seed_tasks[20:24]
    with Curriculum(seeds, CFG, tmp_path, run_seed=RUN_SEED, synthesize=synth, background=False) as cur:
        assert cur.admit(outside + [seeds[0], outside[0]]) == tuple(t.id for t in outside)  # known ones skipped
        assert [d.reason for d in cur.pool.log[-6:]] == ["found"] * 4 + ["duplicate_found"] * 2
        assert set(cur.regions_of(t.id for t in outside).values()) == {"found"}
        hits = collections.Counter(t.id for s in range(100) for t in cur.sample(4, seed=s))
        assert min(hits[t.id] for t in outside) > max(hits[t.id] for t in seeds)
        cur.observe({t.id: [1.0] * GROUP for t in outside})  # mastered: parents all the same, being found
        cur.observe({t.id: [1.0, 0.0] * (GROUP // 2) for t in seeds[:6]})  # boundary seeds
        cur.end_epoch()
        planned = [p for p, _ in cur.pending]
        assert planned[: 2 * CFG.variants_per_seed] == [t.id for t in outside[:2] for _ in range(CFG.variants_per_seed)]
        assert len(set(planned)) == CFG.synth_per_epoch
        synthesized = {d.task_id: d.reason for d in cur.pool.log if d.action == "synthesize"}
        assert [synthesized[t.id] for t in outside] == ["found"] * 4
        before = cur.state_hash()
    with Curriculum(seeds, CFG, tmp_path, run_seed=RUN_SEED, synthesize=synth, background=False) as again:
        assert again.state_hash() == before and again.task(outside[1].id) == outside[1]
        again.observe({outside[1].id: [0.0] * GROUP})  # a found task is a live task: observable after resume
        later = seed_tasks[24]
        assert again.admit([later]) == (later.id,)
        again.end_epoch()  # parents once: only the found item no variant was made of yet comes first
        planned = [p for p, _ in again.pending]
        assert planned[: CFG.variants_per_seed] == [later.id] * CFG.variants_per_seed
        assert not {t.id for t in outside} & set(planned[CFG.variants_per_seed:])


def test_found_variants_are_made_at_admission_live_at_once_and_saved(tmp_path, seed_tasks, synth):
    """``found_variants``: each admitted task's variants are synthesised when it is admitted and drawn in the
    same epoch (as unobserved variants); the boundary saves them, a resumed curriculum knows them, and the
    found task is not planned as a parent again."""
    cfg = dataclasses.replace(CFG, found_variants=3)
    seeds, outside = seed_tasks[:20], seed_tasks[20:22]
    with Curriculum(seeds, cfg, tmp_path, run_seed=RUN_SEED, synthesize=synth, background=False) as cur:
        cur.admit(outside)
        variants = [it for it in cur.pool.items if it.origin == "generated"]
        assert variants and {it.parent_id for it in variants} <= {t.id for t in outside}
        assert all(it.status == "burn_in" and it.added_epoch == 0 for it in variants)
        assert set(cur.regions_of(it.task_id for it in variants).values()) == {"variant"}
        assert dict(cur.pool.attempts) == {t.id: 3 for t in outside}
        cur.observe({it.task_id: [1.0, 0.0] * (GROUP // 2) for it in variants})  # drawn and observed this epoch
        cur.end_epoch()
        assert not {t.id for t in outside} & {p for p, _ in cur.pending}
        assert all(cur.pool.item(it.task_id).status == "active" for it in variants)  # burn-in passed
        saved = {r.task.id for r in persistence.load(tmp_path).generated}
        assert {it.task_id for it in variants} <= saved
        before = cur.state_hash()
    with Curriculum(seeds, cfg, tmp_path, run_seed=RUN_SEED, synthesize=synth, background=False) as again:
        assert again.state_hash() == before and again.parents[variants[0].task_id] == variants[0].parent_id

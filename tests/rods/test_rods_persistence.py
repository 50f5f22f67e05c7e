"""Atomic RODS state on disk, typed errors for corrupt files, and restart determinism."""

import json
import os

import pytest

from cocoda_jax.data import synthetic_math as sm
from cocoda_jax.rods import persistence, simulate
from cocoda_jax.rods.config import RodsConfig
from cocoda_jax.rods.errors import CorruptStateError
from cocoda_jax.rods.pool import pool_hash
from tests.rods.conftest import memoised_synthesizer

CFG = RodsConfig(p_max=12, beta=0.2, synth_per_epoch=5, variants_per_seed=2, stale_epochs=3, window=3,
                 hard_patience=2)
EPOCHS = 7
POLICY = simulate.SimulatedPolicy(seed=3, rate=0.35, group_size=8)


@pytest.fixture(scope="module")
def seed_tasks():
    return [t for t in sm.generate(120, seed=5) if t.depth <= 3][:40]


@pytest.fixture(scope="module")
def synth(sandbox, library):
    return memoised_synthesizer(sandbox, library, CFG, 9)


@pytest.fixture(scope="module")
def reference(tmp_path_factory, seed_tasks, synth):
    d = tmp_path_factory.mktemp("reference")
    return d, simulate.run(seed_tasks, CFG, EPOCHS, d, synth, POLICY)


def test_the_reference_run_exercises_the_whole_lifecycle(reference):
    _, r = reference
    actions = {k.split(":")[0] for m in r.metrics for k in m["decisions"]}
    assert {"inject", "retire", "promote", "evict", "synthesize"} <= actions
    assert len(r.pool.live_generated()) <= CFG.p_max
    assert all(m["synthesis"]["accepted"] == m["synthesis"]["jobs"] for m in r.metrics)


def test_atomic_write_replaces_whole_files(tmp_path):
    p = tmp_path / "a" / "f.json"
    persistence.atomic_write(p, b"one")
    persistence.atomic_write(p, b"two")
    assert p.read_bytes() == b"two" and os.listdir(p.parent) == ["f.json"]


def test_load_gives_back_exactly_what_was_saved(reference, seed_tasks):
    d, r = reference
    back = persistence.load(d)
    assert back.epoch == EPOCHS and back.pool == r.pool and back.tracker == r.tracker
    generated = {k: v for k, v in r.tasks.items() if k.startswith("rods-")}
    assert back.generated_tasks == generated  # zero data loss: every generated task, field for field
    live = set(r.pool.live_ids())
    assert live <= set(generated) | {t.id for t in seed_tasks}


class CrashAfter:
    """A writer that dies (like a kill) before its ``n``-th file lands; a half-written temp file stays."""

    def __init__(self, n):
        self.n = n

    def __call__(self, path, data):
        self.n -= 1
        if self.n <= 0:
            tmp = path.with_name(f".{path.name}.tmp-crash")
            tmp.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_bytes(data[: len(data) // 2])
            raise simulate.SimulatedCrash(f"killed writing {path.name}")
        persistence.atomic_write(path, data)


@pytest.mark.parametrize("crash_after", [1, 2, 4, 7, 11, 16, 23])
def test_a_run_killed_mid_save_resumes_to_the_same_pool(tmp_path, reference, seed_tasks, synth, crash_after):
    _, ref = reference
    with pytest.raises(simulate.SimulatedCrash):
        simulate.run(seed_tasks, CFG, EPOCHS, tmp_path, synth, POLICY, write=CrashAfter(crash_after))
    resumed = simulate.run(seed_tasks, CFG, EPOCHS, tmp_path, synth, POLICY)
    assert pool_hash(resumed.pool) == pool_hash(ref.pool)
    assert resumed.tracker == ref.tracker
    assert persistence.load(tmp_path).generated_tasks == persistence.load(reference[0]).generated_tasks


def test_clean_kills_at_several_epochs_resume_to_the_same_pool(tmp_path, reference, seed_tasks, synth):
    _, ref = reference
    for stop in (1, 3, 4, 6):
        simulate.run(seed_tasks, CFG, EPOCHS, tmp_path, synth, POLICY, stop_after_epoch=stop)
        assert persistence.load(tmp_path).epoch == stop
    resumed = simulate.run(seed_tasks, CFG, EPOCHS, tmp_path, synth, POLICY)
    assert pool_hash(resumed.pool) == pool_hash(ref.pool)


def test_background_synthesis_gives_the_same_pool(tmp_path, reference, seed_tasks, synth):
    _, ref = reference
    simulate.run(seed_tasks, CFG, EPOCHS, tmp_path, synth, POLICY, background=True, stop_after_epoch=4)
    resumed = simulate.run(seed_tasks, CFG, EPOCHS, tmp_path, synth, POLICY, background=True)
    assert pool_hash(resumed.pool) == pool_hash(ref.pool)


# -- corrupt files -------------------------------------------------------------------------------

@pytest.fixture
def saved(tmp_path, reference):
    import shutil
    shutil.copytree(reference[0] / "rods", tmp_path / "rods")
    return tmp_path


def _manifest(d):
    return json.loads((d / "rods" / persistence.MANIFEST).read_text())


def test_a_truncated_pool_file_is_a_typed_error_naming_it(saved):
    path = saved / "rods" / _manifest(saved)["pool"]["file"]
    path.write_bytes(path.read_bytes()[:100])
    with pytest.raises(CorruptStateError, match=path.name) as info:
        persistence.load(saved)
    assert "sha256" in str(info.value)


def test_a_bad_manifest_is_a_typed_error(saved):
    (saved / "rods" / persistence.MANIFEST).write_text("{")
    with pytest.raises(CorruptStateError, match="MANIFEST"):
        persistence.load(saved)
    (saved / "rods" / persistence.MANIFEST).write_text(json.dumps({"format": "x"}))
    with pytest.raises(CorruptStateError, match="not a RODS manifest"):
        persistence.load(saved)


def test_a_bad_generated_record_names_its_line(saved):
    m = _manifest(saved)
    entry = m["generated"][0]
    path = saved / "rods" / entry["file"]
    lines = path.read_text().splitlines()
    lines[0] = json.dumps({"task": {"kind": "math"}, "parent_id": "x", "attempt": 0, "epoch": 0})
    data = ("\n".join(lines) + "\n").encode()
    path.write_bytes(data)
    import hashlib
    entry["sha256"] = hashlib.sha256(data).hexdigest()  # consistent hash, bad content
    (saved / "rods" / persistence.MANIFEST).write_text(json.dumps(m))
    with pytest.raises(CorruptStateError, match=rf"{entry['file'].split('/')[-1]}:1"):
        persistence.load(saved)


def test_a_missing_generated_file_is_a_typed_error(saved):
    entry = _manifest(saved)["generated"][-1]
    (saved / "rods" / entry["file"]).unlink()
    with pytest.raises(CorruptStateError, match="missing"):
        persistence.load(saved)


def test_a_tracker_with_a_valid_hash_but_bad_content_is_a_typed_error(saved):
    m = _manifest(saved)
    data = json.dumps({"format": "cocoda-rods-tracker/v1", "config": {}, "tasks": {"a": {}}}).encode()
    (saved / "rods" / m["tracker"]["file"]).write_bytes(data)
    import hashlib
    m["tracker"]["sha256"] = hashlib.sha256(data).hexdigest()
    (saved / "rods" / persistence.MANIFEST).write_text(json.dumps(m))
    with pytest.raises(CorruptStateError, match="tracker"):
        persistence.load(saved)


_CHILD = r"""
import sys
from cocoda_jax.data import synthetic_math as sm
from cocoda_jax.execution import Sandbox
from cocoda_jax.rods import simulate
from cocoda_jax.rods.config import RodsConfig
from cocoda_jax.rods.synthesis import Synthesizer
cfg = RodsConfig(**{cfg!r})
seeds = [t for t in sm.generate(120, seed=5) if t.depth <= 3][:40]
with Sandbox(workers=1, timeout_s=30) as sb:
    syn = Synthesizer(sb, sm.primitive_library(sb), cfg, run_seed=9)
    simulate.run(seeds, cfg, {epochs}, sys.argv[1], syn.run, simulate.SimulatedPolicy(seed=3, rate=0.35, group_size=8))
"""


@pytest.mark.parametrize("kill_at_epoch", [2, 5])
def test_a_process_killed_with_sigkill_resumes_to_the_same_pool(tmp_path, reference, seed_tasks, synth, kill_at_epoch):
    """A real kill -9 of a running child process, then resume here: the same pool as never killed."""
    import signal
    import subprocess
    import sys
    import time
    _, ref = reference
    script = _CHILD.format(cfg=CFG.to_dict(), epochs=EPOCHS)
    child = subprocess.Popen([sys.executable, "-c", script, str(tmp_path)], cwd=os.getcwd())
    manifest = tmp_path / "rods" / persistence.MANIFEST
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline and child.poll() is None:
            try:
                if json.loads(manifest.read_text())["epoch"] >= kill_at_epoch:
                    break
            except (OSError, ValueError, KeyError):
                pass
            time.sleep(0.005)
        assert child.poll() is None, "the child finished before it could be killed"
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.wait(timeout=60)
    assert child.returncode == -signal.SIGKILL
    assert kill_at_epoch <= persistence.load(tmp_path).epoch < EPOCHS
    resumed = simulate.run(seed_tasks, CFG, EPOCHS, tmp_path, synth, POLICY)
    assert pool_hash(resumed.pool) == pool_hash(ref.pool)

"""cocoda_jax.study.run with workers > 1: the cells in spawned processes give the same study as one
worker, prefixes still run once, a failing cell raises after the running ones finish, bad
arguments are refused (fake runner: no training, no jax).

The fake runner is a module-level function of this module so that a spawned child can unpickle it
(the child imports this module by name: pytest put its directory on ``sys.path``, which the child
inherits). It talks to the test through environment variables, which the children inherit too.
"""

import json
import os
import sys
import time
import zlib
from pathlib import Path

import numpy as np
import pytest

from cocoda_jax.study import run as R
from configs import study as study_config
from tests.study.fake_cells import coin_report

CALLS, FAIL, SLEEP = "STUDY_FAKE_CALLS", "STUDY_FAKE_FAIL", "STUDY_FAKE_SLEEP"


def fake_runner(config, workdir, **kw):
    """A cell (or, with ``stop_after_round=0``, a prefix) in ``workdir = .../ARM/seed_S``: outcomes
    drawn from (arm, seed) alone. ``$STUDY_FAKE_CALLS``: a file each call appends a JSON line to;
    ``$STUDY_FAKE_FAIL``: ``ARM/seed_S,...`` that raise; ``$STUDY_FAKE_SLEEP``: ``ARM/seed_S=s,...``."""
    workdir = Path(workdir)
    key = f"{workdir.parent.name}/{workdir.name}"
    if os.environ.get(CALLS):
        line = {"key": key, "workdir": str(workdir), "kw": kw, "pid": os.getpid(),
                "xla_flags": os.environ.get("XLA_FLAGS", ""), "omp": os.environ.get("OMP_NUM_THREADS"),
                "cores": sorted(os.sched_getaffinity(0)),
                "xla_cache": sys.modules["jax"].config.jax_compilation_cache_dir if "jax" in sys.modules else None}
        with open(os.environ[CALLS], "a") as f:
            f.write(json.dumps(line) + "\n")
    if key in os.environ.get(FAIL, "").split(","):
        raise RuntimeError(f"fake failure in {key}")
    if kw.get("stop_after_round") == 0:
        (workdir / "checkpoints").mkdir(parents=True)
        (workdir / "checkpoints" / "stage2").write_text(str(config.seed))
        (workdir / "logs").mkdir()
        return {"stopped_after_round": 0}
    if (workdir / "checkpoints" / "stage2").exists() != bool(kw.get("allow_config_change")):
        raise AssertionError(f"{key}: a prefix's copy must run with allow_config_change, and only it ({kw})")
    sleeps = dict(item.split("=") for item in os.environ.get(SLEEP, "").split(",") if item)
    time.sleep(float(sleeps.get(key, 0.0)))
    rng = np.random.default_rng([zlib.crc32(workdir.parent.name.encode()), int(config.seed)])
    return coin_report(config, workdir, rng)


def compiling_runner(config, workdir, **kw):
    """``fake_runner`` after compiling one small program (what a real cell does many times)."""
    import jax
    import jax.numpy as jnp

    jax.jit(lambda x: jnp.tanh(x) * 2.0 + 1.0)(jnp.ones(7)).block_until_ready()
    return fake_runner(config, workdir, **kw)


def fake_depths(config):
    return {f"math-{config.domain.seed}-{i}": 1 + i % 2 for i in range(config.domain.n_test)}


def _calls(path):
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _config():
    cfg = study_config.get_config("smoke")
    cfg.bootstrap = 50
    return cfg


def _study(cfg, workdir, arms, seeds, lines, **kw):
    return R.run_study(cfg, workdir, arms=arms, seeds=seeds, runner=fake_runner, depth_fn=fake_depths,
                       log=lines.append, **kw)


def test_two_workers_give_one_workers_study_and_share_prefixes(tmp_path, monkeypatch):
    cfg, arms, seeds = _config(), ["cocoda", "no_ctd", "frozen_library"], [13, 42]
    monkeypatch.setenv(CALLS, str(tmp_path / "calls_1.jsonl"))
    one = _study(cfg, tmp_path / "one", arms, seeds, [])
    monkeypatch.setenv(CALLS, str(tmp_path / "calls_2.jsonl"))
    xla_before = os.environ.get("XLA_FLAGS")
    lines = []
    two = _study(cfg, tmp_path / "two", arms, seeds, lines, workers=2, threads_per_worker=1)
    assert os.environ.get("XLA_FLAGS") == xla_before and "OMP_NUM_THREADS" not in os.environ  # restored

    assert {k: v for k, v in two.items() if k != "wall_s"} == {k: v for k, v in one.items() if k != "wall_s"}
    assert json.loads((tmp_path / "two" / "study.json").read_text()) == two
    calls = _calls(tmp_path / "calls_2.jsonl")
    prefixes = [c for c in calls if c["kw"].get("stop_after_round") == 0]
    assert sorted(c["key"] for c in prefixes) == ["cocoda/seed_13", "cocoda/seed_42"]
    assert all("/_prefix/" in c["workdir"] for c in prefixes)
    cells = [c for c in calls if c not in prefixes]
    assert sorted(c["key"] for c in cells) == sorted(f"{a}/seed_{s}" for a in arms for s in seeds)
    assert {c["key"] for c in cells if c["kw"].get("allow_config_change")} == {
        f"{a}/seed_{s}" for a in ("cocoda", "no_ctd") for s in seeds}
    assert len({c["pid"] for c in calls}) == len(calls) and os.getpid() not in {c["pid"] for c in calls}
    assert all(R.SINGLE_THREAD_XLA in c["xla_flags"] and c["omp"] == "1" for c in calls)
    assert all("--xla_force_host_platform_device_count=8" in c["xla_flags"] for c in calls)  # conftest's kept
    times = json.loads((tmp_path / "two" / "cell_times.json").read_text())
    assert set(times) == {f"{a}/seed_{s}" for a in arms for s in seeds}
    for a in ("cocoda", "no_ctd"):
        cdir = R.cell_dir(tmp_path / "two", a, 13)
        assert (cdir / R.PREFIX_MARK).exists() and not (cdir / "logs").exists()
    assert sum("running ..." in line for line in lines) == 6
    assert sum("ETA" in line and "2 workers" in line for line in lines) == 6
    assert sum("stages 1-2 once" in line for line in lines) == 2

    again_lines = []  # resumed: nothing runs again
    again = _study(cfg, tmp_path / "two", arms, seeds, again_lines, workers=2)
    assert len(_calls(tmp_path / "calls_2.jsonl")) == len(calls)
    assert again["arms"] == two["arms"] and sum("done before" in line for line in again_lines) == 6


def test_streams_in_two_workers_give_one_workers_study(tmp_path, monkeypatch):
    """With streams=2 the streams' cells (``ARM@1``) run in the children too, from the one shared prefix."""
    cfg, arms, seeds = _config(), ["cocoda", "sft_only"], [13]
    cfg.streams = 2
    monkeypatch.setenv(CALLS, str(tmp_path / "calls_1.jsonl"))
    one = _study(cfg, tmp_path / "one", arms, seeds, [])
    monkeypatch.setenv(CALLS, str(tmp_path / "calls_2.jsonl"))
    two = _study(cfg, tmp_path / "two", arms, seeds, [], workers=2)
    assert {k: v for k, v in two.items() if k != "wall_s"} == {k: v for k, v in one.items() if k != "wall_s"}
    assert two["arms"]["cocoda"]["streams"] == 2 and two["arms"]["sft_only"]["streams"] == 1
    calls = _calls(tmp_path / "calls_2.jsonl")
    prefixes = [c for c in calls if c["kw"].get("stop_after_round") == 0]
    assert [c["workdir"] for c in prefixes] == [str(tmp_path / "two" / "_prefix" / "cocoda" / "seed_13")]
    assert sorted(c["key"] for c in calls if c not in prefixes) == ["cocoda/seed_13", "cocoda@1/seed_13",
                                                                    "sft_only/seed_13"]


def test_a_failing_cell_raises_after_the_running_cells_finish(tmp_path, monkeypatch):
    cfg, arms = _config(), ["cocoda", "frozen_library"]
    monkeypatch.setenv(CALLS, str(tmp_path / "calls.jsonl"))
    monkeypatch.setenv(FAIL, "cocoda/seed_13")
    monkeypatch.setenv(SLEEP, "frozen_library/seed_13=1.5")
    lines = []
    with pytest.raises(RuntimeError, match="fake failure in cocoda/seed_13"):
        _study(cfg, tmp_path, arms, [13], lines, workers=2)
    assert any("failed (RuntimeError" in line for line in lines)
    assert not (R.cell_dir(tmp_path, "cocoda", 13) / "report.json").exists()
    assert (R.cell_dir(tmp_path, "frozen_library", 13) / "report.json").exists()  # finished, kept
    assert set(json.loads((tmp_path / "cell_times.json").read_text())) == {"frozen_library/seed_13"}

    monkeypatch.delenv(FAIL)  # the rerun resumes: only the failed cell runs
    n = len(_calls(tmp_path / "calls.jsonl"))
    study = _study(cfg, tmp_path, arms, [13], [], workers=2)
    assert [c["key"] for c in _calls(tmp_path / "calls.jsonl")[n:]] == ["cocoda/seed_13"]
    assert study["arms"]["frozen_library"]["available"] is True


def test_a_prefix_copy_resumes_with_allow_config_change(tmp_path, monkeypatch):
    """A cell copied from a shared prefix that failed (or was interrupted) before its report still
    holds the prefix's checkpoint, saved under another arm's config: a later invocation resumes it
    with allow_config_change (one worker; the fake asserts the flag)."""
    cfg, arms = _config(), ["cocoda", "no_ctd"]
    monkeypatch.setenv(CALLS, str(tmp_path / "calls.jsonl"))
    monkeypatch.setenv(FAIL, "no_ctd/seed_13")
    with pytest.raises(RuntimeError, match="fake failure in no_ctd/seed_13"):
        _study(cfg, tmp_path, arms, [13], [])
    monkeypatch.delenv(FAIL)
    n = len(_calls(tmp_path / "calls.jsonl"))
    _study(cfg, tmp_path, arms, [13], [])
    rerun = _calls(tmp_path / "calls.jsonl")[n:]
    assert [(c["key"], c["kw"]) for c in rerun] == [("no_ctd/seed_13", {"allow_config_change": True})]


def test_bad_workers_and_unpicklable_runners_are_refused(tmp_path):
    cfg = _config()
    for workers in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="workers"):
            R.run_study(cfg, tmp_path, runner=fake_runner, depth_fn=fake_depths, workers=workers)
    with pytest.raises(ValueError, match="threads_per_worker"):
        R.run_study(cfg, tmp_path, runner=fake_runner, depth_fn=fake_depths, workers=2, threads_per_worker=0)

    def local(config, workdir, **kw):
        return fake_runner(config, workdir, **kw)

    for runner in (lambda config, workdir, **kw: fake_runner(config, workdir, **kw), local):
        with pytest.raises(TypeError, match="picklable"):
            R.run_study(cfg, tmp_path, runner=runner, depth_fn=fake_depths, workers=2)
    assert not any(tmp_path.iterdir())  # refused before anything ran


def test_core_slots_split_the_cores_into_disjoint_equal_sets():
    assert R.core_slots([3, 1], 2) == [frozenset({1}), frozenset({3})]
    assert R.core_slots(range(5), 2) == [frozenset({0, 1}), frozenset({2, 3})]  # core 4 left over
    assert R.core_slots([0, 1, 2, 3], 1) == [frozenset({0, 1, 2, 3})]
    with pytest.raises(ValueError, match="a core per worker"):
        R.core_slots([0, 1], 3)


def test_pinned_workers_each_keep_to_their_own_cores(tmp_path, monkeypatch):
    """--pin_cores: every child runs on one of the disjoint core sets, the two sets both in use; the
    study is the one a single worker writes. More workers than cores is refused before anything runs."""
    available = sorted(os.sched_getaffinity(0))
    assert len(available) >= 2, f"this test needs 2 cores (README's machine has 2), got {available}"
    cfg, arms, seeds = _config(), ["cocoda", "frozen_library"], [13, 42]
    monkeypatch.setenv(CALLS, str(tmp_path / "calls.jsonl"))
    monkeypatch.setenv(SLEEP, "cocoda/seed_13=1,frozen_library/seed_13=1")
    pinned = _study(cfg, tmp_path / "pinned", arms, seeds, [], workers=2, pin_cores=True)
    slots = [sorted(s) for s in R.core_slots(available, 2)]
    calls = _calls(tmp_path / "calls.jsonl")
    assert calls and all(c["cores"] in slots for c in calls)
    assert {tuple(c["cores"]) for c in calls} == {tuple(s) for s in slots}
    assert sorted(os.sched_getaffinity(0)) == available  # the parent itself is not pinned
    monkeypatch.delenv(CALLS)
    one = _study(cfg, tmp_path / "one", arms, seeds, [])
    assert {k: v for k, v in pinned.items() if k != "wall_s"} == {k: v for k, v in one.items() if k != "wall_s"}
    with pytest.raises(ValueError, match="a core per worker"):
        _study(cfg, tmp_path / "many", arms, seeds, [], workers=len(available) + 1, pin_cores=True)
    assert not (tmp_path / "many" / "cell_times.json").exists()


def test_cells_share_a_persistent_compilation_cache(tmp_path, monkeypatch):
    """``xla_cache``: every child compiles through the study's cache directory, which then holds the
    compiled program; the study is the one written without a cache."""
    cfg, arms, seeds = _config(), ["cocoda"], [13, 42]
    monkeypatch.setenv(CALLS, str(tmp_path / "calls.jsonl"))
    cache = tmp_path / "xla"
    cached = R.run_study(cfg, tmp_path / "cached", arms=arms, seeds=seeds, runner=compiling_runner,
                         depth_fn=fake_depths, workers=2, xla_cache=cache, log=lambda line: None)
    calls = _calls(tmp_path / "calls.jsonl")
    assert len(calls) == 2 and all(c["xla_cache"] == str(cache.resolve()) for c in calls)
    assert any(cache.iterdir())  # the executable was stored
    monkeypatch.delenv(CALLS)
    plain = R.run_study(cfg, tmp_path / "plain", arms=arms, seeds=seeds, runner=compiling_runner,
                        depth_fn=fake_depths, workers=2, log=lambda line: None)
    assert {k: v for k, v in cached.items() if k != "wall_s"} == {k: v for k, v in plain.items() if k != "wall_s"}


_CHILD = ("import sys, time; from cocoda_jax.study.run import end_with_parent; "
          "assert end_with_parent(int(sys.argv[1])); print('linked', flush=True); time.sleep(120)")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_cell_process_ends_when_the_study_process_is_killed(tmp_path):
    """A killed study (SIGKILL: no cleanup runs in it) leaves no cell computing: the child asked the
    kernel for SIGTERM at its parent's death. A child whose parent is gone before the link is set
    ends at once."""
    import signal
    import subprocess

    pid_file = tmp_path / "child.pid"
    parent_src = ("import subprocess, sys, os, time; "
                  f"c = subprocess.Popen([sys.executable, '-c', {_CHILD!r}, str(os.getpid())], "
                  "stdout=subprocess.PIPE, text=True); "
                  "assert c.stdout.readline().strip() == 'linked'; "
                  f"open({str(pid_file)!r}, 'w').write(str(c.pid)); time.sleep(120)")
    parent = subprocess.Popen([sys.executable, "-c", parent_src])
    try:
        deadline = time.monotonic() + 60
        while not pid_file.exists() or not pid_file.read_text():
            assert time.monotonic() < deadline and parent.poll() is None, "the child never linked"
            time.sleep(0.1)
        child = int(pid_file.read_text())
        os.kill(child, 0)  # alive while its parent is
        parent.send_signal(signal.SIGKILL)
        parent.wait(10)
        deadline = time.monotonic() + 10
        while _alive(child):
            assert time.monotonic() < deadline, "the child outlived its parent"
            time.sleep(0.05)
    finally:
        if parent.poll() is None:
            parent.kill()
    orphan = subprocess.run([sys.executable, "-c", _CHILD, "1"], capture_output=True, timeout=60)
    assert orphan.returncode == -signal.SIGTERM and b"linked" not in orphan.stdout


def _alive(pid):
    """Whether ``pid`` still runs (a zombie, reaped by init later, counts as ended)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_parallel_cells_start_heaviest_first(tmp_path, monkeypatch):
    """With two workers the two heaviest arms (Arm.weight) start first and the lightest last, whatever
    the arms' order: a long cell started last would run alone while the other worker idles."""
    from cocoda_jax.study import arms as A

    cfg, arms = _config(), ["direct", "cocoda", "large_frozen"]
    assert A.get("large_frozen").weight > A.get("cocoda").weight > A.get("direct").weight
    monkeypatch.setenv(CALLS, str(tmp_path / "calls.jsonl"))
    monkeypatch.setenv(SLEEP, "large_frozen/seed_13=0.5,cocoda/seed_13=0.5")
    _study(cfg, tmp_path, arms, [13], [], workers=2)
    started = [c["key"] for c in _calls(tmp_path / "calls.jsonl")]
    assert set(started[:2]) == {"large_frozen/seed_13", "cocoda/seed_13"} and started[2] == "direct/seed_13"

"""Test-wide setup: 8 fake CPU devices for the sharding tests, and XLA:CPU at optimisation level 1.

A tiny test's time is mostly XLA compiling its programs: level 1 (the default is 2) compiles them
faster and runs the tiny planner's steps as fast (measured: the learner's tests 118 -> 93 s, the
chaos config's 120 SFT steps 41 -> 37 s, on 2 cores). The programs are the same; their float bits may
differ from a run at the default level, so every comparison a test makes is within this setting
(the jobs the tests start inherit it). XLA reads XLA_FLAGS once, when jax is first imported, so this
must run before any test module imports jax.
"""

import os

TEST_XLA_FLAGS = "--xla_force_host_platform_device_count=8 --xla_backend_optimization_level=1"
os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " + TEST_XLA_FLAGS).strip()
os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("MPLBACKEND", "Agg")

# The end-to-end launcher tests build the same jitted programs in several runs (each Learner and
# Sampler jits its own closures): one compilation cache per test session lets later runs reuse them.
import tempfile  # noqa: E402

os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", tempfile.mkdtemp(prefix="cocoda_jax_cache_"))
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "0")


import pytest  # noqa: E402


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory, worker_id):
    """One whole run of the main job on configs/chaos.py (a composite mined inside a round), shared
    read-only by the tests that inspect what a run writes (report, plots, report.html) and by the
    chaos test (its reference, with the failpoints it passed in ``trace``; its jobs run in this
    session's environment, 8 fake devices included: see docs/limits.md on CPU numerics across
    processes). Under ``pytest -n`` the workers share it: the first to need it runs it under a file
    lock, the others wait and read it. Returns ``(workdir, report, trace path)``."""
    import json
    import shutil

    from filelock import FileLock

    from cocoda_jax import failpoints
    from cocoda_jax.runs import coevolve
    from configs import chaos

    base = tmp_path_factory.getbasetemp()
    root = (base if worker_id == "master" else base.parent) / "tiny_run"
    trace = root / "reference.trace"
    with FileLock(str(root) + ".lock"):
        done = root / "finished"  # written after the whole run returned (report.html and plots included)
        if not done.exists():
            shutil.rmtree(root, ignore_errors=True)  # what a failed attempt left
            root.mkdir(parents=True)
            with pytest.MonkeyPatch.context() as mp:
                mp.setenv(failpoints.TRACE_ENV, str(trace))
                coevolve.run(chaos.get_config(), root / "run", progress=False)
            done.touch()
    return root / "run", json.loads((root / "run" / "report.json").read_text()), trace


def pytest_collection_modifyitems(config, items):
    """The files that hold a ``slow`` test first, the rest after, each file's tests in their order.

    Under README's ``-n 2 --dist loadfile`` each file runs whole on one worker, handed out in this
    order (pytest.ini turns off xdist's own reorder, by test count, which put the few-test slow files
    last): the longest files start first and short ones fill the end, so the two workers finish close
    together."""
    slow_files = {item.nodeid.split("::")[0] for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.nodeid.split("::")[0] not in slow_files)  # stable: files stay whole

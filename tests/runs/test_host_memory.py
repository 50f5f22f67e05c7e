"""Huge pages for XLA:CPU's per-execution host buffers (cocoda_jax.runs.host_memory).

The allocator checks run in fresh interpreters: glibc reads its tunables when a process starts.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from cocoda_jax.runs import host_memory as H

# A program whose temporary buffer (192 MiB) is above glibc's 64 MiB per-thread heaps: the system
# allocator maps it afresh on every execution and faults in each of its ~49,000 4 KiB pages.
_PROBE = textwrap.dedent("""
    import json, resource
    import jax, jax.numpy as jnp
    from cocoda_jax.runs import host_memory

    def f(x, w):
        h = jnp.stack([jnp.sin(x * (i + 1)) for i in range(24)])  # [24, 4096, 256] f32
        h = jax.lax.optimization_barrier(h)
        return jnp.einsum("knd,de->ke", h, w).sum()

    x, w = jnp.ones((4096, 256)), jnp.ones((256, 8))
    compiled = jax.jit(f).lower(x, w).compile()
    for _ in range(2):
        compiled(x, w).block_until_ready()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(4):
        compiled(x, w).block_until_ready()
    faults = (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 4
    print(json.dumps({"status": host_memory.status(), "faults": faults,
                      "temp_bytes": compiled.memory_analysis().temp_size_in_bytes}))
""")


def _probe(env: dict[str, str]) -> dict:
    out = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=300, env=env,
                         check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_huge_pages_cut_the_faults_of_a_large_buffer():
    env = {k: v for k, v in os.environ.items() if k not in ("GLIBC_TUNABLES", H.ENV)}
    system = _probe(env)
    assert system["temp_bytes"] > 128 * 2**20  # the probe really needs a block above the thread heaps' 64 MiB
    assert system["status"] == H.NO_TUNABLE
    command = H.reexec_command(["python", "-m", "launch.coevolve"], env)
    reason = H.unsupported_reason()
    if reason is not None:  # a machine where the tunable does nothing: no re-execution is proposed
        assert command is None
        return
    huge = _probe(command[1])
    assert huge["status"] == "GLIBC_TUNABLES=" + ":".join(H.TUNABLES)
    # 192 MiB in 2 MiB pages is ~100 faults (127-638 measured); 4 KiB pages would be ~49,000. The bound leaves
    # room for a kernel that cannot find a free huge page for part of the block.
    assert huge["faults"] < 12_000, (huge, system)
    if "[madvise]" in H._THP_MODE.read_text():  # with THP [always] the system allocator gets huge pages too
        assert system["faults"] > 20_000, system  # what the module's docstring says happens without it


@pytest.mark.parametrize("argv, launches", [
    (["python", "-m", "launch.coevolve", "--config=configs/default.py"], True),
    (["python", "-u", "-X", "dev", "-m", "launch.study"], True),
    (["python", "-m", "pytest", "tests"], False),
    (["python", "-c", "import launch", "-m", "launch.coevolve"], False),
    (["python", "launch/coevolve.py"], False),
    (["python", "-m"], False),
])
def test_only_a_launcher_is_reexecuted(argv, launches, monkeypatch):
    monkeypatch.setattr(H, "unsupported_reason", lambda: None)
    command = H.reexec_command(argv, {"PATH": "/bin"})
    assert (command is not None) == launches
    if launches:
        new_argv, env = command
        assert new_argv == [sys.executable, *argv[1:]]  # the same options, module and flags
        assert env == {"PATH": "/bin", "GLIBC_TUNABLES": ":".join(H.TUNABLES)}


def test_the_users_tunables_are_kept_and_their_choice_wins(monkeypatch):
    monkeypatch.setattr(H, "unsupported_reason", lambda: None)
    argv = ["python", "-m", "launch.coevolve"]
    _, env = H.reexec_command(argv, {"GLIBC_TUNABLES": "glibc.malloc.arena_max=2:glibc.malloc.trim_threshold=0"})
    assert env["GLIBC_TUNABLES"] == ("glibc.malloc.arena_max=2:glibc.malloc.trim_threshold=0:glibc.malloc.hugetlb=1:"
                                     "glibc.malloc.mmap_threshold=33554432")  # the user's trim threshold stays
    assert H.reexec_command(argv, {"GLIBC_TUNABLES": "glibc.malloc.hugetlb=0"}) is None  # set already: once only
    assert H.reexec_command(argv, env) is None  # what the re-executed process sees: no second re-execution
    assert H.reexec_command(argv, {H.ENV: "system"}) is None
    assert H.status({H.ENV: "system"}) == "system: COCODA_HOST_MALLOC=system"
    assert H.status({"GLIBC_TUNABLES": "glibc.malloc.hugetlb=0"}) == H.NO_TUNABLE
    assert H.status({"GLIBC_TUNABLES": f"x=1:{H.HUGETLB}"}) == f"GLIBC_TUNABLES=x=1:{H.HUGETLB}"
    monkeypatch.setattr(H, "unsupported_reason", lambda: "not glibc")
    assert H.reexec_command(argv, {}) is None
    assert H.status({"GLIBC_TUNABLES": H.HUGETLB}) == "system: not glibc"


def test_a_wrong_setting_is_refused():
    with pytest.raises(ValueError, match="COCODA_HOST_MALLOC must be 'huge_pages' or 'system'"):
        H.reexec_command(["python", "-m", "launch.coevolve"], {H.ENV: "jemalloc"})


def test_a_launcher_started_as_a_module_runs_with_the_tunable(tmp_path):
    """End to end: ``python -m launch.bench.sampler`` (the cheapest launcher that reports it) says so."""
    env = {k: v for k, v in os.environ.items() if k not in ("GLIBC_TUNABLES", H.ENV)}
    subprocess.run([sys.executable, "-m", "launch.bench.sampler", "--batch=1", "--prompt_len=4", "--new_tokens=2",
                    "--repeats=1", f"--json_out={tmp_path / 'out.json'}"],
                   capture_output=True, text=True, timeout=300, env=env, check=True, cwd=Path(__file__).parents[2])
    got = json.loads((tmp_path / "out.json").read_text())["host_malloc"]
    reason = H.unsupported_reason()
    assert got == ("GLIBC_TUNABLES=" + ":".join(H.TUNABLES) if reason is None else H.NO_TUNABLE)

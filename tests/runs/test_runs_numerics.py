"""The portable-numerics setting (cocoda_jax.runs.numerics): how it reads and merges the environment,
that the installed XLA accepts every flag it sets (an unknown one aborts the process), and that under it
a gradient's bits do not depend on the number of cores nor on the host's ISA above AVX."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

from cocoda_jax.runs import numerics as N


def test_off_unless_asked():
    assert N.setting({}) is None and N.setting({N.ENV: "0"}) is None and N.setting({N.ENV: " "}) is None
    assert N.apply({"XLA_FLAGS": "--a=1"}) == {"XLA_FLAGS": "--a=1"}
    assert N.status({})["portable"] is False


@pytest.mark.parametrize("value", ["yes", "-2", "1.5", "two"])
def test_a_malformed_value_is_refused(value):
    with pytest.raises(N.NumericsSettingError, match="positive integer"):
        N.setting({N.ENV: value})


def test_apply_keeps_the_users_flags_and_adds_the_settings():
    env = N.apply({N.ENV: "3", "XLA_FLAGS": "--xla_force_host_platform_device_count=4", "HOME": "/h"})
    assert env["XLA_FLAGS"].split() == ["--xla_force_host_platform_device_count=4", *N.XLA_CPU_FLAGS]
    assert env["PJRT_NPROC"] == "3" and env["ONEDNN_MAX_CPU_ISA"] == N.ISA and env["HOME"] == "/h"
    assert N.apply(env) == env  # idempotent: a re-executed launcher or a child applies it again


def test_a_conflicting_value_is_refused_not_overridden():
    with pytest.raises(N.NumericsSettingError, match="xla_cpu_max_isa=AVX2"):
        N.apply({N.ENV: "2", "XLA_FLAGS": "--xla_cpu_max_isa=AVX2"})
    with pytest.raises(N.NumericsSettingError, match="PJRT_NPROC=8"):
        N.apply({N.ENV: "2", "PJRT_NPROC": "8"})


def test_configure_refuses_to_come_after_jax_or_numpy():
    env = {N.ENV: "2"}
    with pytest.raises(N.NumericsSettingError, match="before NumPy"):
        N.configure(env, started=["NumPy"])
    assert env == {N.ENV: "2"}  # nothing half-applied
    assert N.configure(env, started=[]) == N.PortableNumerics(threads=2)
    assert N.status(env)["portable"] is True and N.status(env)["threads"] == 2
    assert N.configure(env, started=["JAX"]) == N.PortableNumerics(threads=2)  # already applied: nothing to do


def test_status_says_when_the_environment_lost_a_variable():
    env = N.apply({N.ENV: "2"})
    del env["PJRT_NPROC"]
    assert N.status(env)["portable"] is False and "not applied" in N.status(env)["setting"]


def test_replay_differences_skip_times_and_name_the_path():
    a = {"accuracy": {"final": 0.5, "per_round": [0.4, 0.5]}, "wall_s": 3.0, "warm": {"seconds": 7.4},
         "per_round": [{"wall_s": 1.0, "stage_s": {"grpo": 2.0}, "val": 0.4}]}
    b = {"accuracy": {"final": 0.5, "per_round": [0.4, 0.51]}, "wall_s": 9.0, "warm": {"seconds": 5.4},
         "per_round": [{"wall_s": 7.0, "stage_s": {"grpo": 1.0}, "val": 0.4}]}
    assert N.replay_differences(a, a) == []
    assert N.replay_differences(a, b) == ["accuracy.per_round[1]: 0.5 != 0.51"]
    assert N.replay_differences({"x": [1]}, {"x": [1, 2]}) == ["x: 1 items != 2"]
    assert N.replay_differences({"x": 1}, {}) == ["x: missing in the replay"]


# A gradient through the ops the planner's train step uses: dots (one XLA gives to Eigen/oneDNN, the
# transposed weight gradient), reductions, exp/tanh/rsqrt, a scan over layers; inputs from NumPy (a
# jitted function of constants would be folded at compile time, on no particular ISA).
_PROBE = textwrap.dedent("""
    import hashlib, launch, jax, jax.numpy as jnp, numpy as np
    x = np.random.default_rng(0).standard_normal((8, 96, 64)).astype(np.float32)
    w = (np.random.default_rng(1).standard_normal((3, 64, 64)) * 0.1).astype(np.float32)
    def loss(w, x):
        def layer(h, wl):
            h = jnp.tanh(h @ wl)
            return h * jax.lax.rsqrt((h * h).mean(-1, keepdims=True) + 1e-6), None
        h, _ = jax.lax.scan(layer, x, w)
        return jax.nn.logsumexp(h, -1).sum() + jnp.exp(-h * h).sum()
    g = jax.jit(jax.grad(loss))(w, x)
    print(hashlib.sha256(np.asarray(g).tobytes()).hexdigest())
""")


def _digest(env: dict[str, str], cores: int | None = None) -> str:
    cmd = [sys.executable, "-c", _PROBE]
    if cores is not None:
        cmd = ["taskset", "-c", ",".join(str(c) for c in sorted(os.sched_getaffinity(0))[:cores]), *cmd]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    assert out.returncode == 0, out.stderr[-2000:]  # an unknown XLA flag aborts here
    return out.stdout.strip().splitlines()[-1]


def _env(**over: str) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items()  # the session's fake devices and compilation cache stay out
            if k not in (N.ENV, "XLA_FLAGS", "PJRT_NPROC", "ONEDNN_MAX_CPU_ISA", "NPY_DISABLE_CPU_FEATURES")
            and not k.startswith("JAX_")}
    return {**base, **over}


@pytest.mark.slow
def test_the_installed_xla_accepts_the_flags_and_the_bits_do_not_follow_the_cores():
    """Every flag of the setting parses (an unknown one aborts the child); the gradient is the same on
    one core as on two (the thread pool's size is the setting's, not the machine's); a conflicting
    ISA cap in XLA_FLAGS stops the child with the typed error instead of running half-pinned."""
    portable = _digest(_env(**{N.ENV: "2"}))
    assert len(portable) == 64
    if len(os.sched_getaffinity(0)) >= 2 and shutil.which("taskset"):
        assert _digest(_env(**{N.ENV: "2"}), cores=1) == portable
    with pytest.raises(AssertionError, match="NumericsSettingError"):
        _digest(_env(**{N.ENV: "2", "XLA_FLAGS": "--xla_cpu_max_isa=AVX2"}))


def test_the_report_field_is_json():
    assert json.loads(json.dumps(N.status(N.apply({N.ENV: "1"}))))["PJRT_NPROC"] == "1"


_CPUINFO = """processor\t: 0
model name\t: Example CPU 9000
flags\t\t: fpu sse4_2 avx avx2 fma
processor\t: 1
model name\t: Example CPU 9000
flags\t\t: fpu sse4_2 avx avx2 fma avx512f
"""


def test_the_host_cpu_is_read_from_the_first_processor():
    cpu = N.host_cpu(_CPUINFO)
    assert cpu["model"] == "Example CPU 9000" and cpu["isa"] == "AVX2"  # the first processor's flags
    assert cpu["cores"] >= 1 and cpu["machine"]
    assert N.host_cpu("")["isa"] == ""  # no /proc/cpuinfo: nothing claimed
    assert set(N.status({})["cpu"]) == {"machine", "model", "isa", "cores"}


def test_float_paths_separate_hosts_only_when_the_setting_is_off():
    off = N.status({})
    other_host = {**off, "cpu": {**off["cpu"], "isa": "AVX512" if off["cpu"]["isa"] != "AVX512" else "AVX2"}}
    assert N.float_path(off) == N.float_path(dict(off))
    assert N.float_path(off) != N.float_path(other_host)  # the host's ISA decides the floats when off
    pinned = N.status(N.apply({N.ENV: "1"}))
    pinned_elsewhere = {**pinned, "cpu": other_host["cpu"]}
    assert N.float_path(pinned) == N.float_path(pinned_elsewhere)  # under the setting the host does not
    assert N.float_path(pinned) != N.float_path(N.status(N.apply({N.ENV: "2"})))  # its thread count does
    assert N.float_path({k: v for k, v in off.items() if k != "cpu"}).startswith("host numerics on a CPU not recorded")
    assert N.float_path(None) == N.float_path({}) == "not recorded"

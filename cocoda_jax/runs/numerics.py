"""Portable numerics: one opt-in setting under which a CPU run's floats do not depend on the host CPU.

Out of the box, the same commit and command give different bits on two x86-64 machines, and a
last-bit change in a train step moves a report's accuracies by points. Measured with the installed
jax/jaxlib (docs/scale.md, "Replay on another machine"), the float path depends on the host in five
places, each pinned here:

* XLA:CPU's own code generation targets the host's instruction set: with FMA (AVX2 and up) ``a*b+c``
  is fused, so ``exp``, ``tanh``, ``log``, the PRNG's normals, ... change in the last bit between an
  AVX and an AVX2 machine. ``--xla_cpu_max_isa=AVX`` caps it at AVX, the floor jaxlib itself requires
  (it refuses to start without AVX): every machine that runs jaxlib generates the same code.
* ``--xla_cpu_enable_platform_dependent_math`` (on by default; XLA's help: "faster code at the expense
  of consistent results across CPUs"): ``rsqrt`` differed between AVX and SSE4.2 and between vector
  widths. Off.
* YNNPACK, which runs XLA:CPU's dots and reductions by default, picks its kernels from the host CPU
  and ignores ``--xla_cpu_max_isa`` (its dot gave the same bits under every cap, where XLA's own code
  changed). Off (``--xla_cpu_experimental_ynn_fusion_type=``), and XNNPACK and oneDNN fusions with it.
* The dots left to Eigen run oneDNN's sgemm, which JIT-compiles for the host CPU:
  ``ONEDNN_MAX_CPU_ISA=AVX`` caps it like XLA's own code.
* The thread count: XLA:CPU's intra-op pool has one thread per core, and Eigen splits a contraction
  over it (weight gradients changed between 1 and 2 cores, with every flag above set; the default
  setting too). ``PJRT_NPROC`` fixes the pool's size whatever the cores: the setting's value.

Host-side NumPy dispatches its float loops (``exp``, ``log``, ``tanh``, ...) on the CPU too; the
setting disables its dispatched targets (``NPY_DISABLE_CPU_FEATURES``), leaving NumPy's baseline code.

The setting: ``COCODA_PORTABLE_NUMERICS=<threads>`` (a positive integer, the fixed intra-op thread
count; unset, empty or ``0``: off). ``launch/__init__.py`` applies it before anything imports NumPy or
starts JAX, so ``python -m launch.<name>`` and every child it starts run under it. What it pins is in
:func:`status`, which a run records so that a replay can check it ran the same way.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import platform
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from cocoda_jax.errors import CocodaError

ENV = "COCODA_PORTABLE_NUMERICS"
#: XLA:CPU's target ISA under the setting: the floor jaxlib needs on x86-64 (its CPU check wants AVX).
ISA = "AVX"
#: The flags the setting adds to ``XLA_FLAGS`` (names XLA accepts: an unknown one aborts the process).
XLA_CPU_FLAGS = (
    f"--xla_cpu_max_isa={ISA}",
    "--xla_cpu_enable_platform_dependent_math=false",
    "--xla_cpu_experimental_ynn_fusion_type=",
    "--xla_cpu_use_xnnpack=false",
    "--xla_cpu_use_onednn=false",
    "--xla_cpu_enable_fast_math=false",
    "--xla_cpu_prefer_vector_width=256",
)
#: NumPy's dispatched targets on x86-64 (its build's ``__cpu_dispatch__``); disabled, NumPy runs its baseline.
NUMPY_DISPATCH = "X86_V3 X86_V4 AVX512_ICL AVX512_SPR"
OFF = "off: the host's defaults (XLA:CPU codegen, YNNPACK/oneDNN kernels and thread count follow the CPU)"


class NumericsSettingError(CocodaError, ValueError):
    """``COCODA_PORTABLE_NUMERICS`` is malformed, or the environment already says otherwise (a flag
    or variable of the setting given another value), or it comes after JAX has started."""


@dataclasses.dataclass(frozen=True)
class PortableNumerics:
    """The pinned setting: ``threads`` is the size of XLA:CPU's intra-op pool on every machine."""

    threads: int

    def environment(self) -> dict[str, str]:
        """The variables the setting sets (``XLA_FLAGS`` holds only the setting's own flags)."""
        return {"XLA_FLAGS": " ".join(XLA_CPU_FLAGS), "PJRT_NPROC": str(self.threads),
                "ONEDNN_MAX_CPU_ISA": ISA, "NPY_DISABLE_CPU_FEATURES": NUMPY_DISPATCH}


def setting(environ: Mapping[str, str]) -> PortableNumerics | None:
    """The setting ``environ`` asks for (``None``: off); :class:`NumericsSettingError` when malformed."""
    raw = environ.get(ENV, "").strip()
    if raw in ("", "0"):
        return None
    if not raw.isdigit():
        raise NumericsSettingError(f"{ENV} must be a positive integer (XLA:CPU's fixed thread count) "
                                   f"or 0/empty for off, got {environ[ENV]!r}")
    return PortableNumerics(threads=int(raw))


def _flag_map(flags: str) -> dict[str, str]:
    out = {}
    for token in flags.split():
        name, _, value = token.partition("=")
        out[name] = value
    return out


def apply(environ: Mapping[str, str]) -> dict[str, str]:
    """``environ`` with the setting's variables added (a copy; ``environ`` itself when off).

    ``XLA_FLAGS`` keeps the user's other flags. A flag or variable of the setting that ``environ``
    already holds with another value is refused rather than overridden (which value would win is
    what a replay could not tell)."""
    pinned = setting(environ)
    if pinned is None:
        return dict(environ)
    out = dict(environ)
    conflicts = []
    for name, value in pinned.environment().items():
        if name == "XLA_FLAGS":
            have = _flag_map(environ.get("XLA_FLAGS", ""))
            conflicts += [f"XLA_FLAGS has {k}={have[k]}" for k, v in _flag_map(value).items()
                          if k in have and have[k] != v]
            missing = [f for f in XLA_CPU_FLAGS if f.partition("=")[0] not in have]
            out["XLA_FLAGS"] = " ".join([environ.get("XLA_FLAGS", "").strip(), *missing]).strip()
        elif environ.get(name, value) != value:
            conflicts.append(f"{name}={environ[name]}")
        else:
            out[name] = value
    if conflicts:
        raise NumericsSettingError(f"{ENV}={environ[ENV]} pins what the environment sets otherwise: "
                                   + "; ".join(conflicts) + " (unset them, or drop the setting)")
    return out


def _jax_started() -> bool:
    bridge = sys.modules.get("jax._src.xla_bridge")
    return bool(getattr(bridge, "_backends", None))


def configure(environ: dict[str, str] | None = None, *, started: Sequence[str] | None = None) -> PortableNumerics | None:
    """Applies the setting to this process's environment (``os.environ`` by default): called by
    ``launch/__init__.py`` before NumPy is imported and JAX starts, which read these variables once.
    A no-op when off; :class:`NumericsSettingError` when JAX has already started a backend or NumPy
    is already loaded (their choices are made; ``started`` names them, detected by default)."""
    environ = os.environ if environ is None else environ
    pinned = setting(environ)
    if pinned is None:
        return None
    updated = apply(environ)
    if updated == dict(environ):
        return pinned  # already applied (a re-executed launcher, or a child that inherited it)
    if started is None:
        started = [name for name, up in (("JAX", _jax_started()), ("NumPy", "numpy" in sys.modules)) if up]
    if started:
        raise NumericsSettingError(f"{ENV} must be applied before {' and '.join(started)} start(s): set it in the "
                                   "environment of `python -m launch.<name>`")
    environ.update(updated)
    return pinned


#: x86-64 vector ISAs from the widest, each with the ``/proc/cpuinfo`` flag that says the CPU has it.
_X86_ISAS = (("AVX512", "avx512f"), ("AVX2", "avx2"), ("AVX", "avx"), ("SSE4.2", "sse4_2"))


@functools.cache
def _proc_cpuinfo() -> str:
    """``/proc/cpuinfo`` once a process (it does not change; the cores a process may use can, so they are read
    each time); empty where the system has none."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def host_cpu(cpuinfo: str | None = None) -> dict[str, Any]:
    """The CPU whose choices decide the floats when the setting is off: its model, the widest x86 vector
    ISA it offers (what XLA:CPU generates code for; empty off x86 or where unknown) and the cores this
    process may use (the size of XLA:CPU's intra-op pool). ``cpuinfo``: the text of ``/proc/cpuinfo``
    (read when ``None``; empty where the system has none)."""
    if cpuinfo is None:
        cpuinfo = _proc_cpuinfo()
    fields: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields.setdefault(key.strip(), value.strip())  # the first processor's
    flags = set(fields.get("flags", "").split())
    isa = next((name for name, flag in _X86_ISAS if flag in flags), "")
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 0)
    return {"machine": platform.machine(), "model": fields.get("model name", "") or platform.processor(), "isa": isa,
            "cores": int(cores)}


def status(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """What this process's numerics ran under, for a run's report: off, or the pinned variables as
    they are in the environment (a replay compares this and the software's versions), and the host's
    CPU (:func:`host_cpu`: what decides the floats when the setting is off)."""
    environ = os.environ if environ is None else environ
    pinned = setting(environ)
    versions = {**_versions(), "cpu": host_cpu()}
    if pinned is None:
        return {"portable": False, "setting": OFF, **versions}
    env = pinned.environment()
    applied = all(environ.get(k) == v for k, v in env.items() if k != "XLA_FLAGS") and all(
        f in environ.get("XLA_FLAGS", "").split() for f in XLA_CPU_FLAGS)
    return {"portable": applied, "setting": f"{ENV}={pinned.threads}" + ("" if applied else " (not applied)"),
            "threads": pinned.threads, "xla_flags": environ.get("XLA_FLAGS", ""),
            **{k: environ.get(k, "") for k in ("PJRT_NPROC", "ONEDNN_MAX_CPU_ISA", "NPY_DISABLE_CPU_FEATURES")},
            **versions}


def _versions() -> dict[str, str]:
    from importlib import metadata

    out = {"python": sys.version.split()[0]}
    for dist in ("jax", "jaxlib", "numpy"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = "absent"
    return out


def float_path(recorded: Mapping[str, Any] | None) -> str:
    """A label for the float path a run's :func:`status` says it ran on: two runs of one config and commit
    with different labels are not expected to give the same bits. Under the setting: the setting and the
    versions; off: the host's CPU too (its model, ISA and cores), which a report written before the CPU was
    recorded does not name. Why: cells run on two machines with the setting off are two float paths, so
    their stages 1-2 differ and a paired delta between them also holds the machines' difference."""
    if not recorded:
        return "not recorded"
    versions = ", ".join(f"{k} {recorded.get(k, '?')}" for k in ("jax", "jaxlib", "numpy"))
    if recorded.get("portable"):
        return f"{recorded.get('setting')}; {versions}"
    cpu = recorded.get("cpu")
    if not cpu:
        return f"host numerics on a CPU not recorded; {versions}"
    return (f"host numerics on {cpu.get('model') or cpu.get('machine') or '?'} ({cpu.get('isa') or 'ISA unknown'}, "
            f"{cpu.get('cores')} core(s)); {versions}")


#: What decides a run's floats, of :func:`status`: a resume under other values would not continue the run's numbers.
RUN_KEYS = ("setting", "jax", "jaxlib", "numpy")


def resume_differences(saved: Mapping[str, Any], now: Mapping[str, Any]) -> list[str]:
    """Where this process's numerics (:func:`status`) differ from those a run was started under, as
    ``key: saved -> now`` lines (empty: a resume continues the same float path)."""
    return [f"{k}: {saved.get(k, '<absent>')!r} -> {now.get(k, '<absent>')!r}" for k in RUN_KEYS
            if saved.get(k) != now.get(k)]


#: A report's keys that hold wall-clock times or the machine's description (not compared by a replay).
TIMING_KEYS = ("wall_s", "wall_s_this_process", "test_eval_s", "stage_s", "seconds", "host_malloc", "numerics",
               "rollout_tokens_per_s", "train_tokens_per_s")


def replay_differences(expected: Any, got: Any, path: str = "") -> list[str]:
    """Where a replayed report differs from the committed one, as ``path: expected != got`` lines
    (empty: the replay reproduced it); times anywhere in the tree are skipped (:data:`TIMING_KEYS`)."""
    if isinstance(expected, Mapping) and isinstance(got, Mapping):
        out = []
        for key in sorted(set(expected) | set(got), key=str):
            if key in TIMING_KEYS or str(key).endswith("_s"):
                continue
            where = f"{path}.{key}" if path else str(key)
            if key not in got or key not in expected:
                out.append(f"{where}: {'missing in the replay' if key not in got else 'not in the committed report'}")
                continue
            out += replay_differences(expected[key], got[key], where)
        return out
    if isinstance(expected, Sequence) and isinstance(got, Sequence) and not isinstance(expected, str) \
            and not isinstance(got, str):
        if len(expected) != len(got):
            return [f"{path}: {len(expected)} items != {len(got)}"]
        return [d for i, (a, b) in enumerate(zip(expected, got)) for d in replay_differences(a, b, f"{path}[{i}]")]
    return [] if expected == got else [f"{path}: {expected!r} != {got!r}"]


def main(argv: Sequence[str]) -> int:
    """``python -m cocoda_jax.runs.numerics COMMITTED.json REPLAY.json``: prints each difference
    (times skipped) and exits 1 if any, else prints that the replay reproduced the report."""
    import json

    if len(argv) != 2:
        print("usage: python -m cocoda_jax.runs.numerics COMMITTED_REPORT.json REPLAYED_REPORT.json", file=sys.stderr)
        return 2
    expected, got = (json.loads(open(p, encoding="utf-8").read()) for p in argv)
    diffs = replay_differences(expected, got)
    for line in diffs:
        print(line)
    print(f"{len(diffs)} difference(s)" if diffs else "the replay reproduced every number of the report (times skipped)")
    return 1 if diffs else 0


__all__ = ["ENV", "ISA", "NUMPY_DISPATCH", "NumericsSettingError", "OFF", "PortableNumerics", "TIMING_KEYS",
           "XLA_CPU_FLAGS", "apply", "configure", "float_path", "host_cpu", "replay_differences", "setting", "status"]

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

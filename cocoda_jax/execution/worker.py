"""The sandbox worker process: ``python -B -s -S -P worker.py CONFIG_JSON``.

Standard library only; its siblings (``values.py``, ``guard.py``, ``framing.py``, ``containment.py``,
``runtime.py``) are loaded by file path, so nothing from the trainer's environment (site-packages,
jax, numpy) is importable here. Start-up order matters: load and warm up everything that reads files,
then apply the kernel layers (after which no file can be opened), then say hello.

Protocol (frames of ``framing.py``), trainer -> worker::

    {"op": "batch", "lib": KEY, "tools": [SOURCE, ...] | null,
     "programs": [[SOURCE, INPUTS | null, ENVIRONMENT_SPEC | null], ...], "cpu_s": N, "seed": S}

``tools`` is null when the trainer believes this worker has library ``KEY`` cached (it mirrors the
worker's LRU); if it does not, the worker answers ``{"op": "need_lib"}`` and the trainer resends with
the sources. Otherwise the worker answers one reply frame per program, in order, as each finishes, so
the trainer always knows which program is running (for the wall-clock timeout). Worker -> trainer at
start: ``{"op": "hello", "pid": ..., "layers": {...}, "notes": {...}}``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import resource
import signal
import sys
import traceback
import warnings

_HERE = os.path.dirname(os.path.abspath(__file__))


def _load(name: str, path: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def main() -> None:
    config = json.loads(sys.argv[1])
    sys.setrecursionlimit(1000)
    _load("cocoda_values", os.path.join(os.path.dirname(_HERE), "values.py"))
    _load("cocoda_guard", os.path.join(_HERE, "guard.py"))
    framing = _load("cocoda_framing", os.path.join(_HERE, "framing.py"))
    containment = _load("cocoda_containment", os.path.join(_HERE, "containment.py"))
    runtime = _load("cocoda_runtime", os.path.join(_HERE, "runtime.py"))

    limits = runtime.Limits(max_stdout=int(config["max_stdout"]))
    environment = None
    if config.get("environment"):
        # A trusted environment module (stateful backends): loaded, with the import path its backends
        # need, before the kernel layers close the file system; programs reach it only via runtime.
        spec = config["environment"]
        sys.path.extend(str(p) for p in spec.get("sys_path", ()))
        environment = _load("cocoda_environment", spec["path"])
        environment.warm_up()
    rt = runtime.Runtime(limits, environment=environment)
    runtime.warm_up()
    rfd, wfd = containment.move_pipes()
    # Nothing may write to the standard streams: a warning per compiled program (SyntaxWarning) would
    # fill the stderr pipe and stall the worker. Our own crash report goes to fd 2 directly (see below).
    warnings.simplefilter("ignore")
    sys.stdout = sys.stderr = None
    sys.unraisablehook = lambda _unraisable: None

    layers, notes = containment.apply(config)
    for name in ("separate_process", "ast_guard", "restricted_builtins", "import_allowlist"):
        layers[name] = True  # established by this very process and its Runtime

    def on_xcpu(_signum, _frame):
        raise runtime.CpuLimitExceeded()

    signal.signal(signal.SIGXCPU, on_xcpu)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # writes fail with EFBIG instead of killing us

    budget = int(config["cpu_budget_s"])
    cpu = _CpuArm(budget, layers.get("rlimit_cpu", False))
    framing.write_frame(wfd, {"op": "hello", "pid": os.getpid(), "layers": layers, "notes": notes})
    _serve(rt, framing, rfd, wfd, cpu)


class _CpuArm:
    """Per-run CPU soft limit on top of the worker's lifetime hard limit (``budget``)."""

    def __init__(self, budget: int, active: bool):
        self.budget, self.active = budget, active

    @staticmethod
    def used() -> float:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return usage.ru_utime + usage.ru_stime

    def arm(self, cpu_s: int) -> None:
        if self.active:
            soft = min(self.budget, int(self.used()) + 1 + max(1, int(cpu_s)))
            resource.setrlimit(resource.RLIMIT_CPU, (soft, self.budget))

    def disarm(self) -> None:
        if self.active:
            resource.setrlimit(resource.RLIMIT_CPU, (self.budget, self.budget))

    def exhausted(self) -> bool:
        return self.used() > self.budget / 2


def _serve(rt, framing, rfd: int, wfd: int, cpu: _CpuArm) -> None:
    while True:
        request = framing.read_frame(rfd)
        if request is None or request.get("op") == "exit":
            return
        if request.get("op") != "batch":
            continue
        cpu.arm(request["cpu_s"])
        try:
            lib = rt.library(request["lib"], request.get("tools"))
        finally:
            cpu.disarm()
        if lib is None:
            framing.write_frame(wfd, {"op": "need_lib"})
            continue
        for source, inputs, *rest in request["programs"]:
            environment = rest[0] if rest else None
            cpu.arm(request["cpu_s"])
            try:
                reply = rt.run(lib, source, inputs, request.get("seed", 0), environment)
            finally:
                cpu.disarm()
            reply["retire"] = rt.wants_retirement or cpu.exhausted()
            try:
                frame = framing.pack(reply)
            except (ValueError, TypeError, RecursionError, MemoryError) as exc:
                frame = framing.pack({
                    "ok": False, "value": None, "calls": [], "values": [], "stdout": "", "retire": True,
                    "environment_calls": [],
                    "error": ["output_limit", f"the reply cannot be encoded: {type(exc).__name__}"],
                    "elapsed": reply.get("elapsed", 0.0)})
            framing.write_bytes(wfd, frame)


if __name__ == "__main__":
    try:
        main()
    except BaseException:  # a bug or a broken pipe: leave a short report for the trainer, then go
        try:
            os.write(2, traceback.format_exc()[-2000:].encode("utf-8", "replace"))
        finally:
            os._exit(1)

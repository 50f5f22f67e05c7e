"""The sandboxed executor: a pool of long-lived worker processes that run untrusted programs.

Layers, from the outside in (``sb.containment`` says which are verifiably active on this machine):

* a separate process per worker (``worker.py``), started with a controlled environment, no site
  packages, its request/reply pipes moved off the standard descriptors;
* kernel layers the worker applies to itself (``containment.py``): network namespace, unprivileged uid
  when root, no-new-privs, rlimits on address space, CPU time, file size, descriptors and processes,
  a watchdog that ends it when the trainer dies;
* the static checker (``guard.py``) on programs and tool sources;
* the restricted runtime (``runtime.py``): safe builtins, read-only copies of allowed modules,
  bounded output and values, traced tools;
* here: a wall-clock timeout per run. A worker that overruns, dies or breaks the protocol is killed
  and replaced; the unfinished rest of its batch runs again on another worker. The run it was on fails
  with a typed error (``timeout``; ``worker_died`` only if its worker dies a second time: the first
  death is more likely the machine's doing, so that run is retried once). The caller always gets one
  :class:`RunResult` per program.

Throughput comes from batching: programs are sent in batches to idle workers (the tools are compiled
once per library in each worker and cached), and each reply streams back as soon as its program ends.
"""

from __future__ import annotations

import collections
import hashlib
import json
import keyword
import math
import os
import selectors
import threading
import time
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

from cocoda_jax import values
from cocoda_jax.execution import containment
from cocoda_jax.execution.environment import EnvironmentPlugin
from cocoda_jax.execution.framing import FrameError
from cocoda_jax.execution.process import WorkerProcess
from cocoda_jax.execution.result import ExecError, RunResult, SandboxError

_LIBRARY_CACHE = 16      # libraries each worker keeps compiled (the trainer mirrors the LRU)
_MAX_BATCH = 64          # programs per batch message
_MAX_START_FAILURES = 3  # consecutive worker start failures before the sandbox gives up


def library_sources(library: Any) -> tuple[str, ...]:
    """Tool sources of ``library``: an object with ``.sources()`` (a LibrarySnapshot), a sequence of
    source strings in dependency order, or ``None`` for no tools."""
    if library is None:
        return ()
    if callable(getattr(library, "sources", None)):
        sources = tuple(library.sources())
    elif isinstance(library, (str, bytes)):
        raise TypeError("library must be a sequence of tool sources or a LibrarySnapshot, not one string")
    else:
        sources = tuple(library)
    for i, source in enumerate(sources):
        if not isinstance(source, str):
            raise TypeError(f"library source #{i} is a {type(source).__name__}, not str")
    return sources


def library_key(sources: Sequence[str]) -> str:
    return hashlib.sha256(json.dumps(list(sources)).encode()).hexdigest()[:32]


def _encode_inputs(index: int, inputs: Mapping[str, Any] | None) -> dict | None:
    if inputs is None:
        return None
    encoded = {}
    for name, value in inputs.items():
        if not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name) or name.startswith("__"):
            raise ValueError(f"inputs for program {index}: {name!r} is not a usable variable name")
        try:
            encoded[name] = values.encode(value, lossy=False)
        except values.UnencodableValue as exc:
            raise ValueError(f"inputs for program {index}, {name!r}: {exc}") from None
    return encoded


def _to_result(frame: dict) -> RunResult:
    """A worker's reply as a RunResult (raises on anything malformed: the worker is not trusted)."""
    error = frame["error"]
    ok = error is None
    return RunResult(
        ok=ok,
        value=values.decode(frame["value"]) if ok else None,
        error=None if ok else ExecError(str(error[0]), str(error[1])),
        calls=tuple(str(c) for c in frame["calls"]),
        values=tuple((str(name), values.decode(v)) for name, v in frame["values"]),
        stdout=str(frame["stdout"]),
        elapsed_s=float(frame["elapsed"]),
        environment_calls=tuple((str(k), str(m), dict(values.decode(kw)))
                                for k, m, kw in frame.get("environment_calls", ())),
    )


class _Slot:
    """One place in the pool: the current worker process and the batch it is running."""

    def __init__(self) -> None:
        self.worker: WorkerProcess | None = None
        self.ready = False
        self.batch: list[int] = []
        self.done = 0
        self.since = 0.0
        self.request: dict | None = None
        self.libs: collections.OrderedDict[str, None] = collections.OrderedDict()
        self.retire = False

    @property
    def busy(self) -> bool:
        return bool(self.batch)


class Sandbox:
    """A pool of sandboxed worker processes; use as a context manager (or :meth:`start`/:meth:`close`).

    ``timeout_s`` is the default wall-clock limit per run; ``memory_mb`` the address-space limit of each
    worker; ``cpu_s`` the CPU-time limit per run (default: the run's timeout rounded up, plus 1 s);
    ``uid`` the unprivileged uid a root trainer's workers drop to (``None``: keep root);
    ``network_namespace`` whether workers try to enter a fresh network namespace; ``seed`` seeds
    ``random`` before every run; ``environment`` a trusted stateful environment the workers load
    (:class:`~cocoda_jax.execution.environment.EnvironmentPlugin`; runs opt in per program). Not for concurrent use from several threads at once: calls are
    serialised by a lock.
    """

    def __init__(self, workers: int = 2, timeout_s: float = 5.0, memory_mb: int = 512, cpu_s: int | None = None,
                 *, max_stdout: int = 8192, uid: int | None = 65534, network_namespace: bool = True,
                 seed: int = 0, start_timeout_s: float = 30.0, python: str | None = None,
                 environment: EnvironmentPlugin | None = None):
        if workers < 1:
            raise ValueError(f"workers must be at least 1, got {workers}")
        if not timeout_s > 0:
            raise ValueError(f"timeout_s must be positive, got {timeout_s}")
        if memory_mb < 64:
            raise ValueError(f"memory_mb must be at least 64 (the interpreter needs it), got {memory_mb}")
        if cpu_s is not None and cpu_s < 1:
            raise ValueError(f"cpu_s must be at least 1 (whole seconds), got {cpu_s}")
        self.workers, self.timeout_s, self.memory_mb, self.cpu_s = workers, float(timeout_s), memory_mb, cpu_s
        self.max_stdout, self.uid, self.network_namespace, self.seed = max_stdout, uid, network_namespace, seed
        self.start_timeout_s, self.python, self.environment = start_timeout_s, python, environment
        self._lock = threading.RLock()
        self._slots: list[_Slot] = []
        self._selector: selectors.BaseSelector | None = None
        self._layers: dict[str, bool] | None = None
        self._notes: dict[str, str] = {}
        self._start_failures = 0
        self._owner_pid = os.getpid()
        self.closed = False

    # --- life cycle ------------------------------------------------------------------------------------
    def __enter__(self) -> Sandbox:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> Sandbox:
        """Starts the workers and waits for each to report its containment (idempotent)."""
        with self._lock:
            self._check_usable()
            if self._selector is None:
                self._selector = selectors.DefaultSelector()
                self._slots = [_Slot() for _ in range(self.workers)]
                for slot in self._slots:
                    self._spawn(slot)
                try:
                    while not all(slot.ready for slot in self._slots):
                        self._step(None)
                except BaseException:
                    self.close()
                    raise
            return self

    def close(self) -> None:
        """Stops all workers. Further runs raise :class:`SandboxError`."""
        with self._lock:
            if self.closed:
                return
            self.closed = True
            if os.getpid() != self._owner_pid:
                return  # a forked child does not own these processes
            for slot in self._slots:
                if slot.worker is not None:
                    slot.worker.close()
            if self._selector is not None:
                self._selector.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    @property
    def containment(self) -> Mapping[str, bool]:
        """Each layer of :data:`containment.LAYERS` and whether it is verifiably active in every worker
        started so far (starts the sandbox if needed)."""
        if not self.closed:
            self.start()
        return MappingProxyType(dict(self._layers or {}))

    @property
    def containment_notes(self) -> Mapping[str, str]:
        """Why each inactive layer is inactive."""
        if not self.closed:
            self.start()
        return MappingProxyType(dict(self._notes))

    def worker_pids(self) -> tuple[int, ...]:
        """Process ids of the current workers (for diagnostics and tests)."""
        return tuple(slot.worker.pid for slot in self._slots if slot.worker is not None)

    # --- running ---------------------------------------------------------------------------------------
    def run(self, program: str, library: Any = (), timeout_s: float | None = None, *,
            inputs: Mapping[str, Any] | None = None, environment: Any = None) -> RunResult:
        """Runs one program (see :meth:`run_many`)."""
        return self.run_many([program], library, timeout_s, inputs=None if inputs is None else [inputs],
                             environments=None if environment is None else [environment])[0]

    def run_many(self, programs: Sequence[str], library: Any = (), timeout_s: float | None = None, *,
                 inputs: Sequence[Mapping[str, Any] | None] | None = None,
                 environments: Sequence[Any] | None = None) -> list[RunResult]:
        """Runs each program against ``library``; one :class:`RunResult` per program, in order.

        ``library``: a LibrarySnapshot (anything with ``.sources()``) or tool sources in dependency order.
        ``timeout_s``: wall-clock limit per program (default: the sandbox's). ``inputs``: per program,
        values bound to variable names before it runs (not recorded in ``values``). ``environments``:
        per program, the spec of its environment session (a plain value; None for none), for a
        sandbox built with an ``environment`` plugin.
        """
        programs = list(programs)
        for i, program in enumerate(programs):
            if not isinstance(program, str):
                raise TypeError(f"program {i} is a {type(program).__name__}, not str")
        if inputs is not None and len(inputs) != len(programs):
            raise ValueError(f"{len(inputs)} inputs for {len(programs)} programs")
        encoded = [_encode_inputs(i, inp) for i, inp in enumerate(inputs or [None] * len(programs))]
        if environments is not None and len(environments) != len(programs):
            raise ValueError(f"{len(environments)} environments for {len(programs)} programs")
        if environments is not None and any(e is not None for e in environments) and self.environment is None:
            raise ValueError("environment specs given, but this sandbox was built without an environment plugin")
        try:
            specs = [None if e is None else values.encode(e, lossy=False) for e in environments or [None] * len(programs)]
        except values.UnencodableValue as exc:
            raise ValueError(f"an environment spec is not a plain value: {exc}") from None
        timeout = self.timeout_s if timeout_s is None else float(timeout_s)
        if not timeout > 0:
            raise ValueError(f"timeout_s must be positive, got {timeout_s}")
        sources = library_sources(library)
        with self._lock:
            self.start()
            return self._execute(programs, encoded, sources, timeout, specs)

    # --- the scheduler ---------------------------------------------------------------------------------
    def _check_usable(self) -> None:
        if self.closed:
            raise SandboxError("the sandbox is closed")
        if os.getpid() != self._owner_pid:
            raise SandboxError("this sandbox belongs to the parent process; create a new one after fork")

    def _execute(self, programs: list[str], inputs: list[dict | None], sources: tuple[str, ...],
                 timeout: float, environments: list[Any] | None = None) -> list[RunResult]:
        job = _Job(programs, inputs, sources, library_key(sources), timeout,
                   self.cpu_s or math.ceil(timeout) + 1, self.workers, environments)
        try:
            while job.remaining:
                self._step(job)
        except BaseException:
            # Interrupted (KeyboardInterrupt, a signal handler, a start failure): busy workers would
            # later send replies that belong to this call, so replace them before anyone else runs.
            for slot in self._slots:
                if slot.busy:
                    slot.batch = []
                    self._spawn(slot)
            raise
        return job.results

    def _step(self, job: _Job | None) -> None:
        """One turn of the loop: hand out work, wait for replies or the next deadline, enforce deadlines."""
        if job is not None:
            for slot in self._slots:
                if slot.ready and not slot.busy and job.pending:
                    self._dispatch(slot, job)
        now = time.monotonic()
        deadlines = [slot.worker.started + self.start_timeout_s for slot in self._slots if not slot.ready]
        if job is not None:
            deadlines += [slot.since + job.timeout for slot in self._slots if slot.busy]
        wait = max(0.0, min(deadlines) - now) if deadlines else None
        for key, _ in self._selector.select(wait):
            self._on_readable(key.data, job)
        now = time.monotonic()
        for slot in self._slots:
            if not slot.ready and now - slot.worker.started > self.start_timeout_s:
                self._start_failed(slot, f"no hello within {self.start_timeout_s:g} s")
            elif job is not None and slot.busy and now - slot.since > job.timeout:
                index = slot.batch[slot.done]
                job.finish(index, RunResult.failure(
                    "timeout", f"the run exceeded its wall-clock limit of {job.timeout:g} s; its worker was replaced",
                    elapsed_s=now - slot.since))
                self._abandon(slot, job, first_unfinished=slot.done + 1)

    def _dispatch(self, slot: _Slot, job: _Job) -> None:
        take = [job.pending.popleft() for _ in range(min(job.chunk, len(job.pending)))]
        cached = job.key in slot.libs
        slot.libs[job.key] = None
        slot.libs.move_to_end(job.key)
        while len(slot.libs) > _LIBRARY_CACHE:
            slot.libs.popitem(last=False)
        slot.request = {"op": "batch", "lib": job.key, "tools": None if cached else list(job.sources),
                        "programs": [[job.programs[i], job.inputs[i], job.environments[i]] for i in take],
                        "cpu_s": job.cpu_s, "seed": self.seed}
        slot.batch, slot.done, slot.since = take, 0, time.monotonic()
        if not slot.worker.send(slot.request):  # it died while idle: nothing of this batch ran
            job.pending.extendleft(reversed(take))
            slot.batch = []
            self._spawn(slot)

    def _on_readable(self, slot: _Slot, job: _Job | None) -> None:
        try:
            frames = slot.worker.read()
        except (FrameError, OSError) as exc:
            self._worker_lost(slot, job, f"protocol violation: {exc}")
            return
        if frames is None:
            self._worker_lost(slot, job, slot.worker.death())
            return
        for frame in frames:
            if not isinstance(frame, dict):
                self._worker_lost(slot, job, "protocol violation: a frame that is not an object")
                return
            if not slot.ready:
                if frame.get("op") != "hello":
                    self._start_failed(slot, f"unexpected first frame {str(frame)[:200]}")
                    return
                self._hello(slot, frame)
            elif frame.get("op") == "need_lib" and slot.busy and job is not None:
                slot.request["tools"] = list(job.sources)
                slot.since = time.monotonic()
                if not slot.worker.send(slot.request):
                    self._worker_lost(slot, job, slot.worker.death())
                    return
            elif slot.busy and job is not None:
                try:
                    result = _to_result(frame)
                except (KeyError, TypeError, ValueError, IndexError, ArithmeticError) as exc:
                    self._worker_lost(slot, job, f"protocol violation: malformed reply ({type(exc).__name__}: {exc})")
                    return
                job.finish(slot.batch[slot.done], result)
                slot.done += 1
                slot.since = time.monotonic()
                slot.retire = slot.retire or bool(frame.get("retire"))
                if slot.done == len(slot.batch):
                    slot.batch = []
                    if slot.retire:
                        self._spawn(slot)
                        return
            else:
                self._worker_lost(slot, job, "protocol violation: a reply while idle")
                return

    def _hello(self, slot: _Slot, frame: dict) -> None:
        inside = (dict(frame.get("layers") or {}), dict(frame.get("notes") or {}))
        outside = containment.outside_view(slot.worker.pid)
        reports = [inside, outside]
        if self._layers is not None:
            reports.append((self._layers, self._notes))
        layers, notes = containment.combine(reports)
        self._layers, self._notes = layers, notes
        slot.ready = True
        self._start_failures = 0

    def _worker_lost(self, slot: _Slot, job: _Job | None, why: str) -> None:
        """The worker ended or misbehaved: fail the run it was on, re-queue the rest, replace it."""
        if not slot.ready:
            self._start_failed(slot, why)
            return
        if slot.busy and job is not None:
            index = slot.batch[slot.done]
            if not job.retried[index]:
                # A program cannot end its worker from inside the guards, so a death is more likely the
                # machine's doing (OOM killer, an operator, a worker dying just as it was handed work):
                # run it once more on a fresh worker before blaming it.
                job.retried[index] = True
                self._abandon(slot, job, first_unfinished=slot.done)
                return
            job.finish(index, RunResult.failure(
                "worker_died", f"{why} (it had been retried once on a fresh worker)",
                elapsed_s=time.monotonic() - slot.since))
            self._abandon(slot, job, first_unfinished=slot.done + 1)
        else:
            self._spawn(slot)

    def _abandon(self, slot: _Slot, job: _Job, first_unfinished: int) -> None:
        job.pending.extendleft(reversed(slot.batch[first_unfinished:]))
        slot.batch = []
        self._spawn(slot)

    def _start_failed(self, slot: _Slot, why: str) -> None:
        self._start_failures += 1
        if self._start_failures > _MAX_START_FAILURES:
            slot.worker.kill()
            raise SandboxError(f"sandbox workers fail to start ({self._start_failures} times in a row); last: {why}")
        self._spawn(slot)

    def _spawn(self, slot: _Slot) -> None:
        """Replaces the slot's worker (killing the old one) with a fresh process."""
        if slot.worker is not None:
            try:
                self._selector.unregister(slot.worker.fd)
            except (KeyError, ValueError):
                pass
            slot.worker.kill()
        config = {
            "parent_pid": os.getpid(),
            "parent_netns": containment.net_namespace_id(),
            "uid": self.uid if os.geteuid() == 0 else None,
            "net": self.network_namespace,
            "memory_mb": self.memory_mb,
            # The worker's lifetime CPU hard limit; each run gets a soft limit below it, and a worker
            # that has used half of it retires (so a run never meets the hard limit's SIGKILL).
            "cpu_budget_s": max(3600, 4 * (self.cpu_s or math.ceil(self.timeout_s) + 1)),
            "max_stdout": self.max_stdout,
            "environment": None if self.environment is None else self.environment.to_config(),
        }
        slot.worker = WorkerProcess(config, self.python)
        slot.ready, slot.batch, slot.done, slot.request, slot.retire = False, [], 0, None, False
        slot.libs.clear()
        self._selector.register(slot.worker.fd, selectors.EVENT_READ, slot)


class _Job:
    """The state of one ``run_many`` call: what is pending and what has finished."""

    def __init__(self, programs: list[str], inputs: list[dict | None], sources: tuple[str, ...], key: str,
                 timeout: float, cpu_s: int, workers: int, environments: list[Any] | None = None):
        self.programs, self.inputs, self.sources, self.key = programs, inputs, sources, key
        self.environments = environments or [None] * len(programs)
        self.timeout, self.cpu_s = timeout, cpu_s
        self.pending = collections.deque(range(len(programs)))
        self.results: list[RunResult | None] = [None] * len(programs)
        self.remaining = len(programs)
        self.retried = [False] * len(programs)  # re-run once after its worker died
        self.chunk = max(1, min(_MAX_BATCH, math.ceil(len(programs) / (4 * workers))))

    def finish(self, index: int, result: RunResult) -> None:
        if self.results[index] is None:
            self.remaining -= 1
        self.results[index] = result

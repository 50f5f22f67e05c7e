"""Named crash points, for chaos tests of resume (``launch/chaos.py``).

``hit("grpo/iteration")`` marks a place where a real job can die (a preempted node, the OOM
killer). It does nothing unless the process was started with

- ``COCODA_FAILPOINT=name@k``: at the ``k``-th hit of ``name`` in this process, the process sends
  itself SIGKILL there and then: no ``finally``, no atexit, no flush, as a real kill;
- ``COCODA_FAILPOINT_TRACE=path``: every hit appends its name as a line to ``path`` (so a chaos
  driver learns from an uninterrupted run which points exist and how often each is reached).

Both are read from the environment at each hit (cheap; hits are per step, never per token), so a
test can set them with ``monkeypatch.setenv``. The points are listed in :data:`POINTS`; an unknown
name is a programming error (``ValueError``), so a misspelt point cannot silently never fire.
"""

from __future__ import annotations

import os
import signal
import threading

KILL_ENV = "COCODA_FAILPOINT"
TRACE_ENV = "COCODA_FAILPOINT_TRACE"

#: Every point, where it sits, in run order.
POINTS = {
    "warm/round": "stage 1: after each abstraction round of the warm library",
    "sft/step": "stage 2: after each SFT step",
    "grpo/iteration": "stage 3: after each GRPO iteration (its metrics written)",
    "mining/proposed": "stage 3: the abstractor's proposals made, nothing validated yet",
    "validation/candidate": "stage 3: before each candidate composite's validation (earlier ones done)",
    "refresh/step": "stage 3: after each step of the SFT refresh on refactored demonstrations",
    "rods/synthesis": "RODS: inside a variant-synthesis job (on the background thread)",
    "rods/saved": "RODS: the epoch's files written, the round's checkpoint not yet",
    "checkpoint/write": "in a checkpoint write: Orbax has committed the step (its save is synchronous), the "
                        "caller's files that follow it (the round's library JSON) not yet written; a kill "
                        "while Orbax writes leaves a temporary directory that restore ignores",
    "library/json": "after a round's checkpoint, before its library JSON is written",
    "report/write": "the final report: test evaluated, report.json not yet written",
}

_lock = threading.Lock()
_counts: dict[str, int] = {}


def parse(spec: str) -> tuple[str, int]:
    """``"name@k"`` (or ``"name"``, k = 1) -> ``(name, k)``; a typed error for anything else."""
    name, _, k = spec.partition("@")
    if name not in POINTS:
        raise ValueError(f"{KILL_ENV}: unknown failpoint {name!r}; known: {sorted(POINTS)}")
    try:
        count = int(k) if k else 1
    except ValueError:
        raise ValueError(f"{KILL_ENV}: {spec!r} is not name@k with an integer k") from None
    if count < 1:
        raise ValueError(f"{KILL_ENV}: k must be >= 1 in {spec!r}")
    return name, count


def hit(name: str) -> None:
    """Passes the point ``name``: traced and/or killed here if the environment says so."""
    if name not in POINTS:
        raise ValueError(f"unknown failpoint {name!r}")
    kill, trace = os.environ.get(KILL_ENV), os.environ.get(TRACE_ENV)
    if not kill and not trace:
        return
    with _lock:
        _counts[name] = n = _counts.get(name, 0) + 1
        if trace:
            with open(trace, "a") as f:
                f.write(name + "\n")
    if kill and parse(kill) == (name, n):
        os.kill(os.getpid(), signal.SIGKILL)


__all__ = ["KILL_ENV", "POINTS", "TRACE_ENV", "hit", "parse"]

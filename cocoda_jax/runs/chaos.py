"""Chaos-tested resume: the main job killed (SIGKILL) at chosen failpoints, resumed each time, must
leave what an uninterrupted run leaves (``launch/chaos.py``; ``tests/runs/test_runs_chaos.py``).

1. A reference run of ``launch.coevolve`` in ``workdir/reference`` records every failpoint it
   passes (:mod:`cocoda_jax.failpoints`), in order.
2. A kill plan: ``kills`` positions in that trace, one per phase first (warm library, SFT, GRPO,
   mining, validation, refresh, checkpoint writes, RODS files, report), drawn from ``seed``.
3. ``workdir/chaos``: the job is started with ``COCODA_FAILPOINT=name@k`` (``k``: the hits of
   ``name`` the restarted process makes before that position, counted from the point it resumes
   at, read off its newest checkpoint) and must die by SIGKILL; then resumed with the next kill,
   ..., and finally run to the end. A kill inside a RODS synthesis job (a background thread whose
   timing is not in the trace) goes where a job must run (:func:`with_background_kill`).
4. The two directories are compared: every ``library/*.json`` and ``rods/**`` file byte for byte,
   ``metrics.jsonl`` and ``report.json`` with their wall-clock fields left out (they differ between
   any two runs).
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cocoda_jax.errors import CocodaError
from cocoda_jax import failpoints

#: Where a resumed process starts again: after the checkpoint whose library JSON was written last.
CHECKPOINT_DONE = "library/json"
#: The failpoint on RODS's background thread (its order against the main thread is not reproducible).
BACKGROUND = "rods/synthesis"


class ChaosError(CocodaError, RuntimeError):
    """The job did not behave as the chaos run requires (a kill that did not kill, a crash, a
    difference between the runs)."""


@dataclasses.dataclass(frozen=True)
class Kill:
    """Kill the job at the ``count``-th hit of ``point`` in the process (``position``: the index
    in the reference trace it stands for; None for the background point)."""

    point: str
    count: int
    position: int | None

    @property
    def spec(self) -> str:
        return f"{self.point}@{self.count}"


# ------------------------------------------------------------------------------------------------
# Pure parts: the plan and the comparison
# ------------------------------------------------------------------------------------------------


def restart_index(trace: Sequence[str], rounds_done: int | None) -> int:
    """The trace position a process resumed from the checkpoint of round ``rounds_done`` starts
    at (``None``: no checkpoint; the job starts over)."""
    if rounds_done is None:
        return 0
    seen = -1
    for i, name in enumerate(trace):
        if name == CHECKPOINT_DONE:
            seen += 1
            if seen == rounds_done:
                return i + 1
    raise ChaosError(f"the reference trace has no checkpoint of round {rounds_done}")


def plan_positions(trace: Sequence[str], kills: int, seed: int, points: Sequence[str] | None = None) -> list[int]:
    """``kills`` distinct positions of the (main-thread) ``trace``, ascending: one random hit of
    each phase first (in :data:`failpoints.POINTS` order, a random subset if there are fewer
    kills than phases), then random extra hits."""
    rng = random.Random(seed)
    wanted = [p for p in failpoints.POINTS if p != BACKGROUND and (points is None or p in points)]
    by_point = {p: [i for i, n in enumerate(trace) if n == p] for p in wanted}
    phases = [p for p in wanted if by_point[p]]
    chosen = {rng.choice(by_point[p]) for p in rng.sample(phases, min(kills, len(phases)))}
    rest = [i for p in phases for i in by_point[p] if i not in chosen]
    chosen |= set(rng.sample(rest, min(max(kills - len(chosen), 0), len(rest))))
    return sorted(chosen)


def kill_at(trace: Sequence[str], position: int, start: int) -> Kill:
    """The kill that stops a process started at trace index ``start`` at ``position``."""
    point = trace[position]
    return Kill(point, sum(1 for n in trace[start:position + 1] if n == point), position)


def with_background_kill(trace: Sequence[str], positions: Sequence[int]) -> list[int | None]:
    """``positions`` with the synthesis kill (``None``) inserted where a synthesis job must run: a
    job planned at an epoch boundary is collected (waited for) at the next one, so a process that
    starts before the second ``rods/saved`` runs one. The kill goes before the first main-thread kill
    past that point (at the end of a run, pending jobs race the process's exit)."""
    saved = [i for i, name in enumerate(trace) if name == "rods/saved"]
    collect_at = saved[1] if len(saved) > 1 else len(trace)
    cut = next((k for k, p in enumerate(positions) if p > collect_at), len(positions))
    return [*positions[:cut], None, *positions[cut:]]


#: The report's and metrics' wall-clock fields (they differ between any two runs), and the host allocator
#: setting they ran under (a launcher's and an in-process run's differ; results do not).
TIMING_KEYS = frozenset({"wall_s", "wall_s_this_process", "seconds", "rollout_s", "update_s",
                         "rollout_tokens_per_s", "train_tokens_per_s", "stage_s", "test_eval_s", "host_malloc"})


def without_timing(value: Any) -> Any:
    """``value`` with every wall-clock field (:data:`TIMING_KEYS`, at any depth) removed."""
    if isinstance(value, dict):
        return {k: without_timing(v) for k, v in value.items() if k not in TIMING_KEYS}
    if isinstance(value, list):
        return [without_timing(v) for v in value]
    return value


def compare_runs(reference: Path, other: Path) -> list[str]:
    """What differs between two finished run directories (empty: nothing): the library JSONs and
    RODS files byte for byte, report.json and metrics.jsonl without wall-clock fields."""
    diffs = []
    for sub in ("library", "rods"):
        ref_files = {p.relative_to(reference): p for p in sorted((reference / sub).rglob("*")) if p.is_file()}
        new_files = {p.relative_to(other): p for p in sorted((other / sub).rglob("*")) if p.is_file()}
        for rel in sorted(set(ref_files) | set(new_files)):
            if rel not in ref_files or rel not in new_files:
                diffs.append(f"{rel}: only in {'the reference' if rel in ref_files else 'the chaos run'}")
            elif ref_files[rel].read_bytes() != new_files[rel].read_bytes():
                diffs.append(f"{rel}: bytes differ")
    ref_report = without_timing(json.loads((reference / "report.json").read_text()))
    new_report = without_timing(json.loads((other / "report.json").read_text()))
    for key in sorted(set(ref_report) | set(new_report)):
        if ref_report.get(key) != new_report.get(key):
            diffs.append(f"report.json[{key!r}] differs")
    ref_metrics = [without_timing(json.loads(l)) for l in (reference / "metrics.jsonl").read_text().splitlines()]
    new_metrics = [without_timing(json.loads(l)) for l in (other / "metrics.jsonl").read_text().splitlines()]
    if ref_metrics != new_metrics:
        diffs.append(f"metrics.jsonl differs ({len(ref_metrics)} vs {len(new_metrics)} records)")
    return diffs


# ------------------------------------------------------------------------------------------------
# The job as a subprocess
# ------------------------------------------------------------------------------------------------


def _job(config_args: Sequence[str], workdir: Path, env: dict[str, str], timeout_s: float) -> int:
    """``launch.coevolve`` on ``workdir``; its exit status (negative: killed by that signal)."""
    cmd = [sys.executable, "-m", "launch.coevolve", *config_args, f"--workdir={workdir}", "--noprogress"]
    log = workdir.with_name(workdir.name + ".console.log")
    with open(log, "ab") as out:
        out.write(f"\n$ {env.get(failpoints.KILL_ENV, '')} {' '.join(cmd)}\n".encode())
        out.flush()
        proc = subprocess.run(cmd, cwd=Path(__file__).resolve().parents[2], env=env, stdout=out, stderr=out,
                              timeout=timeout_s)
    return proc.returncode


def _rounds_checkpointed(workdir: Path) -> int | None:
    """The round of ``workdir``'s newest checkpoint (None: none yet)."""
    from cocoda_jax.runs import rundir
    from cocoda_jax.runs.progress import RunProgress
    latest = rundir.latest_checkpoint(workdir)
    return None if latest is None else RunProgress.from_json(latest.payloads["progress"]).round


def _job_env() -> dict[str, str]:
    """The jobs' environment: this process's, without failpoint settings."""
    return {k: v for k, v in os.environ.items() if k not in (failpoints.KILL_ENV, failpoints.TRACE_ENV)}


def reference_run(config_args: Sequence[str], workdir: str | Path, trace: str | Path, *,
                  timeout_s: float = 1800.0) -> Path:
    """An uninterrupted run of ``launch.coevolve`` in ``workdir`` that records its failpoint hits
    in ``trace``; ChaosError if it fails. Returns ``workdir``."""
    workdir, trace = Path(workdir), Path(trace)
    trace.unlink(missing_ok=True)
    rc = _job(config_args, workdir, {**_job_env(), failpoints.TRACE_ENV: str(trace)}, timeout_s)
    if rc != 0:
        raise ChaosError(f"the reference run failed (exit status {rc}); see {workdir}.console.log")
    return workdir


def run(config_args: Sequence[str], workdir: str | Path, *, kills: int = 6, seed: int = 0,
        points: Sequence[str] | None = None, timeout_s: float = 1800.0, reference: str | Path | None = None,
        trace: str | Path | None = None, log=print) -> dict[str, Any]:
    """The chaos run (module docstring) of ``launch.coevolve`` with ``config_args`` (e.g.
    ``["--config=configs/chaos.py"]``); returns (and writes to ``workdir/chaos.json``) the plan,
    what each kill did and the differences found. ``reference``/``trace``: a finished run of the
    same config and its failpoint trace, used instead of making them (they must have run in this
    process's environment: the jobs run in it). Raises :class:`ChaosError`
    when a run fails or a kill does not kill; differences are returned, not raised."""
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    base_env = _job_env()
    chaos = workdir / "chaos"
    reference = Path(reference) if reference is not None else workdir / "reference"
    trace_file = Path(trace) if trace is not None else workdir / "reference.trace"
    t0 = time.perf_counter()
    if not (reference / "report.json").exists():
        reference_run(config_args, reference, trace_file, timeout_s=timeout_s)
    full_trace = trace_file.read_text().split()
    trace = [n for n in full_trace if n != BACKGROUND]
    log(f"reference: {len(trace)} failpoint hits ({time.perf_counter() - t0:.0f} s)")

    positions = plan_positions(trace, kills, seed, points)
    background = BACKGROUND in full_trace and (points is None or BACKGROUND in points)
    done: list[dict[str, Any]] = []
    for i, position in enumerate(with_background_kill(trace, positions) if background else positions):
        start = restart_index(trace, _rounds_checkpointed(chaos))
        if position is not None and position < start:
            done.append({"position": position, "point": trace[position], "skipped": "before the resume point"})
            continue
        kill = Kill(BACKGROUND, 1, None) if position is None else kill_at(trace, position, start)
        t = time.perf_counter()
        rc = _job(config_args, chaos, {**base_env, failpoints.KILL_ENV: kill.spec}, timeout_s)
        entry = {**dataclasses.asdict(kill), "resumed_at": start, "exit_status": rc,
                 "seconds": round(time.perf_counter() - t, 1)}
        done.append(entry)
        log(f"kill {i + 1}: {kill.spec} (trace position {position}, resumed at {start}) -> exit {rc}")
        if rc == 0 and position is None:  # the background job was never run again: nothing to kill
            entry["skipped"] = "no synthesis job ran"
            continue
        if rc != -signal.SIGKILL:
            raise ChaosError(f"kill {kill.spec} should have ended the job by SIGKILL, got exit status {rc}; "
                             f"see {chaos}.console.log")
    rc = _job(config_args, chaos, base_env, timeout_s)
    if rc != 0:
        raise ChaosError(f"the final resume failed (exit status {rc}); see {chaos}.console.log")
    result = {"config_args": list(config_args), "seed": seed, "reference_hits": len(trace), "kills": done,
              "killed": sum(1 for d in done if d.get("exit_status") == -signal.SIGKILL),
              "phases_killed": sorted({d["point"] for d in done if d.get("exit_status") == -signal.SIGKILL}),
              "differences": compare_runs(reference, chaos), "wall_s": time.perf_counter() - t0}
    (workdir / "chaos.json").write_text(json.dumps(result, indent=2) + "\n")
    return result


__all__ = ["ChaosError", "Kill", "compare_runs", "kill_at", "plan_positions", "reference_run", "restart_index", "run",
           "with_background_kill", "without_timing"]

r"""Throughput of the sandboxed executor against a fresh ``python -c`` per program; prints JSON.

    python -m launch.bench.executor [--programs=4000] [--workers=2] [--peer_programs=40]

Both sides run the same programs against the same tools with the same parallelism (``--workers``
concurrent subprocesses for the peer), and their answers are compared. The sandbox side is measured
on a started pool (start-up is reported separately): batched ``run_many``, and one ``run`` at a time.
"""

from __future__ import annotations

import concurrent.futures
import os
import platform
import random
import statistics
import subprocess
import sys
import time

from absl import app, flags

from cocoda_jax.execution import Sandbox
from launch.output import emit_json

TOOLS = (
    "def add(a: float, b: float) -> float:\n    return a + b\n",
    "def sub(a: float, b: float) -> float:\n    return a - b\n",
    "def mul(a: float, b: float) -> float:\n    return a * b\n",
    "def div(a: float, b: float) -> float:\n    return a / b\n",
    "def percent_of(p: float, x: float) -> float:\n    return mul(p, x) / 100\n",
    "def discount(price: float, pct: float) -> float:\n    return sub(price, percent_of(pct, price))\n",
    "def mean(xs: list[float]) -> float:\n    return div(sum(xs), len(xs))\n",
    "def hypot2(x: float, y: float) -> float:\n    return add(mul(x, x), mul(y, y))\n",
)


def make_programs(n: int, seed: int) -> list[str]:
    """Planner-style straight-line programs: a few tool calls over constants, then ``answer``."""
    rng = random.Random(seed)
    programs = []
    for _ in range(n):
        a, b, c = rng.randint(1, 500), rng.randint(1, 99), rng.randint(1, 50)
        programs.append(
            f"x0 = discount({a}, {b})\n"
            f"x1 = hypot2(x0, {c})\n"
            f"x2 = mean([x0, x1, {a}])\n"
            f"answer = round(add(x2, percent_of({b}, {c})), 6)\n")
    return programs


def peer_run(program: str) -> str:
    """The peer: a fresh interpreter per program, the tools defined in it, the answer printed."""
    code = "".join(TOOLS) + program + "print(repr(answer))\n"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise RuntimeError(f"peer failed: {done.stderr[-500:]}")
    return done.stdout.strip()


_PROGRAMS = flags.DEFINE_integer("programs", 4000, "Programs for the batched sandbox run.")
_SINGLE_PROGRAMS = flags.DEFINE_integer("single_programs", 500, "Programs run one sb.run at a time.")
_PEER_PROGRAMS = flags.DEFINE_integer("peer_programs", 40, "Programs for the python -c peer.")
_WORKERS = flags.DEFINE_integer("workers", 2, "Sandbox workers (and the peer's parallelism).")
_SEED = flags.DEFINE_integer("seed", 0, "Seed of the generated programs.")
_JSON_OUT = flags.DEFINE_string("json_out", None, "Also write the JSON here.")


def run(programs_n: int, single_n: int, peer_n: int, workers: int, seed: int) -> dict:
    """Times the sandbox batched and one run at a time, and the fresh-interpreter peer."""
    programs = make_programs(programs_n, seed)
    t0 = time.perf_counter()
    with Sandbox(workers=workers, timeout_s=30.0) as sb:
        start_s = time.perf_counter() - t0
        sb.run_many(programs[:8], TOOLS)  # warm: each worker compiles the library once

        t0 = time.perf_counter()
        results = sb.run_many(programs, TOOLS)
        batched_s = time.perf_counter() - t0
        failed = [r.error for r in results if not r.ok]
        if failed:
            raise SystemExit(f"{len(failed)} sandbox runs failed, e.g. {failed[0]}")

        single = programs[:single_n]
        latencies = []
        for program in single:
            t1 = time.perf_counter()
            sb.run(program, TOOLS)
            latencies.append(time.perf_counter() - t1)
        containment = dict(sb.containment)

    peer_programs = programs[:peer_n]
    t0 = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
        peer_answers = list(pool.map(peer_run, peer_programs))
    peer_s = time.perf_counter() - t0
    mismatches = sum(answer != repr(r.value) for answer, r in zip(peer_answers, results))

    sandbox_rate = len(programs) / batched_s
    peer_rate = len(peer_programs) / peer_s
    report = {
        "benchmark": "executor",
        "programs": len(programs),
        "workers": workers,
        "sandbox_start_s": round(start_s, 4),
        "sandbox_batched_programs_per_s": round(sandbox_rate, 1),
        "sandbox_single_run_programs_per_s": round(len(single) / sum(latencies), 1),
        "sandbox_single_run_latency_ms_median": round(1000 * statistics.median(latencies), 3),
        "peer": "fresh `python -c` per program, tools defined in it, same parallelism",
        "peer_programs": len(peer_programs),
        "peer_programs_per_s": round(peer_rate, 2),
        "ratio_batched_vs_peer": round(sandbox_rate / peer_rate, 1),
        "ratio_single_run_vs_peer": round((len(single) / sum(latencies)) / peer_rate, 1),
        "answers_equal_to_peer": mismatches == 0,
        "containment": containment,
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
    }
    return report


def main(argv: list[str]) -> None:
    del argv
    emit_json(run(_PROGRAMS.value, _SINGLE_PROGRAMS.value, _PEER_PROGRAMS.value, _WORKERS.value, _SEED.value),
              _JSON_OUT.value)


if __name__ == "__main__":
    app.run(main)

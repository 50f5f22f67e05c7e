r"""Benchmark of loading a library JSON: wall and CPU seconds per size, and where the time goes.

    python -m launch.bench_library_load [--load_sizes=1600,6400,25600,102400] [--profile_size=6400]

For each size it writes the seeded synthetic library of :mod:`cocoda_jax.retrieval.synthetic_library`
(primitives and composites up to depth 8) as JSON and times ``LibrarySnapshot.from_json`` on it: the
load re-derives every tool from its source (signature, id, call edges, depth, flat size) and re-runs
INSERTTOOL's static checks, so its cost is what a resumed run, a report or the retrieval benchmark
pays per tool. The loaded snapshot must write the same text back (checked, and said in the JSON).
With ``--profile_size`` it also runs cProfile on that size and lists the functions with the most
cumulative time. There is no peer: no other library stores tools this way. Prints one JSON object.
"""

from __future__ import annotations

import cProfile
import io
import json
import os
import platform
import pstats
import time

from absl import app, flags

from cocoda_jax.library import LibrarySnapshot
from cocoda_jax.retrieval import synthetic_library

# flag names unique among the launchers: tests import several of them into one process
_SIZES = flags.DEFINE_list("load_sizes", ["1600", "6400", "25600"], "Library sizes (tools).")
_PROFILE = flags.DEFINE_integer("profile_size", 0, "Profile the load at this size too (0: no profile).")
_SEED = flags.DEFINE_integer("library_seed", 0, "Seed of the synthetic libraries.")


def library_text(size: int, seed: int = 0) -> str:
    """The synthetic library of ``size`` tools as the JSON a run writes."""
    return synthetic_library.library_json(synthetic_library.generate(size, seed))


def bench_size(size: int, seed: int = 0) -> dict:
    """Load time of the ``size``-tool library, per tool, and whether it writes back the same text."""
    text = library_text(size, seed)
    wall, cpu = time.perf_counter(), time.process_time()
    snap = LibrarySnapshot.from_json(text)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return {"size": size, "tools": len(snap), "json_mb": round(len(text) / 1e6, 2), "load_s": round(wall, 2),
            "load_cpu_s": round(cpu, 2), "ms_per_tool": round(1e3 * wall / len(snap), 3),
            "round_trip_equal": snap.to_json() == text}


def profile_load(size: int, seed: int = 0, top: int = 15) -> list[dict]:
    """The ``top`` functions by cumulative time while loading the ``size``-tool library."""
    text = library_text(size, seed)
    profiler = cProfile.Profile()
    profiler.runcall(LibrarySnapshot.from_json, text)
    stats = pstats.Stats(profiler, stream=io.StringIO())
    rows = []
    for (filename, line, name), (_, ncalls, _, cumtime, _) in stats.stats.items():
        rows.append({"function": f"{os.path.relpath(filename) if filename.startswith('/') else filename}:{line}"
                                 f"({name})", "calls": ncalls, "cumulative_s": round(cumtime, 3)})
    rows.sort(key=lambda r: -r["cumulative_s"])
    return rows[:top]


def main(argv) -> None:
    del argv
    out = {"bench": "library_load", "python": platform.python_version(), "cpus": os.cpu_count(),
           "load_average_1m": round(os.getloadavg()[0], 2), "seed": _SEED.value,
           "sizes": [bench_size(int(n), _SEED.value) for n in _SIZES.value]}
    if _PROFILE.value:
        out["profile"] = {"size": _PROFILE.value, "top_cumulative": profile_load(_PROFILE.value, _SEED.value)}
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    app.run(main)

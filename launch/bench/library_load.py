r"""Benchmark of loading a library JSON: wall and CPU seconds per size, and where the time goes.

    python -m launch.bench.library_load [--load_sizes=1600,6400,25600,102400] [--profile_size=6400]

For each size it writes the seeded synthetic library of :mod:`cocoda_jax.retrieval.synthetic_library`
(primitives and composites up to depth 8) as JSON and times two loads with ``LibrarySnapshot.from_json``:

* ``rederive``: the generator's file carries no digests (format ``/1``), so every tool is rebuilt from
  its source (signature, id, call edges) and re-runs INSERTTOOL's static checks: the cost of loading
  a file from elsewhere (or any file with ``rederive=True``);
* ``vouched``: the file that snapshot writes back (format ``/2``, a digest per tool), which is what a
  resumed run, a report or the retrieval benchmark reads: structure is checked for every tool, the
  facts the digest vouches for are taken as written (see :mod:`cocoda_jax.library.serialize`).

Both loads must give the same snapshot, and the second must write its text back unchanged (checked,
and said in the JSON). With ``--profile_size`` it also runs cProfile on the vouched load of that
size and lists the functions with the most cumulative time. There is no peer: no other library
stores tools this way. Prints one JSON object.
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
_SIZES = flags.DEFINE_list("load_sizes", ["1600", "6400", "25600", "102400"], "Library sizes (tools).")
_PROFILE = flags.DEFINE_integer("profile_size", 0, "Profile the load at this size too (0: no profile).")
_SEED = flags.DEFINE_integer("library_seed", 0, "Seed of the synthetic libraries.")


def library_text(size: int, seed: int = 0) -> str:
    """The synthetic library of ``size`` tools as the JSON a run writes."""
    return synthetic_library.library_json(synthetic_library.generate(size, seed))


def _timed_load(text: str) -> tuple[LibrarySnapshot, dict]:
    wall, cpu = time.perf_counter(), time.process_time()
    snap = LibrarySnapshot.from_json(text)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return snap, {"load_s": round(wall, 3), "load_cpu_s": round(cpu, 3),
                  "ms_per_tool": round(1e3 * wall / max(len(snap), 1), 4)}


def bench_size(size: int, seed: int = 0) -> dict:
    """Both load times of the ``size``-tool library, per tool, and whether they agree."""
    generated = library_text(size, seed)
    rederived, rederive = _timed_load(generated)
    written = rederived.to_json()
    vouched_snap, vouched = _timed_load(written)
    return {"size": size, "tools": len(vouched_snap), "json_mb": round(len(written) / 1e6, 2),
            "rederive": rederive, "vouched": vouched,
            "speedup": round(rederive["load_s"] / max(vouched["load_s"], 1e-9), 1),
            "same_snapshot": vouched_snap == rederived, "round_trip_equal": vouched_snap.to_json() == written}


def profile_load(size: int, seed: int = 0, top: int = 15) -> list[dict]:
    """The ``top`` functions by cumulative time while loading the ``size``-tool library as a run
    writes it (the vouched path)."""
    text = LibrarySnapshot.from_json(library_text(size, seed)).to_json()
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

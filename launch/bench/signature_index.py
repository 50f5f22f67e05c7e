r"""Benchmark of the signature index: build time and lookup latency at growing library sizes.

    python -m launch.bench.signature_index [--sizes=1000,10000,100000] [--queries=200] [--limit=10]

For each size it builds a seeded random library (:mod:`cocoda_jax.types.synthetic`), times
``SignatureIndex.build``, one incremental ``add`` on the built index, a chain of ``--adds`` adds (each
on the index the previous one returned: the amortised cost per call, as a library snapshot pays it),
and ``lookup`` for planner-like queries (derived from library signatures, plus some unrelated random
ones). The peer is the linear scan (:func:`cocoda_jax.types.linear_lookup`: the same cost function on
every signature), run on a subset of the same queries in the same process; the two answers must
agree, and the JSON says so.
Prints one JSON object.
"""

from __future__ import annotations

import json
import os
import platform
import random
import statistics
import time

from absl import app, flags

from cocoda_jax.types import ANY, SignatureIndex, TVar, free_vars, linear_lookup
from cocoda_jax.types.synthetic import query_from, random_library, random_signature

_SIZES = flags.DEFINE_list("sizes", ["1000", "10000", "100000"], "Library sizes.")
_QUERIES = flags.DEFINE_integer("queries", 100, "Index lookups timed per size.")
_PEER_BUDGET = flags.DEFINE_float("peer_seconds", 4.0, "Rough CPU-time budget of the linear-scan peer per size.")
_LIMIT = flags.DEFINE_integer("limit", 10, "Results per lookup.")
_SEED = flags.DEFINE_integer("seed", 0, "Seed of the libraries and queries.")
_ADDS = flags.DEFINE_integer("adds", 1000, "Chained adds timed per size (amortised cost per add).")


def _us(seconds: list[float]) -> dict:
    xs = sorted(s * 1e6 for s in seconds)
    p95 = xs[min(len(xs) - 1, int(round(0.95 * (len(xs) - 1))))]
    return {"median_us": round(statistics.median(xs), 1), "p95_us": round(p95, 1), "n": len(xs)}


def _timed(fn, *args):
    """Runs ``fn(*args)``: (result, wall seconds, CPU seconds of this process). CPU time is shown
    next to wall time because a shared machine's load inflates wall time, not CPU time."""
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn(*args)
    return out, time.perf_counter() - wall, time.process_time() - cpu


def query_kind(query) -> str:
    """The lookup's known hard cases first: ``shared`` (a type variable in two places among the
    arguments and the result), ``bare`` (an argument that is a bare variable or ``Any``), else ``plain``."""
    places = [free_vars(p.type) for p in query.params] + [free_vars(query.result)]
    if any(places[i] & places[j] for i in range(len(places)) for j in range(i + 1, len(places))):
        return "shared"
    if any(isinstance(p.type, TVar) or p.type is ANY for p in query.params):
        return "bare"
    return "plain"


def _queries(library: dict, count: int, rng: random.Random) -> list:
    names = sorted(library)
    return [query_from(library[rng.choice(names)], rng) if rng.random() < 0.8 else random_signature(rng)
            for _ in range(count)]


def _chained_adds(index: SignatureIndex, signatures: list) -> SignatureIndex:
    for i, sig in enumerate(signatures):
        index = index.add(f"tool_added_{i:06d}", sig)
    return index


def bench_size(size: int, n_queries: int, peer_budget_s: float, limit: int, seed: int, n_adds: int = 1000) -> dict:
    library = random_library(size, seed=seed + size)
    index, build_wall, build_cpu = _timed(SignatureIndex.build, library)

    rng = random.Random(seed + 7 * size)
    _, add_wall, _ = _timed(index.add, "tool_extra", random_signature(rng))
    extra = [random_signature(random.Random(seed + 11 * size + i)) for i in range(n_adds)]
    grown, adds_wall, adds_cpu = _timed(_chained_adds, index, extra)
    assert len(grown) == size + n_adds and len(index) == size  # the built index is unchanged

    queries = _queries(library, n_queries, rng)
    index.lookup(queries[0], limit)  # first call: imports and caches warm
    wall, cpu, matched, bounded = [], [], [], []
    for q in queries:
        (_, stats), w, c = _timed(index.lookup_with_stats, q, limit)
        wall.append(w)
        cpu.append(c)
        matched.append(stats["full_matches"])
        bounded.append(stats["bounded_candidates"])

    # The peer: linear scans of the first queries until the budget is used (at least 3 queries).
    peer_wall, peer_cpu, agree = [], [], True
    for q in queries:
        expected, w, c = _timed(linear_lookup, q, library, limit)
        peer_wall.append(w)
        peer_cpu.append(c)
        agree = agree and index.lookup(q, limit) == expected
        if len(peer_cpu) >= 3 and sum(peer_cpu) > peer_budget_s:
            break
    k = len(peer_wall)
    same_wall, same_cpu = _us(wall[:k]), _us(cpu[:k])
    peer_w, peer_c = _us(peer_wall), _us(peer_cpu)
    return {
        "signatures": size,
        "build_s": round(build_wall, 3),
        "build_cpu_s": round(build_cpu, 3),
        "add_one_ms": round(add_wall * 1e3, 3),
        "add_amortised_us": round(adds_wall / max(n_adds, 1) * 1e6, 1),
        "add_amortised_cpu_us": round(adds_cpu / max(n_adds, 1) * 1e6, 1),
        "adds_chained": n_adds,
        "lookup": _us(wall),
        "lookup_cpu": _us(cpu),
        "lookup_cpu_by_kind": {kind: _us([c for c, q in zip(cpu, queries) if query_kind(q) == kind])
                               for kind in sorted({query_kind(q) for q in queries})},
        "full_matches_per_lookup": {"median": statistics.median(matched), "max": max(matched)},
        "bounded_candidates_per_lookup": {"median": statistics.median(bounded), "max": max(bounded)},
        "linear_scan_peer": peer_w,
        "linear_scan_peer_cpu": peer_c,
        "speedup_median": round(peer_w["median_us"] / max(same_wall["median_us"], 1e-3), 1),
        "speedup_median_cpu": round(peer_c["median_us"] / max(same_cpu["median_us"], 1e-3), 1),
        "peer_queries_agree": agree,
    }


def main(argv):
    del argv
    sizes = [int(s) for s in _SIZES.value]
    out = {
        "benchmark": "signature_index",
        "python": platform.python_version(),
        "limit": _LIMIT.value,
        "load_average_1m": round(os.getloadavg()[0], 2),
        "note": "lookup = SignatureIndex.lookup (exact top-k); peer = linear_lookup over all signatures, "
                "same queries (a prefix of them), same process; speedup = peer median / index median on "
                "that prefix; *_cpu = process CPU time (robust to a loaded machine); lookup_cpu_by_kind: "
                "shared = a type variable in two places of the query, bare = a bare variable or Any argument; "
                "add_amortised_us = mean wall time per add over a chain of adds on the built index",
        "results": [bench_size(s, _QUERIES.value, _PEER_BUDGET.value, _LIMIT.value, _SEED.value, _ADDS.value)
                    for s in sizes],
    }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    app.run(main)

"""Pools the sweep's runs (runs/SPLIT_domainD_SUBGOALS_wW.json) per candidate: all-gold-found over every
question, per domain, and a 95% t interval with the domains as units. Prints JSON, best candidate first.

    python docs/results/retrieval_2026-12-07/summarise.py SPLIT
"""
import collections
import json
import pathlib
import re
import statistics
import sys

from scipy import stats

ROWS = {"ablate_no_climb_descend": "no_climb_descend", "typed_dag_ranked": "climb_descend"}
split = sys.argv[1]
here = pathlib.Path(__file__).parent
per = collections.defaultdict(dict)
for f in sorted((here / "runs").glob(f"{split}_domain*_*_w*.json")):
    d, sg, w = re.match(rf"{split}_domain(\d+)_(\w+?)_w([\d.]+)\.json", f.name).groups()
    run = json.loads(f.read_text())
    assert run["split"] == split and run["heldout"] == "wording" and run["k"] == 8 and run["subgoals"] == sg
    for row, moves in ROWS.items():
        per[(sg, moves, float(w))][int(d)] = (run["methods"][row]["all_gold_found"], run["queries"])
out = []
for (sg, moves, w), by_domain in per.items():
    vals = [v for v, _ in by_domain.values()]
    n = sum(q for _, q in by_domain.values())
    pooled = sum(v * q for v, q in by_domain.values()) / n
    mean = sum(vals) / len(vals)
    half = (stats.t.ppf(0.975, len(vals) - 1) * statistics.stdev(vals) / len(vals) ** 0.5) if len(vals) > 1 else None
    out.append({"subgoals": sg, "dag_moves": moves, "encoder_weight": w, "pooled": round(pooled, 4),
                "questions": n, "domains": len(vals),
                "interval_95_domains_as_units": None if half is None else [round(mean - half, 4), round(mean + half, 4)],
                "per_domain": {str(k): round(v, 4) for k, (v, _) in sorted(by_domain.items())}})
out.sort(key=lambda r: -r["pooled"])
print(json.dumps({"split": split, "candidates": out}, indent=1))

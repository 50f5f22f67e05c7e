"""Pools the sweep's runs per candidate: all-gold-found over every question, per domain, and a 95% t interval
with the domains as units. Prints JSON, best candidate first.

    python docs/results/retrieval_2026-12-07/summarise.py val    # runs/ and shapes/: val_domainD_SUBGOALS_wW.json
    python docs/results/retrieval_2026-12-07/summarise.py test   # test/VARIANT_domainD_SUBGOALS.json

Each run gives two candidates: the ranked cascade without climb/descend (row `ablate_no_climb_descend`) and with
them (`typed_dag_ranked`); the test runs also give `flat_ranker` (the same ranker, flat) and `typed_dag` (the
prompt's cascade: BM25 and the usage votes).
"""
import collections
import json
import pathlib
import re
import statistics
import sys

from scipy import stats

ROWS = {"ablate_no_climb_descend": "no_climb_descend", "typed_dag_ranked": "climb_descend"}
TEST_ROWS = {**ROWS, "flat_ranker": "flat_ranker", "typed_dag": "typed_dag (bm25 + votes)"}
split = sys.argv[1]
here = pathlib.Path(__file__).parent
per = collections.defaultdict(dict)
if split == "val":
    files = [(f, re.match(r"val_domain(\d+)_(\w+?)_w([\d.]+)\.json", f.name).groups())
             for f in sorted((here / "runs").glob("val_domain*_*_w*.json"))]
    files += [(f, (d, sg, f"{w} + value shapes")) for f in sorted((here / "shapes").glob("val_domain*_*_w*.json"))
              for d, sg, w in [re.match(r"val_domain(\d+)_(\w+?)_w([\d.]+)\.json", f.name).groups()]]
    rows = ROWS
else:
    files = [(f, re.match(r"(\w+?)_domain(\d+)_(\w+)\.json", f.name).groups())
             for f in sorted((here / "test").glob("*.json"))]
    files = [(f, (d, sg, v)) for f, (v, d, sg) in files]
    rows = TEST_ROWS
for f, (d, sg, variant) in files:
    run = json.loads(f.read_text())
    assert run["split"] == split and run["heldout"] == "wording" and run["k"] == 8 and run["subgoals"] == sg
    for row, name in rows.items():
        per[(sg, name, variant)][int(d)] = (run["methods"][row]["all_gold_found"], run["queries"])
out = []
for (sg, name, variant), by_domain in per.items():
    vals = [v for v, _ in by_domain.values()]
    n = sum(q for _, q in by_domain.values())
    pooled = sum(v * q for v, q in by_domain.values()) / n
    mean = sum(vals) / len(vals)
    half = stats.t.ppf(0.975, len(vals) - 1) * statistics.stdev(vals) / len(vals) ** 0.5 if len(vals) > 1 else None
    out.append({"subgoals": sg, "row": name, ("encoder_weight" if split == "val" else "variant"): variant,
                "pooled": round(pooled, 4), "questions": n, "domains": len(vals),
                "interval_95_domains_as_units": None if half is None else [round(mean - h, 4) for h in (half, -half)],
                "per_domain": {str(k): round(v, 4) for k, (v, _) in sorted(by_domain.items())}})
out.sort(key=lambda r: -r["pooled"])


def paired(a: dict, b: dict) -> dict:
    """a - b over the domains both ran, with a 95% t interval (domains as units)."""
    diffs = [a[d][0] - b[d][0] for d in sorted(a) if d in b]
    mean = sum(diffs) / len(diffs)
    half = stats.t.ppf(0.975, len(diffs) - 1) * statistics.stdev(diffs) / len(diffs) ** 0.5
    return {"delta": round(mean, 4), "interval_95_domains_as_units": [round(mean - half, 4), round(mean + half, 4)],
            "per_domain": [round(x, 4) for x in diffs]}


result = {"split": split, "candidates": out}
if split == "test":  # the tested setting against the comparisons, paired by domain
    chosen = per[("question", "no_climb_descend", "shapes")]
    result["chosen_minus"] = {f"{v} {sg}": paired(chosen, per[(sg, "no_climb_descend", v)])
                              for v, sg in (("plain", "question"), ("plain", "clauses"))}
    result["chosen_minus"]["shapes flat_ranker"] = paired(chosen, per[("question", "flat_ranker", "shapes")])
print(json.dumps(result, indent=1))

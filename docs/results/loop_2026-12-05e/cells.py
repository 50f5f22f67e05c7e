"""Per-run figures of the cells run outside the study's table: the null arm's stream with the growth
rule off (``growth_tolerant_replicate.json``) and four streams of the main job at seed 13
(``seed13_streams.json``), read from the cells' report.json files.

    python docs/results/loop_2026-12-05e/cells.py growth /tmp/study46 /tmp/study45r /tmp/study43 > growth_tolerant_replicate.json
    python docs/results/loop_2026-12-05e/cells.py streams /tmp/study43 /tmp/study45r /tmp/study47_r2 /tmp/study47_r3 > seed13_streams.json
"""

import json
import sys


def report(cell: str) -> dict:
    with open(f"{cell}/report.json") as f:
        return json.load(f)


def categories(r: dict) -> dict:
    return {c: round(v["accuracy"], 4) for c, v in r["test_per_category"].items()}


def growth(tolerant: str, replicate: str, study: str) -> dict:
    cells = {}
    for s in (13, 42):
        r = report(f"{tolerant}/cocoda_replicate/seed_{s}")
        cells[s] = {"test_accuracy": r["test_accuracy"],
                    "decisions": [{k: d[k] for k in ("round", "outcome", "reason", "reference", "reward")}
                                  for d in r["decisions"]],
                    "test_per_category": categories(r), "composites": r["library"]["composites"],
                    "dev_accuracy_per_round": r["dev_accuracy_per_round"],
                    "replicate_growth_must_pay_test_accuracy": report(f"{replicate}/cocoda_replicate/seed_{s}")["test_accuracy"],
                    "cocoda_test_accuracy": report(f"{study}/cocoda/seed_{s}")["test_accuracy"]}
    return {"what": "cocoda_replicate (coevolve.replicate=1) with coevolve.acceptance.growth_must_pay=False, seeds 13 "
                    "and 42; beside it the same stream with the rule (study45r) and cocoda", "cells": cells}


def streams(study: str, replicate: str, r2: str, r3: str) -> dict:
    cells = {"0 (cocoda)": f"{study}/cocoda/seed_13", "1 (cocoda_replicate)": f"{replicate}/cocoda_replicate/seed_13",
             "2": f"{r2}/cocoda/seed_13", "3": f"{r3}/cocoda/seed_13"}
    rows = {}
    for name, cell in cells.items():
        r = report(cell)
        rows[name] = {"test_accuracy": r["test_accuracy"], "decisions": [d["outcome"] for d in r["decisions"]],
                      "test_per_category": categories(r), "composites": r["library"]["composites"],
                      "dev_accuracy_per_round": r["dev_accuracy_per_round"]}
    return {"what": "the main job at seed 13 under four random streams of its rounds (coevolve.replicate 0-3), the same "
                    "stages 1-2; sft_only at seed 13 for reference",
            "sft_only_test_accuracy": report(f"{study}/sft_only/seed_13")["test_accuracy"], "streams": rows}


if __name__ == "__main__":
    what, *dirs = sys.argv[1:]
    print(json.dumps({"growth": growth, "streams": streams}[what](*dirs), indent=1))

"""Each cell of this directory's two-stream study beside the same cell of the previous one-stream study
(docs/results/loop_2026-12-05e, run on another x86-64 machine under the default, host-dependent numerics).

    python docs/results/loop_2026-12-06/cross_machine.py /tmp/s_two > cross_machine.json

Prints JSON: per cell (arm, seed), the test accuracy here and there, with the SFT planner's validation accuracy
and the accepted rounds here.
"""

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
BEFORE = HERE.parent / "loop_2026-12-05e" / "study" / "study.json"
# the earlier study's cells and their names there (cocoda@1 is the null arm's cell, config for config)
PAIRS = {"cocoda": "cocoda", "cocoda@1": "cocoda_replicate", "sft_only": "sft_only", "no_ctd": "no_ctd"}


def main(study_dir: str) -> None:
    before = json.loads(BEFORE.read_text())
    seeds = before["seeds"]
    rows = []
    for cell, old in PAIRS.items():
        for i, seed in enumerate(seeds):
            report = Path(study_dir) / cell / f"seed_{seed}" / "report.json"
            if not report.exists():
                continue
            now = json.loads(report.read_text())
            rows.append({"cell": f"{cell}/seed_{seed}", "test_acc_here": now["test_accuracy"],
                         "test_acc_before": before["arms"][old]["per_seed"][i],
                         "sft_val_here": now["accuracy"]["sft"], "accepted_rounds_here": now.get("accepted_rounds")})
    print(json.dumps({"before": str(BEFORE.relative_to(HERE.parent.parent.parent)), "cells": rows}, indent=1))


if __name__ == "__main__":
    main(sys.argv[1])

"""``python vs_reference.py STUDY_DIR REF ARM[,ARM...]``: each arm against another reference than the study's.

The study's tables give every arm's delta against ``cocoda``; the goal of the rounds is stated against
``sft_only``. Per arm: its test accuracy, and ``arm - REF`` on the same (seed, task) pairs with the study's
paired bootstrap interval (seeds, then tasks) and the Student t interval over the per-seed deltas. An arm's
streams (``ARM``, ``ARM@1``, ...: cells that ran the rounds again) are averaged per task, as the study does.
Prints JSON.
"""

import json
import sys
from pathlib import Path

import numpy as np

from cocoda_jax.study import stats


def outcomes(study: Path, arm: str) -> dict[int, dict[str, float]]:
    """seed -> task -> the mean outcome over the arm's streams that finished at that seed."""
    per_seed: dict[int, list[dict[str, float]]] = {}
    for cells in [study / arm, *sorted(study.glob(f"{arm}@*"))]:
        for cell in cells.glob("seed_*"):
            if (cell / "report.json").exists():
                report = json.loads((cell / "report.json").read_text())
                per_seed.setdefault(int(cell.name.split("_")[1]), []).append(report["test_outcomes"])
    return {s: {t: float(np.mean([run[t] for run in runs])) for t in runs[0]} for s, runs in sorted(per_seed.items())}


def main(study: str, reference: str, arms: str) -> None:
    root = Path(study)
    ref = outcomes(root, reference)
    out = {}
    for arm in arms.split(","):
        mine = outcomes(root, arm)
        seeds = sorted(set(mine) & set(ref))
        per_seed = [float(np.mean([mine[s][t] - ref[s][t] for t in ref[s]])) for s in seeds]
        delta = stats.paired_delta({s: mine[s] for s in seeds}, {s: ref[s] for s in seeds}, seeds)
        accuracy = float(np.mean([np.mean(list(mine[s].values())) for s in seeds]))
        out[arm] = {"seeds": seeds, "streams": [len(list(root.glob(f"{arm}@*/seed_{s}/report.json"))) + 1 for s in seeds],
                    "accuracy": round(accuracy, 4), f"delta_vs_{reference}": round(delta.point, 4),
                    "ci95": [round(delta.lo, 4), round(delta.hi, 4)], "per_seed_delta": [round(d, 4) for d in per_seed],
                    "seeds_as_units_t95": [round(x, 4) for x in stats.seed_t_interval(per_seed) or []]}
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main(*sys.argv[1:4])

"""The rule of this folder's README, read from a study's cells: per arm and seed the final dev and validation
accuracy and the rounds' seconds, their means over the seeds, and whether `short_refresh` meets each clause.

    python docs/results/refresh_2026-12-07/rule.py /tmp/study_refresh
"""
import json
import pathlib
import sys

ARMS, SEEDS = ("cocoda", "short_refresh"), (13, 42, 2026)


def cell(study: pathlib.Path, arm: str, seed: int) -> dict:
    report = json.loads((study / arm / f"seed_{seed}" / "report.json").read_text())
    rounds_s = sum(sum(r["stage_s"].values()) for r in report["per_round"] if r.get("round", 0) > 0)
    return {"dev": report["dev_accuracy_per_round"][-1], "val": report["accuracy"]["final"], "rounds_s": rounds_s,
            "decisions": [r.get("outcome") for r in report["per_round"] if r.get("round", 0) > 0],
            "test": report["test_accuracy"]}


def main(study: pathlib.Path) -> None:
    cells = {arm: {seed: cell(study, arm, seed) for seed in SEEDS} for arm in ARMS}
    mean = {arm: {k: sum(c[k] for c in cells[arm].values()) / len(SEEDS) for k in ("dev", "val", "rounds_s")}
            for arm in ARMS}
    for arm in ARMS:
        for seed, c in cells[arm].items():
            print(arm, seed, {k: (round(v, 4) if isinstance(v, float) else v) for k, v in c.items() if k != "test"})
        print(arm, "mean", {k: round(v, 4) for k, v in mean[arm].items()})
    a, b = mean["short_refresh"], mean["cocoda"]
    clauses = {"dev >= cocoda - 0.010": a["dev"] >= b["dev"] - 0.010,
               "val >= cocoda - 0.010": a["val"] >= b["val"] - 0.010,
               "rounds_s <= 0.85 x cocoda": a["rounds_s"] <= 0.85 * b["rounds_s"]}
    print(json.dumps({"clauses": clauses, "short_refresh becomes the default": all(clauses.values())}, indent=1))


if __name__ == "__main__":
    main(pathlib.Path(sys.argv[1]))

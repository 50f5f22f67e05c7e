"""What the rounds did, per study cell: ``python rounds_of.py STUDY_DIR ARM[,ARM...] > rounds.json``.

For each cell ``STUDY_DIR/<arm>/seed_<s>/report.json`` of the named arms (``cocoda@1``: the second stream),
one line per round (the decision, validation and dev accuracy, the search's tasks / rollouts / solved, the
uniform-group share, RODS's draws per region, the new demonstrations, the stage seconds) and one per cell
(test accuracy per category).
"""

import json
import sys
from pathlib import Path


def rounds_of(cell: Path, arm: str, seed: int) -> list[dict]:
    report = json.loads((cell / "report.json").read_text())
    out = []
    for rec in report["per_round"][1:]:  # per_round[0]: the stage-2 planner
        mech = rec.get("mechanism") or {}
        out.append({"arm": arm, "seed": seed, "round": rec["round"], "outcome": rec["outcome"],
                    "val": rec["val_accuracy"], "dev": rec.get("dev_accuracy"), "explore": mech.get("explore"),
                    "uniform_group_share": mech.get("uniform_group_share"),
                    "rods_draws_by_region": mech.get("rods_draws_by_region"),
                    "new_demonstrations": mech.get("new_demonstrations"),
                    "stage_s": {k: round(v, 1) for k, v in sorted((rec.get("stage_s") or {}).items())}})
    out.append({"arm": arm, "seed": seed, "test": report["test_accuracy"],
                "per_category": report["test_per_category"]})
    return out


def main(study: str, arms: str) -> None:
    lines = []
    for arm in arms.split(","):
        for cell in sorted((Path(study) / arm).glob("seed_*"), key=lambda p: int(p.name.split("_")[1])):
            if (cell / "report.json").exists():
                lines += rounds_of(cell, arm, int(cell.name.split("_")[1]))
    print(json.dumps(lines, indent=1))


if __name__ == "__main__":
    main(*sys.argv[1:3])

"""Per finished cell of a study directory: what its rounds did.

* ``mined_in_rounds_kept``: composites inserted by a round >= 1 that the final library keeps;
  ``called_on_test``: how many of those the test rollouts call (``test_calls``: the calls of each);
* ``mechanism``: per round, GRPO's uniform-group share, entropy, summed update norm and RODS's draws by region;
* ``rods_redraws``: from the last saved RODS tracker, the tasks with a group whose rewards differed (a
  boundary observation) and how many of them were drawn again after it.

    python docs/results/loop_2026-12-06b/cells.py STUDY_DIR [ARM ...] > cells.json
"""

import json
import sys
from pathlib import Path

from cocoda_jax.study import rounds


def cell_figures(report: dict) -> dict:
    called = rounds.kept_round_composites(report)
    figures = rounds.round_composites(report)
    return {"test_accuracy": report["test_accuracy"], "mined_in_rounds_kept": figures["kept"],
            "called_on_test": figures["called_on_test"], "test_calls": called,
            "outcomes": [rec.get("outcome") for rec in report["per_round"][1:]],
            "mechanism": rounds.mechanism_by_round([report])}


def rods_redraws(cell: Path) -> dict:
    trackers = sorted(cell.glob("rods/tracker_*.json"))
    if not trackers:
        return {}
    tasks = json.loads(trackers[-1].read_text())["tasks"]  # per task: groups = [epoch, size, mean, variance]
    mixed = [t for t, v in tasks.items() if any(g[3] > 0 for g in v["groups"])]
    again = [t for t in mixed if any(g[3] > 0 for g in tasks[t]["groups"][:-1])]
    return {"tracked": len(tasks), "with_a_mixed_group": len(mixed), "drawn_again_after_one": len(again),
            "drawn_twice_or_more": sum(1 for v in tasks.values() if v["total_groups"] >= 2)}


def main(study: Path, arms: list[str]) -> dict:
    out = {}
    for rep in sorted(study.glob("*/seed_*/report.json")):
        arm = rep.parent.parent.name
        if arms and arm.split("@")[0] not in arms:
            continue
        out[f"{arm}/{rep.parent.name}"] = {**cell_figures(json.loads(rep.read_text())),
                                           "rods_redraws": rods_redraws(rep.parent)}
    return out


if __name__ == "__main__":
    print(json.dumps(main(Path(sys.argv[1]), sys.argv[2:]), indent=1, sort_keys=True))

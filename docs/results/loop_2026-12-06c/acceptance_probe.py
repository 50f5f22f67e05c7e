"""Does conservative acceptance pay where it refused? ``no_acceptance``'s second stream at the seeds where
``cocoda``'s second stream refused a round's grown library (13 and 42), each from a copy of the same finished
stages 1-2, scored paired against ``cocoda@1`` on the same 1,000 test tasks.

    python docs/results/loop_2026-12-06c/acceptance_probe.py run PREFIX_ROOT OUT SEED   # one cell (a core each)
    python docs/results/loop_2026-12-06c/acceptance_probe.py compare OUT COCODA_STUDY > acceptance_probe.json

PREFIX_ROOT holds ``seed_S`` (a study's finished ``_prefix/ARM``); COCODA_STUDY the study with ``cocoda@1``.
"""

import json
import shutil
import sys
from pathlib import Path

from cocoda_jax.study import arms as A
from cocoda_jax.study import run as R
from cocoda_jax.study import stats
from configs import study as study_config

ARM = "no_acceptance@1"


def run_cell(prefix_root: Path, out: Path, seed: int) -> None:
    cdir = R.cell_dir(out, ARM, seed)
    if not (cdir / "report.json").exists():
        if not cdir.exists():  # a copy of the finished stages 1-2, as the study's shared prefixes are copied
            src = prefix_root / f"seed_{seed}"
            shutil.copytree(src, cdir, ignore=shutil.ignore_patterns("logs", "report.json", "report.html"))
            (cdir / R.PREFIX_MARK).write_text(json.dumps({"prefix": f"copied from {src}", "saved_under": "sft_only"}))
        config = A.cell_config(study_config.get_config("default").run, A.cell_arm(ARM), seed)
        R._coevolve_runner(config, cdir, allow_config_change=True)


def compare(out: Path, cocoda_study: Path) -> dict:
    seeds = sorted(int(p.name.split("_")[1]) for p in (out / ARM).glob("seed_*") if (p / "report.json").exists())
    reports = {(name, s): json.loads((R.cell_dir(d, name, s) / "report.json").read_text())
               for name, d in ((ARM, out), ("cocoda@1", cocoda_study)) for s in seeds}
    arm = {s: {k: int(v) for k, v in reports[(ARM, s)]["test_outcomes"].items()} for s in seeds}
    ref = {s: {k: int(v) for k, v in reports[("cocoda@1", s)]["test_outcomes"].items()} for s in seeds}
    delta = stats.paired_delta(arm, ref, seeds)
    return {"seeds": seeds, "arm": ARM, "reference": "cocoda@1",
            "test_accuracy": {s: reports[(ARM, s)]["test_accuracy"] for s in seeds},
            "reference_accuracy": {s: reports[("cocoda@1", s)]["test_accuracy"] for s in seeds},
            "outcomes": {s: [r.get("outcome") for r in reports[(ARM, s)]["per_round"][1:]] for s in seeds},
            "reference_outcomes": {s: [r.get("outcome") for r in reports[("cocoda@1", s)]["per_round"][1:]]
                                   for s in seeds},
            "delta": delta.point, "delta_ci95": delta.ci, "delta_per_seed": list(delta.per_seed)}


if __name__ == "__main__":
    if sys.argv[1] == "run":
        run_cell(Path(sys.argv[2]), Path(sys.argv[3]), int(sys.argv[4]))
    else:
        print(json.dumps(compare(Path(sys.argv[2]), Path(sys.argv[3])), indent=1))

"""Every loop arm against the null arm ``cocoda_replicate`` instead of ``cocoda``.

``cocoda_replicate`` is the main job again from the same stages 1-2, its rounds under another random
stream. Measured against it, an arm's delta is its delta to a second run of the method; beside the
deltas to ``cocoda`` (study.json) this shows which conclusions depend on which run of the method
one compares with. Same statistics as the study (``cocoda_jax.study.stats``): the paired
seeds-then-tasks bootstrap and the seed-level t interval.

    python docs/results/loop_2026-12-05e/vs_replicate.py STUDY_DIR > vs_replicate.json
"""

import json
import sys

from cocoda_jax.study import stats as S

SEEDS = (13, 42, 2026)
ARMS = ("cocoda", "sft_only", "sft_matched", "no_ctd", "no_gar", "rods_off", "rods_random", "frozen_library")


def outcomes(root: str, arm: str) -> dict:
    return {s: {str(k): int(v) for k, v in json.load(open(f"{root}/{arm}/seed_{s}/report.json"))["test_outcomes"].items()}
            for s in SEEDS}


def main(root: str) -> None:
    ref = outcomes(root, "cocoda_replicate")
    out = {}
    for arm in ARMS:
        d = S.paired_delta(outcomes(root, arm), ref, list(SEEDS))
        out[arm] = {"delta_vs_cocoda_replicate": round(d.point, 4), "ci95": [round(x, 4) for x in d.ci],
                    "seed_t95": [round(x, 4) for x in S.seed_t_interval(d.per_seed)],
                    "per_seed": [round(x, 4) for x in d.per_seed]}
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "/tmp/study43")

"""One-stream arms against `cocoda`'s two-stream mean: per task, the arm's 0/1 outcome minus the mean of
`cocoda`'s two streams, with the study's paired seeds-then-tasks bootstrap and the seeds-as-units t interval.
(A one-stream arm keeps its own rounds' chance; `cocoda`'s is halved.)

    python docs/results/loop_2026-12-06b/vs_two_streams.py STUDY_DIR ARM [ARM ...] > vs_two_streams.json
"""

import json
import sys
from pathlib import Path

from cocoda_jax.study import stats

SEEDS = (13, 42, 2026)


def outcomes(study: Path, cell: str) -> dict:
    return {s: {t: float(v) for t, v in json.loads((study / cell / f"seed_{s}" / "report.json").read_text())
                ["test_outcomes"].items()} for s in SEEDS}


def main(study: Path, arms: list[str]) -> dict:
    first, second = outcomes(study, "cocoda"), outcomes(study, "cocoda@1")
    reference = {s: {t: (first[s][t] + second[s][t]) / 2 for t in first[s]} for s in SEEDS}
    out = {"cocoda (two streams)": stats.accuracy_ci(reference, SEEDS).point}
    for arm in arms:
        delta = stats.paired_delta(outcomes(study, arm), reference, SEEDS)
        out[arm] = {"delta": delta.point, "ci95": delta.ci, "per_seed": list(delta.per_seed),
                    "seed_t95": stats.seed_t_interval(delta.per_seed)}
    return out


if __name__ == "__main__":
    print(json.dumps(main(Path(sys.argv[1]), sys.argv[2:]), indent=1))

"""The turns-passed comparisons with each BFCL scenario as the unit (its four category variants are not
independent draws): paired differences of scenario means with their 95% t intervals.

    python docs/results/planner_search_bfcl_2026-12-06/by_scenario.py > by_scenario.json
"""

import json
import pathlib
import statistics

from scipy import stats

HERE = pathlib.Path(__file__).parent


def by_scenario(name: str) -> dict[str, float]:
    shares = json.loads((HERE / name).read_text())["turns_passed"]
    groups: dict[str, list[float]] = {}
    for task, share in shares.items():
        groups.setdefault(task.rsplit("_", 1)[1], []).append(share)
    return {s: statistics.fmean(v) for s, v in groups.items()}


def paired(a: str, b: str) -> dict:
    """``a - b`` over scenario means, with the 95% t interval."""
    x, y = by_scenario(f"eval_{a}.json"), by_scenario(f"eval_{b}.json")
    d = [x[k] - y[k] for k in sorted(y)]
    mean, sem = statistics.fmean(d), statistics.stdev(d) / len(d) ** 0.5
    half = stats.t.ppf(0.975, len(d) - 1) * sem
    return {"scenarios": len(d), a: statistics.fmean(x.values()), b: statistics.fmean(y.values()),
            "diff": mean, "low": mean - half, "high": mean + half,
            f"scenarios_{a}_higher": sum(v > 0 for v in d), f"scenarios_{b}_higher": sum(v < 0 for v in d)}


print(json.dumps({"measure": "turns_passed, scenario means",
                  "search_minus_question": paired("search", "question"),
                  "search_minus_question_k48": paired("search", "question_k48"),
                  "question_minus_question_k48": paired("question", "question_k48")}, indent=1))

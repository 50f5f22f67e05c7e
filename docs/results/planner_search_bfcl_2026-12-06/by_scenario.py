"""The turns-passed comparison with each BFCL scenario as the unit (its four category variants are not
independent draws): the paired difference of scenario means and its 95% t interval.

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


q, s = by_scenario("eval_question.json"), by_scenario("eval_search.json")
d = [s[k] - q[k] for k in sorted(q)]
mean, sem = statistics.fmean(d), statistics.stdev(d) / len(d) ** 0.5
half = stats.t.ppf(0.975, len(d) - 1) * sem
print(json.dumps({"measure": "turns_passed, scenario means", "scenarios": len(d),
                  "question": statistics.fmean(q.values()), "search": statistics.fmean(s.values()),
                  "search_minus_question": mean,
                  "low": mean - half, "high": mean + half,
                  "scenarios_search_higher": sum(x > 0 for x in d), "scenarios_question_higher": sum(x < 0 for x in d)},
                 indent=1))

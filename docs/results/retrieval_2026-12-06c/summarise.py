"""Mean all-gold-found at k = 8 per way of querying, split and domain seeds (encoder seeds 0/1/2).

    python docs/results/retrieval_2026-12-06c/summarise.py > docs/results/retrieval_2026-12-06c/summary.json

Reads this folder (question_clauses) and ../retrieval_2026-12-06b (question, clauses: the same command
otherwise)."""

import json
import pathlib
import statistics

HERE = pathlib.Path(__file__).parent
EARLIER = HERE.parent / "retrieval_2026-12-06b"
ROWS = ("typed_dag", "typed_dag_ranked", "ablate_no_climb_descend", "flat_ranker")
SUFFIX = {"question": "", "clauses": "_clauses", "question_clauses": "_question_clauses"}


def cell(split: str, mode: str, domains: tuple[int, ...]) -> dict | None:
    runs = []
    for d in domains:
        for s in (0, 1, 2):
            name = f"synthetic_math_wording_{split}_k8_expanded_hybrid_m5{SUFFIX[mode]}_domain{d}_seed{s}.json"
            path = next((p / name for p in (HERE, EARLIER) if (p / name).exists()), None)
            if path is None:
                return None
            runs.append(json.loads(path.read_text())["methods"])
    return {row: {"mean": round(statistics.fmean(r[row]["all_gold_found"] for r in runs), 4),
                  "runs": [r[row]["all_gold_found"] for r in runs]} for row in ROWS} | {"n_runs": len(runs)}


out = {}
for split, domains in (("val", (0, 2, 3)), ("test", (0,)), ("test", (1,)), ("test", (4,))):
    key = f"{split}_domains_{'_'.join(map(str, domains))}"
    out[key] = {m: c for m in SUFFIX if (c := cell(split, m, domains)) is not None}
print(json.dumps(out, indent=1))

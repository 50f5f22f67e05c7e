"""python partial.py STUDY_DIR [ARM=DIR ...] > partial.json: the study's paired comparison for arms that did not
get every seed: accuracy and ``arm - cocoda`` (``cocoda_jax.study.stats``: the seeds-then-tasks bootstrap) on the
seeds the arm has, against STUDY_DIR's ``cocoda`` cells on those seeds; per-depth figures from the reports'
test categories. ARM=DIR reads that arm's cells from another study directory."""
import json
import pathlib
import sys

from cocoda_jax.study import stats as S


def cells(root: pathlib.Path, arm: str) -> dict[int, dict]:
    out = {}
    for cell in sorted((root / arm).glob("seed_*")):
        report = cell / "report.json"
        if report.exists():
            out[int(cell.name[len("seed_"):])] = json.loads(report.read_text())
    return out


def main(study: str, *specs: str) -> None:
    root = pathlib.Path(study)
    ref = cells(root, "cocoda")
    result = {}
    for spec in specs:
        arm, _, where = spec.partition("=")
        reports = cells(pathlib.Path(where) if where else root, arm)
        seeds = sorted(reports)
        mine = {s: reports[s]["test_outcomes"] for s in seeds}
        theirs = {s: ref[s]["test_outcomes"] for s in seeds}
        acc, delta, base = S.accuracy_ci(mine, seeds), S.paired_delta(mine, theirs, seeds), S.accuracy_ci(theirs, seeds)
        cats: dict[str, list[float]] = {}
        for s in seeds:
            for name, row in reports[s]["test_per_category"].items():
                c = cats.setdefault(name, [0.0, 0])
                c[0] += row["accuracy"] * row["n"]
                c[1] += row["n"]
        result[arm] = {"seeds": seeds, "test_acc": acc.point, "ci95": acc.ci, "per_seed": list(acc.per_seed),
                       "cocoda_on_these_seeds": base.point, "delta_vs_cocoda": delta.point, "delta_ci95": delta.ci,
                       "per_category": {k: v[0] / v[1] for k, v in sorted(cats.items())},
                       "retrieval": [reports[s].get("retrieval") for s in seeds],
                       "decisions": [[d["outcome"] for d in reports[s]["decisions"]] for s in seeds]}
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main(*sys.argv[1:])

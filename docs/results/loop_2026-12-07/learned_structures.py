"""Do the structures a run learned from reward carry over to test? ``python learned_structures.py STUDY_DIR ARMS``.

For each seed and each arm with rounds (``ARMS``: comma-separated cells' arm names, ``cocoda@1`` a second
stream): the answer-only training tasks the run solved and kept as demonstrations (its last progress's
stored programs minus the domain's demonstrated tasks; RODS's variants among them read from the cell's
``rods/generated``), their motif chains, and the unseen-structure test
tasks built on one of those chains. On those test tasks and on the other unseen ones, the arm's accuracy
against ``sft_only``'s (the same stage-2 planner before any round), paired by task. Prints JSON.
"""

import json
import sys
from pathlib import Path

import ml_collections

from cocoda_jax.runs import coevolve, domains, rundir
from cocoda_jax.runs.progress import RunProgress


def _outcomes(cell: Path) -> dict[str, bool]:
    return {k: bool(v) for k, v in json.loads((cell / "report.json").read_text())["test_outcomes"].items()}


def main(study: str, arms: str) -> None:
    root = Path(study)
    out = []
    for base in sorted((root / "sft_only").glob("seed_*"), key=lambda p: int(p.name.split("_")[1])):
        seed = int(base.name.split("_")[1])
        config = ml_collections.ConfigDict(json.loads((base / "config.json").read_text()))
        domain = domains.build_domain(config, domains.sandbox_for(config))
        chain = {str(t.id): tuple(t.motifs) for t in (*domain.train, *domain.test)}
        unseen = [str(t.id) for t in domain.test if domain.categories(t) == "depth_2_unseen"]
        sft = _outcomes(base)
        for arm in arms.split(","):
            cell = root / arm / base.name
            if not (cell / "report.json").exists():
                continue
            variants = {}
            for f in (cell / "rods" / "generated").glob("*.jsonl"):
                for line in f.read_text().splitlines():
                    task = json.loads(line)["task"]
                    variants[task["id"]] = tuple(task["motifs"])
            progress = RunProgress.from_json(rundir.latest_checkpoint(cell).payloads["progress"])
            learned = sorted(coevolve.learned_from_reward(domain, progress.demo_programs))
            chains = {chain.get(t) or variants[t] for t in learned}
            on = [t for t in unseen if chain[t] in chains]
            off = [t for t in unseen if chain[t] not in chains]
            mine = _outcomes(cell)

            def acc(ids: list[str], outcomes: dict[str, bool]) -> float | None:
                return round(sum(outcomes[t] for t in ids) / len(ids), 3) if ids else None

            out.append({"seed": seed, "arm": arm, "learned_tasks": len(learned), "learned_chains": len(chains),
                        "unseen_test_on_learned_chains": len(on), "unseen_test_other": len(off),
                        "on_learned": {"arm": acc(on, mine), "sft_only": acc(on, sft),
                                       "gained": sum(mine[t] and not sft[t] for t in on),
                                       "lost": sum(sft[t] and not mine[t] for t in on)},
                        "other_unseen": {"arm": acc(off, mine), "sft_only": acc(off, sft),
                                         "gained": sum(mine[t] and not sft[t] for t in off),
                                         "lost": sum(sft[t] and not mine[t] for t in off)}})
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main(*sys.argv[1:3])

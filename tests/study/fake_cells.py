"""What the study tests' fake runners leave in a cell: a report.json with coin-flip outcomes.

The study reads only ``test_outcomes``, ``test_accuracy`` and ``per_round`` from a cell, so a fake
cell writes just those, its outcomes drawn from a generator the test seeds from the cell's config
(so that two arms, seeds or streams differ where the test needs them to)."""

import json
from pathlib import Path

import numpy as np


def coin_report(config, workdir, rng: np.random.Generator, per_round=None) -> dict:
    """Writes ``workdir/report.json`` with a 0/1 outcome per test task of ``config.domain`` (each a fair
    coin of ``rng``) and returns it; ``per_round``: the round records (default: two with a validation
    accuracy)."""
    outcomes = {f"math-{config.domain.seed}-{i}": int(rng.random() < 0.5) for i in range(config.domain.n_test)}
    report = {"test_accuracy": float(np.mean(list(outcomes.values()))), "test_outcomes": outcomes,
              "per_round": per_round if per_round is not None else
              [{"round": r, "val_accuracy": 0.1 * r} for r in range(2)]}
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "report.json").write_text(json.dumps(report))
    return report

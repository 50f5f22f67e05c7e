"""What an arm's rounds did, read from its cells' reports (pure: no file is read).

Accuracy says whether the rounds paid; this says how: whether a composite mined in the rounds (not in
stage 1) is in the final library and called on test, and what GRPO and RODS did each round (the
share of uniform groups, the sampled entropy, the summed update norm, the draws by curriculum region).
A cell without rounds, or a report without these records (an older run), contributes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

#: The per-round GRPO figures averaged over an arm's cells (``report.json``: ``per_round[r].mechanism``).
MECHANISM_MEANS = ("uniform_group_share", "entropy", "update_norm")


def kept_round_composites(report: Mapping[str, Any]) -> dict[str, int] | None:
    """Each composite inserted by a round >= 1 (not stage 1) that the final library holds -> its calls
    in the test rollouts. ``None`` when the report lacks the records."""
    if "composites" not in report or "test_composite_uses" not in report:
        return None
    final = {c["name"] for c in report["composites"]}
    mined = {n for rec in report.get("per_round", []) if int(rec.get("round", 0)) >= 1
             for n in rec.get("inserted") or []}
    uses = report["test_composite_uses"]
    return {n: int(uses.get(n, 0)) for n in sorted(mined & final)}


def round_composites(report: Mapping[str, Any]) -> dict[str, int] | None:
    """``kept``: composites inserted by a round >= 1 that the final library holds; ``called_on_test``:
    how many of those the test rollouts call. ``None`` when the report lacks the records."""
    kept = kept_round_composites(report)
    if kept is None:
        return None
    return {"kept": len(kept), "called_on_test": sum(1 for calls in kept.values() if calls > 0)}


def mechanism_by_round(reports: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per round with a ``mechanism`` record: the mean of :data:`MECHANISM_MEANS` over the reports
    that have the round (a ``None`` value left out) and the draws per curriculum region summed."""
    by_round: dict[int, list[Mapping[str, Any]]] = {}
    for report in reports:
        for rec in report.get("per_round", []):
            if "mechanism" in rec:
                by_round.setdefault(int(rec["round"]), []).append(rec["mechanism"])
    out = []
    for r in sorted(by_round):
        ms = by_round[r]
        row: dict[str, Any] = {"round": r, "cells": len(ms)}
        for key in MECHANISM_MEANS:
            values = [float(m[key]) for m in ms if m.get(key) is not None]
            row[key] = float(np.mean(values)) if values else None
        draws: dict[str, int] = {}
        for m in ms:
            for region, n in (m.get("rods_draws_by_region") or {}).items():
                draws[region] = draws.get(region, 0) + int(n)
        row["rods_draws_by_region"] = dict(sorted(draws.items()))
        out.append(row)
    return out


def summary(reports: Mapping[tuple[str, int], Mapping[str, Any]], names: Sequence[str], seeds: Sequence[int]
            ) -> dict[str, Any] | None:
    """An arm's ``rounds`` entry in study.json from its cells (``names``: its streams' cell names):
    ``composites`` per cell, ``seeds_with_a_round_composite_called`` (at how many seeds some stream
    keeps a composite mined in the rounds and calls it on test) and ``mechanism`` per round. ``None``
    for an arm whose cells have no round records (no rounds, or reports without them)."""
    cells = [(n, s, reports[(n, s)]) for s in seeds for n in names]
    mechanism = mechanism_by_round([r for _, _, r in cells])
    composites = []
    for n, s, r in cells:
        figures = round_composites(r)
        if figures is not None and any(int(rec.get("round", 0)) >= 1 for rec in r.get("per_round", [])):
            composites.append({"cell": n, "seed": int(s), **figures})
    if not mechanism and not composites:
        return None
    called_seeds = {c["seed"] for c in composites if c["called_on_test"] > 0}
    return {"composites": composites, "seeds_with_a_round_composite_called": len(called_seeds),
            "mechanism": mechanism}


__all__ = ["MECHANISM_MEANS", "kept_round_composites", "mechanism_by_round", "round_composites", "summary"]

"""study.md and the study's plots, from study.json's dict (and, for the validation curves, each
cell's ``per_round`` records). Matplotlib with the Agg backend: no display needed."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from cocoda_jax.study import stats


def _num(x: float | None, digits: int = 3) -> str:
    return "—" if x is None else f"{x:.{digits}f}"


def _interval(ci: Sequence[float | None] | None, digits: int = 3) -> str:
    if ci is None or ci[0] is None:
        return "—"
    return f"[{ci[0]:.{digits}f}, {ci[1]:.{digits}f}]"


def _signed(x: float | None) -> str:
    return "—" if x is None else f"{x:+.3f}"


def _signed_interval(ci: Sequence[float | None] | None) -> str:
    if ci is None or ci[0] is None:
        return "—"
    return f"[{ci[0]:+.3f}, {ci[1]:+.3f}]"


def depths_of(study: Mapping[str, Any]) -> list[str]:
    """Every depth key of any arm, in numeric order."""
    keys = {d for a in study["arms"].values() for d in (a.get("per_depth") or {})}
    return sorted(keys, key=int)


def _paired_cells(v: dict) -> str:
    """A paired comparison's two table cells: the delta with its bootstrap interval, the seeds-as-units interval."""
    return f"{_signed(v['delta'])} {_signed_interval(v['ci95'])} | {_signed_interval(v.get('seed_t95'))}"


def markdown(study: Mapping[str, Any], reference: str = "cocoda") -> str:
    """study.md: one row per arm (test accuracy and its 95% interval, the paired delta against
    ``reference`` and its interval, the verdict, the accuracy per depth), then the unavailable arms
    with their reasons."""
    depths = depths_of(study)
    lines = [
        "# Study: arms x seeds", "",
        f"Seeds: {', '.join(str(s) for s in study['seeds'])}; test tasks per seed: {study['n_test']}; "
        f"wall time of the cells: {study['wall_s']:.0f} s.", "",
        "Test accuracy with a 95% bootstrap interval (seeds, then tasks within a seed, resampled); delta: the arm "
        f"minus `{reference}` on the same (seed, task) pairs, with its paired bootstrap interval. "
        "\"not distinguishable\": the delta's interval contains 0. Seeds as units: a Student t interval over "
        "the per-seed deltas (each seed a whole training run: wider, it counts all the variation between runs, "
        "which the bootstrap's seed level understates with three seeds).", "",
    ]
    paths = study.get("float_paths") or {}
    if len(paths) > 1:
        lines += [f"Float paths: these cells ran on {len(paths)} (a cell's report records its numerics and, since "
                  "that was added, its host's CPU). With the portable setting off, cells of one config on two "
                  "machines are two float paths, so their stages 1-2 differ and a paired delta between them also "
                  "holds the machines' difference, as a second stream would:", ""]
        lines += [f"- {path}: {', '.join(cells)}" for path, cells in paths.items()] + [""]
    n_streams = int(study.get("streams", 1))
    with_rounds = {int(a.get("streams", 1)) for a in study["arms"].values() if a.get("available") and "rounds" in a}
    if n_streams > 1:
        every = (f"every arm with rounds ran them {n_streams} times" if with_rounds <= {n_streams} else
                 f"an arm with rounds ran them up to {n_streams} times (the last column says how many)")
        lines += [f"Streams: {every} at each seed (`coevolve.replicate` "
                  f"0..{n_streams - 1}, the same stages 1-2); a task's outcome is the mean over an arm's streams, and "
                  "every figure of this page is taken over those means. The last column: the standard deviation "
                  "of the streams' test accuracies, per seed.", ""]
    header = ["arm", "test acc [95% CI]", f"delta vs {reference} [95% CI]", "verdict", "delta, seeds as units [95% t]"]
    header += [f"depth {d}" for d in depths]
    if n_streams > 1:
        header.append("streams: sd per seed")
    lines.append("| " + " | ".join(header) + " |")
    lines.append("|" + "|".join(["---"] * len(header)) + "|")
    unavailable = []
    for name, a in study["arms"].items():
        if not a.get("available", False):
            unavailable.append((name, a.get("reason", "")))
            continue
        if name == reference:
            verdict = "reference"
        else:
            verdict = stats.verdict(a.get("delta_ci95"))
        row = [f"`{name}`", f"{_num(a.get('test_acc'))} {_interval(a.get('ci95'))}",
               f"{_signed(a.get('delta_vs_cocoda'))} {_signed_interval(a.get('delta_ci95'))}", verdict,
               "—" if name == reference else _signed_interval(a.get("delta_seed_t95"))]
        row += [_num((a.get("per_depth") or {}).get(d)) for d in depths]
        if n_streams > 1:
            sd = a.get("stream_sd")
            row.append(f"{a.get('streams', 1)}: " + ", ".join(_num(x) for x in sd) if sd else
                       "1" if "rounds" in a else "1 (no rounds)")
        lines.append("| " + " | ".join(row) + " |")
    against = [(name, a["vs_sft_only"]) for name, a in study["arms"].items() if a.get("vs_sft_only")]
    if against:
        lines += ["", "## Against `sft_only`", "",
                  "The arm minus `sft_only` (the stage-2 planner, no round: what the rounds must beat) on the same "
                  "(seed, task) pairs: the paired bootstrap interval, and the seeds as units.", "",
                  "| arm | delta vs sft_only [95% CI] | seeds as units [95% t] |", "|---|---|---|"]
        lines += [f"| `{name}` | {_paired_cells(v)} |" for name, v in against]
    named = [(name, other, v) for name, a in study["arms"].items() for other, v in (a.get("vs") or {}).items()]
    if named:
        lines += ["", "## The comparisons the study names", "",
                  "Each pair of the study's `compare`, on the same (seed, task) pairs: the paired bootstrap interval, "
                  "and the seeds as units.", "",
                  "| arm | against | delta [95% CI] | seeds as units [95% t] |", "|---|---|---|---|"]
        lines += [f"| `{name}` | `{other}` | {_paired_cells(v)} |" for name, other, v in named]
    rows = [(name, a["per_depth_delta"]) for name, a in study["arms"].items()
            if name != reference and a.get("available") and a.get("per_depth_delta")]
    if rows:
        lines += ["", f"## Paired delta vs `{reference}` per task depth", "",
                  "The same paired bootstrap on the tasks of one depth (n: (seed, task) pairs).", ""]
        header = ["arm"] + [f"depth {d}" for d in depths]
        lines.append("| " + " | ".join(header) + " |")
        lines.append("|" + "|".join(["---"] * len(header)) + "|")
        for name, per in rows:
            cells = []
            for d in depths:
                e = per.get(d)
                cells.append("—" if e is None else
                             f"{_signed(e['delta'])} {_signed_interval(e['ci95'])} (n {e['n']})")
            lines.append("| " + " | ".join([f"`{name}`"] + cells) + " |")
    groups = sorted({g for a in study["arms"].values() for g in (a.get("per_structure") or {})})
    if groups:
        lines += ["", "## Seen and unseen structure", "",
                  "Test tasks whose structure a demonstration showed (seen) or none did (unseen): accuracy, and the "
                  f"paired delta vs `{reference}` on those tasks (n: (seed, task) pairs).", ""]
        header = ["arm"] + [f"{g}" for g in groups] + [f"delta {g}" for g in groups]
        lines.append("| " + " | ".join(header) + " |")
        lines.append("|" + "|".join(["---"] * len(header)) + "|")
        for name, a in study["arms"].items():
            if not a.get("available") or not a.get("per_structure"):
                continue
            accs = [_num(a["per_structure"].get(g)) for g in groups]
            deltas = []
            for g in groups:
                e = (a.get("per_structure_delta") or {}).get(g)
                deltas.append("—" if e is None or name == reference else
                              f"{_signed(e['delta'])} {_signed_interval(e['ci95'])} (n {e['n']})")
            lines.append("| " + " | ".join([f"`{name}`"] + accs + deltas) + " |")
    lines += _rounds_section(study)
    if unavailable:
        lines += ["", "## Unavailable arms", ""]
        lines += [f"- `{name}`: {reason}" for name, reason in unavailable]
    return "\n".join(lines) + "\n"


def _by_round(mechanism: Sequence[Mapping[str, Any]], key: str, digits: int) -> str:
    return " / ".join(_num(m.get(key), digits) for m in mechanism) or "—"


def _rounds_section(study: Mapping[str, Any]) -> list[str]:
    """What each arm's rounds did (study.json ``arms.ARM.rounds``), for the arms that have it."""
    rows = [(name, a["rounds"]) for name, a in study["arms"].items() if a.get("available") and a.get("rounds")]
    if not rows:
        return []
    seeds = len(study["seeds"])
    lines = ["", "## What the rounds did", "",
             "Composites mined in the rounds (not in stage 1): kept in the final library and called on test, the "
             "mean per cell, and at how many seeds some cell calls one. Per round (1 / 2 / ...), the mean over the "
             "arm's cells: GRPO's share of uniform groups (no learning signal), the sampled entropy (nats/token), "
             "the update norm summed over the round's steps; and the share of RODS's draws from boundary tasks.", "",
             "| arm | round composites kept / called (per cell) | seeds with one called | uniform groups | entropy "
             "| update norm | boundary draws |", "|---|---|---|---|---|---|---|"]
    for name, did in rows:
        comps = did.get("composites") or []
        kept = _num(float(np.mean([c["kept"] for c in comps])), 1) if comps else "—"
        called = _num(float(np.mean([c["called_on_test"] for c in comps])), 1) if comps else "—"
        mech = did.get("mechanism") or []
        boundary = []
        for m in mech:
            draws = m.get("rods_draws_by_region") or {}
            total = sum(draws.values())
            boundary.append(_num(draws.get("boundary", 0) / total, 2) if total else "—")
        lines.append(f"| `{name}` | {kept} / {called} | {did.get('seeds_with_a_round_composite_called', 0)} of {seeds} "
                     f"| {_by_round(mech, 'uniform_group_share', 2)} | {_by_round(mech, 'entropy', 3)} "
                     f"| {_by_round(mech, 'update_norm', 3)} | {' / '.join(boundary) or '—'} |")
    return lines


def write_markdown(study: Mapping[str, Any], path: str | Path, reference: str = "cocoda") -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(markdown(study, reference))
    return path


def _plt():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _available(study: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    return [(n, a) for n, a in study["arms"].items() if a.get("available") and a.get("test_acc") is not None]


def plot_accuracy(study: Mapping[str, Any], path: str | Path) -> Path:
    """Test accuracy per arm with its 95% interval as error bars."""
    plt = _plt()
    arms = _available(study)
    fig, ax = plt.subplots(figsize=(max(4.0, 1.1 * len(arms) + 1.5), 3.5))
    x = np.arange(len(arms))
    acc = np.array([a["test_acc"] for _, a in arms], dtype=float)
    lo = np.array([a["ci95"][0] for _, a in arms], dtype=float)
    hi = np.array([a["ci95"][1] for _, a in arms], dtype=float)
    ax.bar(x, acc, color="#4C72B0")
    ax.errorbar(x, acc, yerr=[np.maximum(acc - lo, 0), np.maximum(hi - acc, 0)], fmt="none", ecolor="black",
                capsize=4)
    ax.set_xticks(x, [n for n, _ in arms], rotation=30, ha="right")
    ax.set_ylabel("test accuracy (95% CI)")
    ax.set_ylim(0, 1)
    ax.set_title(f"seeds {', '.join(str(s) for s in study['seeds'])}")
    fig.tight_layout()
    return _save(fig, plt, path)


def plot_per_depth(study: Mapping[str, Any], path: str | Path) -> Path:
    """Test accuracy per task depth, one line per arm."""
    plt = _plt()
    depths = depths_of(study)
    fig, ax = plt.subplots(figsize=(5, 3.5))
    for name, a in _available(study):
        per = a.get("per_depth") or {}
        ds = [d for d in depths if d in per]
        ax.plot([int(d) for d in ds], [per[d] for d in ds], marker="o", label=name)
    ax.set_xlabel("depth (motifs)")
    ax.set_ylabel("test accuracy")
    ax.set_ylim(0, 1)
    if depths:
        ax.set_xticks([int(d) for d in depths])
    ax.legend(fontsize=7)
    fig.tight_layout()
    return _save(fig, plt, path)


def plot_val_rounds(curves: Mapping[str, Sequence[Sequence[Mapping[str, Any]]]], path: str | Path) -> Path:
    """Validation accuracy per round, mean over seeds, one line per arm. ``curves``: arm -> one
    ``per_round`` list (records with ``round`` and ``val_accuracy``) per seed."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(5, 3.5))
    for name, runs in curves.items():
        by_round: dict[int, list[float]] = {}
        for records in runs:
            for r in records:
                if r.get("val_accuracy") is not None:
                    by_round.setdefault(int(r["round"]), []).append(float(r["val_accuracy"]))
        if by_round:
            rounds = sorted(by_round)
            ax.plot(rounds, [np.mean(by_round[r]) for r in rounds], marker="o", label=name)
    ax.set_xlabel("round")
    ax.set_ylabel("validation accuracy (mean over seeds)")
    ax.set_ylim(0, 1)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return _save(fig, plt, path)


def plot_val_depth_rounds(curves: Mapping[str, Sequence[Sequence[Mapping[str, Any]]]], path: str | Path
                          ) -> Path | None:
    """Validation accuracy per round, one panel per task depth, one line per arm (mean over seeds),
    from the records' ``val_per_category`` (``depth_<d>``, and ``depth_<d>_unseen`` in its own panel);
    None when no record has it."""
    table_: dict[str, dict[str, dict[int, list[float]]]] = {}
    for name, runs in curves.items():
        for records in runs:
            for r in records:
                for cat, v in (r.get("val_per_category") or {}).items():
                    if cat.startswith("depth_") and cat[6:].split("_")[0].isdigit():
                        table_.setdefault(name, {}).setdefault(cat[6:], {}).setdefault(
                            int(r["round"]), []).append(float(v["accuracy"]))
    depths = sorted({d for per in table_.values() for d in per}, key=lambda d: (int(d.split("_")[0]), d))
    if not depths:
        return None
    plt = _plt()
    fig, axes = plt.subplots(1, len(depths), figsize=(2.6 * len(depths), 3.2), sharey=True, squeeze=False)
    for ax, d in zip(axes[0], depths):
        for name, per in table_.items():
            if d in per:
                rounds = sorted(per[d])
                ax.plot(rounds, [np.mean(per[d][r]) for r in rounds], marker="o", label=name)
        ax.set_title(f"depth {d.replace('_', ' ')}", fontsize=9)
        ax.set_xlabel("round")
        ax.set_ylim(0, 1)
    axes[0][0].set_ylabel("validation accuracy")
    axes[0][-1].legend(fontsize=7)
    fig.tight_layout()
    return _save(fig, plt, path)


def _save(fig, plt, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def write_all(study: Mapping[str, Any], workdir: str | Path,
              curves: Mapping[str, Sequence[Sequence[Mapping[str, Any]]]] | None = None) -> list[Path]:
    """study.md and plots/{accuracy_per_arm,accuracy_per_depth,val_per_round}.png under ``workdir``
    (and val_per_depth_per_round.png when the rounds recorded validation accuracy per depth)."""
    workdir = Path(workdir)
    out = [write_markdown(study, workdir / "study.md"),
           plot_accuracy(study, workdir / "plots" / "accuracy_per_arm.png"),
           plot_per_depth(study, workdir / "plots" / "accuracy_per_depth.png")]
    if curves is not None:
        out.append(plot_val_rounds(curves, workdir / "plots" / "val_per_round.png"))
        per_depth = plot_val_depth_rounds(curves, workdir / "plots" / "val_per_depth_per_round.png")
        if per_depth is not None:
            out.append(per_depth)
    return out


__all__ = ["depths_of", "markdown", "plot_accuracy", "plot_per_depth", "plot_val_rounds", "write_all",
           "write_markdown"]

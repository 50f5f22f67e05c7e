"""The study loop: every available arm x seed cell as one in-process
:func:`cocoda_jax.runs.coevolve.run` in ``workdir/ARM/seed_S``, then study.json, study.md and the
plots (``launch/study.py`` is its command line).

Resumable: a cell whose ``report.json`` exists is read, not rerun; an interrupted cell resumes
from its own checkpoints (coevolve.run resumes from its workdir). The measured seconds of each cell
are kept in ``workdir/cell_times.json`` so that the ETA and ``wall_s`` survive a restart.

Shared prefixes: at a seed, the arms whose overrides differ only in what stage 3 reads
(:data:`~cocoda_jax.study.arms.STAGE3_ONLY`: acceptance, in-round mining, RODS) have the same stages
1-2. When two or more of them still have to start, the prefix runs once (``stop_after_round=0``) in
``workdir/_prefix/GROUP/seed_S``; each of those cells starts from a copy of it and resumes into its
own stage 3 (the job's resume is exact, docs/resume.md). Its seconds are the group's cells' share.

The study config (``configs/study.py``): ``run`` (the run config every cell starts from),
``seeds``, ``arms``, ``bootstrap`` (replicates), ``bootstrap_seed``.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import ml_collections

from cocoda_jax.study import arms as A
from cocoda_jax.study import stats, table

REFERENCE = "cocoda"

Runner = Callable[[ml_collections.ConfigDict, Path], Mapping[str, Any]]
DepthFn = Callable[[ml_collections.ConfigDict], Mapping[str, int]]


def cell_dir(workdir: str | Path, arm: str, seed: int) -> Path:
    return Path(workdir) / arm / f"seed_{int(seed)}"


def _coevolve_runner(config: ml_collections.ConfigDict, workdir: Path, **kwargs: Any) -> Mapping[str, Any]:
    """``coevolve.run`` (``kwargs``: ``stop_after_round``, ``allow_config_change``)."""
    from cocoda_jax.runs import coevolve
    return coevolve.run(config, workdir, progress=False, **kwargs)


def _started(cdir: Path) -> bool:
    return (cdir / "report.json").exists() or (cdir / "checkpoints").is_dir()


def _share_prefixes(study_config: ml_collections.ConfigDict, workdir: Path, cells: Sequence[tuple[A.Arm, int]],
                    runner: Runner, log: Callable[[str], None]) -> dict[str, float]:
    """Runs each shared prefix once and copies it into the cells that have not started (module
    docstring); returns the prefix seconds charged to each cell (``ARM/seed_S`` -> s)."""
    groups: dict[tuple[Any, int], list[A.Arm]] = {}
    for arm, seed in cells:
        if not _started(cell_dir(workdir, arm.name, seed)):
            groups.setdefault((A.prefix_key(arm), seed), []).append(arm)
    charged: dict[str, float] = {}
    for (key, seed), members in groups.items():
        if len(members) < 2:
            continue
        name = "+".join(a.name for a in members)
        pdir = workdir / "_prefix" / members[0].name / f"seed_{seed}"
        log(f"seed {seed}: stages 1-2 once for {name} ...")
        t0 = time.perf_counter()
        runner(A.cell_config(study_config.run, members[0], seed), pdir, stop_after_round=0)
        share = (time.perf_counter() - t0) / len(members)
        for arm in members:
            shutil.copytree(pdir, cell_dir(workdir, arm.name, seed), ignore=shutil.ignore_patterns("logs"))
            charged[f"{arm.name}/seed_{seed}"] = share
    return charged


def task_depths(config: ml_collections.ConfigDict) -> dict[str, int]:
    """Test task id -> depth for a cell's config: the domain is built without a sandbox (the
    synthetic-math generator is pure and takes well under a second for thousands of tasks; the
    primitive library needs no worker to be described). A domain whose tasks have no ``depth``
    gives ``{}``."""
    from cocoda_jax.runs import common
    domain = common.build_domain(config, None)
    return {str(t.id): int(t.depth) for t in domain.test if getattr(t, "depth", None) is not None}


def _write_json(path: Path, data: Any) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=False) + "\n")
    os.replace(tmp, path)


def _read_json(path: Path, default: Any) -> Any:
    return json.loads(path.read_text()) if path.exists() else default


def _fmt_s(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def run_study(study_config: ml_collections.ConfigDict, workdir: str | Path, *, arms: Sequence[str] | None = None,
              seeds: Sequence[int] | None = None, runner: Runner | None = None, depth_fn: DepthFn | None = None,
              log: Callable[[str], None] = print) -> dict[str, Any]:
    """Runs (or reads back) every cell, writes ``study.json``, ``study.md`` and ``plots/`` under
    ``workdir`` and returns study.json's dict. ``arms``/``seeds`` default to the config's;
    ``runner``/``depth_fn`` default to coevolve.run / :func:`task_depths` (tests pass fakes)."""
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    runner = runner or _coevolve_runner
    depth_fn = depth_fn or task_depths
    selected = A.select(list(arms) if arms else list(study_config.arms))
    seeds = [int(s) for s in (seeds if seeds else study_config.seeds)]
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"seeds repeat: {seeds}")
    runnable = [a for a in selected if a.available]
    cells = [(a, s) for a in runnable for s in seeds]
    for a in selected:
        if not a.available:
            log(f"arm {a.name}: unavailable ({a.reason})")

    times_path = workdir / "cell_times.json"
    times: dict[str, float] = _read_json(times_path, {})
    prefix_s = _share_prefixes(study_config, workdir, cells, runner, log)
    reports: dict[tuple[str, int], Mapping[str, Any]] = {}
    for i, (arm, seed) in enumerate(cells, 1):
        key = f"{arm.name}/seed_{seed}"
        cdir = cell_dir(workdir, arm.name, seed)
        report_path = cdir / "report.json"
        if report_path.exists():
            reports[(arm.name, seed)] = json.loads(report_path.read_text())
            log(f"[{i}/{len(cells)}] {key}: done before (test_acc={reports[(arm.name, seed)]['test_accuracy']:.3f})")
            continue
        config = A.cell_config(study_config.run, arm, seed)
        log(f"[{i}/{len(cells)}] {key}: running ...")
        t0 = time.perf_counter()
        if key in prefix_s:  # starts from the shared prefix's copy, saved under the first arm's config
            reports[(arm.name, seed)] = dict(runner(config, cdir, allow_config_change=True))
        else:
            reports[(arm.name, seed)] = dict(runner(config, cdir))
        times[key] = time.perf_counter() - t0 + prefix_s.get(key, 0.0)
        _write_json(times_path, times)
        left = sum(1 for a, s in cells[i:] if not (cell_dir(workdir, a.name, s) / "report.json").exists())
        mean = sum(times.values()) / len(times)
        log(f"[{i}/{len(cells)}] {key}: test_acc={reports[(arm.name, seed)]['test_accuracy']:.3f} in "
            f"{_fmt_s(times[key])}; {left} cell(s) left, ETA {_fmt_s(left * mean)} (mean {_fmt_s(mean)} a cell)")

    depths: dict[int, Mapping[str, int]] = {}
    for seed in seeds:
        try:
            depths[seed] = depth_fn(A.cell_config(study_config.run, A.get(REFERENCE), seed))
        except Exception as e:  # depths are a breakdown, not the result: say so and go on
            log(f"seed {seed}: no task depths ({type(e).__name__}: {e})")
            depths[seed] = {}

    study = summarize(selected, seeds, reports, depths, n_test=int(study_config.run.domain.n_test),
                      wall_s=float(sum(times.get(f"{a.name}/seed_{s}", 0.0) for a, s in cells)),
                      b=int(study_config.get("bootstrap", stats.DEFAULT_B)),
                      boot_seed=int(study_config.get("bootstrap_seed", 0)))
    _write_json(workdir / "study.json", study)
    curves = {a.name: [list(reports[(a.name, s)].get("per_round") or []) for s in seeds] for a in runnable}
    table.write_all(study, workdir, curves)
    log(f"wrote {workdir / 'study.json'}, {workdir / 'study.md'} and {workdir / 'plots'}")
    return study


def summarize(selected: Sequence[A.Arm], seeds: Sequence[int], reports: Mapping[tuple[str, int], Mapping[str, Any]],
              depths: Mapping[int, Mapping[str, int]], *, n_test: int, wall_s: float, b: int = stats.DEFAULT_B,
              boot_seed: int = 0) -> dict[str, Any]:
    """study.json's dict from the cells' reports (pure: no file is read)."""
    outcomes = {a.name: {s: {str(k): int(v) for k, v in reports[(a.name, s)]["test_outcomes"].items()} for s in seeds}
                for a in selected if a.available}
    sizes = {len(o) for per in outcomes.values() for o in per.values()}
    if len(sizes) == 1:
        n_test = sizes.pop()
    out_arms: dict[str, Any] = {}
    for a in selected:
        if not a.available:
            out_arms[a.name] = {"test_acc": None, "ci95": None, "per_seed": None, "per_depth": None,
                                "delta_vs_cocoda": None, "delta_ci95": None, "available": False, "reason": a.reason}
            continue
        acc = stats.accuracy_ci(outcomes[a.name], seeds, b=b, seed=boot_seed)
        entry: dict[str, Any] = {"test_acc": acc.point, "ci95": acc.ci, "per_seed": list(acc.per_seed),
                                 "per_depth": stats.per_depth(outcomes[a.name], depths),
                                 "delta_vs_cocoda": None, "delta_ci95": None, "per_depth_delta": None,
                                 "available": True}
        if REFERENCE in outcomes:
            delta = stats.paired_delta(outcomes[a.name], outcomes[REFERENCE], seeds, b=b, seed=boot_seed)
            entry["delta_vs_cocoda"], entry["delta_ci95"] = delta.point, delta.ci
            entry["per_depth_delta"] = stats.per_depth_delta(outcomes[a.name], outcomes[REFERENCE], depths, seeds,
                                                             b=b, seed=boot_seed)
        out_arms[a.name] = entry
    return {"seeds": list(seeds), "n_test": int(n_test), "arms": out_arms, "wall_s": float(wall_s)}


__all__ = ["REFERENCE", "cell_dir", "run_study", "summarize", "task_depths"]

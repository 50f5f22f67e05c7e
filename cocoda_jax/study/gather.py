"""Finished cells taken in from other study directories: cells run on other machines, in other
invocations or with other ``--workers`` settings become one study, whose table is then the one a
single invocation would have written (the study reads finished cells back, never reruns them).

A cell is taken only when it is finished (``report.json``) and was run under exactly the config
this study gives it (its ``config.json`` against :func:`~cocoda_jax.study.arms.cell_config`, the
keys that say how a process joins a run aside): a cell of another preset, another arm definition
or another seed is a :class:`~cocoda_jax.errors.ConfigError` naming the keys, raised before
anything is copied. A cell no source has under its own name is taken from a finished cell of the
same seed that ran under exactly its config by another name: the null arm ``cocoda_replicate`` is
``cocoda``'s second stream ``cocoda@1`` (:func:`~cocoda_jax.study.arms.streams`) cell for cell. A cell this study has already finished is kept; one it has started but not
finished is refused (two runs of one cell: the user chooses which to keep); an empty one is filled.
The code a cell ran under is not recorded, so gathering cells of different commits is the user's
claim to make. Its float path is (its report's ``numerics``, host CPU included): the study groups the
cells by it (study.json's ``float_paths``), since cells of one config from two machines with the portable
setting off start from different stages 1-2.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import ml_collections

from cocoda_jax.errors import CocodaError
from cocoda_jax.errors import ConfigError
from cocoda_jax.runs.rundir import RUN_CONFIG, run_identity_changes
from cocoda_jax.study import arms as A

CELL_TIMES = "cell_times.json"


class GatherError(CocodaError, ValueError):
    """A cell cannot be taken in without losing or mixing runs (a source without the cell's
    config, a destination cell started but unfinished)."""


@dataclass(frozen=True)
class Take:
    """One cell to copy: ``key`` is ``ARM/seed_S``; ``seconds`` its time in the source's
    cell_times.json (None when the source has none for it)."""
    key: str
    source: Path
    seconds: float | None


def _check_config(cdir: Path, config: ml_collections.ConfigDict) -> None:
    path = cdir / RUN_CONFIG
    if not path.exists():
        raise GatherError(f"{cdir} has a report but no {RUN_CONFIG}: its config cannot be checked")
    changed = run_identity_changes(json.loads(path.read_text()), config.to_dict())
    if changed:
        raise ConfigError(f"{cdir} was run under another config than this study gives the cell; "
                          "changed (saved -> this study): " + "; ".join(changed))


def plan(study_config: ml_collections.ConfigDict, workdir: Path, cells: Sequence[tuple[A.Arm, int]],
         sources: Sequence[str | Path]) -> list[Take]:
    """The cells to take in, each from the first source that has it finished; checks everything
    (module docstring) and copies nothing."""
    workdir = Path(workdir).resolve()
    roots = [Path(s).expanduser().resolve() for s in sources]
    for root in roots:
        if not root.is_dir():
            raise GatherError(f"gather source {root} is not a directory")
        if root == workdir:
            raise GatherError(f"gather source {root} is the study's own directory")
    times = [json.loads((r / CELL_TIMES).read_text()) if (r / CELL_TIMES).exists() else {} for r in roots]
    takes: list[Take] = []
    for arm, seed in cells:
        key = f"{arm.name}/seed_{int(seed)}"
        dest = A.cell_dir(workdir, arm.name, seed)
        if (dest / "report.json").exists():
            continue
        config = A.cell_config(study_config.run, arm, seed)
        found = [(A.cell_dir(r, arm.name, seed), t.get(key)) for r, t in zip(roots, times)
                 if (A.cell_dir(r, arm.name, seed) / "report.json").exists()]
        if found:
            _check_config(found[0][0], config)
        else:
            found = _same_config(roots, times, seed, config)
        if not found:
            continue
        if dest.exists() and any(dest.iterdir()):
            raise GatherError(f"{dest} is started but unfinished and {found[0][0]} has it finished: remove one "
                              "of the two before gathering (the study does not choose between two runs of a cell)")
        source, seconds = found[0]
        takes.append(Take(key, source, None if seconds is None else float(seconds)))
    return takes


def _same_config(roots: Sequence[Path], times: Sequence[dict], seed: int, config: ml_collections.ConfigDict
                 ) -> list[tuple[Path, float | None]]:
    """Finished cells of ``seed`` in ``roots``, under any name, that ran under exactly ``config``
    (with their seconds), in the sources' order."""
    want = config.to_dict()
    out: list[tuple[Path, float | None]] = []
    for root, cell_times in zip(roots, times):
        for report in sorted(root.glob(f"*/seed_{int(seed)}/report.json")):
            cdir = report.parent
            saved = cdir / RUN_CONFIG
            if saved.exists() and not run_identity_changes(json.loads(saved.read_text()), want):
                out.append((cdir, cell_times.get(f"{cdir.parent.name}/seed_{int(seed)}")))
    return out


def gather(study_config: ml_collections.ConfigDict, workdir: str | Path, cells: Sequence[tuple[A.Arm, int]],
           sources: Sequence[str | Path], log: Callable[[str], None] = print) -> list[str]:
    """Copies the finished cells of ``sources`` that ``workdir`` lacks (:func:`plan`) and merges
    their seconds into ``workdir/cell_times.json``; returns the keys taken. Each cell is copied
    under a temporary name and renamed into place, so an interrupted gather leaves no half cell."""
    workdir = Path(workdir)
    takes = plan(study_config, workdir, cells, sources)
    times_path = workdir / CELL_TIMES
    times = json.loads(times_path.read_text()) if times_path.exists() else {}
    for take in takes:
        dest = workdir / take.key
        tmp = dest.with_name(dest.name + ".gathering")
        if tmp.exists():
            shutil.rmtree(tmp)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(take.source, tmp, symlinks=True)
        os.replace(tmp, dest)
        if take.seconds is not None:
            times[take.key] = take.seconds
        renamed = take.source.parent.name != dest.parent.name
        log(f"{take.key}: taken from {take.source}"
            + (" (the same config under another name)" if renamed else "")
            + ("" if take.seconds is not None else " (no time on record there: left out of wall_s)"))
    if takes:
        tmp = times_path.with_name(times_path.name + ".tmp")
        tmp.write_text(json.dumps(times, indent=2) + "\n")
        os.replace(tmp, times_path)
    return [t.key for t in takes]


__all__ = ["GatherError", "Take", "gather", "plan"]

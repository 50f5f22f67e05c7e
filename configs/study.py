"""The study of issue 13 (``launch/study.py``): every arm of ``cocoda_jax.study.arms`` x seeds.

    python -m launch.study --workdir=/tmp/study                    # preset "default"
    python -m launch.study --workdir=/tmp/study_smoke --preset=smoke
    python -m launch.study --config=configs/study.py:smoke --workdir=DIR --config.run.sft.steps=8

Sections: ``run`` (the run config every cell starts from; each arm's overrides and the cell's seed
are applied to a copy), ``seeds`` (each cell sets ``run.seed`` and ``run.domain.seed`` to it),
``arms`` (names; the unavailable ones are reported, not run), ``bootstrap`` (replicates of the
intervals) and ``bootstrap_seed``.

Presets: ``default``: configs/default.py with 1000 test tasks, seeds 13, 42, 2026, every arm (its
wall-clock budget is unmeasured: 6 runnable arms x 3 seeds = 18 runs of the default job, plus the
1000-task test evaluation of each). ``smoke``: configs/tiny.py's budgets, 8 test tasks,
cocoda and frozen_library, one seed (a few minutes on the CPU).
"""

import ml_collections

from cocoda_jax.study import arms
from configs import default, tiny

PRESETS = ("default", "smoke")


def get_config(preset: str | None = None) -> ml_collections.ConfigDict:
    preset = preset or "default"
    if preset == "default":
        run = default.get_config()
        run.domain.n_test = 1000
        seeds, names = (13, 42, 2026), arms.names()
    elif preset == "smoke":
        run = tiny.get_config()
        run.domain.n_test = 8
        seeds, names = (13,), ("cocoda", "frozen_library")
    else:
        raise ValueError(f"unknown study preset {preset!r}; known: {PRESETS}")
    return ml_collections.ConfigDict(dict(preset=preset, run=run, seeds=seeds, arms=names, bootstrap=2000,
                                          bootstrap_seed=0))

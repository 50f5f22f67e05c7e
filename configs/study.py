"""The study (``launch/study.py``): every arm of ``cocoda_jax.study.arms`` x seeds.

    python -m launch.study --workdir=/tmp/study                    # preset "default"
    python -m launch.study --workdir=/tmp/study_smoke --preset=smoke
    python -m launch.study --config=configs/study.py:smoke --workdir=DIR --config.run.sft.steps=8
    python -m launch.study --workdir=/tmp/study --workers=2 --pin_cores   # 2 cells at a time, a core each (1.5x)

Sections: ``run`` (the run config every cell starts from; each arm's overrides and the cell's seed
are applied to a copy), ``seeds`` (each cell sets ``run.seed`` and ``run.domain.seed`` to it),
``arms`` (names; the unavailable ones are reported, not run), ``streams`` (runs of each arm's rounds at a
seed, each under its own random stream, averaged per task; 1: one run, as every study so far; N costs the
rounds N times, the shared stages 1-2 once: ``--config.streams=2``), ``arm_streams`` (other counts
for named arms, ``--config.arm_streams=no_tdr=1``: the reference in two streams beside an arm whose cell
costs twice as much in one; empty: every arm ``streams``), ``compare`` (paired comparisons besides
those with ``cocoda`` and ``sft_only``: ``--config.compare=explore_rods=explore``, study.json's
``arms.<arm>.vs.<other>``), ``bootstrap`` (replicates of the intervals) and ``bootstrap_seed``.

Presets: ``default``: configs/default.py with 1000 test tasks, seeds 13, 42, 2026, every arm (11 arms
x 3 seeds = 33 cells; ``sft_only`` is the stage-2 planner itself, scored on the same test tasks).
The timing below is of the study before the faithful setting (10 arms, 5 GRPO iterations a round). Measured 2026-12-04 on 2 idle cores with ``--workers=2 --pin_cores`` (two cells at
a time, a core each; the shared stages 1-2 once per seed; the study's compilation cache): **1 h 47 min
elapsed**, 12,687 s of cell time (docs/experiments.md, section I),. Unpinned,
two cells side by side ran 1.8-2.8x slower than alone (docs/study.md); one worker leaves a core idle.
``deep``: the same with tasks of 1-4 motifs (``domain.max_depth=4``), where deep tasks do not fit the
turn limit from primitives alone (``python -m launch.turn_ceiling`` measures it), a 512-token context and 600 SFT
steps. ``smoke``: configs/tiny.py's budgets, 8 test tasks, cocoda and frozen_library, one seed (a few
minutes on the CPU).
"""

import ml_collections

from cocoda_jax.study import arms
from configs import default, tiny

PRESETS = ("default", "deep", "smoke")


def get_config(preset: str | None = None) -> ml_collections.ConfigDict:
    preset = preset or "default"
    if preset == "default":
        run = default.get_config()
        run.domain.n_test = 1000
        seeds, names = (13, 42, 2026), arms.names()
    elif preset == "deep":
        # tasks of 1-4 motifs (250 test tasks per depth). With the 8-turn limit, of seed 13's
        # 2,000 training tasks 0 of 500 depth-4 and 237 of 500 depth-3 gold programs fit from primitives alone; refactored to call
        # the warm library (8 composites) 475 and 500 do (docs/experiments.md): the regime where
        # composition, not shortening, decides whether a task is solvable.
        run = default.get_config()
        run.domain.max_depth = 4
        run.domain.n_test = 1000
        # the deep preset measures the turn limit over demonstrated chains: every task demonstrated, and the
        # 8 turns its ceilings were measured at (the default's 4 would leave no depth-3 chain reachable)
        run.domain.demos = "all"
        run.rollout.max_steps = 8
        # 512 tokens, not 384: with the 8-card prompt, 49 of 150 depth-4 demonstrations refactored to the
        # warm library are longer than 384 tokens (all fit 512), and an episode past max_len stops: the
        # bound under study is the turn limit, not the context
        run.rollout.max_len = 512
        # 600 SFT steps, not 200: at 200 (token accuracy 0.93, still rising) the SFT planner solved 0 of
        # 32 validation tasks of depth 3 and of depth 4 at seeds 13 and 42 (depth 1: 0.47 / 0.28), so
        # GRPO started with no reward to learn from where composition should matter
        run.sft.steps = 600
        seeds, names = (13, 42, 2026), arms.names()
    elif preset == "smoke":
        run = tiny.get_config()
        run.domain.n_test = 8
        seeds, names = (13,), ("cocoda", "frozen_library")
    else:
        raise ValueError(f"unknown study preset {preset!r}; known: {PRESETS}")
    return ml_collections.ConfigDict(dict(preset=preset, run=run, seeds=seeds, arms=names, streams=1, arm_streams="",
                                          compare="", bootstrap=2000, bootstrap_seed=0))

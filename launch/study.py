r"""The study: every available arm x seed as one co-evolution run, then accuracy with
95% bootstrap intervals, paired deltas against cocoda, accuracy per depth (docs/study.md).

    python -m launch.study --workdir=/tmp/study                       # configs/study.py, preset default
    python -m launch.study --workdir=/tmp/study_smoke --preset=smoke  # minutes on the CPU
    python -m launch.study --workdir=DIR --arms=cocoda,no_gar --seeds=13,42
    python -m launch.study --workdir=/tmp/study --workers=2 --pin_cores  # 2 cells at a time, a core each
    python -m launch.study --workdir=/tmp/all --gather=/tmp/study_a,/tmp/study_b  # cells run elsewhere, one table
    python -m launch.study --workdir=DIR --config.streams=2  # each arm's rounds twice a seed, averaged per task
    python -m launch.study --workdir=DIR --config.streams=2 --config.arm_streams=no_tdr=1  # no_tdr once
    python -m launch.study --workdir=DIR --plan  # what is finished, what is left, its ETA; runs nothing

Cells run in ``DIR/ARM/seed_S`` (a finished cell is read back, an interrupted one resumes from
its checkpoints); writes ``DIR/study.json``, ``DIR/study.md`` and ``DIR/plots/*.png``. With
``--workers=N`` the cells run N at a time, each in its own spawned process (docs/study.md).
"""

from __future__ import annotations

import importlib.util
import json

from absl import app, flags
from ml_collections import config_flags

from cocoda_jax.runs.rundir import local_workdir

from cocoda_jax.runs.settings import exit_on_config_error
from cocoda_jax.runs.logs import route_logs
from cocoda_jax.study import gather as study_gather
from cocoda_jax.study import run as study_run
from configs import study as study_config

_CONFIG = config_flags.DEFINE_config_file("config", "configs/study.py", "Study config (ml_collections file).",
                                          lock_config=False)
_WORKDIR = flags.DEFINE_string("workdir", None, "The study's directory (one sub-directory per cell).", required=True)
_PRESET = flags.DEFINE_enum("preset", None, list(study_config.PRESETS),
                            "The study config's preset (same as --config=FILE:PRESET); unset: the config's own.")
_ARMS = flags.DEFINE_list("arms", None, "Arms to run (default: the config's arms).")
_SEEDS = flags.DEFINE_list("seeds", None, "Seeds to run (default: the config's seeds).")
_WORKERS = flags.DEFINE_integer("workers", 1, "Cells run at a time, each in its own spawned process "
                                "(1: every cell in this process, in order).", lower_bound=1)
_THREADS = flags.DEFINE_integer("threads_per_worker", None, "With --workers > 1: OMP/MKL/OpenBLAS threads of each "
                                "cell's process; 1 also turns off XLA's multi-threaded CPU ops "
                                "(unset: the environment is left alone).", lower_bound=1)
_XLA_CACHE = flags.DEFINE_string("xla_cache", "auto", "Persistent XLA compilation cache shared by the cells: a "
                                  "directory, 'auto' (WORKDIR/_xla_cache) or '' (none: each cell compiles "
                                  "everything itself).")
_GATHER = flags.DEFINE_list("gather", [], "Other study directories: their finished cells that WORKDIR lacks are "
                            "copied in first (each only if run under the config this study gives it, with its "
                            "seconds); the cells still missing then run.")
_PLAN = flags.DEFINE_bool("plan", False, "Print what the study would do now (each cell finished, resumed, started "
                          "from a shared prefix or new; the ETA of the rest) and stop: nothing runs or is written.")
_PIN = flags.DEFINE_bool("pin_cores", False, "With --workers > 1: each cell's process keeps to its own share of "
                         "the cores (no two cells on one core; XLA's threads sized to the share).")


def _config():
    """The study config, rebuilt with ``--preset`` when it differs from the loaded one (the
    ``--config.*`` overrides are applied again on top)."""
    config = _CONFIG.value
    preset = _PRESET.value
    if preset is None or preset == config.get("preset"):
        return config
    flag = flags.FLAGS["config"]
    path = config_flags.get_config_filename(flag)
    spec = importlib.util.spec_from_file_location("study_config_file", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    config = module.get_config(preset)
    for dotted, value in config_flags.get_override_values(flag).items():
        *parents, leaf = dotted.split(".")
        node = config
        for p in parents:
            node = node[p]
        node[leaf] = value
    return config


def main(argv) -> None:
    del argv
    workdir = local_workdir(_WORKDIR.value)
    seeds = [int(s) for s in _SEEDS.value] if _SEEDS.value else None
    if _PLAN.value:
        plan = study_run.plan_study(_config(), workdir, arms=_ARMS.value, seeds=seeds, workers=_WORKERS.value)
        for c in plan["cells"]:
            print(f"{c['cell']}: {c['state']}")
        eta = "unknown (no cell has finished)" if plan["eta_s"] is None else f"{plan['eta_s'] / 60:.0f} min"
        print(f"{plan['left']} of {len(plan['cells'])} cell(s) left; ETA with {plan['workers']} worker(s): {eta}")
        return
    route_logs(workdir)  # the cells' INFO logs go to workdir/logs/run.log; the console keeps the progress lines
    try:
        study = study_run.run_study(_config(), workdir, arms=_ARMS.value, seeds=seeds,
                                    log=lambda line: print(line, flush=True), workers=_WORKERS.value,
                                    threads_per_worker=_THREADS.value, pin_cores=_PIN.value,
                                    xla_cache=(workdir / "_xla_cache" if _XLA_CACHE.value == "auto"
                                               else _XLA_CACHE.value),
                                    gather_from=_GATHER.value)
    except study_gather.GatherError as e:  # nothing was copied or run: say why and stop
        raise SystemExit(f"gather: {e}") from None
    print(json.dumps(study, indent=2))


if __name__ == "__main__":
    app.run(exit_on_config_error(main))

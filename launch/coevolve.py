r"""The main job: co-evolution of the planner and its tool library (stages 1-3, CoCoDA with RODS).

    python -m launch.coevolve --config=configs/default.py --workdir=/tmp/cocoda_run
    python -m launch.coevolve --config=configs/default.py --workdir=DIR --with_baseline --compare_rods
    python -m launch.coevolve --config=configs/default.py --config.coevolve.rounds=5 --workdir=DIR

Resumes from the work directory's newest checkpoint. Writes ``report.json`` (printed at the end),
``metrics.jsonl`` and TensorBoard events, ``library/round_XXX.json``, ``plots/*.png`` and the
learned DAG ``plots/library_dag.svg``. ``--with_baseline``: the same planner and budget with the
library frozen at its primitives (in ``DIR/baseline_frozen_library``); ``--compare_rods``: the same
budget with RODS switched the other way (in ``DIR/rods_off`` or ``DIR/rods_on``).

    python -m launch.coevolve --config=configs/qwen3_8b_math.py:node8 --dry_run

prints, last, one JSON line with the per-device bytes of the planner's params, optimizer state and
compiled train step on the config's mesh (fake CPU devices, no weights: ``cocoda_jax/runs/dry_run.py``);
``--dry_run_topology=v5p-128`` (or ``4x8xh100``, ``devices=D,hosts=H,device_gb=G``) plans for those machines
(docs/scale.md).
"""

from __future__ import annotations

import json
import math

from absl import app, flags, logging
from ml_collections import config_flags

from cocoda_jax.report import coevolution as REP
from cocoda_jax.runs import coevolve
from cocoda_jax.runs.rundir import run_path
from cocoda_jax.runs.settings import exit_on_config_error
from cocoda_jax.runs.logs import route_logs
from cocoda_jax.runs.settings import RunSettings

_CONFIG = config_flags.DEFINE_config_file("config", "configs/default.py", "Run config (ml_collections file).",
                                          lock_config=True)
_WORKDIR = flags.DEFINE_string("workdir", None, "Checkpoints, metrics, report and plots go here (required unless "
                               "--dry_run: a forgotten flag must not resume a stale run).")
_BASELINE = flags.DEFINE_bool("with_baseline", False, "Also run the frozen-library baseline with the same budget.")
_RODS = flags.DEFINE_bool("compare_rods", False, "Also run with RODS switched the other way, same budget.")
_PROGRESS = flags.DEFINE_bool("progress", True, "Progress bars.")
_DRY_RUN = flags.DEFINE_bool("dry_run", False, "Print the per-device memory of the config's planner, optimizer state and "
                             "compiled train steps on fake CPU devices (no weights allocated, nothing written), then exit.")
_TOPOLOGY = flags.DEFINE_string("dry_run_topology", "", "With --dry_run: the machines to plan for (v5p-128, "
                                "4x8xh100, devices=64,hosts=16,device_gb=95): data=-1 takes the devices the other "
                                "axes leave there, and the plan adds the device memory and the headroom.")
_ALLOW_CHANGE = flags.DEFINE_bool("allow_config_change", False,
                                  "Resume a run whose checkpoint was written with another config.")


def _arm(report: dict) -> dict:
    return {"accuracy": report["accuracy"]["final"], "test_accuracy": report.get("test_accuracy"),
            "sft_accuracy": report["accuracy"]["sft"], "tool_calls_per_solved": report["tool_calls_per_solved"],
            "library": report["library"], "wall_s": report["wall_s"]}


def main(argv) -> None:
    del argv
    config = _CONFIG.value
    if _DRY_RUN.value:
        from cocoda_jax.runs import dry_run

        topology = dry_run.parse_topology(_TOPOLOGY.value) if _TOPOLOGY.value else None
        dry_run.use_fake_cpu_devices(math.prod(dry_run.mesh_shape(RunSettings.of(config), topology)))
        print(json.dumps(dry_run.memory_plan(config, config_flags.get_config_filename(flags.FLAGS["config"]),
                                             topology)))
        return
    if _TOPOLOGY.value:
        raise app.UsageError("--dry_run_topology plans a dry run: give --dry_run too")
    if _WORKDIR.value is None:
        raise app.UsageError("--workdir is required (unless --dry_run)")
    workdir = run_path(_WORKDIR.value)  # a local path or a bucket URL (docs/resume.md)
    # the console shows warnings; the full log is workdir/logs/run.log (process i > 0 of a multi-process
    # run: logs/process_<i>.log, from here when the flags name i, else once jax.distributed has told it)
    dist = RunSettings.of(config).distributed
    if dist is None or not dist.initialize:
        route_logs(workdir)
    else:  # the flags give the index with the coordinator; else the cluster tells it (coevolve.run)
        route_logs(workdir, process_index=dist.process_id if dist.coordinator_address else None)
    report = coevolve.run(config, workdir, progress=_PROGRESS.value, allow_config_change=_ALLOW_CHANGE.value)
    if _BASELINE.value:
        base_cfg = config.copy_and_resolve_references()
        base_cfg.unlock()
        base_cfg.coevolve.frozen_library = True
        logging.info("baseline: the same budget with the library frozen at its primitives")
        report["baseline_frozen_library"] = _arm(coevolve.run(base_cfg, workdir / "baseline_frozen_library",
                                                              progress=_PROGRESS.value,
                                                              allow_config_change=_ALLOW_CHANGE.value))
    if _RODS.value:
        other = config.copy_and_resolve_references()
        other.unlock()
        other.rods.enabled = not config.rods.enabled
        name = "rods_on" if other.rods.enabled else "rods_off"
        other_report = _arm(coevolve.run(other, workdir / name, progress=_PROGRESS.value,
                                         allow_config_change=_ALLOW_CHANGE.value))
        this = _arm(report)
        report["rods"] = {"on": this if config.rods.enabled else other_report,
                          "off": other_report if config.rods.enabled else this}
    REP.write_report(report, workdir / "report.json")
    summary = {k: report[k] for k in ("rounds", "library", "accuracy", "tool_calls_per_solved", "composite_share",
                                      "retrieval_tokens_per_query", "accepted_rounds", "rejected_rounds", "wall_s")}
    for k in ("test_accuracy", "baseline_frozen_library", "rods"):
        if k in report:
            summary[k] = report[k]
    print(json.dumps(summary, indent=2, sort_keys=True))


if __name__ == "__main__":
    app.run(exit_on_config_error(main))

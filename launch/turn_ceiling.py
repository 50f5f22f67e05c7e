r"""The turn-limit ceiling of a study preset's cells (``cocoda_jax.study.ceiling``): per seed and
task depth, how many held-out tasks fit ``rollout.max_steps`` turns from the primitives alone and
with stage 1's warm library (no planner: the most composition can add).

    python -m launch.turn_ceiling --preset=deep --seeds=13,42 --json_out=/tmp/ceiling.json

With ``--run_dirs``, the same count for finished runs (a main job's workdir, a study cell): each
run's domain and turn limit, with the library of its newest checkpoint, beside the planner's own
accuracy per category from its report.json (what the planner took of what the library put in reach;
on test, and with ``--split=dev`` the last round's kept pair on the dev tasks):

    python -m launch.turn_ceiling --run_dirs=/tmp/study/cocoda/seed_13,/tmp/study/sft_matched/seed_13
"""

from __future__ import annotations

import json

from absl import app, flags
from etils import epath

from cocoda_jax.errors import ConfigError
from cocoda_jax.execution import Sandbox
from cocoda_jax.runs import rundir
from cocoda_jax.study import arms
from cocoda_jax.study.ceiling import library_ceilings, turn_ceilings
from configs import study as study_config
from launch.output import emit_json

FLAGS = flags.FLAGS


def _define_flags() -> None:
    """Defined only when run as a program: ``preset``/``seeds`` are launch.study's names too."""
    flags.DEFINE_enum("preset", "deep", list(study_config.PRESETS), "The study preset whose run config to use.")
    flags.DEFINE_list("seeds", None, "Seeds (default: the preset's).")
    flags.DEFINE_enum("split", "test", ["val", "dev", "test"], "The held-out split (dev: a run's n_dev tasks).")
    flags.DEFINE_string("json_out", None, "Also write the JSON here.")
    flags.DEFINE_list("run_dirs", None, "Finished runs: the ceiling with each one's final library instead "
                                        "of a preset's warm one.")


def run_ceiling(run_dir: str, sandbox: Sandbox, split: str) -> dict:
    """The ceiling with ``run_dir``'s newest checkpoint's library, and the run's accuracy per category
    on the split when its report.json has it: test, or dev (the last round's kept pair). None for val:
    a round's validation figures are its proposal's, which acceptance may have refused."""
    root = epath.Path(run_dir)
    restored = rundir.latest_checkpoint(root)
    if restored is None:
        raise ConfigError(f"{run_dir} holds no checkpoint")
    out = library_ceilings(dict(restored.config), sandbox, restored.payloads["library"], split)
    report = root / "report.json"
    if report.exists():
        summary = json.loads(report.read_text())
        if split == "test":
            out["planner_accuracy"] = summary.get("test_per_category")
        elif split == "dev" and summary.get("per_round"):
            out["planner_accuracy"] = summary["per_round"][-1].get("dev_per_category")
    out["step"] = restored.step
    return out


def main(argv):
    del argv
    if FLAGS.run_dirs:
        with Sandbox(workers=2, timeout_s=10.0) as sandbox:
            emit_json({"runs": {d: run_ceiling(d, sandbox, FLAGS.split) for d in FLAGS.run_dirs}}, FLAGS.json_out)
        return
    study = study_config.get_config(FLAGS.preset)
    seeds = [int(s) for s in (FLAGS.seeds or study.seeds)]
    out = {"preset": FLAGS.preset, "per_seed": {}}
    with Sandbox(workers=2, timeout_s=10.0) as sandbox:
        for seed in seeds:
            config = arms.cell_config(study.run, arms.get("cocoda"), seed)
            out["per_seed"][str(seed)] = turn_ceilings(config, sandbox, FLAGS.split)
    emit_json(out, FLAGS.json_out)


if __name__ == "__main__":
    _define_flags()
    app.run(main)

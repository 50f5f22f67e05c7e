r"""The turn-limit ceiling of a study preset's cells (``cocoda_jax.study.ceiling``): per seed and
task depth, how many held-out tasks fit ``rollout.max_steps`` turns from the primitives alone and
with stage 1's warm library (no planner: the most composition can add).

    python -m launch.turn_ceiling --preset=deep --seeds=13,42 --json_out=/tmp/ceiling.json
"""

from __future__ import annotations

from absl import app, flags

from cocoda_jax.execution import Sandbox
from cocoda_jax.study import arms
from cocoda_jax.study.ceiling import turn_ceilings
from configs import study as study_config
from launch.output import emit_json

FLAGS = flags.FLAGS


def _define_flags() -> None:
    """Defined only when run as a program: ``preset``/``seeds`` are launch.study's names too."""
    flags.DEFINE_enum("preset", "deep", list(study_config.PRESETS), "The study preset whose run config to use.")
    flags.DEFINE_list("seeds", None, "Seeds (default: the preset's).")
    flags.DEFINE_enum("split", "test", ["val", "test"], "The held-out split.")
    flags.DEFINE_string("json_out", None, "Also write the JSON here.")


def main(argv):
    del argv
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

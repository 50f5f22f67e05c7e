r"""SFT then GRPO on one domain with a fixed library (no co-evolution).

    python -m launch.train --config=configs/train_math.py --workdir=/tmp/cocoda_train

Resumes from the work directory's newest checkpoint; prints the summary JSON (validation accuracy
after SFT and after GRPO, the validation curve, test accuracy) also written to
``DIR/train_summary.json``; metrics in ``DIR/metrics.jsonl`` and ``DIR/tb``.
"""

from __future__ import annotations

import json

from absl import app, flags
from ml_collections import config_flags

from cocoda_jax.runs import train
from cocoda_jax.runs.rundir import run_path
from cocoda_jax.runs.settings import exit_on_config_error
from cocoda_jax.runs.logs import route_logs

_CONFIG = config_flags.DEFINE_config_file("config", "configs/train_math.py", "Run config (ml_collections file).",
                                          lock_config=True)
_WORKDIR = flags.DEFINE_string("workdir", None, "Checkpoints and metrics go here (required: a forgotten flag "
                               "must not resume a stale run).", required=True)
_PROGRESS = flags.DEFINE_bool("progress", True, "Progress bars.")
_ALLOW_CHANGE = flags.DEFINE_bool("allow_config_change", False,
                                  "Resume a run whose checkpoint was written with another config.")


def main(argv) -> None:
    del argv
    route_logs(run_path(_WORKDIR.value))  # the console shows warnings; the full log is workdir/logs/run.log
    summary = train.run(_CONFIG.value, _WORKDIR.value, progress=_PROGRESS.value,
                        allow_config_change=_ALLOW_CHANGE.value)
    print(json.dumps(summary, indent=2, sort_keys=True))


if __name__ == "__main__":
    app.run(exit_on_config_error(main))

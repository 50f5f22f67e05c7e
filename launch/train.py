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

_CONFIG = config_flags.DEFINE_config_file("config", "configs/train_math.py", "Run config (ml_collections file).")
_WORKDIR = flags.DEFINE_string("workdir", "/tmp/cocoda_train", "Checkpoints and metrics go here.")
_PROGRESS = flags.DEFINE_bool("progress", True, "Progress bars.")


def main(argv) -> None:
    del argv
    print(json.dumps(train.run(_CONFIG.value, _WORKDIR.value, progress=_PROGRESS.value), indent=2, sort_keys=True))


if __name__ == "__main__":
    app.run(main)

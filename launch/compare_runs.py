r"""Test accuracy of finished runs (or of `launch.evaluate_run` files) with 95% intervals, and each run
against the first, paired by task.

    python -m launch.compare_runs --runs=/tmp/run_cascade,/tmp/run_full [--json_out=F]

Each directory holds a ``report.json`` (``launch.coevolve``) or a ``train_summary.json``
(``launch.train``) with ``test_outcomes`` (task id -> 1 if verified correct). Prints JSON
``{"runs": [{"dir", "accuracy", "low", "high", "n"}], "paired_vs_first": [{"dir", "diff", "low",
"high", "n", "only_a", "only_b"}]}`` (``diff`` = that run minus the first, on the tasks both saw).
"""

from __future__ import annotations

import json
from pathlib import Path

from absl import app, flags

from cocoda_jax.report.stats import compare_runs

_RUNS = flags.DEFINE_list("runs", None, "Run directories; the first is the reference.", required=True)
_JSON_OUT = flags.DEFINE_string("json_out", None, "Write the JSON here too.")


def main(argv) -> None:
    del argv
    text = json.dumps(compare_runs(list(_RUNS.value)), indent=1)
    print(text)
    if _JSON_OUT.value:
        Path(_JSON_OUT.value).write_text(text + "\n")


if __name__ == "__main__":
    app.run(main)

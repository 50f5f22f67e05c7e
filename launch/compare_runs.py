r"""Test accuracy of finished runs (or of `launch.evaluate_run` files) with 95% intervals, and each run
against the first, paired by task.

    python -m launch.compare_runs --runs=/tmp/run_cascade,/tmp/run_full [--measure=turns_passed] [--json_out=F]

Each directory holds a ``report.json`` (``launch.coevolve``) or a ``train_summary.json``
(``launch.train``) with ``test_outcomes`` (task id -> 1 if verified correct). Prints JSON
``{"runs": [{"dir", "accuracy", "low", "high", "n"}], "paired_vs_first": [{"dir", "diff", "low",
"high", "n", "only_a", "only_b"}]}`` (``diff`` = that run minus the first, on the tasks both saw).
``--measure=turns_passed`` scores each multi-turn task by the share of its user turns passed
(``test_turns_passed``; runs then carry ``mean`` in place of ``accuracy``).
"""

from __future__ import annotations

import json
from pathlib import Path

from absl import app, flags

from cocoda_jax.report.stats import MEASURES, compare_runs

_RUNS = flags.DEFINE_list("runs", None, "Run directories; the first is the reference.", required=True)
_JSON_OUT = flags.DEFINE_string("json_out", None, "Write the JSON here too.")
_MEASURE = flags.DEFINE_enum("measure", "solved", sorted(MEASURES), "What each task scores: 'solved' (1 if verified) "
                             "or 'turns_passed' (multi-turn: the share of user turns passed before the first failure).")


def main(argv) -> None:
    del argv
    text = json.dumps(compare_runs(list(_RUNS.value), _MEASURE.value), indent=1)
    print(text)
    if _JSON_OUT.value:
        Path(_JSON_OUT.value).write_text(text + "\n")


if __name__ == "__main__":
    app.run(main)

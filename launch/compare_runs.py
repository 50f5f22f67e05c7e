r"""Test accuracy of finished runs with 95% intervals, and each run against the first, paired by task.

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

from cocoda_jax.report.stats import accuracy_interval, paired_difference

_RUNS = flags.DEFINE_list("runs", None, "Run directories; the first is the reference.", required=True)
_JSON_OUT = flags.DEFINE_string("json_out", None, "Write the JSON here too.")


def outcomes_of(run_dir: str | Path) -> dict[str, int]:
    """The run's ``test_outcomes`` (a clear error when the run has none: it is unfinished or older)."""
    d = Path(run_dir)
    for name in ("report.json", "train_summary.json"):
        if (d / name).is_file():
            doc = json.loads((d / name).read_text())
            if "test_outcomes" not in doc:
                raise ValueError(f"{d / name} has no test_outcomes (written by an older version?)")
            return {str(k): int(v) for k, v in doc["test_outcomes"].items()}
    raise FileNotFoundError(f"{d} holds neither report.json nor train_summary.json (an unfinished run?)")


def compare(run_dirs: list[str]) -> dict:
    outs = [outcomes_of(r) for r in run_dirs]
    runs = [{"dir": r, **accuracy_interval(sum(o.values()), len(o))} for r, o in zip(run_dirs, outs)]
    paired = [{"dir": r, **paired_difference(o, outs[0])} for r, o in zip(run_dirs[1:], outs[1:])]
    return {"runs": runs, "paired_vs_first": paired}


def main(argv) -> None:
    del argv
    text = json.dumps(compare(list(_RUNS.value)), indent=1)
    print(text)
    if _JSON_OUT.value:
        Path(_JSON_OUT.value).write_text(text + "\n")


if __name__ == "__main__":
    app.run(main)

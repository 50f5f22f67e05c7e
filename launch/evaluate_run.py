r"""Score a run's planner again: its own held-out split, an earlier checkpoint, or a dev set.

    python -m launch.evaluate_run --run_dir=DIR [--split=test] [--step=N] [--domain_seed=S] [--json_out=F]

``--step``: a kept checkpoint (default: the newest), e.g. the planner right after SFT next to the one
after the rounds. ``--domain_seed``: the domain drawn with another seed, minus every question the run
saw or held out (``cocoda_jax.runs.evaluate.dev_tasks``): choose settings there, not on the test split.
Prints ``{"accuracy", "n", "per_category", "checkpoint_step", "domain_seed", "split", "outcomes", ...}``;
two such files compare task by task with ``python -m launch.compare_runs --runs=A.json,B.json``.
"""

from __future__ import annotations

from pathlib import Path

from absl import app, flags

from launch.output import emit_json

_RUN_DIR = flags.DEFINE_string("run_dir", None, "The run directory (launch.coevolve / launch.train).", required=True)
_SPLIT = flags.DEFINE_enum("split", "test", ["val", "test"], "Which split to score.")
_STEP = flags.DEFINE_integer("step", None, "The checkpoint to score (default: the newest kept).")
_DOMAIN_SEED = flags.DEFINE_integer("domain_seed", None, "Score on this seed's dev set instead of the run's split.")
_JSON_OUT = flags.DEFINE_string("json_out", None, "Write the JSON here too.")


def main(argv) -> None:
    del argv
    from cocoda_jax.runs.evaluate import evaluate_run
    result = evaluate_run(Path(_RUN_DIR.value), split=_SPLIT.value, step=_STEP.value, domain_seed=_DOMAIN_SEED.value)
    emit_json(result, _JSON_OUT.value, indent=1)


if __name__ == "__main__":
    from cocoda_jax.runs.settings import exit_on_config_error
    app.run(exit_on_config_error(main))

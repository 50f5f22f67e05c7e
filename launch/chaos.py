r"""Chaos-tested resume: kills the main job (SIGKILL) at random failpoints, resumes it each time, and
checks that it ends where an uninterrupted run ends (cocoda_jax/runs/chaos.py says how).

    python -m launch.chaos --workdir=/tmp/chaos                       # configs/chaos.py (mines in a round), 10 kills
    python -m launch.chaos --workdir=DIR --kills=10 --seed=3 -- --config=configs/chaos.py --config.seed=1

Arguments after ``--`` go to ``launch.coevolve`` unchanged. Prints ``chaos.json`` (the plan, each
kill, the differences); exits 1 if the chaos run differs from the reference.
"""

from __future__ import annotations

import json

from absl import app, flags

from cocoda_jax.runs import chaos
from cocoda_jax.runs.logs import route_logs

_WORKDIR = flags.DEFINE_string("workdir", None, "reference/ and chaos/ run directories go here.", required=True)
_KILLS = flags.DEFINE_integer("kills", 10, "SIGKILLs at failpoints of the main thread, one per phase first (plus one "
                               "in RODS synthesis).")
_SEED = flags.DEFINE_integer("seed", 0, "Seed of the kill plan.")
_POINTS = flags.DEFINE_list("points", None, "Only these failpoints (default: all; see cocoda_jax/failpoints.py).")
_TIMEOUT = flags.DEFINE_float("timeout_s", 1800.0, "Limit per job process.")


def main(argv) -> None:
    config_args = argv[1:] or ["--config=configs/chaos.py"]
    route_logs(_WORKDIR.value)  # the console shows the kills and warnings; orbax's INFO lines go to logs/run.log
    result = chaos.run(config_args, _WORKDIR.value, kills=_KILLS.value, seed=_SEED.value, points=_POINTS.value,
                       timeout_s=_TIMEOUT.value)
    print(json.dumps(result, indent=2))
    if result["differences"]:
        raise SystemExit(f"the chaos run differs from the reference: {result['differences']}")


if __name__ == "__main__":
    app.run(main)

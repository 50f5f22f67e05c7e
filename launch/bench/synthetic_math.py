r"""Generation rate and motif recurrence of the embedded synthetic math domain; prints JSON.

    python -m launch.bench.synthetic_math --tasks=10000 --split=train --seed=0 [--json_out=PATH]
"""

import json
import pathlib

from absl import app, flags

from cocoda_jax.data import synthetic_math

_TASKS = flags.DEFINE_integer("tasks", 10000, "How many tasks to generate.")
_SPLIT = flags.DEFINE_enum("split", "train", ["train", "validation", "test"], "Which split.")
_SEED = flags.DEFINE_integer("seed", 0, "Generation seed.")
_JSON_OUT = flags.DEFINE_string("json_out", None, "Also write the JSON here.")


def main(argv):
    del argv
    stats = synthetic_math.generation_stats(_TASKS.value, _SEED.value, _SPLIT.value)
    text = json.dumps(stats, indent=1)
    print(text)
    if _JSON_OUT.value:
        pathlib.Path(_JSON_OUT.value).write_text(text + "\n")


if __name__ == "__main__":
    app.run(main)

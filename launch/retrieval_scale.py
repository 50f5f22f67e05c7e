r"""Where retrieval must win: the planner's library grown with distractor tools, ``retrieval.mode``
cascade against full at the same budget.

    python -m launch.retrieval_scale --sizes=0,100,400,1600 --modes=cascade,full \
        --workdir=/tmp/retrieval_scale --json_out=/tmp/retrieval_scale.json

Each (size, mode) cell is one ``launch.train`` run (SFT on the gold demonstrations, then
``--grpo_iterations`` GRPO iterations, the library fixed) in ``WORKDIR/size_N/MODE`` on the
configs/train_math.py config with ``domain.grow_library_to=N`` (0: the 30 primitives alone) and
``retrieval.mode=MODE``; cells already finished are read back from their ``train_summary.json``.
A cell whose every demonstration overflows ``rollout.max_len`` (the whole library does not fit in
the prompt) cannot train: it is recorded with accuracy 0 and all episodes lost. Writes
``{"cells": [{"size", "mode", "val_accuracy", "test_accuracy", "prompt_tokens_per_episode",
"overflow_episodes", "episodes", "all_gold_found", "status"}], "budget"}``.
"""

from __future__ import annotations

from pathlib import Path

from absl import app, flags
from launch.output import emit_json

from cocoda_jax.errors import ConfigError
from cocoda_jax.runs import train

_SIZES = flags.DEFINE_list("sizes", ["0", "100", "400", "1600"], "Library sizes (0: the primitives alone).")
_MODES = flags.DEFINE_list("modes", ["cascade", "full"], "retrieval.mode values to compare.")
_WORKDIR = flags.DEFINE_string("workdir", None, "One run directory per cell under here.", required=True)
_JSON_OUT = flags.DEFINE_string("json_out", None, "Write the JSON here too.")
_SFT_STEPS = flags.DEFINE_integer("sft_steps", 200, "SFT steps of every cell.")
_GRPO = flags.DEFINE_integer("grpo_iterations", 0, "GRPO iterations of every cell.")
_SEED = flags.DEFINE_integer("seed", 0, "Run seed.")
_K = flags.DEFINE_integer("k", 8, "retrieval.k of the cascade cells.")


def cell_config(size: int, mode: str, sft_steps: int, grpo_iterations: int, seed: int, k: int = 8):
    from configs import train_math

    c = train_math.get_config()
    c.seed = seed
    c.domain.grow_library_to = size
    c.retrieval.mode = mode
    c.retrieval.k = k
    c.sft.steps = sft_steps
    c.grpo.iterations = grpo_iterations
    c.grpo.eval_every = max(1, grpo_iterations)
    return c


def run_cell(size: int, mode: str, workdir: Path, sft_steps: int, grpo_iterations: int, seed: int,
             k: int = 8) -> dict:
    config = cell_config(size, mode, sft_steps, grpo_iterations, seed, k)
    cell = {"size": size, "mode": mode, "k": k}
    try:
        summary = train.run(config, workdir, progress=False)
    except ConfigError as e:
        if "longer than rollout.max_len" not in str(e):
            raise
        n = int(config.domain.n_test)
        return {**cell, "status": "overflow", "reason": str(e), "val_accuracy": 0.0, "test_accuracy": 0.0,
                "prompt_tokens_per_episode": None, "overflow_episodes": n, "episodes": n, "all_gold_found": None}
    r = summary["retrieval"]
    return {**cell, "status": "trained", "library_size": r["library_size"],
            "val_accuracy": summary["accuracy"]["grpo_val"], "test_accuracy": summary["accuracy"]["grpo_test"],
            "sft_val_accuracy": summary["accuracy"]["sft_val"],
            "prompt_tokens_per_episode": r["prompt_tokens_per_episode"], "overflow_episodes": r["overflow_episodes"],
            "episodes": r["tasks"], "all_gold_found": r["all_gold_found"],
            "test_outcomes": summary.get("test_outcomes")}


def main(argv) -> None:
    del argv
    root = Path(_WORKDIR.value)
    suffix = "" if _K.value == 8 else f"_k{_K.value}"
    cells = [run_cell(int(s), m, root / f"size_{int(s)}" / f"{m}{suffix if m == 'cascade' else ''}", _SFT_STEPS.value,
                      _GRPO.value, _SEED.value, _K.value)
             for s in _SIZES.value for m in _MODES.value]
    out = {"cells": cells, "budget": {"sft_steps": _SFT_STEPS.value, "grpo_iterations": _GRPO.value,
                                      "seed": _SEED.value, "config": "configs/train_math.py"}}
    emit_json(out, _JSON_OUT.value, indent=1)


if __name__ == "__main__":
    app.run(main)

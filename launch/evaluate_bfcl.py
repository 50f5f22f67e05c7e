r"""Score a policy on BFCL v4 by BFCL's own rules, per category.

    python -m launch.evaluate_bfcl --categories=multi_turn_base,simple_python --policy=gold --json_out=F
    python -m launch.evaluate_bfcl --categories=multi_turn_base --policy=planner --checkpoint=RUN_DIR

``gold`` replays the ground truth (single-turn: the reference call through the AST rules; multi-turn:
the gold program played through the action checker, the sandbox and the real backends, judged by
the package's multi-turn checker). ``planner`` runs the planner of a finished
``launch.coevolve --config=configs/bfcl_multi_turn.py`` run (its final library, tokenizer and
parameters) greedily on the test split of the requested multi-turn categories.
Writes ``{"per_category": {CATEGORY: {"n": int, "accuracy": float, ...}}, "policy": str}``.
"""

from __future__ import annotations

from pathlib import Path

from absl import app, flags
from launch.output import emit_json

_CATEGORIES = flags.DEFINE_list("categories", ["multi_turn_base"], "BFCL categories to score.")
_POLICY = flags.DEFINE_enum("policy", "gold", ["gold", "planner"], "What to score.")
_CHECKPOINT = flags.DEFINE_string("checkpoint", "", "The run directory of the planner (policy=planner).")
_LIMIT = flags.DEFINE_integer("limit", 0, "Score at most this many entries per category (0: all).")
_WORKERS = flags.DEFINE_integer("workers", 2, "Sandbox workers.")
_JSON_OUT = flags.DEFINE_string("json_out", None, "Write the JSON here too.")


def main(argv) -> None:
    del argv
    from third_party.benchmarks import bfcl_domain
    if _POLICY.value == "gold":
        result = bfcl_domain.evaluate_gold(_CATEGORIES.value, limit=_LIMIT.value, workers=_WORKERS.value)
    else:
        if not _CHECKPOINT.value:
            raise app.UsageError("--policy=planner needs --checkpoint=RUN_DIR")
        from cocoda_jax.runs.evaluate import evaluate_run
        result = evaluate_run(Path(_CHECKPOINT.value), split="test", categories=_CATEGORIES.value, limit=_LIMIT.value)
    emit_json(result, _JSON_OUT.value, indent=1)


if __name__ == "__main__":
    app.run(main)

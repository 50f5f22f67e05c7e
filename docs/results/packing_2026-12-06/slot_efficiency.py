"""Token-slot efficiency of the main job's SFT batches, one demonstration a row vs packed.

Runs stage 1 and `--config.sft.steps` SFT steps of the main job (no rounds) with `loop.sft_batch`
wrapped to count real tokens and slots per step; prints one JSON line. Usage (from the repository root):

    python docs/results/packing_2026-12-06/slot_efficiency.py --config=configs/default.py \
        --workdir=/tmp/slots --config.coevolve.rounds=0 --config.sft.steps=100 [--config.sft.pack_length=0]
"""
import atexit
import json

from absl import app

from cocoda_jax.rl import loop

_wrapped = loop.sft_batch
_steps = []


def _counting(*args, **kwargs):
    batch = _wrapped(*args, **kwargs)
    _steps.append((int(batch["valid"].sum()), int(batch["valid"].size), batch["valid"].shape))
    return batch


@atexit.register
def _report():
    real = sum(s[0] for s in _steps)
    slots = sum(s[1] for s in _steps)
    shapes = sorted({s[2] for s in _steps})
    print("SLOTS " + json.dumps({"steps": len(_steps), "real_tokens": real, "slots": slots,
                                 "efficiency": round(real / max(slots, 1), 4),
                                 "mean_slots": slots / max(len(_steps), 1),
                                 "shapes": [list(s) for s in shapes]}), flush=True)


loop.sft_batch = _counting

if __name__ == "__main__":
    from launch import coevolve
    from cocoda_jax.runs.settings import exit_on_config_error
    app.run(exit_on_config_error(coevolve.main))

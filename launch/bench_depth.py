"""Benchmark: compile time and step time of the train step against the decoder's depth, with the
layers unrolled (one copy of the layer in the program per layer) and as one ``lax.scan``
(``model.scan_layers``: one compiled layer body). The layers' weights are stored stacked either way
(one array per parameter kind with a leading layer axis), so the optimizer's update is one op per
kind at any depth; the unrolled forward reads each layer's slice.

    python -m launch.bench_depth [--depth_layers=2,8,28,36 --depth_rows=8 --depth_length=128]
                                 [--depth_remat] [--json_out=PATH]

The ``tiny`` preset's width (d_model 128, fp32) at each depth; one GRPO step (the learner's own,
``Learner.grpo_step``) on a fixed random batch. ``compile_s``: ``lower(...).compile()`` of the step;
``step_s``: the best of ``--depth_repeats`` steady-state steps. Prints JSON: per mode and depth,
compile_s and step_s, and the ratio of compile time at the deepest over the shallowest depth.
"""

from __future__ import annotations

import dataclasses
import time

from absl import app, flags
from launch.output import emit_json


def _define_flags():
    """Defined only when run as a program (tests import several launchers into one process)."""
    flags.DEFINE_list("depth_layers", ["2", "8", "28", "36"], "decoder depths")
    flags.DEFINE_integer("depth_rows", 8, "rows of the GRPO batch")
    flags.DEFINE_integer("depth_length", 128, "tokens per row")
    flags.DEFINE_integer("depth_repeats", 3, "steady-state steps timed (the best is reported)")
    flags.DEFINE_bool("depth_remat", False, "rematerialise each layer (model.remat)")
    flags.DEFINE_string("json_out", None, "also write the JSON here")


def measure(n_layers: int, scan: bool, *, rows: int, length: int, repeats: int, remat: bool) -> dict:
    """Compile and step seconds of one GRPO step of a ``tiny``-width planner with ``n_layers``."""
    import jax
    import numpy as np

    from cocoda_jax.models import create_model, make_mesh
    from cocoda_jax.models.config import tiny
    from cocoda_jax.rl import grpo as G
    from cocoda_jax.rl.learner import Learner, LearnerConfig
    from cocoda_jax.rl.update import OptimConfig

    cfg = dataclasses.replace(tiny(512), n_layers=n_layers)
    mesh = make_mesh(1, 1, 1, devices=jax.devices()[:1])  # one device, named axes (what lower_step shards by)
    learner = Learner(create_model(cfg, seed=0, mesh=mesh), LearnerConfig(
        optim=OptimConfig(learning_rate=1e-4), grpo=G.GRPOConfig(beta=0.0), scan_layers=scan, remat=remat), mesh)
    rng = np.random.default_rng(0)
    batch = {"tokens": rng.integers(0, 512, (rows, length)).astype(np.int32),
             "valid": np.ones((rows, length), bool), "loss_mask": np.ones((rows, length), np.float32),
             "advantages": rng.normal(size=rows).astype(np.float32),
             "old_logp": np.full((rows, length), -6.0, np.float32)}
    state = learner.init_state()
    t0 = time.perf_counter()
    learner.lower_step("grpo", rows, length).compile()  # the step's program for this shape, compiled
    compile_s = time.perf_counter() - t0
    state, _ = learner.grpo_step(state, batch)  # the jitted call compiles again (its own cache): not timed
    jax.block_until_ready(state)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        state, metrics = learner.grpo_step(state, batch)
        jax.block_until_ready(metrics)
        times.append(time.perf_counter() - t0)
    return {"layers": n_layers, "compile_s": round(compile_s, 3), "step_s": round(min(times), 4)}


def run(layers, *, rows: int = 8, length: int = 128, repeats: int = 3, remat: bool = False) -> dict:
    out = {"rows": rows, "length": length, "remat": remat, "width": "tiny (d_model 128)"}
    for mode, scan in (("unrolled", False), ("scan", True)):
        rows_out = [measure(int(n), scan, rows=rows, length=length, repeats=repeats, remat=remat) for n in layers]
        out[mode] = rows_out
        out[f"{mode}_compile_ratio_deepest_vs_shallowest"] = round(rows_out[-1]["compile_s"] / rows_out[0]["compile_s"], 2)
    return out


def main(argv) -> None:
    del argv
    F = flags.FLAGS
    result = run(F.depth_layers, rows=F.depth_rows, length=F.depth_length, repeats=F.depth_repeats,
                 remat=F.depth_remat)
    emit_json(result, F.json_out, indent=1)


if __name__ == "__main__":
    _define_flags()
    app.run(main)

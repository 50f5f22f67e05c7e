"""Benchmark: compile time and step time of the train step against the decoder's depth, with the
layers unrolled (one copy of the layer in the program per layer) and as one ``lax.scan``
(``model.scan_layers``: one compiled layer body). The layers' weights are stored stacked either way
(one array per parameter kind with a leading layer axis), so the optimizer's update is one op per
kind at any depth; the unrolled forward reads each layer's slice.

    python -m launch.bench.depth [--depth_layers=2,8,28,36 --depth_rows=8 --depth_length=128]
                                 [--depth_remat] [--json_out=PATH]

The ``tiny`` preset's width (d_model 128, fp32) at each depth; one GRPO step (the learner's own,
``Learner.grpo_step``) on a fixed random batch. ``compile_s``: ``lower(...).compile()`` of the step;
``step_s``: the best of ``--depth_repeats`` steady-state steps. The sampler the same way (prefill and
decode loop; :func:`measure_sampler`). Prints JSON: per mode and depth, compile_s and step_s (the
sampler: first_call_s, steady_s, compile_s), and the ratio of compile time at the deepest over the
shallowest depth.
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


def measure_sampler(n_layers: int, scan: bool, *, rows: int, prompt: int, new_tokens: int, repeats: int) -> dict:
    """The sampler at ``n_layers`` (``Sampler(scan_layers=scan)``): ``first_call_s``, a fresh
    generation's first call (prefill and decode loop compiled, then run), and ``steady_s``, the best
    of ``repeats`` later calls; ``compile_s`` is their difference (the sampler compiles inside its
    calls, so this is the honest way to split them). ``rows`` prompts of ``prompt`` tokens,
    ``new_tokens`` sampled each (no stop token, so every call decodes the same number of steps)."""
    import jax
    import numpy as np

    from cocoda_jax.models import create_model
    from cocoda_jax.models.config import tiny
    from cocoda_jax.models.sampler import Sampler, SamplingParams, bucket_size

    cfg = dataclasses.replace(tiny(512), n_layers=n_layers)
    sampler = Sampler(create_model(cfg, seed=0), cache_size=bucket_size(prompt) + new_tokens, scan_layers=scan)
    prompts = np.random.default_rng(0).integers(1, 512, (rows, prompt)).tolist()
    params = SamplingParams(max_new_tokens=new_tokens, temperature=1.0)

    def call(i: int) -> float:
        t0 = time.perf_counter()
        out = sampler.generate(prompts, params, jax.random.key(i))
        jax.block_until_ready(out.state.cache.k)
        return time.perf_counter() - t0

    first = call(0)
    steady = min(call(i + 1) for i in range(repeats))
    return {"layers": n_layers, "first_call_s": round(first, 3), "steady_s": round(steady, 4),
            "compile_s": round(first - steady, 3)}


def run(layers, *, rows: int = 8, length: int = 128, repeats: int = 3, remat: bool = False,
        sampler_rows: int = 8, sampler_prompt: int = 32, sampler_new_tokens: int = 32) -> dict:
    out = {"rows": rows, "length": length, "remat": remat, "width": "tiny (d_model 128)",
           "sampler": {"rows": sampler_rows, "prompt": sampler_prompt, "new_tokens": sampler_new_tokens}}
    for mode, scan in (("unrolled", False), ("scan", True)):
        rows_out = [measure(int(n), scan, rows=rows, length=length, repeats=repeats, remat=remat) for n in layers]
        out[mode] = rows_out
        out[f"{mode}_compile_ratio_deepest_vs_shallowest"] = round(rows_out[-1]["compile_s"] / rows_out[0]["compile_s"], 2)
        sampled = [measure_sampler(int(n), scan, rows=sampler_rows, prompt=sampler_prompt,
                                   new_tokens=sampler_new_tokens, repeats=repeats) for n in layers]
        out["sampler"][mode] = sampled
        out["sampler"][f"{mode}_compile_ratio_deepest_vs_shallowest"] = round(
            sampled[-1]["compile_s"] / max(sampled[0]["compile_s"], 1e-9), 2)
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

"""Probe: one SFT step of the tiny planner (packed rows of 384 tokens, random tokens) on one CPU device or on N fake
CPU devices with a data mesh (the batch split over them): does data parallelism use 2 cores better than XLA's own
threads? Prints the mean seconds per step over 10 steps after 3 warm-up steps.

    python docs/results/loop_2026-12-07/probes/sft_step_devices.py DEVICES ROWS

Measured 2026-12-07 on 2 idle AMD EPYC cores (AVX2), 10 rows: 1 device 0.519 s, 2 devices 0.470 s (-9%); 1 device
pinned to one core (taskset -c 0) 0.922 s; 20 rows on 1 device 1.039 s. XLA's threads already use both cores
(1.8x over one core), so a data mesh cannot halve the main job's SFT time.
"""
import os, sys, time
n = int(sys.argv[1])
if n > 1:
    os.environ["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={n}"
import jax, numpy as np
from flax import nnx
from cocoda_jax.models.config import tiny
from cocoda_jax.models.transformer import Transformer
from cocoda_jax.models.sharding import make_mesh
from cocoda_jax.rl.learner import Learner, LearnerConfig
cfg = tiny(1024)
model = Transformer(cfg, rngs=nnx.Rngs(0))
mesh = make_mesh(data=n)
learner = Learner(model, LearnerConfig(), mesh=mesh)
state = learner.init_state()
rows, L = int(sys.argv[2]), 384
rng = np.random.default_rng(0)
batch = dict(tokens=rng.integers(3, 1024, (rows, L)).astype(np.int32), valid=np.ones((rows, L), bool),
             loss_mask=(rng.random((rows, L)) < 0.3).astype(np.float32),
             segments=np.repeat(np.arange(2)[None], rows, 0).repeat(L // 2, 1).astype(np.int32) + 1)
for i in range(3):
    state, m = learner.sft_step(state, batch); jax.block_until_ready(m)
t = time.perf_counter()
for i in range(10):
    state, m = learner.sft_step(state, batch); jax.block_until_ready(m)
print(n, rows, (time.perf_counter() - t) / 10, "s/step")

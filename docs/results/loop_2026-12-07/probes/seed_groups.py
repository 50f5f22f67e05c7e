"""python seed_groups.py RUN [G] [N_FRESH] [T,...]: where would GRPO's groups carry signal for run RUN's final planner?

A synthetic-math probe. Loads run RUN's last checkpoint and plays G (default 8) rollouts of its planner (the run's GRPO sampler) on
(a) RODS's seed tasks (``rods.n_seeds`` training tasks from ``rods.seed_start``: what GRPO draws) and (b)
N_FRESH (default 192) fresh instances of the training distribution, generated past every split's indices
(from index 4,000,000: no split, demonstration or decision has seen them). Prints, per class (demonstrated
seeds and answer-only seeds by depth; fresh instances by depth and by whether a demonstration showed their
structure), the tasks, the mean success rate and the share of groups that would be uniform (all G fail or all
succeed: no GRPO signal). T: sampling temperatures to try (default: the run's own, 1.0; top-p stays the run's).
"""
import dataclasses
import sys
import time

import jax
import numpy as np

from cocoda_jax.data.synthetic_math import generate, structure_demonstrated
from cocoda_jax.rl.rollout import sample_rollouts
from cocoda_jax.runs.evaluate import open_run

run_dir = sys.argv[1]
G = int(sys.argv[2]) if len(sys.argv) > 2 else 8
n_fresh = int(sys.argv[3]) if len(sys.argv) > 3 else 192
temperatures = [float(x) for x in sys.argv[4].split(",")] if len(sys.argv) > 4 else [None]
with open_run(run_dir) as run:
    rods, section = run.settings.rods, run.settings.domain
    seeds = list(run.domain.train[rods.seed_start:rods.seed_start + rods.n_seeds])
    fresh = list(generate(n_fresh, seed=section.get("seed"), split="train", start=4_000_000,
                          max_depth=section.get("max_depth") or None))
    demonstrated = run.domain.demonstrated

    def seed_class(t):
        return f"seed, {'demonstrated' if str(t.id) in demonstrated else 'answer-only'}, depth {t.depth}"

    def fresh_class(t):
        return f"fresh, depth {t.depth}, {'seen' if structure_demonstrated(t.motifs) else 'unseen'} structure"

    labelled = [(seed_class(t), t) for t in seeds] + [(fresh_class(t), t) for t in fresh]
    tasks = [t for _, t in labelled]
    classes = {}
    for i, (name, _) in enumerate(labelled):
        classes.setdefault(name, []).append(i)
    rc = run.settings.rollout
    rows = [t for t in tasks for _ in range(G)]
    for temperature in temperatures:
        sampling = rc.sampling() if temperature is None else dataclasses.replace(rc.sampling(), temperature=temperature)
        t0, trajs = time.perf_counter(), []
        for s in range(0, len(rows), 512):
            out, _ = sample_rollouts(run.model(), run.tokenizer, rows[s:s + 512], run.library, run.sandbox,
                                     sampling=sampling, key=jax.random.fold_in(jax.random.key(17), s),
                                     max_steps=rc.max_steps, max_len=rc.max_len, cards=run.cards,
                                     timeout_s=rc.timeout_s)
            trajs += out
        wins = np.asarray([t.correct for t in trajs], float).reshape(len(tasks), G).sum(1)
        print(f"run={run.run_dir} step={run.step}: {len(seeds)} RODS seeds and {len(fresh)} fresh instances x {G} "
              f"rollouts in {time.perf_counter() - t0:.0f} s (T={sampling.temperature}, top_p={sampling.top_p})")
        for name in sorted(classes):
            w = wins[classes[name]]
            uniform = float(np.mean((w == 0) | (w == G)))
            print(f"  {name}: {len(w)} tasks, success {w.mean() / G:.3f}, uniform groups {uniform:.2f}")

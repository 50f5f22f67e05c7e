"""python uniform_groups.py RUN STEP N TEMP TOP_P [TASKS]: is a uniform GRPO group a property of the task draw
or of the sampler? Loads the planner and library of run RUN's checkpoint STEP, samples N rollouts for each of
TASKS (default 120) tasks of two sets at temperature TEMP and nucleus TOP_P: GRPO's own seeds (the first
training tasks, most of them SFT's demonstrations) and validation tasks (instances SFT never saw). Prints per
set: rollout success, the share of uniform groups (all N rollouts equally correct) and of groups with a
success, and how many distinct programs a group wrote on average."""
import dataclasses, sys, time
import jax
import numpy as np
from cocoda_jax.rl.rollout import sample_rollouts
from cocoda_jax.runs.evaluate import open_run

run_dir, STEP, N, TEMP, TOP_P = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
M = int(sys.argv[6]) if len(sys.argv) > 6 else 120
with open_run(run_dir, STEP) as run:
    rc = dataclasses.replace(run.settings.rollout, temperature=TEMP, top_p=TOP_P)
    for name, tasks in (("grpo_seeds", run.domain.train[:M]), ("validation", run.domain.val[:M])):
        rows = [t for t in tasks for _ in range(N)]
        t0, trajs = time.perf_counter(), []
        for s in range(0, len(rows), 256):
            out, _ = sample_rollouts(run.model(), run.tokenizer, rows[s:s + 256], run.library, run.sandbox,
                                     sampling=rc.sampling(), key=jax.random.fold_in(jax.random.key(11), s),
                                     max_steps=rc.max_steps, max_len=rc.max_len, cards=run.cards,
                                     timeout_s=rc.timeout_s)
            trajs += out
        groups = [trajs[i:i + N] for i in range(0, len(trajs), N)]
        ok = np.array([[t.correct for t in g] for g in groups], dtype=float)
        distinct = np.mean([len({t.program for t in g}) for g in groups])
        uniform = float(np.mean((ok.min(1) == ok.max(1))))
        print(f"{name}: run={run.run_dir.name} step={STEP} T={TEMP} top_p={TOP_P} N={N}: {len(groups)} tasks, "
              f"success {ok.mean():.3f}, uniform groups {uniform:.3f} (all solved {np.mean(ok.min(1) == 1):.3f}, "
              f"none {np.mean(ok.max(1) == 0):.3f}), distinct programs per group {distinct:.2f} "
              f"[{time.perf_counter() - t0:.0f} s]", flush=True)

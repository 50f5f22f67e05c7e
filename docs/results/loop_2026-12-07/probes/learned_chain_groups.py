"""python learned_chain_groups.py RUN [G]: would GRPO groups on the answer-only tasks be informative after the rounds?

Loads run RUN's last checkpoint and plays G (default 8) rollouts of its planner (the run's GRPO sampler) on every
answer-only training task (no demonstration given: the motif pairs held out of the demonstrations), then splits
the tasks by whether the run learned their motif pair from reward (an answer-only task of that pair, or a RODS
variant of one, is among its stored demonstrations). Prints, per class, the tasks, the mean success rate and
the share of groups that would be uniform (all G fail or all succeed: no GRPO signal), for all answer-only
tasks and for those among the RODS seeds (``rods.n_seeds`` training tasks from ``rods.seed_start``), which are
the only ones GRPO draws.
"""
import json
import sys
import time
from pathlib import Path

import jax
import numpy as np

from cocoda_jax.rl.rollout import sample_rollouts
from cocoda_jax.runs import coevolve, rundir
from cocoda_jax.runs.evaluate import open_run
from cocoda_jax.runs.progress import RunProgress

run_dir, G = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 8
with open_run(run_dir) as run:
    variants = {}
    for f in (Path(run_dir) / "rods" / "generated").glob("*.jsonl"):
        for line in f.read_text().splitlines():
            task = json.loads(line)["task"]
            variants[task["id"]] = tuple(task["motifs"])
    progress = RunProgress.from_json(rundir.latest_checkpoint(Path(run_dir)).payloads["progress"])
    learned = coevolve.learned_from_reward(run.domain, progress.demo_programs)
    chains = {tuple(run.tasks_by_id[t].motifs) if t in run.tasks_by_id else variants[t] for t in learned}
    answer_only = run.domain.answer_only
    rods = run.settings.rods
    seeds = {str(t.id) for t in run.domain.train[rods.seed_start:rods.seed_start + rods.n_seeds]}
    rc = run.settings.rollout
    rows = [t for t in answer_only for _ in range(G)]
    t0, trajs = time.perf_counter(), []
    for s in range(0, len(rows), 512):
        out, _ = sample_rollouts(run.model(), run.tokenizer, rows[s:s + 512], run.library, run.sandbox,
                                 sampling=rc.sampling(), key=jax.random.fold_in(jax.random.key(11), s),
                                 max_steps=rc.max_steps, max_len=rc.max_len, cards=run.cards, timeout_s=rc.timeout_s)
        trajs += out
    wins = np.asarray([t.correct for t in trajs], float).reshape(len(answer_only), G).sum(1)
    print(f"run={run.run_dir} step={run.step}: {len(answer_only)} answer-only training tasks x {G} rollouts in "
          f"{time.perf_counter() - t0:.0f} s (T={rc.temperature}, top_p={rc.top_p}); the run learned "
          f"{len(chains)} of {len({tuple(t.motifs) for t in answer_only})} held-out motif pairs from reward "
          f"({len(learned)} demonstrations)")
    for where, keep in (("all answer-only", lambda t: True), ("among the RODS seeds", lambda t: str(t.id) in seeds)):
        for name, test in (("learned pair", True), ("other pair", False)):
            idx = [i for i, t in enumerate(answer_only) if keep(t) and (tuple(t.motifs) in chains) == test]
            if not idx:
                print(f"{where}, {name}: no task")
                continue
            w = wins[idx]
            uniform = float(np.mean((w == 0) | (w == G)))
            print(f"{where}, {name}: {len(idx)} tasks, success {w.mean() / G:.3f}, "
                  f"tasks with a success {int((w > 0).sum())}, uniform groups {uniform:.2f}")

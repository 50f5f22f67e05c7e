"""python branch_search.py RUN STEP NTASKS: does a search that tries each carded tool at a step find first
solutions of answer-only training tasks that sampling does not? Loads run RUN's checkpoint STEP, draws NTASKS
answer-only training tasks without a stored demonstration (seeded), and plays them four ways at the run's
sampler settings (T = 1.0, top-p 0.95): `sample` (16 rollouts a task, what the rounds' search does),
`branch1` (each of the task's 8 carded tools forced as the second step's call, `x2 = tool(`, 2 rollouts each:
16 a task), `branch1_answer` (the same tool forced as the answer step, `answer = tool(`), `branch01` (each
pair of carded tools forced as the first and second calls, one rollout each: 64 a task). The planner names its
steps x1, x2, ... as its demonstrations do. Prints, per way, the rollouts, the share that succeed, the tasks
and the motif pairs with a success, and the programs `sample` found."""
import sys, time

import jax
import numpy as np

from cocoda_jax.rl.rollout import sample_rollouts
from cocoda_jax.runs.evaluate import open_run

run_dir, STEP, NTASKS = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
with open_run(run_dir, STEP) as run:
    known = {i for i, _ in run.programs}
    pool = [t for t in run.domain.train if str(t.id) not in known]
    rng = np.random.default_rng(0)
    tasks = [pool[i] for i in sorted(rng.choice(len(pool), min(NTASKS, len(pool)), replace=False))]
    rc = run.settings.rollout

    def play(name, rows, forced):
        t0, trajs = time.perf_counter(), []
        for s in range(0, len(rows), 512):
            part = {(r - s, turn): text for (r, turn), text in forced.items() if s <= r < s + 512}
            out, _ = sample_rollouts(run.model(), run.tokenizer, rows[s:s + 512], run.library, run.sandbox,
                                     sampling=rc.sampling(), key=jax.random.fold_in(jax.random.key(7), s),
                                     max_steps=rc.max_steps, max_len=rc.max_len, cards=run.cards,
                                     timeout_s=rc.timeout_s, forced=part)
            trajs += out
        ok = {t.task_id for t in trajs if t.correct}
        pairs = {run.tasks_by_id[i].motifs for i in ok}
        print(f"{name}: {len(rows)} rollouts ({len(rows) // len(tasks)} a task) in {time.perf_counter() - t0:.0f} s; "
              f"success {sum(t.correct for t in trajs) / len(trajs):.4f}; tasks solved {len(ok)}/{len(tasks)}; "
              f"motif pairs solved {len(pairs)}/{len({t.motifs for t in tasks})}", flush=True)
        return trajs

    print(f"run={run.run_dir} step={STEP}: {len(pool)} answer-only tasks without a demonstration, {len(tasks)} drawn; "
          f"T={rc.temperature} top_p={rc.top_p}", flush=True)
    for t in play("sample", [t for t in tasks for _ in range(16)], {}):
        if t.correct:
            print("  solved", run.tasks_by_id[t.task_id].motifs, repr(t.program))
    rows, forced = [], {}
    for t in tasks:
        for tool in run.cards.tools(t):
            for _ in range(2):
                forced[(len(rows), 1)] = f"x2 = {tool}("
                rows.append(t)
    play("branch1", rows, forced)
    play("branch1_answer", rows, {k: v.replace("x2 = ", "answer = ") for k, v in forced.items()})
    rows, forced = [], {}
    for t in tasks:
        tools = run.cards.tools(t)
        for a in tools:
            for b in tools:
                forced[(len(rows), 0)], forced[(len(rows), 1)] = f"x1 = {a}(", f"x2 = {b}("
                rows.append(t)
    play("branch01", rows, forced)

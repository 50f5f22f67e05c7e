"""python explore_unseen.py RUN STEP N TEMP [TOP_P]: how often does sampling find a first solution of an
answer-only training task whose motif pair no demonstration showed? Loads the planner and library of run
RUN's checkpoint STEP, draws up to 4 answer-only training tasks per unseen pair, samples N rollouts per task
at temperature TEMP (nucleus TOP_P, default 0.95) and prints the per-rollout success rate, the tasks and the
pairs with at least one success. If a few dozen samples per task find most pairs, a round can buy the
demonstrations the oracle probe says the planner learns from (one or two per pair)."""
import collections, dataclasses, sys, time
import jax
from cocoda_jax.rl.rollout import sample_rollouts
from cocoda_jax.runs.evaluate import open_run

run_dir, STEP, N, TEMP = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
TOP_P = float(sys.argv[5]) if len(sys.argv) > 5 else 0.95
with open_run(run_dir, STEP) as run:
    known = {i for i, _ in run.programs}
    per_pair = collections.defaultdict(list)
    for t in run.domain.train:
        if not t.seen_structure and str(t.id) not in known and len(per_pair[t.motifs]) < 4:
            per_pair[t.motifs].append(t)
    tasks = [t for ts in per_pair.values() for t in ts]
    rc = dataclasses.replace(run.settings.rollout, temperature=TEMP, top_p=TOP_P)
    rows = [t for t in tasks for _ in range(N)]
    t0 = time.perf_counter()
    trajs = []
    for s in range(0, len(rows), 256):
        out, _ = sample_rollouts(run.model(), run.tokenizer, rows[s:s + 256], run.library, run.sandbox,
                                 sampling=rc.sampling(), key=jax.random.fold_in(jax.random.key(7), s),
                                 max_steps=rc.max_steps, max_len=rc.max_len, cards=run.cards, timeout_s=rc.timeout_s)
        trajs += out
    ok_tasks = {t.task_id for t in trajs if t.correct}
    ok_pairs = {run.tasks_by_id[i].motifs for i in ok_tasks}
    print(f"run={run.run_dir.name} step={STEP} N={N} T={TEMP} top_p={TOP_P}: {len(per_pair)} unseen pairs, {len(tasks)} "
          f"tasks, {len(rows)} rollouts in {time.perf_counter() - t0:.0f} s; rollout success "
          f"{sum(t.correct for t in trajs) / len(trajs):.4f}; tasks solved {len(ok_tasks)}/{len(tasks)}; "
          f"pairs solved {len(ok_pairs)}/{len(per_pair)}", flush=True)

"""python explore_unseen.py RUN STEP N TEMP [TOP_P]: how often does sampling find a first solution of an
answer-only training task whose motif pair no demonstration showed? Loads the planner and library of run
RUN's checkpoint STEP, draws up to 4 answer-only training tasks per unseen pair, samples N rollouts per task
at temperature TEMP (nucleus TOP_P, default 0.95) and prints the per-rollout success rate, the tasks and the
pairs with at least one success. If a few dozen samples per task find most pairs, a round can buy the
demonstrations the oracle probe says the planner learns from (one or two per pair)."""
import collections, dataclasses, sys, time
from pathlib import Path
import jax
from cocoda_jax.rl import loop as L
from cocoda_jax.rl.rollout import sample_rollouts
from cocoda_jax.runs import builders, domains, rundir
from cocoda_jax.runs.settings import RunSettings
from cocoda_jax.runs.evaluate import _checkpoint

run_dir, STEP, N, TEMP = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
TOP_P = float(sys.argv[5]) if len(sys.argv) > 5 else 0.95
restored = _checkpoint(run_dir, STEP)
settings = RunSettings.parse(dict(restored.config))
with domains.sandbox_for(settings) as sandbox:
    domain = domains.build_domain(settings, sandbox)
    library = restored.payloads["library"]
    by_id = {str(t.id): t for t in (*domain.train, *domain.val, *domain.test, *domain.dev)}
    stored = [tuple(p) for p in restored.payloads["progress"]["demo_programs"] if p[0] in by_id]
    known = {i for i, _ in stored}
    per_pair = collections.defaultdict(list)
    for t in domain.train:
        if not t.seen_structure and str(t.id) not in known and len(per_pair[t.motifs]) < 4:
            per_pair[t.motifs].append(t)
    tasks = [t for ts in per_pair.values() for t in ts]
    cards = builders.prompt_cards(library, settings.retrieval, stored, {i: by_id[i].question for i, _ in stored})
    tok = builders.tokenizer_for(run_dir, (), settings.model.vocab_size, settings.model.hf_checkpoint)
    mesh = builders.mesh_of(settings)
    model = builders.build_planner(settings, tok.vocab_size, mesh)
    grpo = builders.grpo_learner(model, settings, mesh)
    state, _ = rundir.restore_state(run_dir, grpo, restored.step, with_ref=False)
    rc = dataclasses.replace(settings.rollout, temperature=TEMP, top_p=TOP_P)
    rows = [t for t in tasks for _ in range(N)]
    t0 = time.perf_counter()
    trajs = []
    for s in range(0, len(rows), 256):
        out, _ = sample_rollouts(grpo.model(state), tok, rows[s:s + 256], library, sandbox, sampling=rc.sampling(),
                                 key=jax.random.fold_in(jax.random.key(7), s), max_steps=rc.max_steps,
                                 max_len=rc.max_len, cards=cards, timeout_s=rc.timeout_s)
        trajs += out
    ok_tasks = {t.task_id for t in trajs if t.correct}
    ok_pairs = {by_id[i].motifs for i in ok_tasks}
    print(f"run={run_dir.name} step={STEP} N={N} T={TEMP} top_p={TOP_P}: {len(per_pair)} unseen pairs, {len(tasks)} "
          f"tasks, {len(rows)} rollouts in {time.perf_counter() - t0:.0f} s; rollout success "
          f"{sum(t.correct for t in trajs) / len(trajs):.4f}; tasks solved {len(ok_tasks)}/{len(tasks)}; "
          f"pairs solved {len(ok_pairs)}/{len(per_pair)}", flush=True)

"""GRPO on the greedy-failing training tasks only: does it move dev?  args: lr iters mode(all|fail) [max_success]"""
import sys, jax, dataclasses, numpy as np, time
from pathlib import Path
from cocoda_jax.rl import loop as L
from cocoda_jax.runs import builders, domains, rundir
from cocoda_jax.runs.settings import RunSettings
from cocoda_jax.runs.evaluate import _checkpoint
run_dir = Path("/tmp/x/prefix"); lr = float(sys.argv[1]); iters = int(sys.argv[2]); mode = sys.argv[3]
restored = _checkpoint(run_dir, None)
settings = RunSettings.parse(restored.config)
settings = dataclasses.replace(settings, grpo=dataclasses.replace(settings.grpo, learning_rate=lr, schedule="constant", warmup_steps=0))
def cat(ev, tasks):
    out = {}
    for t, tr in zip(tasks, ev.trajectories):
        k = f"d{t.depth}{'' if t.seen_structure else 'u'}"
        out.setdefault(k, []).append(tr.correct)
    return {k: round(float(np.mean(v)), 3) for k, v in sorted(out.items())}
with domains.sandbox_for(settings) as sandbox:
    domain = domains.build_domain(settings, sandbox)
    library = restored.payloads["library"]
    by_id = {str(t.id): t for t in (*domain.train, *domain.val, *domain.test)}
    programs = [tuple(p) for p in restored.payloads["progress"]["demo_programs"] if p[0] in by_id]
    cards = builders.prompt_cards(library, settings.retrieval, programs, {i: by_id[i].question for i, _ in programs})
    tok = builders.tokenizer_for(run_dir, (), settings.model.vocab_size, settings.model.hf_checkpoint)
    mesh = builders.mesh_of(settings)
    learner = builders.grpo_learner(builders.build_planner(settings, tok.vocab_size, mesh), settings, mesh)
    state, _ = rundir.restore_state(run_dir, learner, restored.step, with_ref=False)
    dev = list(domain.dev)
    ev = L.evaluate(learner.model(state), tok, dev, library, sandbox, settings.rollout, cards=cards)
    print("dev before", ev.accuracy, cat(ev, dev), flush=True)
    pool = list(domain.train[:400])
    if mode == "fail":
        evp = L.evaluate(learner.model(state), tok, pool, library, sandbox, settings.rollout, cards=cards)
        pool = [t for t, tr in zip(pool, evp.trajectories) if not tr.correct]
        print("failing pool", len(pool), cat(evp, list(domain.train[:400])), flush=True)
    rng = np.random.default_rng(0)
    for it in range(iters):
        drawn = [pool[i] for i in rng.choice(len(pool), 12, replace=False)]
        state, m, _ = L.grpo_iteration(learner, state, tok, drawn, library, sandbox, group_size=8, rc=settings.rollout,
            cards=cards, key=L.iteration_key(0, it), reward_config=settings.reward, mask_uniform_groups=True, ppo_epochs=2)
        if it % 5 == 4:
            print(it, "acc", round(m["accuracy"], 3), "uniform", round(m["uniform_group_share"], 2), flush=True)
    ev = L.evaluate(learner.model(state), tok, dev, library, sandbox, settings.rollout, cards=cards)
    print("dev after", ev.accuracy, cat(ev, dev), flush=True)

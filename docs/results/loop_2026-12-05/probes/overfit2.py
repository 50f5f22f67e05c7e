import sys, jax, dataclasses, numpy as np
from pathlib import Path
from cocoda_jax.rl import loop as L
from cocoda_jax.runs import builders, domains, rundir
from cocoda_jax.runs.settings import RunSettings
from cocoda_jax.runs.evaluate import _checkpoint
run_dir = Path("/tmp/x/prefix"); lr = float(sys.argv[1]); adv = sys.argv[2] if len(sys.argv) > 2 else "grpo_gar"
restored = _checkpoint(run_dir, None)
settings = RunSettings.parse(restored.config)
settings = dataclasses.replace(settings, grpo=dataclasses.replace(settings.grpo, learning_rate=lr, schedule="constant", warmup_steps=0, advantage=adv))
with domains.sandbox_for(settings) as sandbox:
    domain = domains.build_domain(settings, sandbox)
    pool = [t for t in domain.train if t.depth == 2 and t.seen_structure][100:200]
    library = restored.payloads["library"]
    by_id = {str(t.id): t for t in (*domain.train, *domain.val, *domain.test)}
    programs = [tuple(p) for p in restored.payloads["progress"]["demo_programs"] if p[0] in by_id]
    cards = builders.prompt_cards(library, settings.retrieval, programs, {i: by_id[i].question for i, _ in programs})
    tok = builders.tokenizer_for(run_dir, (), settings.model.vocab_size, settings.model.hf_checkpoint)
    mesh = builders.mesh_of(settings)
    learner = builders.grpo_learner(builders.build_planner(settings, tok.vocab_size, mesh), settings, mesh)
    state, _ = rundir.restore_state(run_dir, learner, restored.step, with_ref=False)
    ev = L.evaluate(learner.model(state), tok, pool, library, sandbox, settings.rollout, cards=cards, reward_config=settings.reward)
    tasks = [t for t, tr in zip(pool, ev.trajectories) if not tr.correct][:16]
    T = float(sys.argv[3]) if len(sys.argv) > 3 else 1.0
    settings = dataclasses.replace(settings, rollout=dataclasses.replace(settings.rollout, temperature=T))
    print("greedy before", ev.accuracy, flush=True)
    for it in range(10):
        state, m, _ = L.grpo_iteration(learner, state, tok, tasks, library, sandbox, group_size=8, rc=settings.rollout,
            cards=cards, key=L.iteration_key(0, it), reward_config=settings.reward, mask_uniform_groups=True, ppo_epochs=2)
        print(it, "acc", round(m["accuracy"], 3), "uniform", round(m["uniform_group_share"], 2), "ent", round(m["grpo/entropy"], 3), "norm", round(m.get("grpo/update_norm", 0), 3), flush=True)
    ev = L.evaluate(learner.model(state), tok, tasks, library, sandbox, settings.rollout, cards=cards, reward_config=settings.reward)
    print("greedy after", ev.accuracy, flush=True)

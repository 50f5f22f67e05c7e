import sys, collections, jax
from pathlib import Path
from cocoda_jax.rl import loop as L
from cocoda_jax.rl.rollout import sample_rollouts
from cocoda_jax.runs import builders, domains, rundir
from cocoda_jax.runs.settings import RunSettings
from cocoda_jax.runs.evaluate import _checkpoint
run_dir = Path(sys.argv[1]); step = int(sys.argv[2]); T = float(sys.argv[3])
restored = _checkpoint(run_dir, step)
settings = RunSettings.parse(restored.config)
with domains.sandbox_for(settings) as sandbox:
    domain = domains.build_domain(settings, sandbox)
    hard = [t for t in domain.train if t.depth == 2 and not t.seen_structure][:48]
    seen2 = [t for t in domain.train if t.depth == 2 and t.seen_structure][:48]
    library = restored.payloads["library"]
    by_id = {str(t.id): t for t in (*domain.train, *domain.val, *domain.test)}
    programs = [tuple(p) for p in restored.payloads["progress"]["demo_programs"] if p[0] in by_id]
    cards = builders.prompt_cards(library, settings.retrieval, programs, {i: by_id[i].question for i, _ in programs})
    tok = builders.tokenizer_for(run_dir, (), settings.model.vocab_size, settings.model.hf_checkpoint)
    mesh = builders.mesh_of(settings)
    learner = builders.grpo_learner(builders.build_planner(settings, tok.vocab_size, mesh), settings, mesh)
    state, _ = rundir.restore_state(run_dir, learner, restored.step, with_ref=False)
    model = learner.model(state)
    rc = settings.rollout
    import dataclasses
    for name, tasks in (("unseen", hard), ("seen2", seen2)):
      for steps in (4, 8):
        rows = [t for t in tasks for _ in range(8)]
        sp = dataclasses.replace(rc.sampling(), temperature=T)
        trajs, _ = sample_rollouts(model, tok, rows, library, sandbox, sampling=sp, key=jax.random.key(1),
                                   max_steps=steps, max_len=rc.max_len if steps == 4 else 640, cards=cards, timeout_s=10.0)
        ok = [t.correct for t in trajs]
        groups = [any(ok[i*8:(i+1)*8]) for i in range(len(tasks))]
        print(name, "steps", steps, "T", T, "row success", sum(ok)/len(ok), "groups with a success", sum(groups), "/", len(tasks), flush=True)

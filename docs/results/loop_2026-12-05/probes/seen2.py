import sys, collections
from pathlib import Path
from cocoda_jax import checkpoint as ckpt
from cocoda_jax.rl import loop as L
from cocoda_jax.runs import builders, domains, rundir
from cocoda_jax.runs.settings import RunSettings
from cocoda_jax.runs.evaluate import _checkpoint
run_dir = Path(sys.argv[1]); step = int(sys.argv[2]) if len(sys.argv) > 2 else None
restored = _checkpoint(run_dir, step)
settings = RunSettings.parse(restored.config)
with domains.sandbox_for(settings) as sandbox:
    domain = domains.build_domain(settings, sandbox)
    tasks = [t for t in domain.val if t.seen_structure and t.depth == 2][:40]
    library = restored.payloads["library"]
    by_id = {str(t.id): t for t in (*domain.train, *domain.val, *domain.test)}
    programs = [tuple(p) for p in restored.payloads["progress"]["demo_programs"] if p[0] in by_id]
    cards = builders.prompt_cards(library, settings.retrieval, programs, {i: by_id[i].question for i, _ in programs})
    tok = builders.tokenizer_for(run_dir, (), settings.model.vocab_size, settings.model.hf_checkpoint)
    mesh = builders.mesh_of(settings)
    learner = builders.grpo_learner(builders.build_planner(settings, tok.vocab_size, mesh), settings, mesh)
    state, _ = rundir.restore_state(run_dir, learner, restored.step, with_ref=False)
    ev = L.evaluate(learner.model(state), tok, tasks, library, sandbox, settings.rollout, cards=cards, reward_config=settings.reward, seed=0)
    for t, tr in [(a, b) for a, b in zip(tasks, ev.trajectories) if not b.correct][:10]:
        print("=" * 80); print(t.motifs, "correct", tr.correct)
        segs = tr.segments()
        print("".join(s.text for s in segs))
        print("--- gold:", getattr(t, "program", None))

"""python oracle_unseen.py K STEPS LR: can the SFT planner learn an unseen motif pair from K demonstrations
of it? Continues seed 0's SFT planner (/tmp/x/prefix, checkpoint 200) with STEPS refresh steps at LR on
batches of the stored demonstrations plus K gold programs (refactored over the library) of answer-only
training tasks per unseen pair (K = 0: the control, the stored demonstrations only); prints the dev split's
accuracy per category before and after. If a few demonstrations teach a pair, the loop's bottleneck on the
unseen part is discovering one success per pair."""
import collections, sys
from pathlib import Path
from cocoda_jax.coevolve.traces import gold_trace
from cocoda_jax.coevolve.validate import play_programs, refactor_trace
from cocoda_jax.rl import loop as L
from cocoda_jax.runs import builders, domains, rundir
from cocoda_jax.runs.settings import RunSettings
from cocoda_jax.runs.evaluate import _checkpoint

K, STEPS, LR = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
run_dir = Path("/tmp/x/prefix")
restored = _checkpoint(run_dir, 200)
config = dict(restored.config)
config["coevolve"] = dict(config["coevolve"], refresh_learning_rate=LR)
settings = RunSettings.parse(config)
with domains.sandbox_for(settings) as sandbox:
    domain = domains.build_domain(settings, sandbox)
    library = restored.payloads["library"]
    by_id = {str(t.id): t for t in (*domain.train, *domain.val, *domain.test, *domain.dev)}
    stored = [tuple(p) for p in restored.payloads["progress"]["demo_programs"] if p[0] in by_id]
    per_pair = collections.defaultdict(list)
    for t in domain.train:
        if not t.seen_structure and len(per_pair[t.motifs]) < K:
            per_pair[t.motifs].append((str(t.id), refactor_trace(gold_trace(t), library).program()))
    extra = [p for ps in per_pair.values() for p in ps]
    calls = collections.Counter(sum("(" in line for line in p.splitlines()) for _, p in extra)
    print("extra demonstrations", len(extra), "over", len(per_pair), "pairs; calls per program", sorted(calls.items()))
    programs = stored + extra
    cards = builders.prompt_cards(library, settings.retrieval, programs, {i: by_id[i].question for i, _ in programs})
    tok = builders.tokenizer_for(run_dir, (), settings.model.vocab_size, settings.model.hf_checkpoint)
    mesh = builders.mesh_of(settings)
    model = builders.build_planner(settings, tok.vocab_size, mesh)
    grpo = builders.grpo_learner(model, settings, mesh)
    state, _ = rundir.restore_state(run_dir, grpo, restored.step, with_ref=False)

    def dev(st, label):
        ev = L.evaluate(grpo.model(st), tok, list(domain.dev), library, sandbox, settings.rollout, cards=cards,
                        reward_config=settings.reward, seed=0)
        cat = domains.per_category(domain, domain.dev, ev)
        print(label, "dev", round(ev.accuracy, 4), {k: (v["n"], round(v["accuracy"], 3)) for k, v in cat.items()},
              flush=True)

    dev(state, "before")
    # batches: the extra demonstrations, repeated to half of the set, and the stored ones
    reps = max(1, len(stored) // max(len(extra), 1)) if extra else 0
    chosen = stored + extra * reps
    tasks = [by_id[i] for i, _ in chosen]
    played = play_programs(tasks, [cards.demonstration(t, p) for t, (_, p) in zip(tasks, chosen)], library, sandbox,
                           cards=cards)
    ok = [t for t in played if t.correct]
    print("demonstrations played correct", len(ok), "of", len(played), flush=True)
    records = L.demonstration_records([t.segments() for t in ok], tok, settings.rollout)
    refresh = builders.refresh_learner(model, settings, mesh)
    s = L.sft_phase(refresh, refresh.state_from_params(state.params), records, steps=STEPS,
                    batch_size=settings.sft.batch_size, seed=1, rc=settings.rollout, pad_id=tok.pad_id)
    dev(grpo.state_from_params(s.params), f"after K={K} steps={STEPS} lr={LR}")

"""SFT then GRPO on one domain with a fixed library (no co-evolution): ``launch/train.py``'s job.

Global step numbering (metrics and checkpoints): SFT steps are 1..S, GRPO iteration ``i`` (from 0)
is step ``S + i + 1``. The checkpoint after the last SFT step already holds the GRPO learner's
state (fresh optimizer, the SFT params as the frozen reference); ``progress.phase`` says which
learner a checkpoint belongs to. A run resumes from its work directory's newest checkpoint and
repeats exactly what the uninterrupted run would have done (every batch and key is a function of
the seed and the step).
"""

from __future__ import annotations

import itertools
import json
import time
from pathlib import Path
from typing import Any

import ml_collections

from cocoda_jax.report import MetricsWriter
from cocoda_jax.rl import loop as L
from cocoda_jax.rl import trajectory as T
from cocoda_jax.rl.prompts import all_cards
from cocoda_jax.runs import common as C


def _progress_bar(total: int, initial: int, desc: str, enabled: bool):
    from tqdm import tqdm
    return tqdm(total=total, initial=initial, desc=desc, disable=not enabled, dynamic_ncols=True)


def run(config: ml_collections.ConfigDict, workdir: str | Path, *, progress: bool = True,
        stop_after_step: int | None = None, allow_config_change: bool = False) -> dict[str, Any]:
    """Runs (or resumes) the job; returns the summary also written to ``workdir/train_summary.json``.
    ``stop_after_step``: return after the checkpoint of that global step (tests of resumption)."""
    C.require(config, "seed", "domain", "model", "mesh", "rollout", "reward", "sft", "grpo", "sandbox", "checkpoint",
              "retrieval")
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    C.maybe_initialize_distributed(config)
    t_start = time.perf_counter()
    rc, rw, rcfg = C.rollout_config(config), C.reward_config(config), C.retrieval_config(config)
    seed = int(config.seed)
    with C.sandbox_for(config) as sandbox:
        domain = C.build_domain(config, sandbox)
        library = domain.library
        cards = C.prompt_cards(library, rcfg, [(str(t.id), t.program) for t in domain.train],
                               {str(t.id): t.question for t in domain.train})
        segments = L.gold_segments(domain.train, cards)
        # the BPE sees every tool name once, whatever the prompts show
        texts = itertools.chain(["\n".join(all_cards(library, rcfg.card_style))], (T.segments_text(s) for s in segments))
        tok = C.tokenizer_for(workdir, texts, config.model.vocab_size, config.model.hf_checkpoint)
        demos = L.demonstration_records(segments, tok, rc)
        if not demos:
            raise C.ConfigError(f"every demonstration is longer than rollout.max_len={rc.max_len} tokens (the "
                                f"prompt shows {len(cards.tools(domain.train[0]))} tool cards in retrieval.mode="
                                f"{rcfg.mode!r}): raise max_len or show fewer cards")
        mesh = C.mesh_of(config)
        model = C.build_planner(config, tok.vocab_size, mesh)
        sft_l, grpo_l = C.sft_learner(model, config, mesh), C.grpo_learner(model, config, mesh)
        with_ref = grpo_l.config.grpo.beta > 0
        S, I = int(config.sft.steps), int(config.grpo.iterations)

        latest = C.latest_checkpoint(workdir)
        C.check_resume_config(latest, config, allow_config_change)
        prog = dict(latest.payloads["progress"]) if latest else {"phase": "sft", "sft_accuracy": None, "evals": []}
        writer = MetricsWriter(workdir, resume_step=latest.step if latest else None)

        def save(step, state, ref=None):
            C.save_checkpoint(workdir, step, state, {"progress": prog, "library": library}, config, ref,
                              keep=config.checkpoint.keep)

        def stop(step):
            return stop_after_step is not None and step >= stop_after_step

        try:
            # ---------------------------------------------------------------- SFT
            if prog["phase"] == "sft":
                state = C.restore_state(workdir, sft_l, latest.step, False)[0] if latest else sft_l.init_state()
                bar = _progress_bar(S, int(state.step), "SFT", progress)
                every = int(config.checkpoint.every_sft_steps)

                def on_step(step, st, metrics):
                    writer.write(step, {f"sft/{k}": v for k, v in metrics.items()})
                    bar.update(1)
                    bar.set_postfix(loss=f"{metrics['loss']:.3f}")
                    if step < S and step % every == 0:
                        save(step, st)
                        if stop(step):
                            raise _Stop(step)

                state = L.sft_phase(sft_l, state, demos, steps=S, batch_size=config.sft.batch_size, seed=seed, rc=rc,
                                    pad_id=tok.pad_id, on_step=on_step)
                bar.close()
                ev = L.evaluate(sft_l.model(state), tok, domain.val, library, sandbox, rc, cards=cards,
                                reward_config=rw, seed=seed)
                writer.write(S, ev.metrics("val"))
                sft_test = L.evaluate(sft_l.model(state), tok, domain.test, library, sandbox, rc, cards=cards,
                                      reward_config=rw, seed=seed)
                writer.write(S, sft_test.metrics("sft_test"))
                prog.update(phase="grpo", sft_accuracy=ev.accuracy, sft_test_accuracy=sft_test.accuracy, iteration=0,
                            evals=[{"step": S, "iteration": 0, "val_accuracy": ev.accuracy}])
                grpo_state = grpo_l.state_from_params(state.params)
                ref = C.frozen_copy(grpo_state.params) if with_ref else None
                save(S, grpo_state, ref)
                if stop(S):
                    raise _Stop(S)
            else:
                grpo_state, ref = C.restore_state(workdir, grpo_l, latest.step, with_ref)

            # ---------------------------------------------------------------- GRPO
            bar = _progress_bar(I, int(prog["iteration"]), "GRPO", progress)
            for it in range(int(prog["iteration"]), I):
                tasks = L.sample_tasks(domain.train, config.grpo.tasks_per_iteration, seed, it)
                grpo_state, metrics, _ = L.grpo_iteration(
                    grpo_l, grpo_state, tok, tasks, library, sandbox, group_size=config.grpo.group_size, rc=rc,
                    cards=cards, key=L.iteration_key(seed, it), reward_config=rw, ref_params=ref,
                    mask_uniform_groups=config.grpo.mask_uniform_groups, ppo_epochs=int(config.grpo.ppo_epochs))
                step = S + it + 1
                writer.write(step, metrics)
                bar.update(1)
                bar.set_postfix(acc=f"{metrics['accuracy']:.2f}", r=f"{metrics['reward_mean']:.2f}")
                prog["iteration"] = it + 1
                if (it + 1) % int(config.grpo.eval_every) == 0 or it + 1 == I:
                    ev = L.evaluate(grpo_l.model(grpo_state), tok, domain.val, library, sandbox, rc,
                                    cards=cards, reward_config=rw, seed=seed)
                    writer.write(step, ev.metrics("val"))
                    prog["evals"] = list(prog["evals"]) + [{"step": step, "iteration": it + 1,
                                                            "val_accuracy": ev.accuracy}]
                if (it + 1) % int(config.checkpoint.every_iterations) == 0 or it + 1 == I:
                    save(step, grpo_state, ref)
                    if stop(step):
                        raise _Stop(step)
            bar.close()
        except _Stop as s:
            writer.close()
            return {"stopped_at_step": s.step}

        final = L.evaluate(grpo_l.model(grpo_state), tok, domain.test, library, sandbox, rc, cards=cards,
                           reward_config=rw, seed=seed)
        writer.write(S + I, final.metrics("test"))
        writer.close()
        evals = prog["evals"]
        best = max(evals, key=lambda e: e["val_accuracy"])
        summary = {
            "sft_steps": S, "grpo_iterations": I,
            "accuracy": {"sft_val": prog["sft_accuracy"], "grpo_val": evals[-1]["val_accuracy"],
                         "best_val": best["val_accuracy"], "best_val_iteration": best["iteration"],
                         "grpo_test": final.accuracy, "sft_test": prog.get("sft_test_accuracy")},
            "val_curve": evals, "calls_per_solved_test": final.calls_per_solved,
            "retrieval": C.retrieval_summary(cards, domain.test, final, tok, rc),
            "test_outcomes": final.outcomes(),
            "wall_s_this_process": time.perf_counter() - t_start,
        }
        (workdir / "train_summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
        return summary


class _Stop(Exception):
    def __init__(self, step: int):
        super().__init__(step)
        self.step = step


__all__ = ["run"]

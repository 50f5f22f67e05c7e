"""Co-evolution of the planner and the tool library: ``launch/coevolve.py``'s job.

Stage 1 (warm library): the symbolic abstractor folds the gold demonstrations into composites;
the demonstrations are refactored to call them. Stage 2 (SFT): the planner learns the refactored
demonstrations. Stage 3: rounds of

    tasks (RODS curriculum or a static pool) -> G rollouts each -> reward -> GRPO step   (x K)
    -> mine the round's successful trajectories -> validate -> INSERTTOOL
    -> refactor the stored demonstrations with the new composites -> a short SFT refresh on them
       (only when a composite was inserted: the planner must learn to call it)
    -> evaluate on the validation split -> accept the (planner, library) pair or keep the incumbent

``frozen_library`` (the baseline): no warm library, no mining, hence no refresh: the same GRPO
steps on the same tasks with the primitives only.

Checkpoints: one after SFT and one after every round (train state, the incumbent library, the
run's progress record, the stored demonstrations' programs, the RODS files). A resumed run repeats
the remaining rounds exactly as the uninterrupted run would: every batch and key derives from the
seed, the round and the iteration; the validation rewrite and INSERTTOOL are deterministic.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

import ml_collections
import numpy as np

from cocoda_jax.coevolve import acceptance as A
from cocoda_jax.coevolve.abstractor import AbstractorConfig, SymbolicAbstractor
from cocoda_jax.coevolve.sequences import SequenceAbstractor, pattern_from_json, pattern_to_json
from cocoda_jax.coevolve.rounds import abstraction_round, warm_library
from cocoda_jax.coevolve.traces import gold_trace, trace_from_trajectory
from cocoda_jax.coevolve.validate import ValidationConfig, play_programs
from cocoda_jax.report import MetricsWriter, write_html_report
from cocoda_jax.report import coevolution as REP
from cocoda_jax.rl import loop as L
from cocoda_jax.rl import trajectory as T
from cocoda_jax.rl.prompts import PromptCards, RetrievalConfig, all_cards
from cocoda_jax.rods.config import RodsConfig
from cocoda_jax.rods.curriculum import Curriculum
from cocoda_jax.rods.tracker import SIGNALS, tracking_reward
from cocoda_jax.runs import common as C

def _bar(total: int, initial: int, desc: str, enabled: bool):
    from tqdm import tqdm
    return tqdm(total=total, initial=initial, desc=desc, disable=not enabled, dynamic_ncols=True, leave=False)


# ------------------------------------------------------------------------------------------------
# Small pure helpers
# ------------------------------------------------------------------------------------------------


def rods_scalars(m: dict[str, Any]) -> dict[str, float]:
    """The RODS epoch metrics that are numbers, flattened for the metrics file and TensorBoard."""
    out: dict[str, float] = {"rods/live": m["live"], "rods/live_generated": m["live_generated"],
                             "rods/injected": m["injected"]}
    for region, n in (m.get("region_sizes") or {}).items():
        out[f"rods/size/{region}"] = n
    for region, v in (m.get("region_variance") or {}).items():
        if v is not None:
            out[f"rods/variance/{region}"] = v
    for key in ("boundary_variance_ratio", "injected_mean_reward", "injected_first_reward"):
        if m.get(key) is not None:
            out[f"rods/{key}"] = m[key]
    synth = m.get("synthesis") or {}
    if synth.get("acceptance_rate") is not None:
        out["rods/synthesis_acceptance_rate"] = synth["acceptance_rate"]
    return out


def read_tree(root: Path) -> dict[str, str]:
    """Every file under ``root`` as ``relative path -> text`` (the RODS state, for the checkpoint)."""
    if not root.is_dir():
        return {}
    return {str(p.relative_to(root)): p.read_text() for p in sorted(root.rglob("*")) if p.is_file()}


def write_tree(root: Path, files: dict[str, str]) -> None:
    """Replaces ``root`` by exactly ``files`` (written beside it, then renamed into place)."""
    tmp = root.with_name(root.name + ".restore")
    if tmp.exists():
        shutil.rmtree(tmp)
    for rel, text in files.items():
        path = tmp / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    if root.exists():
        shutil.rmtree(root)
    if files:
        os.replace(tmp, root)


# ------------------------------------------------------------------------------------------------
# The run
# ------------------------------------------------------------------------------------------------


@dataclasses.dataclass
class _Ctx:
    """What one run builds once and every stage reads (never checkpointed: rebuilt on resume)."""

    config: ml_collections.ConfigDict
    workdir: Path
    sandbox: Any
    domain: C.Domain
    rc: L.RolloutConfig
    retrieval: RetrievalConfig
    rw: Any
    tok: Any
    sft_l: Any
    grpo_l: Any
    refresh_l: Any
    tasks_by_id: dict
    primitive_names: frozenset
    frozen: bool
    progress: bool
    rods_signal: Any = None
    cards_cache: dict = dataclasses.field(default_factory=dict)


def _cards(ctx: _Ctx, snapshot: Any, programs: Any) -> PromptCards:
    """The prompts' candidate sets over ``snapshot`` with the usage evidence of the stored
    ``programs`` (memoised per pair: a library and its refactored demonstrations go together)."""
    programs = tuple(tuple(p) for p in programs)
    key = (id(snapshot), hash(programs))
    hit = ctx.cards_cache.get(key)
    if hit is None or hit[0] is not snapshot:
        questions = {i: ctx.tasks_by_id[i].question for i, _ in programs}
        hit = (snapshot, C.prompt_cards(snapshot, ctx.retrieval, programs, questions))
        while len(ctx.cards_cache) >= 2:  # a round needs at most the incumbent's and the candidate's
            ctx.cards_cache.pop(next(iter(ctx.cards_cache)))
        ctx.cards_cache[key] = hit
    return hit[1]


def _evaluate(ctx: _Ctx, params_model: Any, snapshot: Any, tasks, cards: PromptCards) -> L.Evaluation:
    return L.evaluate(params_model, ctx.tok, tasks, snapshot, ctx.sandbox, ctx.rc, cards=cards, reward_config=ctx.rw,
                      seed=int(ctx.config.seed))


def _round_record(ctx: _Ctx, r: int, decision: Any, snapshot: Any, ev: L.Evaluation, train_acc: float | None,
                  inserted: list[str], wall_s: float, previous: dict | None = None,
                  previous_library: Any = None) -> dict[str, Any]:
    """``previous``/``previous_library``: the last record and its library; the retrieval cost is
    measured again only when the library changed (an index build per round otherwise)."""
    if previous is not None and previous_library is snapshot:
        tokens = previous["retrieval_tokens_per_query"]
    else:
        questions = [t.question for t in ctx.domain.val[:int(ctx.config.report.retrieval_queries)]]
        tokens = REP.retrieval_tokens_per_query(snapshot, questions, k=int(ctx.config.report.retrieval_k)) \
            if questions else None
    return {"round": r, "outcome": decision.outcome if decision else "initial",
            "reason": decision.reason if decision else "the SFT planner with the warm library",
            **_library_fields(snapshot), "val_accuracy": ev.accuracy, "val_reward": ev.reward_mean,
            "train_accuracy": train_acc, "tool_calls_per_solved": ev.calls_per_solved,
            "composite_share": ev.composite_share, "retrieval_tokens_per_query": tokens, "inserted": inserted,
            "composite_uses": ev.composite_uses, "wall_s": wall_s}


def _library_fields(snapshot: Any) -> dict[str, int]:
    """The round record's library fields, from the report module's summary."""
    lib = REP.library_summary(snapshot)
    return {"library_size": lib["size"], "primitives": lib["primitives"], "composites": lib["composites"],
            "max_depth": lib["max_depth"]}


def _demo_trajectories(ctx: _Ctx, programs: list[tuple[str, str]], snapshot: Any, cards: PromptCards) -> list[Any]:
    """Stored (task id, program) pairs played in the sandbox over ``snapshot`` under the prompts
    ``cards`` give; the correct ones."""
    if not programs:
        return []
    tasks = [ctx.tasks_by_id[i] for i, _ in programs]
    played = play_programs(tasks, [p for _, p in programs], snapshot, ctx.sandbox, cards=cards)
    return [t for t in played if t.correct]


def _sft_demos(ctx: _Ctx, programs: list[tuple[str, str]], snapshot: Any, usage_programs: Any = None) -> list[Any]:
    """SFT records of ``programs`` over ``snapshot``; the prompts' usage evidence is
    ``usage_programs`` (default: ``programs``), the library's whole stored demonstration set."""
    cards = _cards(ctx, snapshot, programs if usage_programs is None else usage_programs)
    played = _demo_trajectories(ctx, programs, snapshot, cards)
    return L.demonstration_records([t.segments() for t in played], ctx.tok, ctx.rc)


def run(config: ml_collections.ConfigDict, workdir: str | Path, *, progress: bool = True,
        stop_after_round: int | None = None, allow_config_change: bool = False) -> dict[str, Any]:
    """Runs or resumes the co-evolution job; returns ``report.json``'s content (also written, with
    the plots, the DAG drawing and a library JSON per round, under ``workdir``). Resuming with a
    config other than the checkpoint's is a ConfigError unless ``allow_config_change``."""
    C.require(config, "seed", "domain", "model", "mesh", "rollout", "reward", "sft", "grpo", "sandbox",
              "checkpoint", "warm", "coevolve", "rods", "report", "retrieval")
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    C.maybe_initialize_distributed(config)
    t_process = time.perf_counter()
    rc, rw, rcfg = C.rollout_config(config), C.reward_config(config), C.retrieval_config(config)
    rods_cfg = C.section(config.rods, "thresholds", RodsConfig) if config.rods.enabled else None
    abs_cfg = C.section(config.coevolve, "abstractor", AbstractorConfig)
    acc_cfg = C.section(config.coevolve, "acceptance", A.AcceptanceConfig)
    frozen = bool(config.coevolve.frozen_library)
    seed = int(config.seed)
    signal = str(config.rods.get("signal", "reward"))
    if signal not in SIGNALS:
        raise C.ConfigError(f"config.rods.signal must be one of {SIGNALS}, got {signal!r}")
    has_gold = True  # the embedded domains record every gold intermediate value

    def rods_signal(t, b):
        return tracking_reward(t, has_gold, signal, b.total)

    with C.sandbox_for(config) as sandbox:
        domain = C.build_domain(config, sandbox)
        primitives = domain.library
        prim_names = frozenset(primitives.names())
        tasks_by_id = {str(t.id): t for t in (*domain.train, *domain.val, *domain.test)}
        sft_tasks = domain.train[:int(config.sft.n_demos)]
        cards = all_cards(primitives, rcfg.card_style)  # the texts are rendered only if a BPE is trained
        tok = C.tokenizer_for(workdir, (T.segments_text(T.demonstration_segments(t, cards)) for t in domain.train),
                              config.model.vocab_size, config.model.hf_checkpoint)
        mesh = C.mesh_of(config)
        model = C.build_planner(config, tok.vocab_size, mesh)
        ctx = _Ctx(config, workdir, sandbox, domain, rc, rcfg, rw, tok, C.sft_learner(model, config, mesh),
                   C.grpo_learner(model, config, mesh), C.refresh_learner(model, config, mesh), tasks_by_id,
                   prim_names, frozen, progress, rods_signal)
        with_ref = ctx.grpo_l.config.grpo.beta > 0

        latest = C.latest_checkpoint(workdir)
        C.check_resume_config(latest, config, allow_config_change)
        writer = MetricsWriter(workdir, resume_step=latest.step if latest else None)
        if latest is None:
            prog, library, state, ref = _stages_1_and_2(ctx, sft_tasks, primitives, abs_cfg, writer)
            _save(ctx, prog, library, state, ref)
        else:
            prog = dict(latest.payloads["progress"])
            library = latest.payloads["library"]
            state, ref = C.restore_state(workdir, ctx.grpo_l, latest.step, with_ref)
            if "rods_files" in latest.payloads and config.rods.enabled:
                write_tree(workdir / "rods", latest.payloads["rods_files"])

        curriculum = None
        seeds = domain.train[:int(config.rods.n_seeds)]
        if config.rods.enabled:
            curriculum = Curriculum(seeds, rods_cfg, workdir, run_seed=seed, library=library, sandbox=sandbox,
                                    background=bool(config.rods.background))
        try:
            state, library = _rounds(ctx, prog, library, state, ref, writer, curriculum, seeds, abs_cfg, acc_cfg,
                                     stop_after_round)
        finally:
            if curriculum is not None:
                curriculum.close()
            writer.close()
        if stop_after_round is not None and int(prog["round"]) < int(config.coevolve.rounds):
            return {"stopped_after_round": int(prog["round"])}
        return _finish(ctx, prog, state, library, t_process)


def _abstractor(ctx: _Ctx, config: AbstractorConfig, excluded: frozenset) -> Any:
    """The teacher-abstractor of this domain: dataflow motifs, or runs of stateful calls when the
    tasks act on an environment (their calls share state, not values; see coevolve/sequences.py)."""
    if ctx.domain.barrier_tools is not None:
        return SequenceAbstractor(config, excluded, frozenset(ctx.domain.barrier_tools))
    return SymbolicAbstractor(config, excluded)


def _stages_1_and_2(ctx: _Ctx, sft_tasks, primitives, abs_cfg: AbstractorConfig, writer: MetricsWriter):
    """Warm library (unless frozen), refactored demonstrations, SFT, the initial evaluation."""
    cfg = ctx.config
    t0 = time.perf_counter()
    traces = [gold_trace(t) for t in sft_tasks]
    if ctx.frozen:
        library, demo_traces, warm_log = primitives, traces, []
    else:
        warm = warm_library(traces, primitives, ctx.sandbox, rounds=int(cfg.warm.rounds), config=abs_cfg,
                            make_abstractor=lambda excluded: _abstractor(ctx, abs_cfg, excluded))
        library, demo_traces = warm.snapshot, list(warm.traces)
        warm_log = [o.to_record() for o in warm.rounds]
    programs = [(tr.task_id, tr.program()) for tr in demo_traces]
    demos = _sft_demos(ctx, programs, library)
    warm_s = time.perf_counter() - t0
    # SFT
    state = ctx.sft_l.init_state()
    steps = int(cfg.sft.steps)
    bar = _bar(steps, 0, "stage 2: SFT", ctx.progress)

    def on_step(step, st, metrics):
        writer.write(step, {f"sft/{k}": v for k, v in metrics.items()})
        bar.update(1)
        bar.set_postfix(loss=f"{metrics['loss']:.3f}")

    state = L.sft_phase(ctx.sft_l, state, demos, steps=steps, batch_size=int(cfg.sft.batch_size),
                        seed=int(cfg.seed), rc=ctx.rc, pad_id=ctx.tok.pad_id, on_step=on_step)
    bar.close()
    ev = _evaluate(ctx, ctx.sft_l.model(state), library, ctx.domain.val, _cards(ctx, library, programs))
    grpo_state = ctx.grpo_l.state_from_params(state.params)
    ref = C.frozen_copy(grpo_state.params) if ctx.grpo_l.config.grpo.beta > 0 else None
    writer.write(steps, {"val/accuracy": ev.accuracy})
    record = _round_record(ctx, 0, None, library, ev, None, sorted(set(library.names()) - ctx.primitive_names),
                           time.perf_counter() - t0)
    inc = A.initial("round-0", library, ev.accuracy, ev.used_tools)
    prog = {"round": 0, "global_step": steps, "records": [record], "sft_accuracy": ev.accuracy,
            "warm": {"rounds": warm_log, "seconds": warm_s, "demos": len(demos)},
            "demo_programs": [list(p) for p in programs], "excluded": [],
            "incumbent": {"round": 0, "val_reward": inc.val_reward, "best_reward": inc.best_reward,
                          "used_tools": sorted(inc.used_tools)},
            "decisions": [], "rods_metrics": []}
    return prog, library, grpo_state, ref


def _save(ctx: _Ctx, prog: dict, library: Any, state: Any, ref: Any) -> None:
    payloads = {"progress": prog, "library": library}
    if ctx.config.rods.enabled:
        payloads["rods_files"] = read_tree(ctx.workdir / "rods")
    C.save_checkpoint(ctx.workdir, int(prog["global_step"]), state, payloads, ctx.config, ref,
                      keep=int(ctx.config.checkpoint.keep))
    lib_dir = ctx.workdir / "library"
    lib_dir.mkdir(exist_ok=True)
    (lib_dir / f"round_{int(prog['round']):03d}.json").write_text(library.to_json())


def _rounds(ctx: _Ctx, prog: dict, library: Any, state: Any, ref: Any, writer: MetricsWriter, curriculum: Any,
            seeds, abs_cfg: AbstractorConfig, acc_cfg: A.AcceptanceConfig, stop_after_round: int | None):
    cfg = ctx.config
    R, K = int(cfg.coevolve.rounds), int(cfg.grpo.iterations_per_round)
    seed = int(cfg.seed)
    inc_info = prog["incumbent"]
    incumbent = A.Incumbent(int(inc_info["round"]), f"round-{inc_info['round']}", library,
                            float(inc_info["val_reward"]), float(inc_info["best_reward"]),
                            frozenset(inc_info["used_tools"]))
    rounds_bar = _bar(R, int(prog["round"]), "stage 3: rounds", ctx.progress)
    while int(prog["round"]) < R:
        if stop_after_round is not None and int(prog["round"]) >= stop_after_round:
            break
        r = int(prog["round"]) + 1
        t_round = time.perf_counter()
        step = int(prog["global_step"])
        cards = _cards(ctx, library, prog["demo_programs"])
        successes: dict[tuple[str, str], Any] = {}
        accs = []
        for k in range(K):
            it = (r - 1) * K + k
            if curriculum is not None:
                tasks = list(curriculum.sample(int(cfg.grpo.tasks_per_iteration), seed=seed * 100_003 + it))
            else:
                tasks = L.sample_tasks(seeds, int(cfg.grpo.tasks_per_iteration), seed, it, stream=11)
            for t in tasks:
                ctx.tasks_by_id.setdefault(str(t.id), t)
            state, metrics, iteration = L.grpo_iteration(
                ctx.grpo_l, state, ctx.tok, tasks, library, ctx.sandbox, group_size=int(cfg.grpo.group_size),
                rc=ctx.rc, cards=cards, key=L.iteration_key(seed, it), reward_config=ctx.rw, ref_params=ref,
                mask_uniform_groups=bool(cfg.grpo.mask_uniform_groups), ppo_epochs=int(cfg.grpo.ppo_epochs))
            step += 1
            writer.write(step, {**metrics, "round": r})
            accs.append(metrics["accuracy"])
            if curriculum is not None:
                curriculum.observe(dict(iteration.group_rewards(ctx.rods_signal)))
            for t, b in zip(iteration.trajectories, iteration.breakdowns):
                if t.correct and b.total >= float(cfg.coevolve.rho):
                    successes.setdefault((t.task_id, t.program), t)
        candidate_library, inserted, accepted_cands, round_log = library, [], [], {}
        if not ctx.frozen and successes:
            excluded = frozenset(pattern_from_json(p) for p in prog["excluded"])
            mined = [trace_from_trajectory(t, library, ctx.tasks_by_id[t.task_id].inputs,
                                           getattr(ctx.tasks_by_id[t.task_id], "environment", None))
                     for t in successes.values()]
            outcome = abstraction_round(mined, library, ctx.sandbox, _abstractor(ctx, abs_cfg, excluded),
                                        ValidationConfig(), r)
            round_log = outcome.to_record()
            rejected = {rej.name for rej in outcome.result.rejections}
            prog["excluded"] = list(prog["excluded"]) + [pattern_to_json(c.pattern) for c in outcome.candidates
                                                         if c.name in rejected]
            candidate_library = outcome.result.snapshot
            inserted = [t.name for t in outcome.result.accepted]
            accepted_cands = [c for c in outcome.candidates if c.name in set(inserted)]
        # refactor the stored demonstrations with the new composites; a short SFT refresh on them
        programs = [tuple(p) for p in prog["demo_programs"]]
        if accepted_cands:
            new_programs = []
            for played in _demo_trajectories(ctx, programs, library, cards):
                task = ctx.tasks_by_id[played.task_id]
                tr = trace_from_trajectory(played, library, task.inputs, getattr(task, "environment", None))
                for c in accepted_cands:
                    tr, _ = c.pattern.rewrite(tr, c.name, c.arg_order)
                new_programs.append((tr.task_id, tr.program()))
            programs = new_programs
        refresh = int(cfg.coevolve.refresh_sft_steps)
        if refresh > 0 and accepted_cands:
            rng = np.random.default_rng([seed, 13, r])
            pick = [programs[i] for i in rng.choice(len(programs), min(len(programs), int(cfg.coevolve.refresh_demos)),
                                                     replace=False)]
            demos = _sft_demos(ctx, pick, candidate_library, usage_programs=programs)
            if demos:
                sft_state = ctx.refresh_l.state_from_params(state.params)
                sft_state = L.sft_phase(ctx.refresh_l, sft_state, demos, steps=refresh,
                                        batch_size=int(cfg.sft.batch_size), seed=seed * 1000 + r, rc=ctx.rc,
                                        pad_id=ctx.tok.pad_id)
                state = ctx.grpo_l.state_from_params(sft_state.params)
                step += refresh
        # evaluate and decide
        candidate_cards = _cards(ctx, candidate_library, programs) if accepted_cands else cards
        ev = _evaluate(ctx, ctx.grpo_l.model(state), candidate_library, ctx.domain.val, candidate_cards)
        proposal = A.Proposal(r, f"round-{r}", candidate_library, ev.accuracy, ev.used_tools)
        new_inc, decision = A.decide(incumbent, proposal, acc_cfg)
        if decision.outcome == "reject" and candidate_library is not library:
            alone = _evaluate(ctx, ctx.grpo_l.model(state), library, ctx.domain.val, cards)
            proposal = dataclasses.replace(proposal, planner_only_reward=alone.accuracy,
                                           planner_only_used_tools=alone.used_tools)
            new_inc, decision = A.decide(incumbent, proposal, acc_cfg)
            if decision.outcome == "accept_planner":
                ev = alone
        if decision.outcome == "reject":
            prev = C.restore_state(ctx.workdir, ctx.grpo_l, int(prog["global_step"]), ref is not None)
            state = prev[0]
            ev_final = None
        else:
            ev_final = ev
        incumbent = new_inc
        previous_library = library
        if decision.outcome == "accept":
            library = candidate_library
            prog["demo_programs"] = [list(p) for p in programs]
        rods_m = None
        if curriculum is not None:
            curriculum.set_library(library)
            rods_m = curriculum.end_epoch()
            prog["rods_metrics"] = list(prog["rods_metrics"]) + [rods_m]
        record = _round_record(ctx, r, decision, library if decision.outcome != "reject" else incumbent.library,
                               ev_final if ev_final is not None else ev, float(np.mean(accs)),
                               inserted if decision.outcome == "accept" else [], time.perf_counter() - t_round,
                               previous=prog["records"][-1], previous_library=previous_library)
        if decision.outcome == "reject":  # the kept pair's numbers, not the refused proposal's
            prev_rec = prog["records"][-1]
            for key in ("val_accuracy", "val_reward", "tool_calls_per_solved", "composite_share", "composite_uses"):
                record[key] = prev_rec[key]
            record["proposal_val_accuracy"] = ev.accuracy
        record["mining"] = round_log
        prog["records"] = list(prog["records"]) + [record]
        prog["decisions"] = list(prog["decisions"]) + [decision.to_record()]
        prog["incumbent"] = {"round": incumbent.round, "val_reward": incumbent.val_reward,
                             "best_reward": incumbent.best_reward, "used_tools": sorted(incumbent.used_tools)}
        prog["round"] = r
        prog["global_step"] = step
        scalars = {"val/accuracy": record["val_accuracy"], "library/size": record["library_size"],
                   "library/max_depth": record["max_depth"], "val/composite_share": record["composite_share"],
                   "round/accepted": float(decision.accepted)}
        if record["tool_calls_per_solved"] is not None:
            scalars["val/calls_per_solved"] = record["tool_calls_per_solved"]
        if rods_m is not None:
            scalars.update(rods_scalars(rods_m))
        writer.write(step, scalars)
        _save(ctx, prog, library, state, ref)
        rounds_bar.update(1)
        rounds_bar.set_postfix(acc=f"{record['val_accuracy']:.2f}", lib=record["library_size"],
                               outcome=decision.outcome)
    rounds_bar.close()
    return state, library


def _finish(ctx: _Ctx, prog: dict, state: Any, library: Any, t_process: float) -> dict[str, Any]:
    """The final test evaluation of the incumbent (the loop's last state: the accepted planner),
    report.json, plots and the DAG drawing."""
    cards = _cards(ctx, library, prog["demo_programs"])
    test = _evaluate(ctx, ctx.grpo_l.model(state), library, ctx.domain.test, cards)
    rounds = [{k: v for k, v in rec.items() if k in REP.ROUND_KEYS} for rec in prog["records"]]
    wall = sum(float(rec["wall_s"]) for rec in prog["records"])
    report = REP.build_report(rounds, sft_accuracy=prog["sft_accuracy"], final_accuracy=prog["records"][-1]["val_accuracy"],
                              final_library=library, primitive_names=ctx.primitive_names, wall_s=wall,
                              extra={"test_accuracy": test.accuracy, "frozen_library": ctx.frozen,
                                     "decisions": prog["decisions"], "warm": prog["warm"],
                                     "wall_s_this_process": time.perf_counter() - t_process,
                                     "retrieval": C.retrieval_summary(cards, ctx.domain.test, test, ctx.tok, ctx.rc),
                                     "test_outcomes": test.outcomes(),
                                     "test_per_category": C.per_category(ctx.domain, ctx.domain.test, test),
                                     "rods_per_epoch": prog["rods_metrics"] or None})
    REP.write_report(report, ctx.workdir / "report.json")
    REP.plot_coevolution(rounds, ctx.workdir / "plots")
    REP.draw_library(library, ctx.workdir / "plots" / "library_dag.svg", primitive_names=ctx.primitive_names)
    write_html_report(ctx.workdir)  # reads the report, the library JSONs, the metrics and the DAG drawing
    return report


__all__ = ["rods_scalars", "pattern_from_json", "pattern_to_json", "read_tree", "run", "write_tree"]

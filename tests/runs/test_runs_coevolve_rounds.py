"""A co-evolution round on the path the tiny run never takes (its planner scores 0 throughout, so
every proposal passes): a refused proposal. The validation accuracies are scripted; everything else
is the real job."""

import dataclasses
import json
from types import SimpleNamespace

import pytest

from cocoda_jax.coevolve.acceptance import AcceptanceConfig, initial
from cocoda_jax.report import read_metrics
from cocoda_jax.rl import loop
from cocoda_jax.runs import coevolve, rundir
from cocoda_jax.report.rounds import Outcome
from cocoda_jax.errors import ConfigError
from cocoda_jax.runs.progress import RunProgress
from cocoda_jax.runs.settings import RunSettings
from tests.runs.conftest import tiny_config

pytestmark = pytest.mark.filterwarnings("ignore:Some donated buffers were not usable")


def _scripted_evaluations(monkeypatch, accuracies):
    """``loop.evaluate`` runs as usual but reports the next of ``accuracies`` (then 0.0)."""
    real, script, seen = loop.evaluate, iter(accuracies), []

    def evaluate(*args, **kwargs):
        ev = dataclasses.replace(real(*args, **kwargs), accuracy=next(script, 0.0))
        seen.append(ev.accuracy)
        return ev

    monkeypatch.setattr(loop, "evaluate", evaluate)
    return seen


def test_a_refused_proposal_keeps_the_incumbent_pair_and_its_numbers(tmp_path, monkeypatch):
    # the SFT planner scores 0.5; round 1's proposal 0.0, below 0.5 - tolerance: refused
    seen = _scripted_evaluations(monkeypatch, [0.5, 0.0])
    config = tiny_config(coevolve__rounds=1, rods__enabled=False, coevolve__explore_tasks=2, coevolve__explore_samples=3)
    report = coevolve.run(config, tmp_path, progress=False)
    assert seen[:2] == [0.5, 0.0]  # then the test split's
    assert [d["outcome"] for d in report["decisions"]] == [Outcome.REJECT]
    initial, refused = report["per_round"]
    assert refused["outcome"] == "reject" and refused["inserted"] == []
    for key in ("val_accuracy", "val_reward", "tool_calls_per_solved", "composite_share", "composite_uses",
                "library_size", "retrieval_tokens_per_query"):
        assert refused[key] == initial[key], key
    assert refused["val_accuracy"] == 0.5
    lib = tmp_path / "library"
    assert (lib / "round_001.json").read_bytes() == (lib / "round_000.json").read_bytes()
    progress = RunProgress.from_json(rundir.latest_checkpoint(tmp_path).payloads["progress"])
    assert progress.round == 1 and progress.last_record.proposal_val_accuracy == 0.0
    assert refused["proposal_val_accuracy"] == 0.0  # report.json shows what the refused proposal scored
    assert progress.incumbent.round == 0 and progress.incumbent.best_reward == 0.5
    assert progress.global_step == tiny_config().sft.steps + 1  # the GRPO step counts, though undone
    round_end = [r for r in read_metrics(tmp_path / "metrics.jsonl") if "round/accepted" in r]
    assert [r["round/accepted"] for r in round_end] == [0.0] and round_end[0]["val/accuracy"] == 0.5
    # the round's search ran in the real job: 2 answer-only tasks, 3 samples each (the tiny planner solves none);
    # with RODS off (a static draw) rods.admit_explored, on by default, has no pool to admit into
    assert refused["mechanism"]["explore"] == {"tasks": 2, "rollouts": 6, "solved": 0, "found": 0, "admitted": 0}
    assert refused["stage_s"]["explore"] > 0


def _decide_with_scores(monkeypatch, scores, rule):
    """``coevolve.decide`` on a round that grew the library, with the validation accuracy of each
    (planner state, library) scripted by ``scores``; returns the verdict and what was evaluated."""
    old, new = frozenset({"add", "subtract"}), frozenset({"add", "subtract", "grow"})
    evaluated = []

    def evaluate(ctx, state, snapshot, tasks, cards):
        evaluated.append((state, "new" if snapshot is new else "old"))
        uses = {"grow": 3} if snapshot is new else {}  # only the pair's prompts show the new composite
        return SimpleNamespace(accuracy=scores[evaluated[-1]], used_tools=frozenset({"add"}), composite_uses=uses)

    monkeypatch.setattr(coevolve, "_evaluate", evaluate)
    monkeypatch.setattr(coevolve, "_cards", lambda *args: "candidate cards")
    ctx = SimpleNamespace(settings=SimpleNamespace(coevolve=SimpleNamespace(acceptance=rule)),
                          domain=SimpleNamespace(val=()))
    mined = coevolve.Mined(library=new, inserted=("grow",), accepted=("a candidate",))
    refactored = coevolve.Refactored(programs=(), state="refreshed", step=12)
    trained = coevolve.GrpoRound(state="grpo only", step=11, accuracies=(0.5,), successes=())
    verdict = coevolve.decide(ctx, 1, initial("round-0", old, 0.50, ("add",)), old, "cards", mined, refactored,
                              trained)
    return verdict, evaluated


def test_growth_that_does_not_pay_keeps_the_grpo_planner_without_its_refresh(monkeypatch):
    # the pair (refreshed planner, grown library) 0.48 is inside the 0.04 tolerance of 0.50, but the
    # round's GRPO planner alone with the old library scores 0.52: the growth did not pay
    scores = {("refreshed", "new"): 0.48, ("grpo only", "old"): 0.52}
    verdict, evaluated = _decide_with_scores(monkeypatch, scores, AcceptanceConfig(tolerance=0.04))
    assert evaluated == [("refreshed", "new"), ("grpo only", "old")]
    assert verdict.outcome is Outcome.ACCEPT_PLANNER and verdict.state == "grpo only"
    assert verdict.evaluation.accuracy == 0.52 and verdict.incumbent.library == frozenset({"add", "subtract"})
    assert verdict.pair_accuracy == 0.48  # what the refused growth scored, for the round record
    # the new composite's calls are counted where it was in the prompts: the pair's rollouts
    assert verdict.pair_composite_uses == {"grow": 3} and verdict.evaluation.composite_uses == {}
    mined = coevolve.Mined(library=frozenset(), inserted=("grow",), log={"proposed": ["grow"]})
    refactored = coevolve.Refactored(programs=(), state="refreshed", step=12, new=(("t9", "answer = n0"),))
    mech = coevolve.mechanism(coevolve.GrpoRound("s", 1, (0.5,), ()), mined, refactored, verdict)
    assert mech["composites"] == {"proposed": 1, "validated": 1, "accepted": 0, "called_on_validation": 3}
    assert mech["new_demonstrations"] == 1
    # without the rule the pair is accepted and the planner alone is never evaluated
    verdict, evaluated = _decide_with_scores(monkeypatch, scores,
                                             AcceptanceConfig(tolerance=0.04, growth_must_pay=False))
    assert evaluated == [("refreshed", "new")]
    assert verdict.outcome is Outcome.ACCEPT and verdict.state == "refreshed"


def test_growth_that_pays_keeps_the_refreshed_planner_and_the_new_library(monkeypatch):
    scores = {("refreshed", "new"): 0.55, ("grpo only", "old"): 0.52}
    verdict, _ = _decide_with_scores(monkeypatch, scores, AcceptanceConfig(tolerance=0.04))
    assert verdict.outcome is Outcome.ACCEPT and verdict.state == "refreshed"
    assert "grow" in verdict.incumbent.library
    scores = {("refreshed", "new"): 0.30, ("grpo only", "old"): 0.40}  # both below 0.50 - 0.04
    verdict, _ = _decide_with_scores(monkeypatch, scores, AcceptanceConfig(tolerance=0.04))
    assert verdict.outcome is Outcome.REJECT and verdict.state is None


@pytest.mark.slow
def test_a_round_refactors_the_stored_demonstrations_without_playing_them_again(tmp_path, monkeypatch):
    """Stage 2 plays the stored demonstrations once; a round that inserts a composite refactors them
    from their remembered traces and plays only the refresh sample in the sandbox. The refactored
    traces are exactly what their programs replay to over the grown library (checked by playing them)."""
    from configs import chaos

    played, checked = [], []
    real_play, real_refactor = coevolve.play_programs, coevolve.refactor_and_refresh

    def play(tasks, programs, *args, **kwargs):
        played.append(len(programs))
        return real_play(tasks, programs, *args, **kwargs)

    def refactor(ctx, r, library, cards, demo_programs, mined, trained):
        out = real_refactor(ctx, r, library, cards, demo_programs, mined, trained)
        if mined.accepted:
            n = len(played)
            fresh = dataclasses.replace(ctx, demo_traces={})
            replayed = coevolve.stored_traces(fresh, out.programs, mined.library,
                                              coevolve._cards(ctx, mined.library, out.programs))
            del played[n:]  # this check's own play
            checked.append((len(out.programs), replayed == list(out.traces)))
        return out

    monkeypatch.setattr(coevolve, "play_programs", play)
    monkeypatch.setattr(coevolve, "refactor_and_refresh", refactor)
    config = chaos.get_config()
    config.coevolve.rounds, config.coevolve.refresh_demos, config.rods.enabled = 1, 3, False
    report = coevolve.run(config, tmp_path, progress=False)
    assert report["per_round"][1]["stage_s"]["refactor_and_refresh"] > 0
    assert checked and checked[0][0] >= 3 and checked[0][1], checked  # round 1 inserted a composite
    assert played == [config.sft.n_demos, 3]  # stage 2: every stored demonstration; round 1: the refresh sample


def test_a_rounds_successes_on_undemonstrated_tasks_join_the_stored_demonstrations():
    """``coevolve.keep_successes``: the first solved program of each task without a stored demonstration,
    in order; a task already demonstrated keeps its own."""
    stored = (("t1", "answer = a(n0)\n"),)
    successes = [SimpleNamespace(task_id=i, program=p) for i, p in
                 (("t1", "answer = b(n0)\n"), ("t2", "answer = c(n0)\n"), ("t3", "answer = d(n0)\n"),
                  ("t2", "answer = e(n0)\n"))]
    assert coevolve._new_demonstrations(stored, successes) == (("t2", "answer = c(n0)\n"), ("t3", "answer = d(n0)\n"))
    assert coevolve._new_demonstrations(stored, []) == ()


def test_a_refused_round_keeps_its_new_solutions_and_an_accepted_one_its_refactored_set():
    stored = (("t1", "answer = a(n0)\n"),)
    new = (("t2", "answer = c(n0)\n"),)
    refactored = coevolve.Refactored(programs=(("t1", "answer = grow(n0)\n"), ("t2", "answer = grow(n0)\n")),
                                     state="s", step=3, new=new)
    assert coevolve.kept_demonstrations(stored, refactored, accepted=False) == stored + new
    assert coevolve.kept_demonstrations(stored, refactored, accepted=True) == refactored.programs
    nothing_new = dataclasses.replace(refactored, new=())
    assert coevolve.kept_demonstrations(stored, nothing_new, accepted=False) == stored


def _explore_context(explore_tasks, explore_samples=4, rounds_seed=5):
    tasks = [SimpleNamespace(id=f"t{i}") for i in range(10)]
    settings = SimpleNamespace(
        coevolve=SimpleNamespace(explore_tasks=explore_tasks, explore_samples=explore_samples, rho=0.5),
        rollout=SimpleNamespace(sampling=lambda: "sampling", max_steps=4, max_len=64, timeout_s=1.0, host_shards=1),
        reward="reward settings", model=SimpleNamespace(scan_layers=False))
    learner = SimpleNamespace(model=lambda state: ("planner", state))
    return SimpleNamespace(settings=settings, domain=SimpleNamespace(train=tasks), tasks_by_id={}, distributed=False,
                           grpo_learner=learner, tokenizer="tok", sandbox="sandbox", rounds_seed=rounds_seed)


def test_the_search_samples_answer_only_tasks_and_keeps_each_ones_first_success(monkeypatch):
    """``coevolve.explore``: ``explore_samples`` rollouts of the given planner on ``explore_tasks`` training
    tasks without a stored demonstration, drawn from (rounds seed, round); a task's first rollout that is
    correct with a reward >= rho is its success, one per task."""
    sampled = []

    def play_rows(learner, state, tokenizer, rows, library, sandbox, *, key, rollouts, **kwargs):
        sampled.append(((learner.model(state), rollouts), [t.id for t in rows], key))
        # a rollout is correct on its task's odd samples; the reward is 0.4 on t1 (below rho), else 1.0
        trajs = [SimpleNamespace(task_id=t.id, correct=j % 2 == 1, program=f"{t.id}#{j}")
                 for t, j in zip(rows, [k % 4 for k in range(len(rows))])]
        return trajs, [None] * len(rows), [SimpleNamespace(total=0.4 if t.task_id == "t1" else 1.0) for t in trajs]

    monkeypatch.setattr(coevolve.loop, "play_rows", play_rows)
    ctx = _explore_context(explore_tasks=4)
    stored = (("t0", "answer = a(n0)\n"), ("t2", "answer = b(n0)\n"))
    out = coevolve.explore(ctx, 1, "library", "cards", "state", stored)
    (model, rows, key), = sampled
    chosen = rows[::4]
    assert model == (("planner", "state"), None) and rows == [t for t in chosen for _ in range(4)]
    assert len(set(chosen)) == 4 and not {"t0", "t2"} & set(chosen)  # answer-only tasks, each once
    assert set(ctx.tasks_by_id) == set(chosen)
    assert (out.tasks, out.rollouts) == (4, 16)
    assert [(t.task_id, t.program) for t in out.successes] == [(i, f"{i}#1") for i in chosen if i != "t1"]
    # every task is solved in 2 of its 4 samples: all four are found (solved now and then)
    assert [t.id for t in out.found] == chosen
    assert out.summary() == {"tasks": 4, "rollouts": 16, "solved": len(out.successes), "found": 4, "admitted": 0}
    # the draw is a function of (rounds seed, round): the same again, another round draws on its own
    again = coevolve.explore(_explore_context(explore_tasks=4), 1, "library", "cards", "state", stored)
    assert [t.task_id for t in again.successes] == [t.task_id for t in out.successes]
    assert sampled[1][1] == rows and (sampled[1][2] == key).all()
    coevolve.explore(_explore_context(explore_tasks=4), 2, "library", "cards", "state", stored)
    assert not (sampled[2][2] == key).all()
    # off, or nothing left to search: no rollout
    assert coevolve.explore(_explore_context(explore_tasks=0), 1, "library", "cards", "state", stored) == coevolve.Explored()
    everything = tuple((f"t{i}", "answer = a(n0)\n") for i in range(10))
    assert coevolve.explore(ctx, 1, "library", "cards", "state", everything) == coevolve.Explored()
    assert len(sampled) == 3


def test_rods_seeds_come_from_the_training_tasks_or_the_answer_only_ones():
    """``rods.seed_pool``: GRPO's seeds are ``n_seeds`` tasks from ``seed_start`` on, of all the training
    tasks or of those the domain gives no program for; a pool that ends before ``seed_start``, or an
    answer-only pool of a domain that demonstrates everything, is a ConfigError naming the key."""
    train = tuple(SimpleNamespace(id=f"t{i}") for i in range(10))
    domain = coevolve.domains.Domain("d", train, (), (), None, demonstrated=frozenset({"t0", "t2", "t3", "t5"}))

    def rods(**over):
        return RunSettings.of(tiny_config(**{f"rods__{k}": v for k, v in over.items()})).rods

    assert [t.id for t in coevolve.rods_seeds(domain, rods(n_seeds=3, seed_start=1))] == ["t1", "t2", "t3"]
    only = coevolve.rods_seeds(domain, rods(n_seeds=3, seed_start=1, seed_pool="answer_only"))
    assert [t.id for t in only] == ["t4", "t6", "t7"]  # t1, t4, t6, t7, t8, t9 have answers only
    assert len(coevolve.rods_seeds(domain, rods(n_seeds=50, seed_pool="answer_only"))) == 6
    with pytest.raises(ConfigError, match=r"rods.seed_start=6 is past the domain's 6 answer-only training tasks"):
        coevolve.rods_seeds(domain, rods(seed_start=6, seed_pool="answer_only"))
    everything = dataclasses.replace(domain, demonstrated=None)
    with pytest.raises(ConfigError, match="seed_pool='answer_only'"):
        coevolve.rods_seeds(everything, rods(seed_pool="answer_only"))


def test_the_tasks_the_search_found_join_rods_pool_in_the_real_job(tmp_path, monkeypatch):
    """``rods.admit_explored``: what the round's search found (here scripted: the tiny planner solves nothing)
    joins RODS's live pool; the round's probation iteration draws it, the boundary makes it a synthesis
    parent, the report counts it, and the run resumed after round 1 ends where the uninterrupted one does."""
    real, given = coevolve.explore, []

    def explore(ctx, r, *args):  # two answer-only tasks a round, from the end: none is among RODS's seeds
        out, n = real(ctx, r, *args), len(ctx.domain.answer_only)
        found = tuple(ctx.domain.answer_only[n - 2 * r:n - 2 * r + 2])
        given.extend(str(t.id) for t in found)
        return dataclasses.replace(out, found=found)

    monkeypatch.setattr(coevolve, "explore", explore)
    over = dict(coevolve__rounds=2, grpo__iterations_per_round=2, grpo__iterations=4,
                coevolve__probation_iterations=1, coevolve__explore_tasks=2, coevolve__explore_samples=2,
                rods__admit_explored=True, rods__background=False)
    config = tiny_config(**over)
    config.rods.thresholds.found_variants = 0  # the boundary plans them (default: 4 at once)
    report = coevolve.run(config, tmp_path / "whole", progress=False)
    pool = json.loads(next((tmp_path / "whole").glob("rods/pool_*2.json")).read_text())
    found = [it["task_id"] for it in pool["items"] if it["origin"] == "found"]
    assert found == given and len(set(given)) == 4
    parents = {d["task_id"] for d in pool["log"] if d["action"] == "synthesize" and d["reason"] == "found"}
    assert parents == set(found)
    for r in (1, 2):
        mech = report["per_round"][r]["mechanism"]
        assert mech["explore"]["admitted"] == 2 and mech["rods_draws_by_region"].get("found", 0) >= 1
    assert coevolve.run(config, tmp_path / "resumed", progress=False, stop_after_round=1) == {"stopped_after_round": 1}
    coevolve.run(config, tmp_path / "resumed", progress=False)
    for name in ("pool_000002.json", "tracker_000002.json", "extra_000002.json"):
        assert (tmp_path / "resumed/rods" / name).read_bytes() == (tmp_path / "whole/rods" / name).read_bytes()

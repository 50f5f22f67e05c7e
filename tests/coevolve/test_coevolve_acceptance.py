"""Conservative updates: unit cases and property tests over simulated recorded rounds."""

import dataclasses
import math

import pytest
from hypothesis import given, settings, strategies as st

from cocoda_jax.coevolve.acceptance import (
    AcceptanceConfig, Incumbent, Proposal, decide, initial, run_rounds, tool_names,
)

TOOLS = ("add", "subtract", "percent_of", "grow", "discount", "discount_tax", "split")
BASE = frozenset({"add", "subtract", "percent_of"})


def _start(reward=0.5, used=("add",)):
    return initial("sft", BASE, reward, used)


def test_accepts_within_tolerance_and_logs_why():
    new, d = decide(_start(), Proposal(1, "p1", BASE | {"grow"}, 0.48, frozenset({"grow"})),
                    AcceptanceConfig(tolerance=0.05))
    assert d.outcome == "accept" and d.accepted and new.planner == "p1" and new.library == BASE | {"grow"}
    assert new.best_reward == 0.5 and new.used_tools == {"add", "grow"}
    assert d.to_record()["kept"] == "new planner and new library"


def test_rejects_a_drop_beyond_tolerance_and_keeps_everything():
    start = _start()
    new, d = decide(start, Proposal(1, "p1", BASE | {"grow"}, 0.40), AcceptanceConfig(tolerance=0.05))
    assert d.outcome == "reject" and new is start and "below" in d.reason
    assert "round 0" in d.kept


def test_rejects_a_library_that_drops_a_used_tool_even_with_a_better_reward():
    start = _start(used=("add", "subtract"))
    new, d = decide(start, Proposal(1, "p1", frozenset({"add", "percent_of"}), 0.9), AcceptanceConfig())
    assert d.outcome == "reject" and d.missing_tools == ("subtract",) and new is start


def test_rejects_trajectories_that_use_tools_outside_their_library():
    _, d = decide(_start(), Proposal(1, "p1", BASE, 0.9, frozenset({"ghost"})))
    assert d.outcome == "reject" and d.missing_tools == ("ghost",)


def test_keeps_the_new_planner_with_the_old_library_when_that_passes():
    start = _start()
    proposal = Proposal(1, "p1", BASE | {"grow"}, 0.3, frozenset({"grow"}), planner_only_reward=0.55,
                        planner_only_used_tools=frozenset({"subtract"}))
    new, d = decide(start, proposal)
    assert d.outcome == "accept_planner" and new.planner == "p1" and new.library is start.library
    assert new.val_reward == 0.55 and new.used_tools == {"add", "subtract"}
    _, off = decide(start, proposal, AcceptanceConfig(allow_planner_only=False))
    assert off.outcome == "reject"


def test_growth_must_pay_refuses_a_pair_below_the_planner_alone_inside_the_tolerance():
    start = _start()
    proposal = Proposal(1, "p1-refreshed", BASE | {"grow"}, 0.48, frozenset({"grow"}), planner_only_reward=0.50,
                        planner_only_used_tools=frozenset({"add"}), planner_alone="p1-grpo")
    new, d = decide(start, proposal, AcceptanceConfig(tolerance=0.05))
    assert d.outcome == "accept_planner" and "does not pay" in d.reason
    assert new.planner == "p1-grpo" and new.library is start.library and new.val_reward == 0.50
    # the same pair without the rule: accepted inside the tolerance, as before
    new, d = decide(start, proposal, AcceptanceConfig(tolerance=0.05, growth_must_pay=False))
    assert d.outcome == "accept" and new.planner == "p1-refreshed" and new.library == BASE | {"grow"}


def test_growth_that_ties_the_planner_alone_is_kept():
    proposal = Proposal(1, "p1", BASE | {"grow"}, 0.50, frozenset({"grow"}), planner_only_reward=0.50)
    new, d = decide(_start(), proposal, AcceptanceConfig(tolerance=0.05))
    assert d.outcome == "accept" and new.library == BASE | {"grow"}


def test_a_refused_growth_falls_back_to_reject_when_the_planner_alone_fails_too():
    proposal = Proposal(1, "p1", BASE | {"grow"}, 0.47, frozenset({"grow"}), planner_only_reward=0.48)
    start = _start()
    new, d = decide(start, proposal, AcceptanceConfig(tolerance=0.05, allow_planner_only=False))
    assert d.outcome == "reject" and new is start and "does not pay" in d.reason
    new, d = decide(start, dataclasses.replace(proposal, planner_only_reward=0.40), AcceptanceConfig(tolerance=0.05))
    assert d.outcome == "accept" and new.val_reward == 0.47  # the pair beats the planner alone: growth paid


def test_best_reference_stops_a_slow_slide_that_last_allows():
    rewards = [0.50, 0.46, 0.42, 0.38]
    proposals = [Proposal(i + 1, f"p{i + 1}", BASE, r) for i, r in enumerate(rewards[1:])]
    _, best, _ = run_rounds(_start(0.50), proposals, AcceptanceConfig(tolerance=0.05, reference="best"))
    _, last, _ = run_rounds(_start(0.50), proposals, AcceptanceConfig(tolerance=0.05, reference="last"))
    assert [d.outcome for d in best] == ["accept", "reject", "reject"]
    assert [d.outcome for d in last] == ["accept", "accept", "accept"]


def test_config_and_inputs_are_validated():
    with pytest.raises(ValueError):
        AcceptanceConfig(tolerance=-0.1)
    with pytest.raises(ValueError):
        AcceptanceConfig(reference="mean")
    with pytest.raises(ValueError, match="lacks"):
        initial("sft", BASE, 0.5, ("grow",))
    _, d = decide(_start(), Proposal(1, "p", BASE, math.nan))
    assert d.outcome == "reject" and "finite" in d.reason


def test_tool_names_reads_snapshots(math_library):
    assert tool_names(math_library) == frozenset(math_library.names())


# -- properties over simulated recorded rounds ---------------------------------------------------

rewards = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)
tool_sets = st.frozensets(st.sampled_from(TOOLS), max_size=len(TOOLS))


@st.composite
def proposals(draw, rnd):
    library = BASE | draw(tool_sets) if draw(st.booleans()) else draw(tool_sets)   # sometimes drops tools
    used = draw(st.frozensets(st.sampled_from(sorted(library) or ["add"]), max_size=3))
    if draw(st.integers(0, 9)) == 0:
        used |= {"ghost"}                                                            # sometimes inconsistent
    alone = draw(st.none() | rewards)
    alone_used = draw(st.frozensets(st.sampled_from(TOOLS), max_size=2))
    alone_planner = draw(st.none() | st.just(f"planner{rnd}-alone"))
    return Proposal(rnd, f"planner{rnd}", library, draw(rewards), used, alone, alone_used, alone_planner)


@st.composite
def recorded_runs(draw):
    n = draw(st.integers(1, 12))
    config = AcceptanceConfig(tolerance=draw(st.sampled_from([0.0, 0.01, 0.05, 0.2])),
                              reference=draw(st.sampled_from(["best", "last"])),
                              allow_planner_only=draw(st.booleans()), growth_must_pay=draw(st.booleans()))
    start = initial("sft", BASE, draw(rewards), draw(st.frozensets(st.sampled_from(sorted(BASE)), max_size=2)))
    return start, [draw(proposals(i + 1)) for i in range(n)], config


@settings(max_examples=120, deadline=None)
@given(recorded_runs())
def test_accepted_rewards_never_fall_beyond_the_tolerance(run):
    start, props, config = run
    _, decisions, history = run_rounds(start, props, config)
    best, last = start.val_reward, start.val_reward
    for d, inc in zip(decisions, history):
        if d.accepted:
            reference = best if config.reference == "best" else last
            assert inc.val_reward >= reference - config.tolerance - 1e-12
            best, last = max(best, inc.val_reward), inc.val_reward
        assert inc.best_reward == best
    if config.reference == "best":   # the whole accepted sequence stays within tolerance of its running max
        accepted = [start.val_reward] + [h.val_reward for d, h in zip(decisions, history) if d.accepted]
        assert all(r >= max(accepted[:i + 1]) - config.tolerance - 1e-12 for i, r in enumerate(accepted))


@settings(max_examples=120, deadline=None)
@given(recorded_runs())
def test_no_accepted_library_drops_a_tool_an_accepted_trajectory_uses(run):
    start, props, config = run
    _, decisions, history = run_rounds(start, props, config)
    used_so_far = set(start.used_tools)
    for p, d, inc in zip(props, decisions, history):
        if d.outcome == "accept":
            used_so_far |= p.used_tools
        elif d.outcome == "accept_planner":
            used_so_far |= p.planner_only_used_tools
        assert used_so_far <= tool_names(inc.library)
        assert inc.used_tools == used_so_far


@settings(max_examples=120, deadline=None)
@given(recorded_runs())
def test_under_growth_must_pay_an_accepted_pair_never_scores_below_its_planner_alone(run):
    start, props, config = run
    _, decisions, history = run_rounds(start, props, config)
    for p, d, inc in zip(props, decisions, history):
        if d.outcome == "accept" and config.growth_must_pay and p.planner_only_reward is not None:
            assert p.val_reward >= p.planner_only_reward
        if d.outcome == "accept_planner":  # the planner kept is the one measured alone
            assert inc.planner == (p.planner if p.planner_alone is None else p.planner_alone)


@settings(max_examples=80, deadline=None)
@given(recorded_runs())
def test_a_rejected_round_keeps_the_incumbent_and_the_fold_is_pure(run):
    start, props, config = run
    final, decisions, history = run_rounds(start, props, config)
    previous = start
    for d, inc in zip(decisions, history):
        if not d.accepted:
            assert inc is previous
        else:
            assert isinstance(inc, Incumbent) and inc.round == d.round
        previous = inc
    assert run_rounds(start, props, config) == (final, decisions, history)

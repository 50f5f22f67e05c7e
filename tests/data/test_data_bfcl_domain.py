"""BFCL multi-turn as a domain: gold programs played through the action checker, the sandbox and the
real backends are accepted by BFCL's own checker; a dropped call or a changed argument is not;
episodes never share backend state; demonstrations equal the played episodes."""

from __future__ import annotations

import pytest

from cocoda_jax.coevolve.validate import play_programs
from cocoda_jax.rl import trajectory as T
from third_party.benchmarks import bfcl as loader
from third_party.benchmarks import bfcl_domain as D

PER_CATEGORY = 6


@pytest.fixture(scope="module")
def library(bfcl_library):
    return bfcl_library


@pytest.fixture(scope="module")
def sandbox(bfcl_sandbox):
    return bfcl_sandbox


@pytest.fixture(scope="module")
def tasks(library, sandbox):
    entries = [e for c in D.MULTI_TURN for e in loader.load_category(c)[:PER_CATEGORY]]
    built, dropped = D.build_tasks(entries, library, sandbox)
    assert not dropped
    return built


def test_the_library_holds_every_executable_function_and_end_turn(library):
    assert "end_turn" in library and "cd" in library and "post_tweet" in library and "book_flight" in library
    assert len(library) == 129  # 128 functions of the eight classes + end_turn
    assert "environment_call" in library.tool("cd").source


def test_gold_replays_score_one_in_every_category(tasks, library, sandbox):
    played = play_programs(tasks, [t.program for t in tasks], library, sandbox)
    assert {t.category for t in tasks} == set(D.MULTI_TURN)
    assert [p.r_res for p in played] == [1.0] * len(tasks)
    # every call went to a real backend, turn by turn as BFCL splits them
    for task, p in zip(tasks, played):
        turns = D.calls_by_turn(p.environment_calls, task.n_turns)
        assert [len(t) for t in turns] == [len(t) for t in task.entry.ground_truth]


def _without_line(program: str, index: int) -> str:
    lines = program.splitlines()
    return "\n".join(lines[:index] + lines[index + 1:])


def test_a_dropped_call_or_a_changed_argument_fails(tasks, library, sandbox):
    base = [t for t in tasks if t.category == "multi_turn_base"][:4]
    dropped, changed = [], []
    for t in base:
        lines = t.program.splitlines()
        call_lines = [i for i, line in enumerate(lines) if "end_turn" not in line]
        dropped.append(_without_line(t.program, call_lines[-1]))
        i = next(i for i in call_lines if "'" in lines[i])
        changed.append("\n".join(lines[:i] + [lines[i].replace("'", "'zz_", 1)] + lines[i + 1:]))
    played = play_programs(base + base, dropped + changed, library, sandbox)
    assert [p.r_res for p in played] == [0.0] * len(played)


def test_episodes_never_share_backend_state(tasks, library, sandbox):
    """A wrong episode and the gold one of the same task, in one lockstep batch, several times."""
    t = next(t for t in tasks if t.category == "multi_turn_base")
    wrong = _without_line(t.program, 0)
    played = play_programs([t, t, t, t], [wrong, t.program, wrong, t.program], library, sandbox)
    assert [p.r_res for p in played] == [0.0, 1.0, 0.0, 1.0]
    assert played[1].environment_calls == played[3].environment_calls


def test_end_turn_reveals_the_next_user_turn_whole(tasks, library, sandbox):
    t = next(t for t in tasks if t.n_turns > 1 and len(" ".join(t.environment["turns"][1])) > 150)
    p = play_programs([t], [t.program], library, sandbox)[0]
    first_end = next(s for s in p.steps if "end_turn" in s.text)
    assert first_end.observation == "-> " + repr("\n".join(t.environment["turns"][1]))


def test_demonstrations_equal_the_played_episodes(tasks, library, sandbox):
    cards = library.names()[:8]
    played = play_programs(tasks[:4], [t.program for t in tasks[:4]], library, sandbox, cards=lambda task: cards)
    for t, p in zip(tasks[:4], played):
        assert T.segments_text(T.demonstration_segments(t, cards)) == p.text


def test_gold_steps_are_positional_in_the_tools_order_with_gaps_filled(library):
    classes = ("GorillaFileSystem",)
    assert D.gold_step("find(name='test')", classes, library) == "find('.', 'test')"
    assert D.gold_step("sort('final_report.pdf')", classes, library) == "sort('final_report.pdf')"
    assert D.gold_step("ls(a=True)", classes, library) == "ls(True)"
    with pytest.raises(ValueError, match="no backend"):
        D.gold_step("post_tweet(content='x')", classes, library)


def test_calls_by_turn_splits_at_end_turn():
    log = [("GorillaFileSystem", "cd", {"folder": "a"}), ("Conversation", "end_turn", {}),
           ("Conversation", "end_turn", {}), ("GorillaFileSystem", "ls", {"a": True}),
           ("Conversation", "end_turn", {}), ("GorillaFileSystem", "pwd", {})]
    assert D.calls_by_turn(log, 3) == [["cd(folder='a')"], [], ["ls(a=True)"]]


def test_the_gold_report_names_each_failure_and_its_cause():
    result = D.evaluate_gold(["simple_python", "multi_turn_base"], limit=5, workers=1)
    assert result["policy"] == "gold"
    assert {c: v["accuracy"] for c, v in result["per_category"].items()} == {"simple_python": 1.0,
                                                                              "multi_turn_base": 1.0}
    with pytest.raises(ValueError, match="not supported"):
        D.evaluate_gold(["memory"])


def test_the_one_scenario_whose_gold_does_not_replay_is_left_out_with_its_reason(library, sandbox):
    entry = next(e for e in loader.load_category("multi_turn_base") if e.id == "multi_turn_base_173")
    built, dropped = D.build_tasks([entry], library, sandbox)
    assert built == () and "ill_typed" in dropped["multi_turn_base_173"]


def test_turns_passed_counts_the_turns_before_the_first_failure(tasks, library, sandbox):
    t = next(t for t in tasks if t.category == "multi_turn_base" and t.n_turns >= 3)
    lines = t.program.splitlines()
    first_call = next(i for i, line in enumerate(lines) if "end_turn" not in line)
    last_call = max(i for i, line in enumerate(lines) if "end_turn" not in line)
    programs = [t.program, "\n".join(lines[:last_call] + lines[last_call + 1:]),
                "\n".join(lines[:first_call] + lines[first_call + 1:])]
    played = play_programs([t] * 3, programs, library, sandbox)
    passed = [t.turns_passed(p.environment_calls) for p in played]
    assert passed[0] == t.n_turns and passed[2] == 0
    assert passed[1] < t.n_turns and passed[1] >= 1

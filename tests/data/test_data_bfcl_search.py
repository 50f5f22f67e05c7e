"""BFCL conversations under ``retrieval.cards="search"``: the demonstrations search in each user turn
that needs functions no earlier card showed, and replay to BFCL's verdict of the plain gold programs."""

from __future__ import annotations

import pytest

from cocoda_jax.coevolve.validate import play_programs
from cocoda_jax.rl.prompts import PromptCards, RetrievalConfig
from third_party.benchmarks import bfcl as loader
from third_party.benchmarks import bfcl_domain as D


@pytest.fixture(scope="module")
def library(bfcl_library):
    return bfcl_library


@pytest.fixture(scope="module")
def sandbox(bfcl_sandbox):
    return bfcl_sandbox


@pytest.fixture(scope="module")
def tasks(library, sandbox):
    entries = loader.load_category("multi_turn_base")[:4]
    built, dropped = D.build_tasks(entries, library, sandbox)
    assert not dropped
    return built


def _turn_of_each_step(program: str) -> list[int]:
    turns, turn = [], 0
    for line in program.splitlines():
        turns.append(turn)
        turn += "end_turn()" in line
    return turns


def test_demonstrations_search_per_user_turn_and_score_as_the_gold(tasks, library, sandbox):
    cards = PromptCards(library, RetrievalConfig(cards="search", k=12, l2_shortlist=16, l2_keep=24))
    programs = [cards.demonstration(t, t.program) for t in tasks]
    played = play_programs(tasks, programs, library, sandbox, cards=cards)
    assert [p.r_res for p in played] == [1.0] * len(tasks)
    assert [p.environment_calls for p in played] == \
        [p.environment_calls for p in play_programs(tasks, [t.program for t in tasks], library, sandbox)]
    later_turns = 0
    for task, program in zip(tasks, programs):
        lines = program.splitlines()
        searched_turns = {turn for line, turn in zip(lines, _turn_of_each_step(program)) if line.startswith("search(")}
        assert 0 in searched_turns  # the prompt shows no cards: the first turn must ask
        later_turns += len(searched_turns - {0})
        assert [line for line in lines if not line.startswith("search(")] == task.program.strip().splitlines()
    assert later_turns >= 1  # some conversation needs new functions in a later turn and asks there


def test_each_functions_own_typed_search_finds_it(library):
    from cocoda_jax.rl.prompts import search_query
    cards = PromptCards(library, RetrievalConfig(cards="search", k=12, l2_shortlist=16, l2_keep=24))
    missed = {typed: [n for n in library.names()
                      if n not in cards.search_tools(search_query(library.tool(n))[1],
                                                     search_query(library.tool(n))[0] if typed else None)]
              for typed in (False, True)}
    assert missed[True] == []  # with the signature, L1 narrows the pool: every function is found
    assert len(missed[False]) <= 12  # three words alone miss a few of the 129 (9 when measured)

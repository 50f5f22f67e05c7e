"""The planner's search step: its grammar, its observation (the cascade's cards for the query), that
it is not a tool call, the demonstrations that teach it, and the default path it leaves alone."""

import dataclasses

import pytest

from cocoda_jax.coevolve.traces import trace_from_trajectory
from cocoda_jax.coevolve.validate import play_programs
from cocoda_jax.data import synthetic_math as sm
from cocoda_jax.retrieval.cascade import retrieve
from cocoda_jax.rl import actions as A
from cocoda_jax.rl import loop as L
from cocoda_jax.rl import rewards as R
from cocoda_jax.rl import trajectory as T
from cocoda_jax.rl.prompts import PromptCards, RetrievalConfig, search_query, search_step, search_subgoal
from cocoda_jax.types import parse_type

TASKS = sm.generate(24, seed=0, split="train", max_depth=2)


def _cards(library, cards="search", **kw):
    return PromptCards(library, RetrievalConfig(cards=cards, **kw))


# ------------------------------------------------------------------------------------------------
# Grammar
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("text, query, signature", [
    ('search("move a file into a folder")', "move a file into a folder", None),
    ("search('percent  of\ta price')", "percent of a price", None),
    ('search("(str, str) -> dict", "move file")', "move file", "(str, str) -> dict[Any, Any]"),
    ('search("(x: float, y: float) -> float", "add")', "add", "(x: float, y: float) -> float"),
])
def test_a_well_formed_search_parses_and_checks_ok(math_library, text, query, signature):
    check = A.check_step(text, math_library, {}, search=True)
    assert check.ok and check.is_search and not check.is_answer
    assert (check.step.query, check.step.signature, check.step.target, check.step.tool) == (query, signature, "", None)
    assert check.result_type is None
    with pytest.raises(ValueError, match="binds no name"):
        A.bind({}, check)


@pytest.mark.parametrize("text, says", [
    ("search()", "string literals"),
    ("search(1)", "string literals"),
    ("search(n0)", "string literals"),
    ('search("a", "b", "c")', "string literals"),
    ('search(query="x")', "string literals"),
    ('search("(float) -> float", 3)', "string literals"),
    ('search("   ")', "empty"),
    ('search("(float -> float", "add")', "does not parse"),
    ('search("float float", "add")', "does not parse"),
    ('x0 = search("add")', "without a target"),
    ('search("add"); search("x")', "statements"),
])
def test_a_malformed_search_is_a_typed_step_error(math_library, text, says):
    check = A.check_step(text, math_library, {"n0": parse_type("float")}, search=True)
    assert check.kind == "malformed" and says in check.message
    assert A.render_observation(check).startswith("-> error[malformed]: ")


def test_without_the_option_a_search_is_malformed_as_before(math_library):
    plain = A.check_step('search("add two numbers")', math_library, {})
    assert plain.kind == "malformed" and plain.message.startswith("a step must be one assignment")
    assert A.check_step('x0 = search("add")', math_library, {}).kind == "unknown_tool"


def test_the_option_is_a_retrieval_setting_with_the_question_as_default():
    assert RetrievalConfig().cards == "question"
    with pytest.raises(ValueError, match="retrieval.cards"):
        RetrievalConfig(cards="sometimes")
    with pytest.raises(ValueError, match="needs retrieval.mode='cascade'"):
        RetrievalConfig(cards="search", mode="full")


# ------------------------------------------------------------------------------------------------
# The observation
# ------------------------------------------------------------------------------------------------


def _played(library, sandbox, cards, task, steps, max_steps=None):
    policy = T.ScriptedPolicy(T.render_prompt(task, T.cards_of(cards, task)), tuple(steps))
    return T.run_episode(policy, task, library, sandbox, max_steps or len(steps), cards=cards)


@pytest.mark.parametrize("style", ["bare", "compact"])
def test_the_observation_is_the_cascades_cards_for_the_query(math_library, sandbox, style):
    cards = _cards(math_library, card_style=style, k=5)
    task = TASKS[0]
    steps = ('search("(float, float) -> float", "the p percent of x")', 'search("round a number to digits")',
             *task.program.strip().splitlines())
    played = _played(math_library, sandbox, cards, task, steps)
    assert played.correct and played.searches == 2
    cfg = cards.config.cascade()
    typed = retrieve(cards.index, search_subgoal("the p percent of x", "(float, float) -> float"), cfg)
    words = retrieve(cards.index, search_subgoal("round a number to digits"), cfg)
    render = T.compact_card if style == "compact" else (lambda t: t.name)
    for step, out in zip(played.steps[:2], (typed, words)):
        want = tuple(render(math_library.tool(n)) for n in out.selected)
        assert len(want) == 5
        assert step.observation == A.render_search(want) == A.OBSERVATION_PREFIX + A.SEARCH_SEPARATOR.join(want)
        assert step.outcome.value == want and step.calls == ()
    assert "percent_of" in typed.selected and "round_to" in words.selected


def test_the_stated_signature_is_what_l1_matches(generic_library):
    cards = _cards(generic_library)
    sub = search_subgoal("the word in capitals", "(str) -> str")
    assert sub.inputs == (parse_type("str"),) and sub.output == parse_type("str") and sub.values is None
    typed = cards.search_tools("the word in capitals", "(str) -> str")
    assert typed[0] == "shout"
    # a float signature prunes the str tool at L1, whatever the words say
    assert "shout" not in cards.search_tools("the word in capitals", "(float, float) -> float")
    assert "shout" in cards.search_tools("the word in capitals")


def test_search_tokens_count_in_the_episode_and_are_not_trainable(math_library, sandbox):
    task = TASKS[0]
    cards = _cards(math_library)
    program = task.program.strip().splitlines()
    search = 'search("(float, float) -> float", "the p percent of x")'
    plain = _played(math_library, sandbox, cards, task, program)
    asked = _played(math_library, sandbox, cards, task, [search, *program])
    encode = lambda s: list(s.encode("utf-8"))  # noqa: E731 (one token per byte: counts are exact)
    a, b = T.tokenize_segments(plain.segments(), encode), T.tokenize_segments(asked.segments(), encode)
    obs = asked.steps[0].observation + "\n"
    assert len(b) == len(a) + len(search) + 1 + len(obs)
    assert sum(b.loss_mask) == sum(a.loss_mask) + len(search) + 1  # the action is trained, the cards are not
    assert asked.text == asked.prompt + search + "\n" + obs + plain.text[len(plain.prompt):]


# ------------------------------------------------------------------------------------------------
# A search is not a tool call
# ------------------------------------------------------------------------------------------------


def test_a_search_is_not_a_tool_call_nor_a_turn(composite_library, sandbox):
    task = sm.make_task(0, "train", 3, depth=2)
    cards = _cards(composite_library)
    program = task.program.strip().splitlines()
    searches = ['search("the p percent of x")', 'search("(float) -> float", "miles")']
    plain = _played(composite_library, sandbox, cards, task, program)
    asked = _played(composite_library, sandbox, cards, task, [searches[0], *program[:2], searches[1], *program[2:]],
                    max_steps=len(program))  # the searches do not use up the turns the program needs
    assert plain.correct and asked.correct and asked.answer == plain.answer and asked.stop == "answer"
    assert asked.calls == plain.calls and asked.attempted_calls == plain.attempted_calls
    assert asked.values == plain.values and asked.program == plain.program and asked.progress == plain.progress
    for config in (R.RewardConfig(), R.RewardConfig(normalize_by_calls=True)):
        assert R.reward(asked, composite_library, config) == R.reward(plain, composite_library, config)
    assert trace_from_trajectory(asked, composite_library, task.inputs) == \
        trace_from_trajectory(plain, composite_library, task.inputs)


def test_an_episode_of_searches_alone_ends(math_library, sandbox):
    cards = _cards(math_library)
    played = _played(math_library, sandbox, cards, TASKS[1], ['search("add")'] * 10, max_steps=3)
    assert played.searches == 3 and played.stop == "max_steps" and not played.answered and played.r_res == 0.0


# ------------------------------------------------------------------------------------------------
# Demonstrations
# ------------------------------------------------------------------------------------------------


def test_search_query_is_the_tools_own_signature_and_first_words(math_library):
    tool = math_library.tool("percent_of")
    signature, words = search_query(tool)
    assert signature == "(float, float) -> float" and words == "percent example discount"
    assert search_step(tool) == "search('percent example discount')"
    assert search_step(tool, typed=True) == "search('(float, float) -> float', 'percent example discount')"
    assert search_query(math_library.tool("add")) == ("(float, float) -> float", "add two numbers")


def test_each_tools_own_search_finds_it(math_library):
    cards = _cards(math_library)
    for typed in (False, True):
        missed = [n for n in math_library.names()
                  if n not in cards.search_tools(search_query(math_library.tool(n))[1],
                                                 search_query(math_library.tool(n))[0] if typed else None)]
        assert missed == []


@pytest.mark.parametrize("source, typed", [("search", False), ("both", False), ("search", True)])
def test_demonstrations_search_before_each_unshown_tool_and_replay_to_the_same_answers(math_library, sandbox, source,
                                                                                      typed):
    cards = _cards(math_library, cards=source, search_typed=typed)
    programs = [cards.demonstration(t, t.program) for t in TASKS]
    plain = play_programs(TASKS, [t.program for t in TASKS], math_library, sandbox, cards=cards)
    asked = play_programs(TASKS, programs, math_library, sandbox, cards=cards)
    assert all(p.correct for p in plain) and all(p.correct for p in asked)
    assert [p.answer for p in asked] == [p.answer for p in plain]
    assert [p.calls for p in asked] == [p.calls for p in plain]
    for task, program, played in zip(TASKS, programs, asked):
        assert program == cards.demonstration(task, task.program)  # deterministic
        shown = set(cards.tools(task))
        for step in played.steps:
            if step.is_search:
                shown.update(n for n in cards.search_tools(step.check.step.query, step.check.step.signature))
            elif step.check.step.tool is not None:
                assert step.check.step.tool in shown  # every tool called was on a card the context showed
    assert all((s.check.step.signature is not None) == typed for p in asked for s in p.steps if s.is_search)
    counts = [p.searches for p in asked]
    if source == "search":
        assert min(counts) >= 1 and all(not cards(t) for t in TASKS)
    else:
        assert 0 in counts and max(counts) >= 1
        assert all(p.searches == 0 for t, p in zip(TASKS, asked)
                   if {c for c in p.calls} <= set(cards.tools(t)))
    # the segments built without running equal the played demonstrations (SFT's loss mask included)
    segments = L.gold_segments(TASKS, cards)
    assert [T.segments_text(s) for s in segments] == [p.text for p in asked]
    assert [T.char_mask(s) for s in segments] == [T.char_mask(p.segments()) for p in asked]


def test_the_default_demonstrations_and_prompts_are_unchanged(math_library, sandbox):
    default = PromptCards(math_library, RetrievalConfig())
    assert default.searcher is None
    assert all(default.demonstration(t, t.program) is t.program for t in TASKS)
    assert L.gold_segments(TASKS, default) == [T.demonstration_segments(t, default(t)) for t in TASKS]
    # the prompt's cards under "both" are the question's, as by default
    both = dataclasses.replace(default.config, cards="both")
    assert [PromptCards(math_library, both)(t) for t in TASKS] == [default(t) for t in TASKS]
    # a planner that writes a search under the default gets the malformed step it always got
    played = _played(math_library, sandbox, default, TASKS[0], ['search("add")', *TASKS[0].program.splitlines()],
                     max_steps=8)
    assert played.steps[0].kind == "malformed" and played.searches == 0


def test_the_report_counts_the_searches_tokens(math_library, sandbox):
    from cocoda_jax.runs.builders import retrieval_summary
    cards = _cards(math_library)
    task = TASKS[0]
    program = task.program.strip().splitlines()
    asked = _played(math_library, sandbox, cards, task, ['search("add")', 'search("(float) -> float", "x")', *program])
    plain = _played(math_library, sandbox, cards, TASKS[1], TASKS[1].program.strip().splitlines())
    encode = lambda s: list(s.encode("utf-8"))  # noqa: E731

    class Tok:
        pass
    tok = Tok()
    tok.encode = encode
    rc = L.RolloutConfig()
    out = retrieval_summary(cards, [task, TASKS[1]], L.summarize([asked, plain], math_library), tok, rc)
    want = sum(len(s.text) + 1 + len(s.observation) + 1 for s in asked.steps[:2])
    assert out["cards"] == "search" and out["searches_per_episode"] == 1.0 and out["episodes_with_search"] == 0.5
    assert out["search_tokens_per_episode"] == want / 2
    default = retrieval_summary(PromptCards(math_library, RetrievalConfig()), [task], L.summarize([plain], math_library),
                                tok, rc)
    assert "searches_per_episode" not in default and "cards" not in default

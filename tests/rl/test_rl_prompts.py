"""The planner's candidate set C_q(L): a pure function of (question, snapshot, config, usage), never
more than k cards and only tools of the snapshot, the same prompt for SFT, GRPO and evaluation, and
recall of the gold tools on held-out questions that the usage evidence actually earns."""

import dataclasses

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cocoda_jax.coevolve.validate import gold_tool_sets
from cocoda_jax.data import synthetic_math as sm
from cocoda_jax.retrieval.rankers import BM25Ranker
from cocoda_jax.retrieval.synthetic_library import with_distractors
from cocoda_jax.retrieval.usage import UsageIndex, program_tools
from cocoda_jax.rl import loop as L
from cocoda_jax.rl import trajectory as T
from cocoda_jax.rl.prompts import PromptCards, RetrievalConfig, all_cards, candidate_tools

TRAIN = sm.generate(300, seed=0, split="train", max_depth=2)
HELD_OUT = sm.generate(40, seed=0, split="train", start=1_000_000, max_depth=2)


@pytest.fixture(scope="module")
def usage():
    return UsageIndex.from_programs([(str(t.id), t.program) for t in TRAIN], {str(t.id): t.question for t in TRAIN})


@pytest.fixture(scope="module")
def grown(math_library):
    """The primitives among 200 tools: distractors of other domains and of the same numeric types."""
    return with_distractors(math_library, 200, seed=0)


def test_modes(math_library, usage):
    task = HELD_OUT[0]
    assert candidate_tools(task, math_library, RetrievalConfig(mode="full")) == math_library.topological_order()
    assert candidate_tools(task, math_library, RetrievalConfig(mode="none")) == ()
    chosen = candidate_tools(task, math_library, RetrievalConfig(mode="cascade", k=5), usage)
    assert len(chosen) == 5 and len(set(chosen)) == 5
    with pytest.raises(ValueError, match="retrieval.mode"):
        RetrievalConfig(mode="everything")
    with pytest.raises(ValueError, match="card_style"):
        RetrievalConfig(card_style="poster")


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(i=st.integers(0, len(HELD_OUT) - 1), k=st.integers(1, 20), with_usage=st.booleans(),
       neighbours=st.integers(0, 12))
def test_candidate_set_is_bounded_pure_and_of_the_snapshot(grown, usage, i, k, with_usage, neighbours):
    task = HELD_OUT[i]
    cfg = RetrievalConfig(k=k, neighbours=neighbours)
    first = candidate_tools(task, grown, cfg, usage if with_usage else None)
    assert len(first) <= k and len(set(first)) == len(first)
    assert all(n in grown for n in first)
    assert candidate_tools(task, grown, cfg, usage if with_usage else None) == first
    # the memoising holder answers the same as the function
    assert PromptCards(grown, cfg, usage if with_usage else None).tools(task) == first


def test_children_come_along_with_composites(composite_library):
    task = dataclasses.replace(HELD_OUT[0], question="A price gets a discount then a tax: discount tax price.")
    cfg = RetrievalConfig(k=2, with_children=True, usage_weight=0.0)
    chosen = candidate_tools(task, composite_library, cfg)
    composites = [n for n in chosen[:2] if composite_library.is_composite(n)]
    for c in composites:
        assert set(composite_library.children(c)) <= set(chosen)


def test_sft_grpo_and_evaluation_see_the_same_prompt(math_library, sandbox, usage):
    cards = PromptCards(math_library, RetrievalConfig(k=6), usage)
    tasks = HELD_OUT[:3]
    sft_prompts = [segs[0].text for segs in L.gold_segments(tasks, cards)]
    played = [T.gold_demonstration(t, math_library, sandbox, cards=cards) for t in tasks]

    def silent(contexts):
        return ["" for _ in contexts]

    rollouts = T.run_episodes(silent, tasks, math_library, sandbox, max_steps=1, cards=cards)
    assert sft_prompts == [p.prompt for p in played] == [r.prompt for r in rollouts]
    for t, prompt in zip(tasks, sft_prompts):
        assert prompt == T.render_prompt(t, cards(t))
        assert prompt.startswith(T.PROMPT_HEADER + "\n" + "\n".join(cards(t)) + "\n\n")
    # a task's own demonstration is not its usage evidence: a training task's set is built like a
    # held-out one's (up to the BM25 statistics its record still adds to the corpus)
    own = TRAIN[0]
    alone = UsageIndex([r for r in usage.records if r.task_id != str(own.id)])
    assert usage.votes(own.question, 10, exclude=str(own.id)) == pytest.approx(alone.votes(own.question, 10), rel=0.02)


def test_usage_votes():
    idx = UsageIndex.from_programs([("a", "x0 = add(n0, n1)\nanswer = x0"), ("b", "x0 = mean(n0)\nanswer = x0")],
                                   {"a": "Tom adds apples and pears", "b": "the average of the scores"})
    votes = idx.votes("how many apples and pears together", 5)
    assert set(votes) == {"add"} and votes["add"] == pytest.approx(1.0)
    assert idx.votes("nothing in common here", 5) == {}
    assert idx.votes("apples and pears", 5, exclude="a") == {}
    assert program_tools("x0 = percent_of(n0, n1)\nx1 = subtract(n1, x0)\nanswer = x1") == {"percent_of", "subtract"}
    assert UsageIndex([]).votes("anything") == {}


def test_expanded_texts_carry_the_words_of_the_questions_that_call_a_tool():
    idx = UsageIndex.from_programs([("a", "x0 = add(n0, n1)\nanswer = x0"), ("b", "x0 = add(n0, n1)\nanswer = x0"),
                                    ("c", "x0 = mean(n0)\nanswer = x0")],
                                   {"a": "Tom adds apples and pears", "b": "apples plus plums",
                                    "c": "the average of the scores"})
    names, texts = ("add", "mean", "round"), ("Add a and b.", "The mean of xs.", "Round x.")
    out = idx.expanded_texts(names, texts)
    assert out[2] == "Round x."  # no record calls it
    assert out[0].startswith("Add a and b. ") and out[1].startswith("The mean of xs. ")
    added = out[0][len("Add a and b. "):].split()
    assert added == sorted(set(added)) and "appl" in added and "plum" in added  # each (stemmed) word once
    assert "scor" not in out[0] and "scor" in out[1]
    # a word only the records used now reaches the tool, which its own text never named
    ranker = BM25Ranker(names, out)
    assert ranker.rank("plums", limit=1)[0][0] == "add"
    assert BM25Ranker(names, texts).scores("plums").max() == 0


def _all_found(tasks, snapshot, cfg, usage):
    hits = 0
    for t in tasks:
        chosen = set(candidate_tools(t, snapshot, cfg, usage))
        hits += any(g <= chosen for g in gold_tool_sets(t, snapshot))
    return hits / len(tasks)


def test_usage_evidence_earns_recall_on_held_out_questions(grown, usage):
    """Descriptions alone rarely name a word problem's tools; the votes of solved training questions
    do (measured at scale by launch/bench/retrieval.py --domain=synthetic_math)."""
    with_usage = _all_found(HELD_OUT, grown, RetrievalConfig(k=8), usage)
    without = _all_found(HELD_OUT, grown, RetrievalConfig(k=8, usage_weight=0.0), None)
    assert with_usage >= 0.85
    assert with_usage > without + 0.3


def test_full_prompts_grow_with_the_library_and_cascade_prompts_do_not(math_library, grown, usage):
    task = HELD_OUT[1]
    full_small = T.render_prompt(task, all_cards(math_library, "bare"))
    full_big = T.render_prompt(task, all_cards(grown, "bare"))
    cascade_big = T.render_prompt(task, PromptCards(grown, RetrievalConfig(k=8), usage)(task))
    assert len(full_big) > 4 * len(full_small)
    assert len(cascade_big) < len(full_small)


def test_with_distractors_keeps_the_base(math_library, grown):
    assert len(grown) == 200 and set(math_library.names()) <= set(grown.names())
    assert with_distractors(math_library, len(math_library), seed=0) is math_library
    with pytest.raises(ValueError, match="more than size"):
        with_distractors(math_library, 10, seed=0)


def test_charging_tokens_does_not_change_the_selection(grown, usage):
    """The prompt path charges no stage (``lm_stages=()``); the benchmark charges L2-L4 for the same
    retrieval: both must select the same tools."""
    from cocoda_jax.retrieval.cascade import RetrievalIndex, retrieve
    from cocoda_jax.rl.prompts import question_subgoal

    index, cfg = RetrievalIndex.build(grown), RetrievalConfig(k=8)
    for t in HELD_OUT[:10]:
        charged = retrieve(index, question_subgoal(t), cfg.cascade(lm_stages=("L2", "L3", "L4")),
                           prior=usage.votes(t.question, cfg.neighbours, exclude=str(t.id)))
        assert charged.stage("L2").tokens > 0
        assert charged.selected + charged.children == candidate_tools(t, grown, cfg, usage, index=index)


NEW_WORDING = sm.generate(48, seed=0, split="test", max_depth=2)  # the generator's held-out templates and entities


def test_a_ranker_built_from_the_usage_records_ranks_the_prompt(math_library, usage):
    """``retrieval.ranker``: the prompt's L2 ranks with the usage-expanded BM25 (and the trained encoder
    for ``expanded_hybrid``), registered by the same function the retrieval bench calls, so the prompt
    shows what the bench measures; it changes the cards of questions in a wording the training
    questions never used, and they stay a pure function of their inputs (the encoder is trained from
    its seed)."""
    from cocoda_jax.retrieval.cascade import RetrievalIndex, retrieve
    from cocoda_jax.retrieval.encoder import _usage_encoder, add_usage_rankers
    from cocoda_jax.rl.prompts import question_subgoal

    cfg = RetrievalConfig(k=8, ranker="expanded")
    index = RetrievalIndex.build(math_library)
    add_usage_rankers(index, usage, "expanded")
    changed = 0
    for t in NEW_WORDING:
        got = candidate_tools(t, math_library, cfg, usage)
        prior = usage.votes(t.question, cfg.neighbours, exclude=str(t.id))
        bench = retrieve(index, question_subgoal(t), cfg.cascade(), prior=prior)
        assert got == bench.selected + bench.children
        changed += got != candidate_tools(t, math_library, RetrievalConfig(k=8), usage)
    assert changed >= len(NEW_WORDING) // 4
    hybrid = RetrievalConfig(k=8, ranker="expanded_hybrid", encoder_members=1)
    cards = PromptCards(math_library, hybrid, usage)
    assert set(cards.index.rankers) >= {"expanded", "encoder", "expanded_hybrid"}
    first = [cards.tools(t) for t in NEW_WORDING[:6]]
    _usage_encoder.cache_clear()  # retrained from its seed, not the memoised encoder
    assert [PromptCards(math_library, hybrid, usage).tools(t) for t in NEW_WORDING[:6]] == first
    assert all(len(c) == 8 for c in first)


def test_a_usage_ranker_needs_the_usage_records():
    with pytest.raises(ValueError, match="retrieval.ranker"):
        RetrievalConfig(ranker="dense")
    with pytest.raises(ValueError, match="usage_weight > 0"):
        RetrievalConfig(ranker="expanded", usage_weight=0.0)
    with pytest.raises(ValueError, match="encoder_members"):
        RetrievalConfig(ranker="encoder", encoder_members=0)

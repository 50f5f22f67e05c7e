"""The text-level episode loop, the Trajectory record, prompts and SFT demonstrations."""

import dataclasses

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cocoda_jax.data import synthetic_math
from cocoda_jax.rl import actions as A
from cocoda_jax.rl import trajectory as T


@pytest.fixture(scope="module")
def tasks():
    return synthetic_math.generate(6, seed=3, split="train")


def test_render_prompt_has_cards_tagged_question_inputs_and_header(math_library, tasks):
    task = tasks[0]
    cards = T.tool_cards(math_library)
    prompt = T.render_prompt(task, cards)
    assert prompt.startswith("Tools:\n") and prompt.endswith("\nProgram:\n")
    for card in cards:
        assert card + "\n" in prompt
    assert len(cards) == len(math_library)
    assert T.compact_card(math_library.tool("add")) == "add(a: float, b: float) -> float: Add two numbers: the total of a and b."
    for name, value in task.inputs:
        assert f"[{name}]" in prompt
        assert f"{name} = {A.format_value(value)}" in prompt
    assert T.tool_cards(math_library, ["mean", "add"])[0].startswith("mean(xs: list[float]) -> float")


def test_tag_numbers():
    q = "A shirt costs $12.50 and is 20% off; 3 people pay."
    assert T.tag_numbers(q, (("n0", 12.5), ("n1", 20), ("n2", 3))) == \
        "A shirt costs $12.50 [n0] and is 20% [n1] off; 3 [n2] people pay."
    # numbers that do not line up with the inputs leave the question alone
    assert T.tag_numbers(q, (("n0", 12.5), ("n1", 21), ("n2", 3))) == q
    assert T.tag_numbers(q, (("n0", 12.5),)) == q


def test_gold_demonstration_replays_the_gold_program(math_library, sandbox, tasks):
    for task in tasks:
        tr = T.gold_demonstration(task, math_library, sandbox)
        assert tr.stop == "answer" and tr.answered and tr.correct and tr.r_res == 1.0 and tr.progress == 1.0
        assert tr.calls == tuple(fn for fn, _ in task.skeleton)
        assert tr.step_kinds == ("ok",) * len(task.steps)
        assert [v for _, v in tr.values[:-1]] == list(task.gold_values)
        assert tr.values[-1] == ("answer", tr.answer) and tr.task_id == task.id
        assert tr.program == task.program
        # the pure rendering from recorded intermediates is the same text and the same mask
        assert T.demonstration_segments(task, T.tool_cards(math_library)) == tr.segments()


def test_segments_label_actions_trainable_and_rebuild_the_context(math_library, sandbox, tasks):
    tr = T.gold_demonstration(tasks[1], math_library, sandbox)
    segs = tr.segments()
    assert segs[0].role == "prompt" and not segs[0].trainable
    assert [s.role for s in segs[1:]] == ["action", "observation"] * len(tr.steps)
    assert T.segments_text(segs) == tr.text
    mask = T.char_mask(segs)
    assert len(mask) == len(tr.text)
    trainable = "".join(c for c, m in zip(tr.text, mask) if m)
    assert trainable == "".join(line + "\n" for line in tasks[1].steps)
    assert all(s.text.startswith(A.OBSERVATION_PREFIX) for s in segs[2::2])


def test_the_policy_sees_exactly_the_context_so_far(math_library, sandbox, tasks):
    task = tasks[2]
    seen = []
    steps = list(task.steps)

    def policy(context):
        seen.append(context)
        return steps[len(seen) - 1] + "\nthis second line is ignored\n"

    tr = T.run_episode(policy, task, math_library, sandbox, max_steps=20)
    assert tr.correct and len(seen) == len(steps)
    segs = tr.segments()
    for turn, context in enumerate(seen):
        assert context == T.segments_text(segs[:1 + 2 * turn])
    assert tr.steps[0].raw.endswith("ignored\n") and tr.steps[0].text == steps[0]


def test_errors_are_observed_and_the_planner_can_recover(math_library, sandbox, tasks):
    task = tasks[0]
    gold = list(task.steps)
    script = ["x0 = mean(n0)", "x0 = sqrt(n0)", "bogus", "x0 = divide(n0, 0)"] + gold
    policy = T.ScriptedPolicy(T.render_prompt(task, T.tool_cards(math_library)), tuple(script))
    tr = T.run_episode(policy, task, math_library, sandbox, max_steps=len(script))
    assert tr.step_kinds[:4] == ("ill_typed", "unknown_tool", "malformed", "runtime")
    assert tr.steps[3].outcome.calls == ("divide",) and tr.steps[3].calls == ()
    assert tr.attempted_calls[0] == "divide" and tr.calls == tuple(fn for fn, _ in task.skeleton)
    assert [s.observation.split(":")[0] for s in tr.steps[:4]] == [
        "-> error[ill_typed]", "-> error[unknown_tool]", "-> error[malformed]", "-> error[runtime]"]
    assert tr.correct and tr.progress == 1.0
    assert tr.program == task.program  # the refused and failed steps are not part of it
    import json
    record = json.loads(json.dumps(tr.to_record()))
    assert record["r_res"] == 1.0 and record["stop"] == "answer" and len(record["steps"]) == len(script)
    assert record["steps"][0] == {"text": "x0 = mean(n0)", "kind": "ill_typed", "observation": tr.steps[0].observation,
                                  "calls": []}
    assert [c for s in record["steps"] for c in s["calls"]] == list(tr.calls)


def test_wrong_answer_scores_zero_with_partial_progress(math_library, sandbox, tasks):
    task = next(t for t in tasks if t.difficulty >= 3)
    script = tuple(task.steps[:2]) + ("answer = x1",)
    policy = T.ScriptedPolicy(T.render_prompt(task, T.tool_cards(math_library)), script)
    tr = T.run_episode(policy, task, math_library, sandbox)
    assert tr.answered and tr.stop == "answer" and tr.r_res == 0.0 and not tr.correct
    assert tr.progress == pytest.approx(2 / task.difficulty)


def test_max_steps_ends_an_episode_without_an_answer(math_library, sandbox, tasks):
    task = tasks[0]
    tr = T.run_episode(lambda ctx: "x9 = add(n0, n0)", task, math_library, sandbox, max_steps=3)
    assert tr.stop == "max_steps" and not tr.answered and tr.answer is None and tr.r_res == 0.0
    assert tr.step_kinds == ("ok", "bad_target", "bad_target")
    from cocoda_jax.data.verifiers import progress_reward
    assert tr.values == (("x9", 2 * task.inputs[0][1]),)
    assert tr.progress == progress_reward(task.intermediates, [2 * task.inputs[0][1]])


def test_run_episodes_in_lockstep_equals_one_by_one(math_library, sandbox, tasks):
    cards = T.tool_cards(math_library)
    scripts = {}
    for i, task in enumerate(tasks[:4]):
        steps = list(task.steps)
        if i == 1:
            steps = ["x0 = nope(n0)"] + steps          # one extra turn
        if i == 2:
            steps = steps[:-1] + ["answer = n0"]       # wrong answer
        scripts[T.render_prompt(task, cards)] = T.ScriptedPolicy(T.render_prompt(task, cards), tuple(steps))
    calls = []

    def batch_policy(contexts):
        calls.append(len(contexts))
        return [next(p for prompt, p in scripts.items() if c.startswith(prompt))(c) for c in contexts]

    group = T.run_episodes(batch_policy, tasks[:4], math_library, sandbox, max_steps=40, cards=cards)
    single = [T.run_episode(p, t, math_library, sandbox, max_steps=40, cards=cards)
              for t, p in zip(tasks[:4], scripts.values())]
    assert group == single
    assert calls[0] == 4 and calls == sorted(calls, reverse=True)  # finished rollouts leave the batch
    assert [g.correct for g in group] == [True, True, False, True]
    # with rows: the policy learns which rollout each context belongs to
    seen_rows = []

    def row_policy(contexts, rows):
        seen_rows.append(tuple(rows))
        assert all(c.startswith(T.render_prompt(tasks[i], cards)) for c, i in zip(contexts, rows))
        return batch_policy(contexts)

    again = T.run_episodes(row_policy, tasks[:4], math_library, sandbox, max_steps=40, cards=cards, with_rows=True)
    assert again == group and seen_rows[0] == (0, 1, 2, 3)
    assert seen_rows[-1] == (max(range(4), key=lambda i: len(group[i].steps)),)


def test_episode_arguments_are_validated(math_library, sandbox, tasks):
    with pytest.raises(ValueError, match="max_steps"):
        T.run_episode(lambda c: "", tasks[0], math_library, sandbox, max_steps=0)
    with pytest.raises(ValueError, match="returned 0 texts"):
        T.run_episodes(lambda cs: [], tasks[:1], math_library, sandbox)
    with pytest.raises(TypeError, match="must return text"):
        T.run_episode(lambda c: [1, 2], tasks[0], math_library, sandbox)


def test_a_policy_may_return_generations_that_carry_tokens(math_library, sandbox, tasks):
    @dataclasses.dataclass(frozen=True)
    class Generation:
        text: str
        token_ids: tuple
        logprobs: tuple

    task = tasks[0]
    script = T.ScriptedPolicy(T.render_prompt(task, T.tool_cards(math_library)), task.steps)
    tr = T.run_episode(lambda c: Generation(script(c) + "\n", (1, 2), (-0.1, -0.2)), task, math_library, sandbox,
                       max_steps=20)
    assert tr.correct and all(s.generation.token_ids == (1, 2) for s in tr.steps)
    assert tr.steps[0].raw == task.steps[0] + "\n" and tr.steps[0].text == task.steps[0]
    gold = T.gold_demonstration(task, math_library, sandbox)
    assert tr.segments() == gold.segments()  # the same context: only the first step of a turn counts
    assert dataclasses.replace(tr.steps[0], generation=None) == tr.steps[0]  # the payload is not compared
    with pytest.raises(ValueError, match="outside"):
        T.run_episode(T.ScriptedPolicy(T.render_prompt(tasks[0], T.tool_cards(math_library)), tasks[0].steps),
                      tasks[0], math_library, sandbox, verify=lambda a, t: 2.0)


def test_trajectory_is_frozen_and_scripted_policy_pure(math_library, sandbox, tasks):
    tr = T.gold_demonstration(tasks[0], math_library, sandbox)
    with pytest.raises(dataclasses.FrozenInstanceError):
        tr.r_res = 0.5
    policy = T.ScriptedPolicy(tr.prompt, tasks[0].steps)
    assert policy(tr.prompt) == policy(tr.prompt) == tasks[0].steps[0]
    assert policy(tr.text) == ""
    with pytest.raises(ValueError):
        policy("another prompt")


def test_tokenized_segments_mask_exactly_the_action_tokens(math_library, sandbox, tasks):
    tr = T.gold_demonstration(tasks[0], math_library, sandbox)
    segs = tr.segments()

    def encode(text):  # a toy tokenizer: one token per word, spaces and newlines their own tokens
        import re
        return [hash(piece) % 1000 for piece in re.findall(r"\S+|\s", text)]

    ep = T.tokenize_segments(segs, encode)
    assert len(ep.ids) == len(ep.loss_mask) == sum(len(encode(s.text)) for s in segs) and not ep.truncated
    start = 0
    for seg in segs:
        n = len(encode(seg.text))
        assert set(ep.loss_mask[start:start + n]) <= {int(seg.trainable)}
        start += n
    assert sum(ep.loss_mask) == sum(len(encode(s.text)) for s in segs if s.trainable) > 0
    short = T.tokenize_segments(segs, encode, max_tokens=10)
    assert short.truncated and short.ids == ep.ids[:10] and short.loss_mask == ep.loss_mask[:10]
    ids, mask, valid = T.pad_episodes([ep, short], len(ep) + 3, pad_id=-1)
    assert ids.shape == (2, len(ep) + 3) and ids[1, 10] == -1 and mask[1, 10:].sum() == 0
    assert valid.sum() == len(ep) + 10 and mask[0].sum() == sum(ep.loss_mask)
    with pytest.raises(ValueError, match="more than length"):
        T.pad_episodes([ep], 5)


_PIECES = ["x0 = add(n0, n1)", "x1 = multiply(x0, n2)", "answer = x1", "answer = x0", "x0 = divide(n0, 0)",
           "x2 = mean([x0, x1])", "x1 = nope(n0)", "x1 = add(x0)", "x3 = mean(n0)", "answer = x9", "", "x0 =",
           "x1 = subtract(x0, n1)\nanswer = x1", "```", "-> 5"]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(script=st.lists(st.one_of(st.sampled_from(_PIECES), st.text(max_size=15)), max_size=6),
       max_steps=st.integers(1, 5))
def test_episode_invariants_under_arbitrary_policy_output(math_library, sandbox, tasks, script, max_steps):
    task = tasks[0]
    prompt = T.render_prompt(task, T.tool_cards(math_library))
    outputs = iter(script + [""] * 10)
    tr = T.run_episode(lambda ctx: next(outputs), task, math_library, sandbox, max_steps=max_steps)
    assert 1 <= len(tr.steps) <= max_steps and tr.prompt == prompt
    assert tr.text == T.segments_text(tr.segments())
    assert tr.r_res in (0.0, 1.0) and 0.0 <= tr.progress <= 1.0
    assert set(tr.calls) <= set(math_library.names())
    assert all("\n" not in s.text and "\n" not in s.observation for s in tr.steps)
    if tr.answered:
        assert tr.stop == "answer" and tr.steps[-1].ok and tr.steps[-1].check.is_answer
        assert all(not (s.ok and s.check.is_answer) for s in tr.steps[:-1])
    else:
        assert tr.stop == "max_steps" and len(tr.steps) == max_steps and tr.r_res == 0.0

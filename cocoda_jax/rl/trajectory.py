"""One rollout at the text level: the prompt, the steps, their observations, the verdict.

The episode loop here knows nothing about language models: a policy is any callable
``policy_fn(context_text) -> generated_text`` (the LM sampler plugs in later, scripted policies
give demonstrations and tests). Each turn the first step of the generated text is checked
(:func:`~cocoda_jax.rl.actions.check_step`), run in the real sandbox if it passes, and its
observation line is appended to the context; the episode stops after an ``answer`` step that ran,
or after ``max_steps`` turns (a ``search`` step, when the card source offers one, is answered with
cards and is not one of those turns).

The context is always the concatenation of a :class:`Trajectory`'s :meth:`~Trajectory.segments`:
the prompt and every observation are labelled not trainable, every action trainable, so the token
loss masks of SFT and GRPO follow from one definition (demonstrations are trajectories of the gold
program, :func:`gold_demonstration`).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Sequence
from typing import Any

from cocoda_jax.data.verifiers import default_verify
from cocoda_jax.rl import actions
from cocoda_jax.rl.actions import StepCheck, StepOutcome

PolicyFn = Callable[[str], str]
BatchPolicyFn = Callable[[Sequence[str]], Sequence[str]]
#: What a prompt's tool cards come from: one sequence for every task, or a function of the task
#: (the per-question candidate set ``C_q(L)``, :class:`~cocoda_jax.rl.prompts.PromptCards`).
CardSource = Sequence[str] | Callable[[Any], Sequence[str]]
#: What answers a planner's ``search`` step: the parsed search step -> the cards found (a
#: :class:`~cocoda_jax.rl.prompts.PromptCards` offers one as ``.searcher`` when its setting asks).
Searcher = Callable[[Any], Sequence[str]]

PROMPT_HEADER = "Tools:"
PROGRAM_HEADER = "Program:"
#: Why an episode ended: an ``answer`` step ran, or the turn limit was reached.
STOP_REASONS = ("answer", "max_steps")


# ------------------------------------------------------------------------------------------------
# Segments
# ------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Segment:
    """A piece of the context: ``role`` is ``"prompt"``, ``"action"`` or ``"observation"``; only
    actions are ``trainable`` (the planner wrote them; the rest it was given)."""

    text: str
    role: str

    @property
    def trainable(self) -> bool:
        return self.role == "action"


def segments_text(segments: Sequence[Segment]) -> str:
    return "".join(s.text for s in segments)


def char_mask(segments: Sequence[Segment]) -> tuple[bool, ...]:
    """Per character of :func:`segments_text`, whether it is trainable (a tokenizer with offsets
    turns this into the token loss mask)."""
    return tuple(flag for s in segments for flag in [s.trainable] * len(s.text))


@dataclasses.dataclass(frozen=True)
class TokenizedEpisode:
    """Token ids of a context and, per token, whether the planner generated it (1) or was given it
    (0: prompt and observations). In next-token training the loss at position ``t`` predicts
    ``ids[t]`` from ``ids[:t]``: use ``loss_mask[1:]`` with ``logits[:-1]``."""

    ids: tuple[int, ...]
    loss_mask: tuple[int, ...]
    truncated: bool = False

    def __len__(self) -> int:
        return len(self.ids)


def tokenize_segments(segments: Sequence[Segment], encode: Callable[[str], Sequence[int]], *,
                      max_tokens: int | None = None) -> TokenizedEpisode:
    """Encodes each segment on its own and concatenates, so a token never straddles an action and an
    observation and the mask is exact; this is also how a rollout's sequence grows (sampled action
    tokens, then the encoded observation). ``max_tokens`` keeps the head and flags ``truncated``."""
    ids: list[int] = []
    mask: list[int] = []
    for seg in segments:
        piece = [int(i) for i in encode(seg.text)]
        ids += piece
        mask += [int(seg.trainable)] * len(piece)
    truncated = max_tokens is not None and len(ids) > max_tokens
    if truncated:
        ids, mask = ids[:max_tokens], mask[:max_tokens]
    return TokenizedEpisode(tuple(ids), tuple(mask), truncated)


def pad_episodes(episodes: Sequence[TokenizedEpisode], length: int, pad_id: int = 0):
    """``(ids[B, length] int32, loss_mask[B, length] float32, valid[B, length] bool)`` right-padded
    numpy arrays for the learner; an episode longer than ``length`` is an error (truncate first)."""
    import numpy as np

    ids = np.full((len(episodes), length), pad_id, np.int32)
    mask = np.zeros((len(episodes), length), np.float32)
    valid = np.zeros((len(episodes), length), bool)
    for i, ep in enumerate(episodes):
        if len(ep) > length:
            raise ValueError(f"episode {i} has {len(ep)} tokens, more than length={length}")
        ids[i, :len(ep)] = ep.ids
        mask[i, :len(ep)] = ep.loss_mask
        valid[i, :len(ep)] = True
    return ids, mask, valid


def pack_episodes(episodes: Sequence[TokenizedEpisode], length: int, pad_id: int = 0, *, row_multiple: int = 1):
    """``(ids, loss_mask, valid, segments)`` ``[R, length]``: the episodes packed several to a row.

    Why: demonstrations vary in length (120-292 tokens in the default domain), so one episode a row
    padded to the batch's longest spends about a third of the step on padding; packed rows carry the
    same tokens in fewer slots. ``segments`` numbers the episodes of a row from 1 (0: padding); the
    model attends within a segment only and counts positions from each segment's start
    (``Transformer.__call__(segment_ids=)``), so every token sees what it would see alone. An episode's
    first token gets loss mask 0: it would be predicted from the previous episode's last position,
    and alone it is column 0, which no loss reads. Rows are filled first-fit in order of decreasing
    length (ties in the given order: deterministic), their count rounded up to ``row_multiple`` with
    empty rows (micro-batches and the mesh's batch shards need whole rows)."""
    import numpy as np

    if length < 1 or row_multiple < 1:
        raise ValueError(f"length and row_multiple must be >= 1, got {length} and {row_multiple}")
    rows: list[list[int]] = []  # episode indices per row
    used: list[int] = []
    for i in sorted(range(len(episodes)), key=lambda i: -len(episodes[i])):
        n = len(episodes[i])
        if n > length:
            raise ValueError(f"episode {i} has {n} tokens, more than length={length}")
        for r, u in enumerate(used):
            if u + n <= length:
                rows[r].append(i)
                used[r] += n
                break
        else:
            rows.append([i])
            used.append(n)
    count = -(-max(len(rows), 1) // row_multiple) * row_multiple
    ids = np.full((count, length), pad_id, np.int32)
    mask = np.zeros((count, length), np.float32)
    segments = np.zeros((count, length), np.int32)
    for r, members in enumerate(rows):
        at = 0
        for s, i in enumerate(members, start=1):
            ep = episodes[i]
            ids[r, at:at + len(ep)] = ep.ids
            mask[r, at + 1:at + len(ep)] = ep.loss_mask[1:]
            segments[r, at:at + len(ep)] = s
            at += len(ep)
    return ids, mask, segments > 0, segments


# ------------------------------------------------------------------------------------------------
# Prompt
# ------------------------------------------------------------------------------------------------


def first_sentence(description: str) -> str:
    """The description's first sentence, whitespace collapsed (what a compact card shows)."""
    return re.split(r"(?<=[.!?])\s", " ".join(description.split()), maxsplit=1)[0]


def compact_card(tool: Any) -> str:
    """One line per tool, ``name(params) -> result: first sentence of the description``: the
    shortest card that still gives the planner the L1 signature it is checked against."""
    first = first_sentence(tool.description)
    return f"{tool.name}{tool.signature}: {first}" if first else f"{tool.name}{tool.signature}"


def tool_cards(snapshot: Any, names: Sequence[str] | None = None,
               card_fn: Callable[[Any], str] = compact_card) -> tuple[str, ...]:
    """The cards of ``names`` (default: the whole library, in topological order), in that order."""
    chosen = snapshot.topological_order() if names is None else tuple(names)
    return tuple(card_fn(snapshot.tool(n)) for n in chosen)


def cards_of(cards: CardSource, task: Any) -> tuple[str, ...]:
    """The cards ``task``'s prompt shows under ``cards`` (see :data:`CardSource`)."""
    return tuple(cards(task)) if callable(cards) else tuple(cards)


_NUMBER = re.compile(r"\$?(\d+(?:\.\d+)?)%?")


def tag_numbers(question: str, inputs: Sequence[tuple[str, Any]]) -> str:
    """The question with each number followed by its variable (``75 [n0] km``), so the planner can
    refer to the right number by name. Only when the numbers in the text are exactly the numeric
    inputs in order (the synthetic-math convention); otherwise the question is returned unchanged."""
    numeric = [(n, v) for n, v in inputs if isinstance(v, (int, float)) and not isinstance(v, bool)]
    matches = list(_NUMBER.finditer(question))
    if not numeric or len(matches) != len(numeric) or any(
            abs(float(m.group(1)) - float(v)) > 1e-9 * max(1.0, abs(float(v))) for m, (_, v) in zip(matches, numeric)):
        return question
    out, last = [], 0
    for m, (name, _) in zip(matches, numeric):
        out.append(question[last:m.end()] + f" [{name}]")
        last = m.end()
    return "".join(out) + question[last:]


def render_prompt(task: Any, cards: Sequence[str]) -> str:
    """The planner's prompt: tool cards, the question with its numbers tagged, the inputs bound to
    names, then the program header after which the first step is written. Ends with a newline."""
    inputs = tuple(task.inputs)
    lines = [PROMPT_HEADER, *cards, "", "Question: " + tag_numbers(task.question, inputs)]
    if inputs:
        lines.append("Inputs: " + ", ".join(f"{n} = {actions.format_value(v)}" for n, v in inputs))
    lines.append(PROGRAM_HEADER)
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------------------------
# Records
# ------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class StepRecord:
    """One turn: what the policy generated (``raw``), the step taken from it (``text``), the static
    verdict, the run's outcome (``None`` when the checker refused the step) and the observation.

    ``generation`` is whatever the policy returned when it was not plain text (an object with a
    ``text`` attribute, e.g. the sampler's token ids and log-probs for the learner); ``None`` else.
    """

    raw: str
    text: str
    check: StepCheck
    outcome: StepOutcome | None
    observation: str
    generation: Any = dataclasses.field(default=None, compare=False)

    @property
    def kind(self) -> str:
        """``"ok"``, a static error kind or a runtime error kind: the step's one-word fate."""
        if not self.check.ok:
            return self.check.kind
        return "ok" if self.outcome.ok else self.outcome.error

    @property
    def ok(self) -> bool:
        return self.kind == "ok"

    @property
    def calls(self) -> tuple[str, ...]:
        """Top-level tool calls of the step if it ran to completion (failed runs earn no credit)."""
        return self.outcome.calls if self.ok else ()

    @property
    def is_search(self) -> bool:
        """A search step: it asked for cards, calls no tool and binds no name."""
        return self.check.is_search


@dataclasses.dataclass(frozen=True)
class Trajectory:
    """A finished rollout. ``r_res`` is the verifier's result in [0, 1]; ``progress`` the share of
    the gold intermediate values the executed steps produced (RODS §B.2); ``answer`` the value bound
    to ``answer`` (``None`` if never bound); ``stop`` one of :data:`STOP_REASONS`."""

    task_id: str
    prompt: str
    steps: tuple[StepRecord, ...]
    answer: Any
    answered: bool
    r_res: float
    progress: float
    stop: str
    #: A stateful domain's ``(kind, method, kwargs)`` environment calls of the completed steps.
    environment_calls: tuple[tuple[str, str, dict], ...] = ()

    @property
    def correct(self) -> bool:
        return self.r_res == 1.0

    @property
    def calls(self) -> tuple[str, ...]:
        """The ordered tool-call trace of the steps that ran to completion (what the reward counts)."""
        return tuple(c for s in self.steps for c in s.calls)

    @property
    def attempted_calls(self) -> tuple[str, ...]:
        """Every top-level call the sandbox saw, including those of steps that failed while running."""
        return tuple(c for s in self.steps if s.outcome is not None for c in s.outcome.calls)

    @property
    def values(self) -> tuple[tuple[str, Any], ...]:
        """``(target, value)`` of every step that ran to completion, in order."""
        return tuple((s.check.step.target, s.outcome.value) for s in self.steps if s.ok and not s.is_search)

    @property
    def program(self) -> str:
        """The steps that ran to completion, as one program (what an abstractor mines; searches
        are left out: they compute nothing)."""
        return "".join(s.text + "\n" for s in self.steps if s.ok and not s.is_search)

    @property
    def searches(self) -> int:
        return sum(s.is_search for s in self.steps)

    @property
    def step_kinds(self) -> tuple[str, ...]:
        return tuple(s.kind for s in self.steps)

    def segments(self) -> tuple[Segment, ...]:
        """Prompt, then per turn the action line and the observation line (see the module doc)."""
        out = [Segment(self.prompt, "prompt")]
        for s in self.steps:
            out.append(Segment(s.text + "\n", "action"))
            out.append(Segment(s.observation + "\n", "observation"))
        return tuple(out)

    @property
    def text(self) -> str:
        return segments_text(self.segments())

    def to_record(self) -> dict[str, Any]:
        """A JSON-ready summary (JSONL logs, the abstractor's input): steps with their fate and calls,
        the answer through the project's value codec; the prompt is left out (it is re-rendered)."""
        from cocoda_jax import values as codec
        return {
            "task_id": self.task_id, "stop": self.stop, "answered": self.answered, "r_res": self.r_res,
            "progress": self.progress, "answer": codec.encode(self.answer),
            "steps": [{"text": s.text, "kind": s.kind, "observation": s.observation, "calls": list(s.calls)}
                      for s in self.steps],
        }


# ------------------------------------------------------------------------------------------------
# Verdict
# ------------------------------------------------------------------------------------------------


def progress_of(task: Any, values: Sequence[tuple[str, Any]], r_res: float) -> float:
    """The RODS progress reward of a rollout: the share of the gold intermediate values its executed
    steps produced (its own answer step excluded, it only copies a value).

    A verified answer (``r_res == 1``) counts as full progress: a composite call computes gold
    intermediates inside the tool, where the trace cannot see them, and a progress signal that
    penalised composites would work against the DAG reward. A task without intermediates falls
    back to ``r_res``.
    """
    from cocoda_jax.data.verifiers import progress_reward
    gold = tuple(getattr(task, "intermediates", ()) or ())
    if not gold or r_res == 1.0:
        return float(r_res)
    produced = [v for name, v in values if name != actions.ANSWER]
    return progress_reward(gold, produced)


# ------------------------------------------------------------------------------------------------
# Episodes
# ------------------------------------------------------------------------------------------------


@dataclasses.dataclass
class _Live:
    """The mutable state of one rollout while the loop runs (never leaves this module)."""

    task: Any
    prompt: str
    context: str
    env: dict
    bindings: dict
    steps: list
    done: bool = False
    answered: bool = False
    turns: int = 0      # steps other than searches (what ``max_steps`` bounds)
    searches: int = 0
    environment_calls: list = dataclasses.field(default_factory=list)

    def environment_spec(self) -> Any:
        """The spec of this rollout's environment session for its next step: the task's initial
        state with every call its completed steps made (None for a stateless domain)."""
        spec = getattr(self.task, "environment", None)
        return None if spec is None else {**spec, "replay": [list(c) for c in self.environment_calls]}


def run_episodes(policy: BatchPolicyFn, tasks: Sequence[Any], snapshot: Any, sandbox: Any, max_steps: int = 8, *,
                 cards: CardSource | None = None, timeout_s: float | None = None,
                 verify: Callable[[Any, Any], float] = default_verify, with_rows: bool = False,
                 search: Searcher | None = None) -> list[Trajectory]:
    """Runs one rollout per entry of ``tasks`` in lockstep (a GRPO group is the same task G times).

    Each turn, ``policy`` gets the contexts of the rollouts still running and returns one generated
    text per context (or an object with ``.text``, kept as :attr:`StepRecord.generation`: an LM
    sampler should stop at the newline, so that its tokens are exactly the step); the steps that pass
    the checker run in one sandbox batch. ``cards`` are the tool cards of each prompt
    (:data:`CardSource`; default: the whole library, :func:`tool_cards`). ``with_rows`` calls
    ``policy(contexts, rows)`` with the indices into ``tasks`` of the rollouts still running, so a
    stateful sampler (a KV cache per row) can append only what is new to each row's context.

    ``search`` answers the planner's ``search(...)`` steps (default: ``cards.searcher`` when the
    card source offers one; with none, a search is a malformed step as before). A search's
    observation is the cards found; it calls no tool, binds nothing and does not use up one of the
    ``max_steps`` turns, but an episode stops after ``max_steps`` searches too (so it ends).
    """
    if max_steps < 1:
        raise ValueError(f"max_steps must be at least 1, got {max_steps}")
    cards = tool_cards(snapshot) if cards is None else cards
    searcher = search if search is not None else getattr(cards, "searcher", None)
    live = []
    for task in tasks:
        prompt = render_prompt(task, cards_of(cards, task))
        inputs = tuple(task.inputs)
        live.append(_Live(task, prompt, prompt, actions.input_types(inputs), dict(inputs), []))
    while True:
        active = [r for r in live if not r.done]
        if not active:
            break
        contexts = [r.context for r in active]
        if with_rows:
            generated = list(policy(contexts, [i for i, r in enumerate(live) if not r.done]))
        else:
            generated = list(policy(contexts))
        if len(generated) != len(active):
            raise ValueError(f"the policy returned {len(generated)} texts for {len(active)} contexts")
        raws = [_text_of(g) for g in generated]
        texts = [actions.first_step(g) for g in raws]
        checks = [actions.check_step(t, snapshot, r.env, search=searcher is not None) for t, r in zip(texts, active)]
        runnable = [i for i, c in enumerate(checks) if c.ok and not c.is_search]
        outcomes: dict[int, StepOutcome] = {}
        if runnable:
            ran = actions.execute_steps([texts[i] for i in runnable], [checks[i] for i in runnable],
                                        [active[i].bindings for i in runnable], snapshot, sandbox, timeout_s,
                                        environments=[active[i].environment_spec() for i in runnable])
            outcomes = dict(zip(runnable, ran))
        for i, r in enumerate(active):
            check, outcome = checks[i], outcomes.get(i)
            if check.is_search:
                found = tuple(searcher(check.step))
                outcome = StepOutcome(ok=True, value=found)
                observation = actions.render_search(found)
                r.searches += 1
            else:
                observation = actions.render_observation(
                    check, outcome, getattr(r.task, "observation_chars", actions.MAX_OBSERVATION_CHARS))
                r.turns += 1
            extra = None if isinstance(generated[i], str) else generated[i]
            r.steps.append(StepRecord(raws[i], texts[i], check, outcome, observation, extra))
            r.context += texts[i] + "\n" + observation + "\n"
            if outcome is not None and outcome.ok and not check.is_search:
                r.environment_calls.extend(outcome.environment_calls)
                r.bindings[check.step.target] = outcome.value
                r.env = actions.bind(r.env, check)
                r.answered = r.done = check.is_answer
            r.done = r.done or r.turns >= max_steps or r.searches >= max_steps
    return [_finish(r, verify) for r in live]


def _text_of(generated: Any) -> str:
    """A policy returns text, or an object carrying it in ``.text`` (plus tokens, log-probs, ...)."""
    text = generated if isinstance(generated, str) else getattr(generated, "text", None)
    if not isinstance(text, str):
        raise TypeError(f"the policy must return text or an object with a str .text, got {type(generated).__name__}")
    return text


def _finish(r: _Live, verify: Callable[[Any, Any], float]) -> Trajectory:
    answered = r.answered
    answer = r.bindings.get(actions.ANSWER) if answered else None
    score_calls = getattr(r.task, "score_environment_calls", None)
    if score_calls is not None:  # a stateful domain is judged on what was done, not on a value
        r_res = float(score_calls(tuple(r.environment_calls)))
    else:
        r_res = float(verify(answer, r.task)) if answered else 0.0
    if not 0.0 <= r_res <= 1.0:
        raise ValueError(f"the verifier returned {r_res}, outside [0, 1]")
    values = tuple((s.check.step.target, s.outcome.value) for s in r.steps if s.ok and not s.is_search)
    return Trajectory(task_id=str(getattr(r.task, "id", "")), prompt=r.prompt, steps=tuple(r.steps),
                      answer=answer, answered=answered, r_res=r_res, progress=progress_of(r.task, values, r_res),
                      stop="answer" if answered else "max_steps",
                      environment_calls=tuple(r.environment_calls))


def run_episode(policy_fn: PolicyFn, task: Any, snapshot: Any, sandbox: Any, max_steps: int = 8, **kwargs) -> Trajectory:
    """One rollout with a single-context policy ``policy_fn(context) -> generated text`` (see
    :func:`run_episodes` for the keyword options)."""
    return run_episodes(lambda contexts: [policy_fn(c) for c in contexts], [task], snapshot, sandbox, max_steps,
                        **kwargs)[0]


# ------------------------------------------------------------------------------------------------
# Demonstrations
# ------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ScriptedPolicy:
    """Writes ``steps`` one per turn, whatever it observes: the turn is read off the context (two
    lines per finished turn after ``prompt``), so the policy itself is a pure function."""

    prompt: str
    steps: tuple[str, ...]

    def __call__(self, context: str) -> str:
        if not context.startswith(self.prompt):
            raise ValueError("the context does not start with this policy's prompt")
        turn = context[len(self.prompt):].count("\n") // 2
        return self.steps[turn] if turn < len(self.steps) else ""


def gold_demonstration(task: Any, snapshot: Any, sandbox: Any, *, cards: CardSource | None = None,
                       max_steps: int | None = None, timeout_s: float | None = None) -> Trajectory:
    """The task's gold program played through the real loop (checker, sandbox, observations): an SFT
    demonstration whose :meth:`~Trajectory.segments` carry the loss mask."""
    cards = tool_cards(snapshot) if cards is None else cards_of(cards, task)
    steps = tuple(task.program.strip().splitlines())
    policy = ScriptedPolicy(render_prompt(task, cards), steps)
    return run_episode(policy, task, snapshot, sandbox, max_steps or len(steps), cards=cards, timeout_s=timeout_s)


def demonstration_segments(task: Any, cards: Sequence[str], *, program: str | None = None,
                           search: Searcher | None = None) -> tuple[Segment, ...]:
    """The gold demonstration's segments without running anything: observations from the task's
    recorded intermediate values (the generator computed them with the tools' own code). Equal to
    ``gold_demonstration(...).segments()`` for a well-formed task; cheap enough for thousands.
    ``program``: the gold program with search steps inserted (default ``task.program``), whose
    observations ``search`` gives (the cascade is pure, so they too need no run)."""
    values = dict(task.intermediates)
    out = [Segment(render_prompt(task, cards), "prompt")]
    for line in (task.program if program is None else program).strip().splitlines():
        parsed = actions.parse_step(line, search=True) if search is not None else None
        if isinstance(parsed, actions.Step) and parsed.is_search:
            out.append(Segment(line.strip() + "\n", "action"))
            out.append(Segment(actions.render_search(tuple(search(parsed))) + "\n", "observation"))
            continue
        target = line.split("=", 1)[0].strip()
        value = task.answer if target == actions.ANSWER else values[target]
        out.append(Segment(line.strip() + "\n", "action"))
        width = getattr(task, "observation_chars", actions.MAX_OBSERVATION_CHARS)
        out.append(Segment(actions.OBSERVATION_PREFIX + actions.format_value(value, width) + "\n", "observation"))
    return tuple(out)


__all__ = [
    "BatchPolicyFn", "CardSource", "Searcher", "PROGRAM_HEADER", "PROMPT_HEADER", "PolicyFn", "STOP_REASONS", "ScriptedPolicy", "Segment",
    "StepRecord", "TokenizedEpisode", "Trajectory", "char_mask", "pack_episodes", "pad_episodes",
    "tokenize_segments", "cards_of", "compact_card", "default_verify", "demonstration_segments",
    "gold_demonstration", "progress_of", "render_prompt", "run_episode", "run_episodes", "segments_text",
    "tag_numbers", "tool_cards",
]

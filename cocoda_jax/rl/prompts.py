"""The planner's candidate set ``C_q(L)``: which tool cards a question's prompt shows.

The CoCoDA paper (§A.1 of the paper digest): the planner samples ``tau ~ pi(. | q, C_q(L))``. :func:`candidate_tools` is that set
as a pure function of (task, snapshot, :class:`RetrievalConfig`, usage evidence), and SFT
demonstrations, GRPO rollouts and evaluation all render their prompt through one
:class:`PromptCards` built from those, so the same task gets the same prompt in all three.

Modes (``retrieval.mode``):

* ``cascade`` — the typed DAG retrieval cascade (:func:`~cocoda_jax.retrieval.retrieve`) on the
  question's subgoal: its values as typed inputs (L1 prunes tools whose parameter types the
  question cannot supply beyond ``l1_max_cost``), its words for L2, whose score adds the usage
  votes of the solved training questions most like it (:mod:`cocoda_jax.retrieval.usage`), the
  climb/descend moves over the DAG, the specs (L3) and examples (L4); the best ``k`` cards.
* ``full`` — every tool of the library in topological order (the -TDR ablation: no retrieval).
* ``none`` — no tool cards (the planner must know its tools from training alone).

Where the cards come from (``retrieval.cards``): ``question`` (the default, the set above, once per
episode), ``search`` (no cards in the prompt: the planner gets cards only through its own
``search(...)`` steps, answered by the cascade on the query's words and stated signature) or
``both`` (the question's cards and the search step). With a search setting the demonstrations
insert a search before the first call of each tool the context has not shown yet
(:meth:`PromptCards.demonstration`).

Why the question-level set is the default: measured on the default domain's validation questions,
it holds every tool of the (refactored) gold program for 99% of tasks at k = 8, with 30 to 1,616
tools in the library (README, "Retrieval in the loop"), so the planner rarely needs to ask; the
search settings exist for what it cannot do, use the types of the step about to be written (and for
BFCL, whose user turns need other functions).
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Callable
from typing import Any

from cocoda_jax.retrieval.cascade import CascadeConfig, RetrievalIndex, retrieve
from cocoda_jax.retrieval.encoder import USAGE_ENCODER, USAGE_RANKERS, add_usage_rankers
from cocoda_jax.retrieval.subgoals import extract_subgoal
from cocoda_jax.retrieval.usage import UsageIndex
from cocoda_jax.rl import actions
from cocoda_jax.rl import trajectory as T

MODES = ("cascade", "full", "none")
#: Where a prompt's cards come from: the question alone, the planner's searches alone, or both.
CARD_SOURCES = ("question", "search", "both")


def signature_card(tool: Any) -> str:
    """``name(params) -> result``: the L1 signature alone."""
    return f"{tool.name}{tool.signature}"


def name_card(tool: Any) -> str:
    """``name(p1, p2)``: the shortest card with arity (what a tiny CPU planner can afford to read)."""
    return f"{tool.name}({', '.join(p.name for p in tool.signature.params)})"


def bare_card(tool: Any) -> str:
    """The tool's name alone: the planner learns arities from demonstrations."""
    return tool.name


CARD_STYLES: dict[str, Callable[[Any], str]] = {"compact": T.compact_card, "signature": signature_card,
                                                "name": name_card, "bare": bare_card}


@dataclasses.dataclass(frozen=True)
class RetrievalConfig:
    """``mode`` (see the module doc), ``k`` cards, their ``card_style``; the cascade's knobs for the
    question-level subgoal: ``l1_max_cost`` (a whole question supplies more values than one step
    uses, so extra arguments must not prune), the L2 shortlist sizes (raised to ``k`` when smaller,
    so ``k`` cards are shown whenever ``k`` tools survive L1), the usage evidence
    (``neighbours`` solved questions, ``usage_weight`` on their votes; 0 turns it off) and
    ``with_children`` (each selected composite brings its direct children, as the paper's release);
    ``cards``: where the cards come from (:data:`CARD_SOURCES`, see the module doc); a search
    returns ``k`` cards in ``card_style``; ``search_typed``: the demonstrations' searches state the
    tool's L1 signature too (longer than the CPU default's ``rollout.max_new_tokens`` allows);
    ``ranker``: what ranks L2 (``"bm25"``, or one of :data:`~cocoda_jax.retrieval.encoder.USAGE_RANKERS`,
    built from the cards and the usage records by :func:`~cocoda_jax.retrieval.encoder.add_usage_rankers`:
    the expanded BM25 and the trained encoder, ``encoder_members`` of them, seeds derived from
    ``encoder_seed``), the same rankers the retrieval bench measures."""

    mode: str = "cascade"
    k: int = 8
    card_style: str = "bare"
    l1_max_cost: float = 3.0
    l2_shortlist: int = 12
    l2_keep: int = 16
    neighbours: int = 10
    usage_weight: float = 20.0
    with_children: bool = False
    cards: str = "question"
    search_typed: bool = False
    ranker: str = "bm25"
    encoder_members: int = 5
    encoder_seed: int = 0

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"retrieval.mode must be one of {MODES}, got {self.mode!r}")
        if self.cards not in CARD_SOURCES:
            raise ValueError(f"retrieval.cards must be one of {CARD_SOURCES}, got {self.cards!r}")
        if self.cards != "question" and self.mode != "cascade":
            raise ValueError(f"retrieval.cards={self.cards!r} answers searches with the cascade: it needs "
                             f"retrieval.mode='cascade', got {self.mode!r}")
        if self.card_style not in CARD_STYLES:
            raise ValueError(f"retrieval.card_style must be one of {sorted(CARD_STYLES)}, got {self.card_style!r}")
        for name in ("k", "l2_shortlist", "l2_keep"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"retrieval.{name} must be an int >= 1, got {v!r}")
        if self.neighbours < 0 or self.usage_weight < 0 or not self.l1_max_cost >= 0:
            raise ValueError("retrieval.neighbours, usage_weight and l1_max_cost must be >= 0")
        if self.ranker not in ("bm25", *USAGE_RANKERS):
            raise ValueError(f"retrieval.ranker must be one of {('bm25', *USAGE_RANKERS)}, got {self.ranker!r}")
        if self.ranker != "bm25" and (self.mode != "cascade" or not self.usage_weight > 0):
            raise ValueError(f"retrieval.ranker={self.ranker!r} is built from the usage records: it needs "
                             f"retrieval.mode='cascade' and usage_weight > 0, got {self.mode!r}, {self.usage_weight}")
        members = self.encoder_members
        if isinstance(members, bool) or not isinstance(members, int) or members < 1:
            raise ValueError(f"retrieval.encoder_members must be an int >= 1, got {self.encoder_members!r}")

    def cascade(self, lm_stages: tuple[str, ...] = ()) -> CascadeConfig:
        """The cascade's config. ``lm_stages``: the stages whose reading is charged in tokens; the
        prompt path charges none (the selection is the same; counting is the benchmark's job)."""
        return CascadeConfig(k=self.k, l1_max_cost=self.l1_max_cost, l2_shortlist=max(self.l2_shortlist, self.k),
                             l2_keep=max(self.l2_keep, self.k), prior_weight=self.usage_weight,
                             with_children=self.with_children, lm_stages=lm_stages, ranker=self.ranker)

    def index(self, snapshot: Any, usage: UsageIndex | None) -> RetrievalIndex:
        """The cascade's index over ``snapshot``, with ``ranker`` registered (trained here from the
        cards and ``usage`` when it is not BM25: deterministic from ``encoder_seed``)."""
        index = RetrievalIndex.build(snapshot)
        if self.ranker != "bm25":
            if usage is None:
                raise ValueError(f"retrieval.ranker={self.ranker!r} needs the run's usage records")
            add_usage_rankers(index, usage, self.ranker, members=self.encoder_members,
                              config=dataclasses.replace(USAGE_ENCODER, seed=self.encoder_seed))
        return index


def question_subgoal(task: Any):
    """The question's subgoal: its text, the values it states as typed inputs, any result (the steps
    of a program produce intermediate types, not only the answer's)."""
    return extract_subgoal(task.question, "Any")


def search_subgoal(query: str, signature: str | None = None):
    """A search's subgoal: its words for the text layers and, when stated, its signature for L1
    (parameter types as inputs, the result as output); without one, the values its words name, as
    a question's (:func:`question_subgoal`)."""
    from cocoda_jax.retrieval.subgoals import Subgoal
    from cocoda_jax.types import parse_signature
    if signature is None:
        return extract_subgoal(query, "Any")
    sig = parse_signature(signature)
    return Subgoal(query, tuple(p.type for p in sig.params), sig.result)


#: Words a demonstration's query leaves out of a description (they name no operation).
_STOP_WORDS = frozenset("a an and are as at be by for from how in into is it its many much of on or than that "
                        "the this to what when with".split())
#: Content words of a demonstration's query: short enough that a search fits one turn's
#: ``rollout.max_new_tokens`` (24 on the CPU default) and still finding the tool it is written for
#: on synthetic math (every tool) and BFCL (all but 9 of 129; typed, every one) (tested).
SEARCH_WORDS = 3


def search_query(tool: Any) -> tuple[str, str]:
    """The demonstrations' search for ``tool``: ``(signature, words)``, its L1 signature without
    parameter names and the first :data:`SEARCH_WORDS` distinct content words of its description's
    first sentence (its name's words when there are none): deterministic, and written only from
    what the tool's own card states."""
    sig = tool.signature
    signature = "(" + ", ".join(str(p.type) for p in sig.params) + f") -> {sig.result}"
    found = re.findall(r"[a-z]+", T.first_sentence(tool.description).lower())
    content = [w for w in dict.fromkeys(found) if len(w) > 1 and w not in _STOP_WORDS][:SEARCH_WORDS]
    return signature, " ".join(content) or tool.name.replace("_", " ")


def search_step(tool: Any, typed: bool = False) -> str:
    """The step text of :func:`search_query`: ``search("percent part whole")``, or with ``typed``
    ``search("(float, float) -> float", "percent part whole")``."""
    signature, words = search_query(tool)
    return f"{actions.SEARCH}({signature!r}, {words!r})" if typed else f"{actions.SEARCH}({words!r})"


def candidate_tools(task: Any, snapshot: Any, config: RetrievalConfig, usage: UsageIndex | None = None, *,
                    index: RetrievalIndex | None = None) -> tuple[str, ...]:
    """``C_q(L)``: the names whose cards the prompt of ``task`` shows, in prompt order (a pure
    function of its arguments; ``index`` is the snapshot's :class:`RetrievalIndex`, built when
    absent). ``usage`` never counts ``task``'s own record."""
    if config.mode == "none":
        return ()
    if config.mode == "full":
        return snapshot.topological_order()
    index = index if index is not None else config.index(snapshot, usage)
    prior = usage.votes(task.question, config.neighbours, exclude=str(getattr(task, "id", ""))) \
        if usage is not None and config.usage_weight > 0 else None
    out = retrieve(index, question_subgoal(task), config.cascade(), prior=prior)
    return out.selected + out.children


class PromptCards:
    """The cards of every prompt over one snapshot: ``cards(task)`` (what
    :func:`~cocoda_jax.rl.trajectory.run_episodes` takes as ``cards``). Immutable; the retrieval
    index is built once, on first use, and each task's set is memoised."""

    def __init__(self, snapshot: Any, config: RetrievalConfig, usage: UsageIndex | None = None):
        self.snapshot, self.config, self.usage = snapshot, config, usage
        self._render = CARD_STYLES[config.card_style]
        self._tools: dict[tuple[str, str], tuple[str, ...]] = {}

    @functools.cached_property
    def index(self) -> RetrievalIndex:
        return self.config.index(self.snapshot, self.usage)

    def tools(self, task: Any) -> tuple[str, ...]:
        """The names the prompt of ``task`` shows (none with ``cards="search"``)."""
        if self.config.cards == "search":
            return ()
        key = (str(getattr(task, "id", "")), task.question)
        if key not in self._tools:
            index = self.index if self.config.mode == "cascade" else None
            self._tools[key] = candidate_tools(task, self.snapshot, self.config, self.usage, index=index)
        return self._tools[key]

    def __call__(self, task: Any) -> tuple[str, ...]:
        return tuple(self._render(self.snapshot.tool(n)) for n in self.tools(task))

    @property
    def searcher(self) -> T.Searcher | None:
        """What answers the planner's search steps (:func:`~.trajectory.run_episodes` reads it);
        None under ``cards="question"``, so that a search stays a malformed step there."""
        return None if self.config.cards == "question" else self.search

    def search_tools(self, query: str, signature: str | None = None) -> tuple[str, ...]:
        """The names the cascade returns for a search (no usage prior: the query is the planner's
        words about one step, not a question with solved neighbours). Memoised per query."""
        key = ("search", query, signature or "")
        if key not in self._tools:
            out = retrieve(self.index, search_subgoal(query, signature), self.config.cascade())
            self._tools[key] = out.selected + out.children
        return self._tools[key]

    def search(self, step: Any) -> tuple[str, ...]:
        """A parsed search step's observation cards, in ``card_style`` (the prompt's)."""
        return tuple(self._render(self.snapshot.tool(n)) for n in self.search_tools(step.query, step.signature))

    def demonstration(self, task: Any, program: str) -> str:
        """``program`` with a search step before the first call of each tool whose card the context
        has not shown yet (the prompt's cards and every earlier search's), so SFT teaches the
        planner to ask; unchanged under ``cards="question"``. For a multi-turn episode this asks
        again in each user turn that needs a tool no earlier card showed."""
        if self.config.cards == "question":
            return program
        shown = set(self.tools(task))
        out = []
        for line in program.strip().splitlines():
            parsed = actions.parse_step(line)
            tool = None if isinstance(parsed, actions.StepCheck) else parsed.tool
            if tool is not None and tool not in shown and tool in self.snapshot:
                signature, words = search_query(self.snapshot.tool(tool))
                typed = self.config.search_typed
                out.append(search_step(self.snapshot.tool(tool), typed))
                shown.update(self.search_tools(words, signature if typed else None))
                shown.add(tool)  # asked once: a search that missed it is not repeated
            out.append(line.strip())
        return "\n".join(out) + "\n"


def all_cards(snapshot: Any, style: str) -> tuple[str, ...]:
    """Every tool's card in topological order (the ``full`` prompt; texts for training a BPE)."""
    return T.tool_cards(snapshot, card_fn=CARD_STYLES[style])


__all__ = ["CARD_SOURCES", "CARD_STYLES", "MODES", "SEARCH_WORDS", "search_query", "search_step", "search_subgoal", "PromptCards", "RetrievalConfig", "all_cards", "bare_card", "candidate_tools",
           "name_card", "question_subgoal", "signature_card"]

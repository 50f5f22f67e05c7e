"""Conservative updates: whether a round's new (planner, library) pair replaces the incumbent.

The paper claims monotone co-evolution under conservative updates (the CoCoDA paper, §A.5 of the paper digest); this is the
rule that makes it hold by construction, as a pure function of recorded numbers:

* a proposal is measured against a *reference*: the best validation reward accepted so far
  (``reference="best"``, the default: small drops cannot add up to a large one) or the last
  accepted one (``"last"``); it may fall at most ``tolerance`` below it;
* the new library must keep every tool that an accepted trajectory used (those of earlier accepted
  rounds and those of the proposal's own validation rollouts): the DAG may grow and reorganise, but
  a demonstrated behaviour never loses its tools;
* if the pair fails, the new planner alone may still be taken with the incumbent library, when it
  was also evaluated with that library (``planner_only_reward``) and passes the same two tests;
* growth must pay (``growth_must_pay``, the default): when the planner alone was measured, a pair
  that scores below it is refused as a pair even inside the tolerance, so a new library is kept
  only where it does at least as well as the same round without it. Why: the tolerance is there for
  the noise of a small validation split, and letting a library change spend it compounds what
  the library change costs (measured in docs/experiments.md section B: the deep study's round 1
  accepted a pair 2.3 points below the incumbent on validation, while the same GRPO update with the
  incumbent library scored exactly the incumbent's 0.695);
* otherwise the incumbent (planner and library) is kept. Every call returns a :class:`Decision`
  saying what was kept and why, for the run log.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Sequence
from typing import Any

from cocoda_jax.report.rounds import Outcome

REFERENCES = ("best", "last")


@dataclasses.dataclass(frozen=True)
class AcceptanceConfig:
    tolerance: float = 0.0
    reference: str = "best"
    allow_planner_only: bool = True
    growth_must_pay: bool = True

    def __post_init__(self) -> None:
        if not (isinstance(self.tolerance, (int, float)) and math.isfinite(self.tolerance) and self.tolerance >= 0):
            raise ValueError(f"tolerance must be a finite number >= 0, got {self.tolerance!r}")
        if self.reference not in REFERENCES:
            raise ValueError(f"reference must be one of {REFERENCES}, got {self.reference!r}")


def tool_names(library: Any) -> frozenset[str]:
    """The tool names of a LibrarySnapshot (``.names()``) or of any iterable of names."""
    names = library.names() if callable(getattr(library, "names", None)) else library
    return frozenset(names)


@dataclasses.dataclass(frozen=True)
class Proposal:
    """What one round produced and how it did on the validation split.

    ``planner`` is opaque here (parameters, a checkpoint step, a name). ``used_tools``: every tool
    called by the proposal's accepted validation trajectories. ``planner_only_*``: the new planner
    evaluated with the incumbent library, if that was measured; ``planner_alone``: the planner that
    measurement used, when it is not ``planner`` (the round's planner before a refresh it had only
    for the new library), kept if only the planner is accepted.
    """

    round: int
    planner: Any
    library: Any
    val_reward: float
    used_tools: frozenset[str] = frozenset()
    planner_only_reward: float | None = None
    planner_only_used_tools: frozenset[str] = frozenset()
    planner_alone: Any = None


@dataclasses.dataclass(frozen=True)
class Incumbent:
    """The accepted pair, its validation reward, the best accepted reward so far and the union of
    the tools accepted trajectories used (which no later library may drop)."""

    round: int
    planner: Any
    library: Any
    val_reward: float
    best_reward: float
    used_tools: frozenset[str]


@dataclasses.dataclass(frozen=True)
class Decision:
    """The log record of one round's decision."""

    round: int
    outcome: Outcome
    reason: str
    reward: float
    reference: float
    tolerance: float
    kept: str
    missing_tools: tuple[str, ...] = ()

    @property
    def accepted(self) -> bool:
        return self.outcome is not Outcome.REJECT

    def to_record(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["outcome"] = self.outcome.value
        out["missing_tools"] = list(self.missing_tools)
        return out


def initial(planner: Any, library: Any, val_reward: float, used_tools: Iterable[str] = (), round: int = 0) -> Incumbent:
    """The starting incumbent (e.g. the SFT planner with the warm library)."""
    used = frozenset(used_tools)
    missing = used - tool_names(library)
    if missing:
        raise ValueError(f"the initial library lacks tools its trajectories use: {sorted(missing)}")
    return Incumbent(round, planner, library, float(val_reward), float(val_reward), used)


def _check(reward: float, used: frozenset[str], library: Any, incumbent: Incumbent, threshold: float
           ) -> tuple[str, tuple[str, ...]] | None:
    """Why this (reward, library) cannot be accepted, with the missing tools; ``None`` if it can."""
    if not math.isfinite(reward):
        return f"validation reward {reward!r} is not finite", ()
    names = tool_names(library)
    dropped = tuple(sorted(incumbent.used_tools - names))
    if dropped:
        return f"the library drops {len(dropped)} tool(s) accepted trajectories use", dropped
    unknown = tuple(sorted(used - names))
    if unknown:
        return f"its trajectories use {len(unknown)} tool(s) the library lacks", unknown
    if reward < threshold:
        return f"validation reward {reward:.6g} is below the reference minus the tolerance ({threshold:.6g})", ()
    return None


def decide(incumbent: Incumbent, proposal: Proposal, config: AcceptanceConfig = AcceptanceConfig()
           ) -> tuple[Incumbent, Decision]:
    """The next incumbent and the decision record (module docstring)."""
    reference = incumbent.best_reward if config.reference == "best" else incumbent.val_reward
    threshold = reference - config.tolerance
    reward = float(proposal.val_reward)
    used = frozenset(proposal.used_tools)
    problem = _check(reward, used, proposal.library, incumbent, threshold)
    if problem is None and config.growth_must_pay and proposal.planner_only_reward is not None \
            and reward < float(proposal.planner_only_reward):
        problem = (f"the new library does not pay: the pair's {reward:.6g} is below the planner alone's "
                   f"{float(proposal.planner_only_reward):.6g}", ())
    if problem is None:
        new = Incumbent(proposal.round, proposal.planner, proposal.library, reward,
                        max(incumbent.best_reward, reward), incumbent.used_tools | used)
        return new, Decision(proposal.round, Outcome.ACCEPT, "validation reward within tolerance; no used tool dropped",
                             reward, reference, config.tolerance, "new planner and new library")
    why, missing = problem
    if config.allow_planner_only and proposal.planner_only_reward is not None:
        alone = float(proposal.planner_only_reward)
        alone_used = frozenset(proposal.planner_only_used_tools)
        second = _check(alone, alone_used, incumbent.library, incumbent, threshold)
        if second is None:
            planner = proposal.planner if proposal.planner_alone is None else proposal.planner_alone
            new = Incumbent(proposal.round, planner, incumbent.library, alone,
                            max(incumbent.best_reward, alone), incumbent.used_tools | alone_used)
            return new, Decision(proposal.round, Outcome.ACCEPT_PLANNER, f"new library refused: {why}", alone, reference,
                                 config.tolerance, "new planner, previous library", missing)
        why = f"{why}; planner alone: {second[0]}"
    return incumbent, Decision(proposal.round, Outcome.REJECT, why, reward, reference, config.tolerance,
                               f"previous planner and library (round {incumbent.round})", missing)


def run_rounds(start: Incumbent, proposals: Sequence[Proposal], config: AcceptanceConfig = AcceptanceConfig()
               ) -> tuple[Incumbent, tuple[Decision, ...], tuple[Incumbent, ...]]:
    """:func:`decide` folded over recorded rounds: the final incumbent, every decision, and the
    incumbent after each round (what a replay of the run must reproduce)."""
    current = start
    decisions: list[Decision] = []
    history: list[Incumbent] = []
    for p in proposals:
        current, d = decide(current, p, config)
        decisions.append(d)
        history.append(current)
    return current, tuple(decisions), tuple(history)


__all__ = [
    "AcceptanceConfig", "Decision", "Incumbent", "Outcome", "Proposal", "REFERENCES", "decide", "initial",
    "run_rounds", "tool_names",
]

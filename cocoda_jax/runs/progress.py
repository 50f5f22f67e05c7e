"""The typed progress records of the two jobs: what a checkpoint stores as its ``"progress"`` payload.

:class:`RunProgress` is the co-evolution run's (``runs/coevolve.py``), :class:`TrainProgress` the
SFT-then-GRPO job's (``runs/train.py``). Both are frozen: a stage returns a new record
(``dataclasses.replace``) instead of editing the one it was given. ``to_json`` writes exactly the
plain dict the jobs stored before these types existed (same keys, same JSON values), and
``from_json`` reads that dict, so checkpoints written either way resume.

A round's record is a :class:`~cocoda_jax.report.rounds.RoundRecord` (the report's schema).
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from typing import Any

from cocoda_jax.coevolve import acceptance
from cocoda_jax.report.rounds import RoundRecord


# ------------------------------------------------------------------------------------------------
# Co-evolution
# ------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class IncumbentRecord:
    """The accepted (planner, library) pair's numbers: enough to rebuild the
    :class:`~cocoda_jax.coevolve.acceptance.Incumbent` with the run's current library."""

    round: int
    val_reward: float
    best_reward: float
    used_tools: tuple[str, ...]

    @classmethod
    def of(cls, incumbent: acceptance.Incumbent) -> IncumbentRecord:
        return cls(incumbent.round, incumbent.val_reward, incumbent.best_reward, tuple(sorted(incumbent.used_tools)))

    def incumbent(self, library: Any) -> acceptance.Incumbent:
        """The incumbent with ``library`` (the run's library is always the incumbent's)."""
        return acceptance.Incumbent(int(self.round), f"round-{self.round}", library, float(self.val_reward),
                                    float(self.best_reward), frozenset(self.used_tools))

    def to_json(self) -> dict[str, Any]:
        return {"round": self.round, "val_reward": self.val_reward, "best_reward": self.best_reward,
                "used_tools": list(self.used_tools)}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> IncumbentRecord:
        return cls(int(d["round"]), float(d["val_reward"]), float(d["best_reward"]),
                   tuple(sorted(d["used_tools"])))


@dataclasses.dataclass(frozen=True)
class RunProgress:
    """Where a co-evolution run stands after a round (round 0: after SFT).

    ``records``: one :class:`RoundRecord` per round; ``decisions``: the acceptance decisions' records; ``warm``: stage 1's log;
    ``demo_programs``: the stored demonstrations as ``(task id, program)``, refactored to call the
    incumbent library's composites; ``excluded``: the patterns validation refused (JSON, from
    ``sequences.pattern_to_json``), never proposed again; ``rods_metrics``: one RODS epoch summary
    per round when the curriculum runs.
    """

    round: int
    global_step: int
    sft_accuracy: float
    incumbent: IncumbentRecord
    records: tuple[RoundRecord, ...]
    decisions: tuple[dict[str, Any], ...] = ()
    demo_programs: tuple[tuple[str, str], ...] = ()
    excluded: tuple[Any, ...] = ()
    warm: dict[str, Any] = dataclasses.field(default_factory=dict)
    rods_metrics: tuple[dict[str, Any], ...] = ()

    @property
    def last_record(self) -> RoundRecord:
        return self.records[-1]

    def to_json(self) -> dict[str, Any]:
        """The checkpoint payload (the plain dict of earlier versions, key for key)."""
        return {"round": self.round, "global_step": self.global_step, "records": [r.to_json() for r in self.records],
                "sft_accuracy": self.sft_accuracy, "warm": self.warm,
                "demo_programs": [list(p) for p in self.demo_programs], "excluded": list(self.excluded),
                "incumbent": self.incumbent.to_json(), "decisions": list(self.decisions),
                "rods_metrics": list(self.rods_metrics)}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> RunProgress:
        return cls(round=int(d["round"]), global_step=int(d["global_step"]), sft_accuracy=d["sft_accuracy"],
                   incumbent=IncumbentRecord.from_json(d["incumbent"]), records=tuple(RoundRecord.from_json(r, i) for i, r in enumerate(d["records"])),
                   decisions=tuple(d.get("decisions") or ()),
                   demo_programs=tuple(tuple(p) for p in d.get("demo_programs") or ()),
                   excluded=tuple(d.get("excluded") or ()), warm=dict(d.get("warm") or {}),
                   rods_metrics=tuple(d.get("rods_metrics") or ()))


# ------------------------------------------------------------------------------------------------
# SFT then GRPO
# ------------------------------------------------------------------------------------------------


class Phase(enum.StrEnum):
    """Which learner a checkpoint of the train job belongs to."""

    SFT = "sft"
    GRPO = "grpo"


@dataclasses.dataclass(frozen=True)
class ValidationPoint:
    """One point of the train job's validation curve (iteration 0: after SFT)."""

    step: int
    iteration: int
    val_accuracy: float

    def to_json(self) -> dict[str, Any]:
        return {"step": self.step, "iteration": self.iteration, "val_accuracy": self.val_accuracy}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> ValidationPoint:
        return cls(int(d["step"]), int(d["iteration"]), d["val_accuracy"])


@dataclasses.dataclass(frozen=True)
class TrainProgress:
    """Where the train job stands: the phase, the SFT planner's accuracies (``None`` until SFT is
    done), the GRPO iterations done and the validation curve."""

    phase: Phase = Phase.SFT
    sft_accuracy: float | None = None
    sft_test_accuracy: float | None = None
    iteration: int = 0
    evals: tuple[ValidationPoint, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"phase": self.phase.value, "sft_accuracy": self.sft_accuracy,
                "sft_test_accuracy": self.sft_test_accuracy, "iteration": self.iteration,
                "evals": [e.to_json() for e in self.evals]}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> TrainProgress:
        """Also reads the SFT-phase dict of earlier versions (no ``iteration``/``sft_test_accuracy``)."""
        return cls(phase=Phase(d["phase"]), sft_accuracy=d.get("sft_accuracy"),
                   sft_test_accuracy=d.get("sft_test_accuracy"), iteration=int(d.get("iteration") or 0),
                   evals=tuple(ValidationPoint.from_json(e) for e in d.get("evals") or ()))


__all__ = ["IncumbentRecord", "Phase", "RunProgress", "TrainProgress", "ValidationPoint"]

"""One co-evolution round's record: the one schema the checkpoint stores and the report reads.

    rec = RoundRecord(round=1, outcome=Outcome.ACCEPT, reason="pays", library_size=32, primitives=30,
                      composites=2, max_depth=2, val_accuracy=0.61, val_reward=0.64, train_accuracy=0.5,
                      tool_calls_per_solved=2.1, composite_share=0.3, retrieval_tokens_per_query=120.0,
                      inserted=("c1", "c2"), composite_uses={"c1": 4}, wall_s=61.0)
    RoundRecord.from_json(rec.to_json()) == rec          # JSON round-trip, checked on the way in

Decisions: a record is checked when it is read (:class:`ReportError` names the round and the key):
the library counts are ints with ``library_size == primitives + composites``; a measurement may be
``None`` (not measured) but never NaN or infinite, so the report is strict JSON; only round 0 is
(and must be) ``Outcome.INITIAL``. The fields after ``wall_s`` are written only when measured
(``val_per_category`` is ``None`` for a one-category domain); keys this version does not know are
kept in ``extra`` and written back, so an older or newer checkpoint loses nothing.
"""

from __future__ import annotations

import dataclasses
import enum
import math
from collections.abc import Mapping, Sequence
from typing import Any

from cocoda_jax.errors import CocodaError


class ReportError(CocodaError, ValueError):
    """A round record or report input that is malformed (names the round and the key)."""


class Outcome(enum.StrEnum):
    """A round's acceptance decision, or ``INITIAL`` for round 0 (the SFT planner with the warm library)."""

    INITIAL = "initial"
    ACCEPT = "accept"                   # the new planner and the new library
    ACCEPT_PLANNER = "accept_planner"   # the new planner with the previous library
    REJECT = "reject"                   # the previous planner and library are kept

    @property
    def keeps_new_planner(self) -> bool:
        return self in (Outcome.ACCEPT, Outcome.ACCEPT_PLANNER)


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_real(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


@dataclasses.dataclass(frozen=True, kw_only=True)
class RoundRecord:
    """A round's state after its decision: the kept (planner, library) pair's numbers on validation
    (a refused proposal's accuracy in ``proposal_val_accuracy``), the library, and what the round did."""

    round: int
    outcome: Outcome
    reason: str
    library_size: int
    primitives: int
    composites: int
    max_depth: int
    val_accuracy: float | None
    val_reward: float | None
    train_accuracy: float | None
    tool_calls_per_solved: float | None
    composite_share: float | None
    retrieval_tokens_per_query: float | None
    inserted: tuple[str, ...]
    composite_uses: Mapping[str, int]
    wall_s: float | None
    #: written only when measured
    val_per_category: Mapping[str, Any] | None = None
    proposal_val_accuracy: float | None = None
    dev_accuracy: float | None = None
    dev_per_category: Mapping[str, Any] | None = None
    mechanism: Mapping[str, Any] | None = None
    mining: Mapping[str, Any] | None = None
    stage_s: Mapping[str, float] | None = None
    extra: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    # -- JSON ------------------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        """The record as JSON-ready dict: the schema keys in order, then what was measured, then ``extra``."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name == "extra":
                continue
            if f.name in _WHEN_MEASURED and value is None:
                continue
            if f.name == "outcome":
                value = value.value
            elif f.name == "inserted":
                value = list(value)
            elif isinstance(value, Mapping):
                value = dict(value)
            out[f.name] = value
        out.update(self.extra)
        return out

    @classmethod
    def from_json(cls, record: Any, position: int = 0) -> RoundRecord:
        """The checked record of a dict (:class:`ReportError` for a malformed one); ``position``
        names it in the error when its own ``round`` is unreadable."""
        if not isinstance(record, Mapping):
            raise ReportError(f"round record #{position} is a {type(record).__name__}, not a dict")
        r = record.get("round")
        where = f"round {r}" if _is_int(r) else f"round record #{position}"
        missing = [k for k in SCHEMA_KEYS if k not in record]
        if missing:
            raise ReportError(f"{where}: missing key(s) {missing}")
        values: dict[str, Any] = {}
        for key in (*SCHEMA_KEYS, *_WHEN_MEASURED):
            if key not in record:
                continue
            v = record[key]
            bad = _check(key, v)
            if bad is not None:
                raise ReportError(f"{where}: key {key!r} must be {bad}, got {v!r}")
            values[key] = _convert(key, v)
        if values["library_size"] != values["primitives"] + values["composites"]:
            raise ReportError(f"{where}: key 'library_size' is {values['library_size']}, but primitives + "
                              f"composites = {values['primitives']} + {values['composites']}")
        if (values["round"] == 0) != (values["outcome"] is Outcome.INITIAL):
            raise ReportError(f"{where}: key 'outcome' is {values['outcome'].value!r}; round 0 and only round 0 "
                              "is 'initial'")
        return cls(**values, extra={k: v for k, v in record.items() if k not in values})

    def replace(self, **changes: Any) -> RoundRecord:
        return dataclasses.replace(self, **changes)


#: The fields every record has (the report's per-round columns), in order.
SCHEMA_KEYS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(RoundRecord)
                                     if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING)
_WHEN_MEASURED = ("val_per_category", "proposal_val_accuracy", "dev_accuracy", "dev_per_category", "mechanism", "mining", "stage_s")
_COUNTS = ("library_size", "primitives", "composites", "max_depth")
_MEASURES = ("val_accuracy", "val_reward", "train_accuracy", "tool_calls_per_solved", "composite_share",
             "retrieval_tokens_per_query", "wall_s", "proposal_val_accuracy", "dev_accuracy")


def _check(key: str, v: Any) -> str | None:
    """What ``v`` must be for field ``key``, or ``None`` when it is."""
    if key == "round" or key in _COUNTS:
        return None if _is_int(v) and v >= 0 else "an int >= 0"
    if key == "outcome":
        return None if v in tuple(Outcome) else f"one of {[o.value for o in Outcome]}"
    if key == "reason":
        return None if isinstance(v, str) else "a str"
    if key in _MEASURES:
        return None if v is None or _is_real(v) else "a finite number or None"
    if key == "inserted":
        ok = not isinstance(v, (str, bytes)) and isinstance(v, Sequence) and all(isinstance(n, str) for n in v)
        return None if ok else "a list of str"
    if key == "composite_uses":
        ok = isinstance(v, Mapping) and all(isinstance(n, str) and _is_int(c) and c >= 0 for n, c in v.items())
        return None if ok else "a dict of str -> int >= 0"
    return None if v is None or isinstance(v, Mapping) else "a dict or None"


def _convert(key: str, v: Any) -> Any:
    if key == "outcome":
        return Outcome(v)
    if key == "inserted":
        return tuple(v)
    if key == "composite_uses":
        return {n: v[n] for n in sorted(v)}
    return v


def read_rounds(rounds: Any) -> list[RoundRecord]:
    """Each record checked (records already typed pass through), round numbers strictly increasing."""
    if isinstance(rounds, (str, bytes, Mapping)) or not isinstance(rounds, Sequence):
        raise ReportError(f"rounds must be a list of round records, got {type(rounds).__name__}")
    checked = [r if isinstance(r, RoundRecord) else RoundRecord.from_json(r, i) for i, r in enumerate(rounds)]
    for prev, cur in zip(checked, checked[1:]):
        if cur.round <= prev.round:
            raise ReportError(f"round {cur.round}: key 'round' does not increase (it follows round {prev.round})")
    return checked


__all__ = ["Outcome", "ReportError", "RoundRecord", "SCHEMA_KEYS", "read_rounds"]

"""Every RODS threshold in one frozen, self-validating config (the defaults: the RODS paper, Part B.2 of the paper digest)."""

from __future__ import annotations

import dataclasses
import math


@dataclasses.dataclass(frozen=True)
class RodsConfig:
    """Thresholds of boundary detection, synthesis and the pool's lifecycle.

    Regions of a task's windowed mean reward ``r``: mastered ``r > mastered``, hard ``r < hard``,
    boundary otherwise (both ends included, as in the paper). ``window``: how many recent GRPO groups
    per task the tracker keeps. Pool: at most ``beta`` of the active pool injected per epoch;
    ``burn_in_epochs`` before a new item is judged (kept only if its mean lies in
    ``[burn_in_low, burn_in_high]``); retire when ``r > retire_mastered`` (after ``min_groups``
    groups), when the last ``hard_patience`` groups were all hard, or when not observed for
    ``stale_epochs``; ``p_max`` caps live generated items (lowest phi evicted). Synthesis: ``k_max``
    repairs per candidate, ``synth_per_epoch`` boundary parents, ``variants_per_seed`` jobs each,
    ``max_draws`` generator draws per skeleton search; ``found_variants`` jobs for each task found
    outside GRPO's draw, run when it is admitted (0: it waits for the boundary's plan like the rest).

    Draw weights (``Curriculum.sample``'s weighted draw without replacement), relative to a boundary
    task at ``phi = 1`` (weight 1; a boundary task weighs ``max(phi, recheck_weight)``):
    ``explore_weight`` for an unobserved seed task (drawn, but below the boundary so that exploration
    does not crowd out what the tracker found), ``variant_weight`` for an unobserved generated task
    (what synthesis was for: it must be drawn soon to be tracked), ``recheck_weight`` for mastered
    and hard tasks (re-checked now and then: a mastered task can regress, a hard one become
    reachable). A weight of 0 draws a task only after every task of positive weight.
    """

    window: int = 4
    mastered: float = 0.85
    hard: float = 0.20
    retire_mastered: float = 0.95
    min_groups: int = 2
    hard_patience: int = 3
    stale_epochs: int = 6
    beta: float = 0.20
    burn_in_epochs: int = 1
    burn_in_low: float = 0.05
    burn_in_high: float = 0.95
    p_max: int = 400
    retire_seeds: bool = True
    k_max: int = 3
    synth_per_epoch: int = 16
    variants_per_seed: int = 2
    found_variants: int = 0
    max_draws: int = 20000
    queue_capacity: int = 256
    explore_weight: float = 0.5
    variant_weight: float = 10.0
    recheck_weight: float = 0.05

    def __post_init__(self) -> None:
        def prob(name: str) -> float:
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and 0.0 <= v <= 1.0):
                raise ValueError(f"RodsConfig.{name} must be a number in [0, 1], got {v!r}")
            return float(v)

        def count(name: str, low: int) -> None:
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < low:
                raise ValueError(f"RodsConfig.{name} must be an int >= {low}, got {v!r}")

        hard, mastered, retire = prob("hard"), prob("mastered"), prob("retire_mastered")
        if not hard < mastered:
            raise ValueError(f"RodsConfig.hard ({hard}) must be below mastered ({mastered})")
        if not mastered <= retire:
            raise ValueError(f"RodsConfig.retire_mastered ({retire}) must be >= mastered ({mastered})")
        low, high = prob("burn_in_low"), prob("burn_in_high")
        if not low <= high:
            raise ValueError(f"RodsConfig.burn_in_low ({low}) must be <= burn_in_high ({high})")
        prob("beta")
        for name in ("window", "min_groups", "hard_patience", "stale_epochs", "max_draws", "queue_capacity"):
            count(name, 1)
        for name in ("burn_in_epochs", "p_max", "k_max", "synth_per_epoch", "variants_per_seed", "found_variants"):
            count(name, 0)
        if self.hard_patience > self.window:
            raise ValueError(f"RodsConfig.hard_patience ({self.hard_patience}) cannot exceed window "
                             f"({self.window}): the tracker only keeps that many groups")
        if self.min_groups > self.window:
            raise ValueError(f"RodsConfig.min_groups ({self.min_groups}) cannot exceed window ({self.window})")
        for name in ("explore_weight", "variant_weight", "recheck_weight"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0.0):
                raise ValueError(f"RodsConfig.{name} must be a finite number >= 0, got {v!r}")
        if not isinstance(self.retire_seeds, bool):
            raise ValueError(f"RodsConfig.retire_seeds must be a bool, got {self.retire_seeds!r}")

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "RodsConfig":
        unknown = set(d) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise ValueError(f"unknown RodsConfig fields: {sorted(unknown)}")
        return cls(**d)

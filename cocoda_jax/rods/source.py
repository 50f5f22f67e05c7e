"""Where GRPO's tasks come from: the RODS curriculum, or a static draw from the seed tasks.

    source = TaskSource.open(seeds, curriculum_config, run_dir, run_seed=0, library=snap, sandbox=sb,
                             background=False, selection="weighted", tasks_per_iteration=16)
    tasks, drawn = source.sample(iteration)          # drawn: {"boundary": 9, "unobserved": 7, ...}
    source.observe(group_rewards)                    # {task id: the group's tracked rewards}
    source.admit(found_tasks)                        # tasks found outside the draw join the pool
    summary = source.end_epoch(kept_library)         # the curriculum's epoch summary (None: static)

Both kinds draw as pure functions of ``(run seed, iteration)``, so a resumed run draws what the
uninterrupted one drew; the curriculum's own state lives in its directory (``rods/``).
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from cocoda_jax.rl.loop import sample_tasks
from cocoda_jax.rods.config import RodsConfig
from cocoda_jax.rods.curriculum import Curriculum

#: Keeps the static draw's stream apart from the other users of the run's seed.
STATIC_STREAM = 11
#: The static draw's refills (attempt k: stream REFILL_STREAM + k).
REFILL_STREAM = 1_000


@dataclasses.dataclass(frozen=True)
class TaskSource:
    """The seed tasks and, unless the curriculum is off, the curriculum that draws from them."""

    seeds: tuple[Any, ...]
    curriculum: Curriculum | None
    run_seed: int
    tasks_per_iteration: int

    @classmethod
    def open(cls, seeds: Sequence[Any], config: RodsConfig | None, directory: Path, *, run_seed: int,
             library: Any, sandbox: Any, background: bool, selection: str, tasks_per_iteration: int) -> TaskSource:
        """A static draw when ``config`` is ``None``; else the curriculum over ``seeds``, its state
        kept (and restored from) ``directory``."""
        seeds = tuple(seeds)
        curriculum = None if config is None else Curriculum(
            seeds, config, directory, run_seed=run_seed, library=library, sandbox=sandbox, background=background,
            selection=selection)
        return cls(seeds, curriculum, run_seed, tasks_per_iteration)

    def sample(self, iteration: int, attempt: int = 0) -> tuple[list[Any], dict[str, int]]:
        """GRPO iteration ``iteration``'s tasks and how many came from each curriculum region at
        draw time (``static`` without a curriculum); ``attempt`` > 0: another draw of the same
        iteration (dynamic sampling's refills), a pure function of ``(run seed, iteration, attempt)``."""
        n = self.tasks_per_iteration
        if self.curriculum is None:
            stream = STATIC_STREAM if attempt == 0 else REFILL_STREAM + attempt
            return sample_tasks(self.seeds, n, self.run_seed, iteration, stream=stream), {"static": n}
        tasks = list(self.curriculum.sample(n, seed=self.run_seed * 100_003 + iteration + attempt * 1_000_003))
        return tasks, self.regions_count(tasks)

    def regions_count(self, tasks: Sequence[Any]) -> dict[str, int]:
        """How many of ``tasks`` lie in each curriculum region now (``static`` without a curriculum)."""
        if self.curriculum is None:
            return {"static": len(tasks)} if tasks else {}
        regions = self.curriculum.regions_of([str(t.id) for t in tasks])
        return dict(collections.Counter(regions[str(t.id)] for t in tasks))

    def observe(self, group_rewards: Mapping[str, Sequence[float]]) -> None:
        """The tracked rewards of an iteration's groups, by task id (nothing for a static draw)."""
        if self.curriculum is not None:
            self.curriculum.observe(dict(group_rewards))

    def admit(self, tasks: Sequence[Any]) -> tuple[str, ...]:
        """``tasks`` found outside GRPO's draw join the curriculum's live pool (:meth:`Curriculum.admit`);
        the ids added (none for a static draw, whose seeds are fixed)."""
        return () if self.curriculum is None else self.curriculum.admit(tasks)

    def end_epoch(self, library: Any) -> dict[str, Any] | None:
        """The curriculum's epoch summary, the round's kept ``library`` handed on (``None``: static)."""
        if self.curriculum is None:
            return None
        self.curriculum.set_library(library)
        return self.curriculum.end_epoch()

    def close(self) -> None:
        if self.curriculum is not None:
            self.curriculum.close()


__all__ = ["REFILL_STREAM", "STATIC_STREAM", "TaskSource"]

"""What every domain's task derives from its fields, written once for all domains."""

from __future__ import annotations

from typing import Any


class GoldProgramTask:
    """Derived views of a task with ``inputs``, ``program`` and ``intermediates`` fields: the
    planner, the verifiers and RODS read these, whatever the domain."""

    __slots__ = ()

    @property
    def input_dict(self) -> dict[str, Any]:
        return dict(self.inputs)

    @property
    def gold_values(self) -> tuple[Any, ...]:
        return tuple(v for _, v in self.intermediates)

    @property
    def steps(self) -> tuple[str, ...]:
        """The program's lines (each one planner action)."""
        return tuple(self.program.splitlines())

"""The direct-answer baseline (the study's ``direct`` arm): the planner states the answer in one
step, without calling a tool that computes anything.

The action format has no literal answer step (``answer = name`` copies a bound name,
``answer = tool(args)`` calls a tool), and widening the grammar for every arm would let the tool
planner write digits too. So the baseline's library holds one tool that computes nothing,
``state_answer(value)``, which returns its argument: ``answer = state_answer(79.375)`` is a one-step
episode whose answer is exactly the digits the planner wrote. It goes through the same checker,
sandbox and verifier as every other arm; the demonstrations are the gold answers written that way
(``repr``: the shortest literal that reads back as the same value, so a copied demonstration is
verified under any tolerance).
"""

from __future__ import annotations

import math
from typing import Any

from cocoda_jax.data.library_build import verified_library
from cocoda_jax.data.math_primitives import PrimitiveSpec
from cocoda_jax.library import LibrarySnapshot

TOOL_NAME = "state_answer"

STATE_ANSWER = PrimitiveSpec(
    f"def {TOOL_NAME}(value: T) -> T:\n    return value\n",
    "State the final answer as a literal value: returns value unchanged (computes nothing).",
    (), ("result == value",), (({"value": 3}, 3), ({"value": 2.5}, 2.5), ({"value": "yes"}, "yes")))

_LITERAL_TYPES = (bool, int, float, str)


def library(runner: Any = None) -> LibrarySnapshot:
    """The direct arm's whole library: ``state_answer`` alone (checked once per process)."""
    return verified_library("direct_answer", (STATE_ANSWER,), runner=runner)


def program(task: Any) -> str:
    """``task``'s demonstration for the direct arm: its gold answer stated in one step. A ValueError
    for an answer that is not a plain literal (the action format's literals only)."""
    answer = task.answer
    if not isinstance(answer, _LITERAL_TYPES) or (isinstance(answer, float) and not math.isfinite(answer)):
        raise ValueError(f"task {getattr(task, 'id', '?')!r}: the answer {answer!r} cannot be stated as a literal")
    return f"answer = {TOOL_NAME}({answer!r})\n"


__all__ = ["STATE_ANSWER", "TOOL_NAME", "library", "program"]

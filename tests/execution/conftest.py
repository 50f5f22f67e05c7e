"""Fixtures of the execution tests: sandboxes shared per module (starting workers costs ~0.1 s each)."""

import pytest

from cocoda_jax.execution import Sandbox

#: Generous wall-clock limit for runs that are expected to finish: a loaded 2-core machine is slow.
SLOW_OK_S = 30.0

TOOLS = (
    "def add(a: float, b: float) -> float:\n    return a + b\n",
    "def mul(a: float, b: float) -> float:\n    return a * b\n",
    "def square(x: float) -> float:\n    return mul(x, x)\n",
    "def sum_sq(x: float, y: float) -> float:\n    return add(square(x), square(y))\n",
    "def apply_twice(f, x):\n    return f(f(x))\n",
)


@pytest.fixture(scope="session")
def tools():
    return TOOLS


@pytest.fixture(scope="module")
def sandbox():
    with Sandbox(workers=2, timeout_s=SLOW_OK_S, memory_mb=256) as sb:
        yield sb


@pytest.fixture(scope="module")
def solo():
    """One worker: every run of a call lands in the same process (for state-leak and batch tests)."""
    with Sandbox(workers=1, timeout_s=SLOW_OK_S, memory_mb=256) as sb:
        yield sb

"""Fixtures of the RODS tests: one sandbox and the math library per module."""

import pytest

from cocoda_jax.data import synthetic_math as sm
from cocoda_jax.execution import Sandbox

SLOW_OK_S = 30.0


@pytest.fixture(scope="module")
def sandbox():
    with Sandbox(workers=2, timeout_s=SLOW_OK_S, memory_mb=512) as sb:
        yield sb


@pytest.fixture(scope="module")
def library(sandbox):
    return sm.primitive_library(sandbox)

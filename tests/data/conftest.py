"""Fixtures of the data tests: one sandbox per test module (starting workers costs ~0.1 s each)."""

import pytest

from cocoda_jax.execution import Sandbox

#: Generous wall-clock limit for runs that are expected to finish: a loaded 2-core machine is slow.
SLOW_OK_S = 30.0


@pytest.fixture(scope="module")
def sandbox():
    with Sandbox(workers=2, timeout_s=SLOW_OK_S, memory_mb=512) as sb:
        yield sb


@pytest.fixture(scope="module")
def bfcl_library():
    """The BFCL domain's primitive library (its API functions)."""
    from third_party.benchmarks import bfcl_domain

    return bfcl_domain.primitive_library()


@pytest.fixture(scope="module")
def bfcl_sandbox():
    """A sandbox whose workers hold BFCL's stateful environment."""
    from third_party.benchmarks import bfcl_domain

    with Sandbox(workers=2, timeout_s=20.0, environment=bfcl_domain.plugin()) as sb:
        yield sb

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


def memoised_synthesizer(sandbox, library, config, run_seed):
    """The real synthesizer, memoised on its (pure) inputs so that many runs over the same jobs
    stay fast."""
    from cocoda_jax.rods.synthesis import Synthesizer

    syn = Synthesizer(sandbox, library, config, run_seed=run_seed)
    cache = {}

    def run(job):
        key = (job.parent.id, job.attempt, job.pool_keys)
        if key not in cache:
            cache[key] = syn.run(job)
        return cache[key]

    return run

"""Fixtures of the co-evolution tests: one sandbox, 300 synthetic-math gold trajectories played
through the real loop, and the first two abstraction rounds over them (computed once)."""

import pytest

N_TASKS = 300


@pytest.fixture(scope="session")
def sandbox():
    from cocoda_jax.execution import Sandbox

    with Sandbox(workers=2, timeout_s=30.0) as sb:
        yield sb


@pytest.fixture(scope="session")
def math_library(sandbox):
    from cocoda_jax.data import synthetic_math

    return synthetic_math.primitive_library(sandbox)


@pytest.fixture(scope="session")
def tasks():
    from cocoda_jax.data import synthetic_math

    return synthetic_math.generate(N_TASKS, seed=0, split="train")


@pytest.fixture(scope="session")
def gold_trajectories(tasks, math_library, sandbox):
    from cocoda_jax.coevolve.validate import play_programs

    return play_programs(tasks, [t.program for t in tasks], math_library, sandbox)


@pytest.fixture(scope="session")
def gold_traces(tasks, gold_trajectories, math_library):
    from cocoda_jax.coevolve.traces import trace_from_trajectory

    return tuple(trace_from_trajectory(tr, math_library, t.inputs) for tr, t in zip(gold_trajectories, tasks))


@pytest.fixture(scope="session")
def round1(gold_traces, math_library, sandbox):
    """(candidates, validation result) of the first round over the gold traces."""
    from cocoda_jax.coevolve.abstractor import propose
    from cocoda_jax.coevolve.validate import validate

    cands = propose(gold_traces, math_library)
    return cands, validate(cands, gold_traces, math_library, sandbox)


@pytest.fixture(scope="session")
def round2(round1, sandbox):
    """The second round, mined from the refactored traces against the grown library."""
    from cocoda_jax.coevolve.abstractor import propose
    from cocoda_jax.coevolve.validate import validate

    _, first = round1
    cands = propose(first.traces, first.snapshot)
    return cands, validate(cands, first.traces, first.snapshot, sandbox)

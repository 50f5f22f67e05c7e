"""Fixtures of the library tests: a shared sandbox and libraries built from the corpus
(:mod:`tests.library.library_corpus`)."""

import pytest

from cocoda_jax.library import LibrarySnapshot
from tests.library.library_corpus import build


@pytest.fixture(scope="session")
def sandbox():
    """One real sandbox for the whole session (starting workers costs more than the checks)."""
    from cocoda_jax.execution import Sandbox

    with Sandbox(workers=2, timeout_s=5.0) as sb:
        yield sb


@pytest.fixture(scope="session")
def static_library() -> LibrarySnapshot:
    """The corpus without examples: built through the static checks only."""
    return build(with_examples=False)


@pytest.fixture(scope="session")
def checked_library(sandbox) -> LibrarySnapshot:
    """The full corpus, every example and condition checked in the sandbox."""
    return build(runner=sandbox)

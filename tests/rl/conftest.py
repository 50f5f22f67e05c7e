"""Fixtures of the RL tests: one sandbox, the synthetic-math library and a copy with composites."""

import pytest

from cocoda_jax.library import LibrarySnapshot, Tool

#: Composites over the synthetic-math primitives: Phi 3, 1, 7 (depth 2, a child called twice), 3.
COMPOSITES = (
    ("def discount_tax(price: float, d: float, t: float) -> float:\n"
     "    cut = percent_of(d, price)\n    sale = subtract(price, cut)\n"
     "    tax = percent_of(t, sale)\n    return add(sale, tax)\n",
     "The price after a d percent discount and then a t percent tax on the reduced price."),
    ("def round_trip_miles(km: float) -> float:\n    both = add(km, km)\n    return km_to_miles(both)\n",
     "Miles driven there and back for a one-way distance in km."),
    ("def twice_discount_tax(price: float, d: float, t: float) -> float:\n"
     "    once = discount_tax(price, d, t)\n    return discount_tax(once, d, t)\n",
     "Apply the discount-then-tax twice."),
    ("def grow_two_years(x: float, r: float) -> float:\n"
     "    g = percent_of(r, x)\n    y = add(x, g)\n    g2 = percent_of(r, y)\n    return add(y, g2)\n",
     "An amount after two years of r percent yearly compound growth."),
)

GENERIC = (
    ("def head(xs: list[T]) -> T:\n    return xs[0]\n", "The first element of a list."),
    ("def same_pair(a: T, b: T) -> list[T]:\n    return [a, b]\n", "Two values of one type as a list."),
    ("def scale(x: float, k: int = 2) -> float:\n    return x * k\n", "x times k (k defaults to 2)."),
    ("def shout(word: str) -> str:\n    return word.upper()\n", "The word in capitals."),
)


@pytest.fixture(scope="session")
def sandbox():
    from cocoda_jax.execution import Sandbox

    with Sandbox(workers=2, timeout_s=30.0) as sb:
        yield sb


@pytest.fixture(scope="session")
def math_library(sandbox) -> LibrarySnapshot:
    from cocoda_jax.data import synthetic_math

    return synthetic_math.primitive_library(sandbox)


@pytest.fixture(scope="session")
def composite_library(math_library, sandbox) -> LibrarySnapshot:
    """The primitives plus :data:`COMPOSITES`, inserted through the real INSERTTOOL."""
    snap = math_library
    for source, description in COMPOSITES:
        snap = snap.insert(Tool.from_source(source, description), runner=sandbox)
    return snap


@pytest.fixture(scope="session")
def generic_library(math_library, sandbox) -> LibrarySnapshot:
    snap = math_library
    for source, description in GENERIC:
        snap = snap.insert(Tool.from_source(source, description), runner=sandbox)
    return snap

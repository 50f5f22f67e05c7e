"""Fixtures of the retrieval tests: small synthetic libraries and a hand-made DAG, built once."""

import pytest

from cocoda_jax.library import LibrarySnapshot
from cocoda_jax.retrieval import synthetic_library as sl
from cocoda_jax.retrieval.cascade import RetrievalIndex


@pytest.fixture(scope="session")
def synth():
    """(snapshot, specs, index) of a 300-tool synthetic library (seed 0)."""
    specs = sl.generate(300, 0)
    snap = LibrarySnapshot.from_json(sl.library_json(specs), verify_examples=False)
    return snap, specs, RetrievalIndex.build(snap)


def _spec(source, description, pre=(), post=(), complexity="O(1)", calls=(), depth=0, params=(), result="float"):
    return sl.Spec(source.split("(")[0][4:], source, description, tuple(pre), tuple(post), complexity, (), "hand",
                   "shop", tuple(calls), (), tuple(params), result, depth)


@pytest.fixture(scope="session")
def shop():
    """A small hand-made DAG: discount = subtract(price, percent_of(pct, price))."""
    specs = [
        _spec("def percent_of(p: float, x: float) -> float:\n    return p * x / 100\n",
              "The p percent of an amount x.", params=(("p", "float"), ("x", "float"))),
        _spec("def subtract(a: float, b: float) -> float:\n    return a - b\n",
              "Subtract an amount b from a.", params=(("a", "float"), ("b", "float"))),
        _spec("def divide(a: float, b: float) -> float:\n    return a / b\n",
              "Divide an amount a by b.", pre=("b != 0",), params=(("a", "float"), ("b", "float"))),
        _spec("def sort_prices(xs: list[float]) -> list[float]:\n    return sorted(xs)\n",
              "Sort a list of prices.", complexity="O(n log n)", params=(("xs", "list[float]"),), result="list[float]"),
        _spec("def largest_prices(xs: list[float]) -> list[float]:\n    return [max(xs)]\n",
              "The largest of a list of prices.", complexity="O(n)", params=(("xs", "list[float]"),),
              result="list[float]"),
        _spec("def safe_ratio(a: float, b: float) -> float:\n    return (a + 0.0) / b\n", "Ratio a over b, unchecked.",
              post=("result >= 0",), params=(("a", "float"), ("b", "float"))),
        _spec("def label(name: str) -> str:\n    return name.upper()\n", "Upper-case label of a product name.",
              params=(("name", "str"),), result="str"),
        _spec("def discount(price: float, pct: float) -> float:\n    return subtract(price, percent_of(pct, price))\n",
              "Price after taking a percent off.", calls=("subtract", "percent_of"), depth=1,
              params=(("price", "float"), ("pct", "float"))),
    ]
    snap = LibrarySnapshot.from_json(sl.library_json(specs), verify_examples=False)
    return snap, RetrievalIndex.build(snap)

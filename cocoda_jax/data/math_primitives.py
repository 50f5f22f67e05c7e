"""The starting library of the embedded synthetic math domain: 30 typed, atomic primitives.

Each primitive is one record ``(source, description, pre, post, examples)`` that becomes a
:class:`~cocoda_jax.library.Tool` with all four layers (L1 signature from the annotations, L2
description, L3 pre/post-conditions, L4 worked examples). None of them is a multi-step motif of the
generator (:mod:`cocoda_jax.data.synthetic_math`): a discount-then-tax or a compound growth has to be
*discovered* from the primitives.

Same-signature primitives carry examples that tell them apart (``subtract(3, 5)`` is not
``abs_diff(3, 5)``; ``floor_div(7, 2)`` is not ``divide(7, 2)``), so INSERTTOOL's duplicate-behaviour
check accepts all of them. The sources are also executed in this (trusted) process by
:func:`local_functions`, so the generator computes gold values with exactly the code the sandbox runs.
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple


class PrimitiveSpec(NamedTuple):
    source: str
    description: str
    pre: tuple[str, ...]
    post: tuple[str, ...]
    examples: tuple[tuple[dict[str, Any], Any], ...]


def _p(source: str, description: str, pre=(), post=(), examples=()) -> PrimitiveSpec:
    return PrimitiveSpec(source, description, tuple(pre), tuple(post), tuple(examples))


def _unit(name: str, doc: str, expr: str, ins: float, out: float, extra: tuple = ()) -> PrimitiveSpec:
    return _p(f"def {name}(x: float) -> float:\n    return {expr}\n", doc, (), (),
              ((({"x": ins}), out),) + extra)


PRIMITIVES: tuple[PrimitiveSpec, ...] = (
    # -- arithmetic ------------------------------------------------------------------------------
    _p("def add(a: float, b: float) -> float:\n    return a + b\n",
       "Add two numbers: the total of a and b.", (), ("result == a + b",),
       (({"a": 2, "b": 3}, 5), ({"a": 1.5, "b": -0.5}, 1.0))),
    _p("def subtract(a: float, b: float) -> float:\n    return a - b\n",
       "Subtract b from a: how much is left, or the difference a minus b.", (), ("result + b == a",),
       (({"a": 5, "b": 3}, 2), ({"a": 3, "b": 5}, -2))),
    _p("def multiply(a: float, b: float) -> float:\n    return a * b\n",
       "Multiply two numbers: a times b (a product, a total of equal groups).", (), (),
       (({"a": 4, "b": 2.5}, 10.0), ({"a": 3, "b": 3}, 9))),
    _p("def divide(a: float, b: float) -> float:\n    return a / b\n",
       "Divide a by b: a quotient, a rate or a per-unit amount.", ("b != 0",), (),
       (({"a": 9, "b": 3}, 3.0), ({"a": 7, "b": 2}, 3.5))),
    _p("def floor_div(a: float, b: float) -> float:\n    return a // b\n",
       "How many whole times b fits into a (integer division, rounding down).", ("b > 0",), ("result <= a / b",),
       (({"a": 7, "b": 2}, 3), ({"a": 20, "b": 6}, 3))),
    _p("def remainder(a: float, b: float) -> float:\n    return a % b\n",
       "What is left over after taking as many whole b out of a as possible (a modulo b).", ("b > 0",),
       ("0 <= result < b",), (({"a": 7, "b": 2}, 1), ({"a": 20, "b": 6}, 2))),
    _p("def ceil_div(a: float, b: float) -> float:\n    return -(-a // b)\n",
       "How many groups of size b are needed to hold a (division rounding up, e.g. boxes needed).",
       ("b > 0",), ("result >= a / b",), (({"a": 7, "b": 2}, 4), ({"a": 12, "b": 4}, 3))),
    _p("def power(base: float, exponent: float) -> float:\n    return base ** exponent\n",
       "Raise base to the power exponent.", (), (),
       (({"base": 2, "exponent": 3}, 8), ({"base": 9, "exponent": 0.5}, 3.0))),
    _p("def abs_diff(a: float, b: float) -> float:\n    return abs(a - b)\n",
       "The absolute difference between two numbers (how far apart they are).", (), ("result >= 0",),
       (({"a": 3, "b": 5}, 2), ({"a": 10, "b": 4}, 6))),
    _p("def round_to(x: float, digits: int) -> float:\n    return round(x, digits)\n",
       "Round x to a number of decimal digits.", ("digits >= 0",), (),
       (({"x": 2.345, "digits": 1}, 2.3), ({"x": 7.5, "digits": 0}, 8.0))),
    # -- percentages and ratios --------------------------------------------------------------------
    _p("def percent_of(p: float, x: float) -> float:\n    return p * x / 100\n",
       "The p percent of x (for example a discount, a tax or an interest amount).", (), (),
       (({"p": 20, "x": 50}, 10.0), ({"p": 5, "x": 7}, 0.35))),
    _p("def as_percent(part: float, whole: float) -> float:\n    return part / whole * 100\n",
       "What percent part is of whole.", ("whole != 0",), (),
       (({"part": 10, "whole": 50}, 20.0), ({"part": 3, "whole": 4}, 75.0))),
    _p("def percent_change(old: float, new: float) -> float:\n    return (new - old) / old * 100\n",
       "The percent increase (positive) or decrease (negative) from old to new.", ("old != 0",), (),
       (({"old": 50, "new": 60}, 20.0), ({"old": 80, "new": 60}, -25.0))),
    _p("def ratio_part(total: float, a: float, b: float) -> float:\n    return total * a / (a + b)\n",
       "The first share when total is split in the ratio a : b.", ("a + b != 0",), (),
       (({"total": 30, "a": 1, "b": 2}, 10.0), ({"total": 100, "a": 3, "b": 1}, 75.0))),
    # -- lists -------------------------------------------------------------------------------------
    _p("def sum_list(xs: list[float]) -> float:\n    return sum(xs)\n",
       "The sum of a list of numbers.", (), (),
       (({"xs": [1, 2, 3]}, 6), ({"xs": []}, 0))),
    _p("def mean(xs: list[float]) -> float:\n    return sum(xs) / len(xs)\n",
       "The arithmetic mean (average) of a list of numbers.", ("len(xs) > 0",), ("min(xs) <= result <= max(xs)",),
       (({"xs": [1, 2, 3]}, 2.0), ({"xs": [4, 5]}, 4.5))),
    _p("def max_list(xs: list[float]) -> float:\n    return max(xs)\n",
       "The largest number in a list.", ("len(xs) > 0",), ("result in xs",),
       (({"xs": [1, 7, 3]}, 7), ({"xs": [-2, -5]}, -2))),
    _p("def min_list(xs: list[float]) -> float:\n    return min(xs)\n",
       "The smallest number in a list.", ("len(xs) > 0",), ("result in xs",),
       (({"xs": [1, 7, 3]}, 1), ({"xs": [-2, -5]}, -5))),
    _p("def count_items(xs: list[float]) -> int:\n    return len(xs)\n",
       "How many numbers a list holds.", (), ("result >= 0",),
       (({"xs": [1, 7, 3]}, 3), ({"xs": []}, 0))),
    # -- unit conversions (distinct factors, so no two are the same function) ----------------------
    _unit("hours_to_minutes", "Convert hours to minutes (1 hour = 60 minutes).", "x * 60", 2, 120),
    _unit("minutes_to_hours", "Convert minutes to hours (60 minutes = 1 hour).", "x / 60", 90, 1.5),
    _unit("days_to_hours", "Convert days to hours (1 day = 24 hours).", "x * 24", 2, 48),
    _unit("weeks_to_days", "Convert weeks to days (1 week = 7 days).", "x * 7", 3, 21),
    _unit("kg_to_grams", "Convert kilograms to grams (1 kg = 1000 g).", "x * 1000", 2.5, 2500.0),
    _unit("grams_to_kg", "Convert grams to kilograms (1000 g = 1 kg).", "x / 1000", 1500, 1.5),
    _unit("dollars_to_cents", "Convert dollars to cents (1 dollar = 100 cents).", "x * 100", 2.5, 250.0),
    _unit("cents_to_dollars", "Convert cents to dollars (100 cents = 1 dollar).", "x / 100", 250, 2.5),
    _unit("km_to_miles", "Convert kilometres to miles (1 km = 0.621371 miles).", "x * 0.621371", 10, 6.21371),
    _unit("miles_to_km", "Convert miles to kilometres (1 mile = 1.609344 km).", "x * 1.609344", 10, 16.09344),
    _unit("dozens_to_items", "Convert dozens to single items (1 dozen = 12).", "x * 12", 3, 36),
)


@functools.cache
def local_functions() -> dict[str, Any]:
    """The primitives as callables of this process (our own, trusted sources), by name."""
    namespace: dict[str, Any] = {}
    for spec in PRIMITIVES:
        exec(compile(spec.source, "<math primitive>", "exec"), namespace)  # noqa: S102 - trusted, fixed text
    return {name: fn for name, fn in namespace.items() if not name.startswith("__")}

r"""The embedded default domain: arithmetic word problems generated from latent programs.

    from cocoda_jax.data import synthetic_math
    lib = synthetic_math.primitive_library()          # 30 typed primitives, a LibrarySnapshot
    tasks = synthetic_math.generate(1000, seed=0, split="train")
    t = tasks[0]; t.question, t.inputs, t.program, t.answer, t.intermediates, t.skeleton

How a task is made (all choices from ``random.Random`` seeded by ``(seed, split, index)``, so a task
depends only on those three and :data:`VERSION`):

1. A *chain* of 1 to 5 motifs is drawn. A motif (:data:`MOTIFS`) is a recurring multi-step
   computation over the primitives — a discount then a tax, compound growth, an average speed, a
   split with a remainder, a chain of unit conversions, rate times time, ... — that takes one carried
   quantity of a *kind* (money, count, hours, km, ...) plus fresh numbers and yields a quantity of
   another kind. Consecutive motifs must fit by kind, so the chain is a well-typed composition and the
   same sub-computations recur across many tasks: what an abstractor should discover. No motif is in
   the starting library.
2. The numbers are drawn, the motif computations run on the real primitive code, and a step whose
   result is implausible (a negative price, zero items, a loss where a profit is asked) is redrawn.
3. The question is rendered from per-motif sentence templates (the first motif introduces its carried
   quantity; later ones refer back to it) and an asking sentence of the last motif. The numbers of the
   question are its only inputs: they are bound to ``n0, n1, ...`` in order of appearance in the text.
4. The gold program is straight-line Python, one primitive call per line
   (``x3 = percent_of(n2, x2)``), ending with ``answer = x<k>``; the gold intermediate values are the
   values of ``x0, x1, ...``.

Splits: ``train``, ``validation`` and ``test`` differ in number ranges (validation and test draw from
ranges just above the training range), phrasings (one sentence template per motif part, the
connectives and the people's names are held out), and motif combinations (adjacent motif pairs are
assigned to a split by a stable hash: a training chain contains no held-out pair; every validation or
test chain of two or more motifs contains at least one pair held out for its split).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
import zlib
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from cocoda_jax.data.domain import (DomainBase, DomainConfigError, DomainSplits, dataclass_from_dict, is_number, pairs,
                                    register_domain, tuplify)
from cocoda_jax.data.math_primitives import PRIMITIVES, local_functions
from cocoda_jax.data.task import GoldProgramTask
from cocoda_jax.library import LibrarySnapshot

VERSION = 1
SPLITS = ("train", "validation", "test")
MAX_DEPTH = 5

# ------------------------------------------------------------------------------------------------
# The task record
# ------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class MathTask(GoldProgramTask):
    """One generated word problem with its latent program.

    ``inputs``: ``(("n0", v0), ("n1", v1), ...)``, the question's numbers in order of appearance.
    ``program``: one primitive call per line, ending ``answer = x<k>``.
    ``intermediates``: ``(("x0", v), ...)``, the value of every call line (the last is the answer).
    ``skeleton``: the shape of the call graph, per line ``(primitive, argument shapes)`` where an
    argument is ``"n"`` (a question number), the index of an earlier line, or a tuple of those (a list
    argument). Hashable; two tasks with the same skeleton differ only in numbers and wording.
    ``difficulty``: the number of primitive calls. ``motifs``: the motif chain, in order.
    ``seen_structure``: whether the run's demonstrations show this task's structure (every adjacent
    motif pair of its chain; ``domain.demos="seen_pairs"``): False marks a training task that has an
    answer only, and a held-out task whose structure no demonstration showed.
    """

    id: str
    split: str
    question: str
    inputs: tuple[tuple[str, float], ...]
    program: str
    answer: float
    answer_type: str
    intermediates: tuple[tuple[str, float], ...]
    skeleton: tuple
    difficulty: int
    motifs: tuple[str, ...]
    seen_structure: bool = True

    @property
    def depth(self) -> int:
        return len(self.motifs)


# ------------------------------------------------------------------------------------------------
# Numbers
# ------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Num:
    """A number range: training draws multiples of ``step`` in ``[lo, hi]``; validation from just
    above ``hi`` (up to a quarter of the width more, at least two steps), test from the quarter after
    that."""

    lo: float
    hi: float
    step: float
    fmt: str  # "int", "money", "pct", "dec"

    def bounds(self, split: str) -> tuple[float, float]:
        width = self.hi - self.lo
        quarter = max(width / 4, 2 * self.step)  # at least two values in each held-out range
        if split == "train":
            return self.lo, self.hi
        if split == "validation":
            return self.hi + self.step, self.hi + quarter
        return self.hi + quarter + self.step, self.hi + 2 * quarter

    def draw(self, rng, split: str, carried: float = 0.0) -> float:
        lo, hi = self.bounds(split)
        k_lo, k_hi = math.ceil(lo / self.step - 1e-9), math.floor(hi / self.step + 1e-9)
        k = rng.randint(k_lo, max(k_lo, k_hi))
        value = round(k * self.step, 6)
        return int(value) if float(value).is_integer() else value


@dataclasses.dataclass(frozen=True)
class Rel:
    """A number drawn relative to the carried quantity ``x``: ``x`` times a fraction from ``frac``
    (whose range is held out by split like any :class:`Num`), rounded to ``step`` (at least ``step``)."""

    frac: Num
    step: float
    fmt: str

    def draw(self, rng, split: str, carried: float = 0.0) -> float:
        value = round(max(self.step, round(carried * self.frac.draw(rng, split) / self.step) * self.step), 6)
        return int(value) if float(value).is_integer() else value


def format_number(value: float, fmt: str) -> str:
    if fmt == "money":
        return f"${int(value)}" if float(value).is_integer() else f"${value:.2f}"
    if fmt == "pct":
        return f"{value:g}%"
    return f"{value:g}"


_NUMBER_RE = re.compile(r"\$?(\d+(?:\.\d+)?)%?")


def question_numbers(question: str) -> list[float]:
    """The numbers written in a question, in order (what ``n0, n1, ...`` are bound to)."""
    return [float(m.group(1)) for m in _NUMBER_RE.finditer(question)]


# ------------------------------------------------------------------------------------------------
# Building a program
# ------------------------------------------------------------------------------------------------


class _Reject(Exception):
    """The drawn numbers make an implausible or invalid step: draw again."""


def _is_slot(ref: Any) -> bool:
    """Question numbers are referred to by negative ints (slot ``k`` is ``-k - 1``) until they get
    their ``n`` names, which depend on their place in the text; call lines by their index >= 0."""
    return isinstance(ref, int) and ref < 0


class _Builder:
    def __init__(self) -> None:
        self.fns = local_functions()
        self.values: dict[int, float] = {}  # slot (< 0) or line index (>= 0) -> value
        self.lines: list[tuple[str, tuple]] = []
        self.slot_fmt: dict[int, str] = {}

    def number(self, value: float, fmt: str) -> int:
        slot = -len(self.slot_fmt) - 1
        self.slot_fmt[slot] = fmt
        self.values[slot] = value
        return slot

    def value(self, ref: Any) -> Any:
        if isinstance(ref, list):
            return [self.values[r] for r in ref]
        return self.values[ref]

    def call(self, fn: str, *args: Any) -> int:
        try:
            result = self.fns[fn](*(self.value(a) for a in args))
        except (ArithmeticError, ValueError) as exc:
            raise _Reject(f"{fn}: {exc}") from None
        if isinstance(result, complex) or not math.isfinite(result) or abs(result) > 1e8:
            raise _Reject(f"{fn} gave {result!r}")
        index = len(self.lines)
        self.lines.append((fn, args))
        self.values[index] = result
        return index

    def mark(self) -> tuple[int, int]:
        return len(self.lines), len(self.slot_fmt)

    def rollback(self, mark: tuple[int, int]) -> None:
        n_lines, n_slots = mark
        for i in range(n_lines, len(self.lines)):
            del self.values[i]
        for k in range(n_slots, len(self.slot_fmt)):
            del self.values[-k - 1]
            del self.slot_fmt[-k - 1]
        del self.lines[n_lines:]


# ------------------------------------------------------------------------------------------------
# Motifs
# ------------------------------------------------------------------------------------------------

#: A kind's range when it starts a chain (the carried quantity of the first motif), and its format.
KINDS: dict[str, Num] = {
    "money": Num(20, 400, 0.5, "money"),
    "count": Num(20, 200, 1, "int"),
    "hours": Num(5, 60, 1, "int"),
    "km": Num(20, 300, 5, "int"),
    "speed": Num(20, 100, 5, "int"),
    "kg": Num(2, 40, 1, "int"),
    "weeks": Num(1, 6, 1, "int"),
    "points": Num(40, 100, 1, "int"),
}
#: What a quantity of each kind must satisfy to be carried on (or asked for).
_PLAUSIBLE: dict[str, Callable[[float], bool]] = {
    "count": lambda v: v >= 1 and float(v).is_integer(),
    "percent": lambda v: v > 0,
    "gap": lambda v: v >= 0,
}
ANSWER_TYPES = {"count": "int"}


@dataclasses.dataclass(frozen=True)
class Motif:
    """A recurring multi-step computation: carried quantity of ``in_kind`` -> quantity of ``out_kind``.

    ``params``: the fresh numbers, role -> range. ``build(b, x, p, ctx)`` emits the calls and returns
    the result line. ``start``/``cont``: sentence templates when the motif opens the chain (its carried
    quantity is written as ``{x}``) or continues it; ``ask``: the question sentence when it ends the
    chain. Templates have three variants: 0 and 1 for training, 2 held out for validation and test.
    """

    name: str
    in_kind: str
    out_kind: str
    params: tuple[tuple[str, Num], ...]
    build: Callable[..., int]
    start: tuple[str, str, str]
    cont: tuple[str, str, str]
    ask: tuple[str, str, str]
    check: Callable[[Mapping[str, float], float], bool] = lambda p, out: True


def _m_discount_tax(b, x, p, ctx):
    cut = b.call("percent_of", p["d"], x)
    sale = b.call("subtract", x, cut)
    tax = b.call("percent_of", p["t"], sale)
    return b.call("add", sale, tax)


def _m_compound(b, x, p, ctx):
    for _ in range(ctx["years"]):
        gain = b.call("percent_of", p["r"], x)
        x = b.call("add", x, gain)
    return x


def _m_ratio_split(b, x, p, ctx):
    first = b.call("ratio_part", x, p["a"], p["b"])
    return b.call("subtract", x, first)


def _m_wage(b, x, p, ctx):
    pay = b.call("multiply", x, p["rate"])
    return b.call("add", pay, p["bonus"])


def _m_split_keep(b, x, p, ctx):
    share = b.call("floor_div", x, p["k"])
    left = b.call("remainder", x, p["k"])
    if b.value(share) < 1:
        raise _Reject("fewer items than people")
    return b.call("add", share, left)


def _m_average_speed(b, x, p, ctx):
    dist = b.call("add", x, p["d2"])
    time = b.call("add", p["t1"], p["t2"])
    return b.call("divide", dist, time)


def _m_travel(b, x, p, ctx):
    hours = b.call("minutes_to_hours", p["m"])
    return b.call("multiply", x, hours)


def _m_nonstop(b, x, p, ctx):
    days = b.call("weeks_to_days", x)
    return b.call("days_to_hours", days)


def _m_round_trip(b, x, p, ctx):
    both = b.call("add", x, x)
    return b.call("km_to_miles", both)


def _m_portions(b, x, p, ctx):
    grams = b.call("kg_to_grams", x)
    return b.call("floor_div", grams, p["size"])


def _m_weigh(b, x, p, ctx):
    grams = b.call("multiply", x, p["g"])
    return b.call("grams_to_kg", grams)


def _m_boxes_cost(b, x, p, ctx):
    boxes = b.call("ceil_div", x, p["cap"])
    return b.call("multiply", boxes, p["price"])


def _m_cents(b, x, p, ctx):
    cents = b.call("multiply", x, p["c"])
    return b.call("cents_to_dollars", cents)


def _m_budget(b, x, p, ctx):
    rest = b.call("subtract", x, p["keep"])
    if b.value(rest) <= 0:
        raise _Reject("sets aside more than there is")
    return b.call("floor_div", rest, p["price"])


def _m_fuel(b, x, p, ctx):
    litres = b.call("divide", x, p["per"])
    return b.call("multiply", litres, p["price"])


def _m_profit(b, x, p, ctx):
    profit = b.call("subtract", x, p["cost"])
    return b.call("as_percent", profit, p["cost"])


def _m_score_gap(b, x, p, ctx):
    scores = [x, p["a"], p["b"], p["c"]]
    avg = b.call("mean", scores)
    best = b.call("max_list", scores)
    return b.call("subtract", best, avg)


def _m_dozens(b, x, p, ctx):
    items = b.call("dozens_to_items", x)
    return b.call("subtract", items, p["s"])


def _m_shift_hours(b, x, p, ctx):
    total = b.call("multiply", x, p["h"])
    minutes = b.call("multiply", x, p["brk"])
    breaks = b.call("minutes_to_hours", minutes)
    return b.call("subtract", total, breaks)


def _m_rate_time(b, x, p, ctx):
    miles = b.call("multiply", x, p["v"])
    return b.call("miles_to_km", miles)


def _m_drive_minutes(b, x, p, ctx):
    hours = b.call("divide", x, p["v"])
    return b.call("hours_to_minutes", hours)


def _pct(lo, hi, step=1):
    return Num(lo, hi, step, "pct")


def _money(lo, hi, step):
    return Num(lo, hi, step, "money")


def _int(lo, hi, step=1):
    return Num(lo, hi, step, "int")


MOTIFS: tuple[Motif, ...] = (
    Motif("discount_tax", "money", "money", (("d", _pct(5, 40, 5)), ("t", _pct(2, 12))), _m_discount_tax,
          ("A {thing} costs {x}. It is sold at {d} off, and a {t} sales tax is added to the sale price.",
           "{name} picks a {thing} priced at {x}; the shop takes {d} off and then charges {t} tax on the reduced price.",
           "The tag on a {thing} says {x}. A {d} discount applies first, then a {t} tax on the discounted amount."),
          ("That amount is marked down by {d}, and a {t} sales tax is added to the marked-down amount.",
           "{name} then gets {d} off that amount and pays {t} tax on what remains.",
           "A {d} reduction is taken off that sum, followed by a {t} levy on the reduced sum."),
          ("What is the final price?", "How much is paid in the end?", "What does the purchase finally cost?")),
    Motif("compound_growth", "money", "money", (("r", _pct(2, 10)),), _m_compound,
          ("{name} puts {x} in a savings account that pays {r} interest per year, compounded yearly, for {years} years.",
           "An investment of {x} grows by {r} every year for {years} years, each year on the new balance.",
           "{name} lends {x} at {r} yearly interest that compounds annually, over {years} years."),
          ("That money is deposited at {r} interest per year, compounded yearly, for {years} years.",
           "{name} invests that sum, and it grows by {r} per year on the current balance for {years} years.",
           "The sum is then left to compound at {r} annually for {years} years."),
          ("How much money is there at the end?", "What is the balance after the last year?",
           "What is the final amount of the investment?")),
    Motif("ratio_split", "money", "money", (("a", _int(1, 5)), ("b", _int(1, 5))), _m_ratio_split,
          ("{name} and {other} share {x} in the ratio {a}:{b}.",
           "A prize of {x} is divided between {name} and {other} in the ratio {a}:{b}.",
           "{x} is to be parted between {name} and {other} with proportions {a}:{b}."),
          ("That amount is shared by {name} and {other} in the ratio {a}:{b}, and {other} keeps the second share.",
           "{name} and {other} divide that money in the ratio {a}:{b}; {other} takes the second part.",
           "That sum is parted between {name} and {other} with proportions {a}:{b}, {other} holding the latter portion."),
          ("How much does {other} get?", "What is {other}'s share?", "What amount ends up with {other}?"),
          check=lambda p, out: p["a"] != p["b"]),
    Motif("wage", "hours", "money", (("rate", _money(8, 30, 0.5)), ("bonus", _money(10, 100, 5))), _m_wage,
          ("{name} works {x} hours at {rate} per hour and also gets a {bonus} bonus.",
           "For {x} hours of work {name} is paid {rate} an hour, plus a one-time bonus of {bonus}.",
           "{name} logs {x} hours billed at {rate} hourly and receives an extra {bonus} on top."),
          ("{name} is paid {rate} for each of those hours plus a {bonus} bonus.",
           "Each of those hours earns {rate}, and there is a bonus of {bonus}.",
           "Those hours are billed at {rate} apiece, with an extra {bonus} on top."),
          ("How much is earned in total?", "What is the total pay?", "What are the total earnings?")),
    Motif("split_keep", "count", "count", (("k", _int(3, 9)),), _m_split_keep,
          ("{name} has {x} {items} and shares them equally among {k} people, including themself, keeping any left over.",
           "{x} {items} are split evenly among {k} people, one of whom is {name}, who also keeps the leftovers.",
           "{name} deals {x} {items} out evenly to a group of {k}, counting themself, and pockets the remainder."),
          ("{name} shares them equally among {k} people, including themself, and keeps the leftovers.",
           "They are split evenly among {k} people, one of whom is {name}, who also keeps what is left over.",
           "{name} deals them out evenly to a group of {k}, counting themself, and pockets the remainder."),
          ("How many {items} does {name} end up with?", "How many {items} does {name} have in the end?",
           "What number of {items} stays with {name}?")),
    Motif("average_speed", "km", "speed",
          (("t1", Num(1, 5, 0.5, "dec")), ("d2", _int(20, 300, 5)), ("t2", Num(1, 5, 0.5, "dec"))), _m_average_speed,
          ("A {vehicle} travels {x} km in {t1} hours, then {d2} km in {t2} hours.",
           "On the first leg a {vehicle} covers {x} km in {t1} hours; the second leg is {d2} km and takes {t2} hours.",
           "A {vehicle} does {x} km over {t1} hours and afterwards {d2} km over {t2} hours."),
          ("A {vehicle} covers that distance in {t1} hours and then another {d2} km in {t2} hours.",
           "That distance takes a {vehicle} {t1} hours, after which it goes {d2} km more in {t2} hours.",
           "A {vehicle} does that many km over {t1} hours and then {d2} km over {t2} hours."),
          ("What is its average speed in km per hour?", "What is the average speed for the whole trip, in km per hour?",
           "At what mean speed, in km per hour, did it move?")),
    Motif("travel", "speed", "km", (("m", _int(30, 180, 15)),), _m_travel,
          ("A {vehicle} moves at {x} km per hour for {m} minutes.",
           "Going at a steady {x} km per hour, a {vehicle} drives for {m} minutes.",
           "A {vehicle} keeps a pace of {x} km per hour during {m} minutes."),
          ("At that speed, a {vehicle} travels for {m} minutes.",
           "A {vehicle} keeps that speed for {m} minutes.",
           "Holding that pace, a {vehicle} goes on for {m} minutes."),
          ("How many km does it travel?", "What distance, in km, does it cover?", "How far in km does it get?")),
    Motif("nonstop_hours", "weeks", "hours", (), _m_nonstop,
          ("A machine runs nonstop for {x} weeks.", "{name} rents a generator that runs day and night for {x} weeks.",
           "A pump operates around the clock for {x} weeks."),
          ("", "", ""),
          ("For how many hours does it run?", "How many hours is that?", "What is that duration in hours?")),
    Motif("round_trip_miles", "km", "miles", (), _m_round_trip,
          ("A {vehicle} drives {x} km to a town and back the same way.",
           "{name} rides a {vehicle} {x} km to a lake and returns along the same road.",
           "A {vehicle} goes {x} km out and then retraces the route home."),
          ("A {vehicle} drives that distance to a town and back the same way.",
           "{name} rides a {vehicle} that far to a lake and returns along the same road.",
           "A {vehicle} covers that distance out and then retraces the route home."),
          ("How many miles is the whole trip?", "What is the round trip in miles?",
           "How long is the full journey, in miles?")),
    Motif("portions", "kg", "count", (("size", _int(100, 500, 50)),), _m_portions,
          ("A baker has {x} kg of flour and uses {size} grams for each loaf.",
           "{name} buys {x} kg of rice and cooks it in portions of {size} grams.",
           "A {x} kg sack of sugar is scooped into bags of {size} grams."),
          ("All of it is used in portions of {size} grams.", "{name} divides that weight into portions of {size} grams.",
           "That mass is scooped into bags of {size} grams."),
          ("How many whole portions can be made?", "How many full portions are there?",
           "What number of complete bags results?")),
    Motif("weigh_items", "count", "kg", (("g", _int(50, 500, 10)),), _m_weigh,
          ("A crate holds {x} {items}, and each one weighs {g} grams.",
           "{name} packs {x} {items} that weigh {g} grams apiece.",
           "There are {x} {items}, every one of them {g} grams heavy."),
          ("Each of those {items} weighs {g} grams.", "Every one of them weighs {g} grams.",
           "Those {items} are {g} grams heavy apiece."),
          ("What is their total weight in kg?", "How many kg do they weigh together?",
           "What is the combined mass in kg?")),
    Motif("boxes_cost", "count", "money", (("cap", _int(4, 24)), ("price", _money(1, 10, 0.25))), _m_boxes_cost,
          ("{name} must pack {x} {items} into boxes that hold {cap} each, and every box costs {price}.",
           "To ship {x} {items}, {name} uses boxes with room for {cap}; a box costs {price}.",
           "{x} {items} go into crates of capacity {cap}, priced at {price} per crate."),
          ("They are packed into boxes that hold {cap} each, and every box costs {price}.",
           "{name} ships them in boxes with room for {cap}; a box costs {price}.",
           "They go into crates of capacity {cap}, priced at {price} per crate."),
          ("How much do the boxes cost?", "What do the boxes cost altogether?", "What is spent on crates?")),
    Motif("cents_total", "count", "money", (("c", _int(5, 95, 5)),), _m_cents,
          ("{name} buys {x} {items} at {c} cents each.", "Each of {x} {items} costs {c} cents, and {name} buys them all.",
           "{name} pays {c} cents apiece for {x} {items}."),
          ("{name} sells them at {c} cents each.", "Each of them is sold for {c} cents.",
           "They fetch {c} cents apiece."),
          ("How many dollars is that?", "What is the total in dollars?", "What does that come to in dollars?")),
    Motif("budget_items", "money", "count", (("keep", Rel(Num(0.05, 0.3, 0.05, "dec"), 1, "money")),
                                                     ("price", Rel(Num(0.02, 0.2, 0.01, "dec"), 0.5, "money"))), _m_budget,
          ("{name} has {x}, sets aside {keep}, and spends the rest on {items} that cost {price} each.",
           "With {x} in hand, {name} saves {keep} and uses the remainder to buy {items} at {price} apiece.",
           "{name} holds {x}, reserves {keep}, and converts what is left into {items} priced {price} each."),
          ("From that money {name} sets aside {keep} and spends the rest on {items} at {price} each.",
           "{name} saves {keep} of it and uses the remainder to buy {items} at {price} apiece.",
           "{name} reserves {keep} of that sum and converts what is left into {items} priced {price} each."),
          ("How many {items} can {name} buy?", "How many {items} does {name} get?",
           "What is the largest number of {items} obtainable?")),
    Motif("fuel_cost", "km", "money", (("per", _int(8, 20)), ("price", _money(1, 3, 0.05))), _m_fuel,
          ("A {vehicle} drives {x} km and goes {per} km on one litre of fuel, which costs {price} per litre.",
           "{name}'s {vehicle} covers {x} km; it needs a litre for every {per} km, and fuel is {price} a litre.",
           "Over {x} km a {vehicle} burns one litre per {per} km, with fuel priced at {price} per litre."),
          ("A {vehicle} drives that far, going {per} km on one litre of fuel that costs {price} per litre.",
           "{name}'s {vehicle} covers that distance, needing a litre for every {per} km at {price} a litre.",
           "Over that distance a {vehicle} burns one litre per {per} km, with fuel priced at {price} per litre."),
          ("How much does the fuel cost?", "What is the fuel bill?", "What is spent on fuel?")),
    Motif("profit_percent", "money", "percent", (("cost", Rel(Num(0.4, 0.8, 0.05, "dec"), 1, "money")),), _m_profit,
          ("{name} sells a {thing} for {x} that cost {cost} to make.",
           "{name} sells a {thing} for {x}; making it cost {cost}.",
           "A {thing} fetches {x} at market although its production cost was {cost}."),
          ("That is the selling price of a {thing} that cost {cost} to make.",
           "{name} receives that amount for a {thing} whose making cost {cost}.",
           "That sum is what a {thing} fetches at market although its production cost was {cost}."),
          ("What is the profit as a percent of the cost?", "By what percent of the cost does the price exceed it?",
           "What is the markup, expressed in percent of cost?")),
    Motif("score_gap", "points", "gap", (("a", _int(40, 100)), ("b", _int(40, 100)), ("c", _int(40, 100))),
          _m_score_gap,
          ("{name} scores {x}, {a}, {b} and {c} points in four games.",
           "In four rounds {name} gets {x}, {a}, {b} and {c} points.",
           "Across four matches {name} posts {x}, {a}, {b} and {c} points."),
          ("", "", ""),
          ("How far is the best game above the average?", "By how many points does the best game beat the mean?",
           "What is the gap between the top score and the mean score?")),
    Motif("dozens_broken", "count", "count", (("s", _int(1, 30)),), _m_dozens,
          ("A shop orders {x} dozen eggs and {s} of them break.",
           "{name} buys {x} dozen {items}, and {s} of them turn out to be damaged.",
           "A delivery of {x} dozen {items} arrives with {s} of them spoiled."),
          ("That many dozen {items} are ordered and {s} of them break.",
           "{name} orders that many dozen {items}, and {s} turn out to be damaged.",
           "That number of dozens of {items} arrives with {s} of them spoiled."),
          ("How many good ones are left?", "How many undamaged ones remain?", "How many usable ones are there?")),
    Motif("shift_hours", "count", "hours", (("h", _int(4, 10)), ("brk", _int(10, 60, 5))), _m_shift_hours,
          ("{name} works {x} shifts of {h} hours each but takes an unpaid {brk}-minute break in every shift.",
           "A nurse does {x} shifts, each {h} hours long, with a {brk} minute break per shift that is not worked.",
           "{name} signs up for {x} shifts of {h} hours, and {brk} minutes of each shift are spent on a break."),
          ("{name} works that many shifts of {h} hours each, with an unpaid {brk}-minute break in every shift.",
           "That is the number of {h}-hour shifts {name} works, each with a {brk} minute break that is not worked.",
           "{name} signs up for that many shifts of {h} hours, spending {brk} minutes of each on a break."),
          ("How many hours are actually worked?", "What is the total working time in hours?",
           "How many hours of real work is that?")),
    Motif("rate_time", "hours", "km", (("v", _int(20, 70, 5)),), _m_rate_time,
          ("A {vehicle} drives for {x} hours at {v} miles per hour.",
           "For {x} hours, a {vehicle} holds a speed of {v} miles per hour.",
           "A {vehicle} spends {x} hours on the road at {v} miles per hour."),
          ("A {vehicle} drives for that many hours at {v} miles per hour.",
           "For that long, a {vehicle} holds a speed of {v} miles per hour.",
           "A {vehicle} spends that time on the road at {v} miles per hour."),
          ("How many km does it cover?", "What distance in km is that?", "How far does it go, in km?")),
    Motif("drive_minutes", "km", "minutes", (("v", _int(30, 120, 5)),), _m_drive_minutes,
          ("A {vehicle} covers {x} km at {v} km per hour.", "{name} drives a {vehicle} {x} km at a steady {v} km per hour.",
           "A {vehicle} travels {x} km holding {v} km per hour."),
          ("A {vehicle} covers that distance at {v} km per hour.", "{name} drives a {vehicle} that far at a steady {v} km per hour.",
           "A {vehicle} travels that far holding {v} km per hour."),
          ("How many minutes does it take?", "How long is the drive in minutes?", "For how many minutes is it on the road?")),
)
MOTIF_BY_NAME = {m.name: m for m in MOTIFS}

_NAMES = {"train": ("Ava", "Ben", "Chloe", "Dev", "Emma", "Felix", "Grace", "Hugo", "Ines", "Jack", "Kira", "Liam"),
          "heldout": ("Maya", "Nico", "Olga", "Pavel", "Quinn", "Rosa", "Sami", "Tara")}
_THINGS = {"train": ("jacket", "lamp", "bicycle", "watch", "backpack", "chair"),
           "heldout": ("guitar", "tent", "camera", "kettle")}
_ITEMS = {"train": ("apples", "stickers", "marbles", "cookies", "pencils", "oranges"),
          "heldout": ("buttons", "shells", "candles", "plums")}
_VEHICLES = {"train": ("car", "bus", "truck", "van"), "heldout": ("train", "motorbike", "coach")}
_CONNECTIVES = {"train": ("Then", "After that"), "heldout": ("Next", "Later on")}
_YEARS = {"train": (2, 3), "heldout": (2, 3, 4)}
_YEAR_WORDS = {2: "two", 3: "three", 4: "four"}


def _pool(table: Mapping[str, Sequence], split: str) -> Sequence:
    return table["train" if split == "train" else "heldout"]


def _templates(split: str) -> tuple[int, ...]:
    return (0, 1) if split == "train" else (2,)


# ------------------------------------------------------------------------------------------------
# Chains and held-out combinations
# ------------------------------------------------------------------------------------------------


def pair_split(first: str, second: str) -> str:
    """The split an adjacent motif pair belongs to (stable across runs and platforms)."""
    h = zlib.crc32(f"{first}>{second}".encode()) % 10
    return "test" if h == 0 else "validation" if h == 1 else "train"


def pair_demonstrated(first: str, second: str) -> bool:
    """Whether demonstrations may show the adjacent motif pair (``domain.demos="seen_pairs"``): a
    stable hash puts about half of the pairs on each side, independent of :func:`pair_split`."""
    return zlib.crc32(f"demonstrated:{first}>{second}".encode()) % 2 == 0


def structure_demonstrated(motifs: Sequence[str]) -> bool:
    """Every adjacent pair of the chain is demonstrated (a one-motif chain always is)."""
    return all(pair_demonstrated(a, b) for a, b in zip(motifs, motifs[1:]))


@functools.cache
def _successors() -> dict[str, tuple[Motif, ...]]:
    return {kind: tuple(m for m in MOTIFS if m.in_kind == kind) for kind in {m.out_kind for m in MOTIFS} | set(KINDS)}


@functools.cache
def _chains_by_motif(split: str, depth: int) -> dict[str, tuple[tuple[Motif, ...], ...]]:
    out: dict[str, list] = {}
    for chain in chains(split, depth):
        for name in dict.fromkeys(m.name for m in chain):
            out.setdefault(name, []).append(chain)
    return {k: tuple(v) for k, v in out.items()}


def _allowed_pair(a: str, b: str, split: str) -> bool:
    cls = pair_split(a, b)
    if split == "train":
        return cls == "train"
    if split == "validation":
        return cls != "test"
    return cls != "validation"


@functools.cache
def chains(split: str, depth: int) -> tuple[tuple[Motif, ...], ...]:
    """Every motif chain of ``depth`` that ``split`` may use (kinds fit, no motif twice in a row;
    see the module docstring for the held-out pairs). Tasks draw their chain uniformly from these."""
    partial: list[tuple[Motif, ...]] = [(m,) for m in MOTIFS if m.in_kind in KINDS]
    for _ in range(depth - 1):
        partial = [c + (m,) for c in partial for m in _successors().get(c[-1].out_kind, ())
                   if m is not c[-1] and _allowed_pair(c[-1].name, m.name, split)]
    if split != "train" and depth >= 2:
        partial = [c for c in partial if any(pair_split(a.name, b.name) == split for a, b in zip(c, c[1:]))]
    return tuple(partial)


# ------------------------------------------------------------------------------------------------
# Rendering
# ------------------------------------------------------------------------------------------------

_FIELD_RE = re.compile(r"\{(\w+)\}")


def _render(template: str, numbers: Mapping[str, int], words: Mapping[str, str], b: _Builder,
            order: list[int]) -> str:
    def sub(m: re.Match) -> str:
        key = m.group(1)
        if key in numbers:
            slot = numbers[key]
            order.append(slot)
            return format_number(b.values[slot], b.slot_fmt[slot])
        return words[key]

    return _FIELD_RE.sub(sub, template)


def _lower_first(text: str) -> str:
    return text if text.startswith("{") or not text else text[0].lower() + text[1:]


# ------------------------------------------------------------------------------------------------
# Generation
# ------------------------------------------------------------------------------------------------


def _rng(seed: int, split: str, index: int):
    import random
    return random.Random(f"cocoda-synthetic-math/v{VERSION}/{seed}/{split}/{index}")


def _plausible(kind: str, value: float) -> bool:
    check = _PLAUSIBLE.get(kind)
    return value > 0 if check is None else check(value)


def make_task(seed: int, split: str, index: int, depth: int | None = None) -> MathTask:
    """Task ``index`` of ``split`` for ``seed`` (what :func:`generate` returns at that position)."""
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; expected one of {SPLITS}")
    rng = _rng(seed, split, index)
    if depth is None:
        depth = rng.randint(1, MAX_DEPTH)
    if not 1 <= depth <= MAX_DEPTH:
        raise ValueError(f"depth must be in 1..{MAX_DEPTH}, got {depth}")
    by_motif = _chains_by_motif(split, depth)
    if not by_motif:
        raise RuntimeError(f"split {split!r} has no motif chain of depth {depth}")
    focus = sorted(by_motif)
    for _ in range(200):
        # A focus motif first, then a chain that contains it: every motif is drawn about equally
        # often, however many chains its kinds allow.
        task = _instantiate(rng, seed, split, index, rng.choice(by_motif[rng.choice(focus)]))
        if task is not None:
            return task
    raise RuntimeError(f"no valid task for seed={seed} split={split} index={index} depth={depth}")


def make_task_from_chain(seed: int, split: str, index: int, motifs: Sequence[str]) -> MathTask:
    """A task of ``split`` built on the given motif chain (names, in order) with numbers, entities
    and wording drawn from ``(seed, split, index)``: what RODS needs to make a variant of a seed task
    without searching the generator's stream for the same chain."""
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; expected one of {SPLITS}")
    by_name = {m.name: m for m in MOTIFS}
    unknown = [name for name in motifs if name not in by_name]
    if unknown or not motifs:
        raise ValueError(f"unknown or empty motif chain {tuple(motifs)!r} (unknown: {unknown})")
    chain = tuple(by_name[name] for name in motifs)
    rng = _rng(seed, split, index)
    for _ in range(200):
        task = _instantiate(rng, seed, split, index, chain)
        if task is not None:
            return task
    raise RuntimeError(f"no valid task for chain {tuple(motifs)} seed={seed} split={split} index={index}")


def _instantiate(rng, seed: int, split: str, index: int, chain: tuple[Motif, ...]) -> MathTask | None:
    b = _Builder()
    words = {"name": rng.choice(_pool(_NAMES, split)), "thing": rng.choice(_pool(_THINGS, split)),
             "items": rng.choice(_pool(_ITEMS, split)), "vehicle": rng.choice(_pool(_VEHICLES, split)),
             "years": ""}
    words["other"] = rng.choice([n for n in _pool(_NAMES, split) if n != words["name"]])
    first = chain[0]
    x = b.number(KINDS[first.in_kind].draw(rng, split), KINDS[first.in_kind].fmt)
    stages = []  # (motif, numbers, words) per stage, for rendering
    for motif in chain:
        for _attempt in range(30):
            mark = b.mark()
            carried = b.values[x]
            params = {role: b.number(num.draw(rng, split, carried), num.fmt) for role, num in motif.params}
            ctx = {"years": rng.choice(_pool(_YEARS, split))}
            try:
                out = motif.build(b, x, params, ctx)
                if not motif.check({r: b.values[s] for r, s in params.items()}, b.value(out)):
                    raise _Reject("motif check")
                if not _plausible(motif.out_kind, b.value(out)):
                    raise _Reject("implausible")
            except _Reject:
                b.rollback(mark)
                continue
            stages.append((motif, params, ctx))
            x = out
            break
        else:
            return None
    # Render: the first motif introduces its carried number, later ones refer back to it.
    order: list[int] = []
    variant = rng.choice(_templates(split))
    sentences = []
    for i, (motif, params, ctx) in enumerate(stages):
        w = dict(words, years=_YEAR_WORDS[ctx["years"]])
        if i == 0:
            numbers = dict(params, x=-1)  # the chain's first number, drawn before any other
            sentences.append(_render(motif.start[variant], numbers, w, b, order))
        else:
            template = motif.cont[variant]
            if rng.random() < 0.5:
                template = f"{rng.choice(_pool(_CONNECTIVES, split))}, {_lower_first(template)}"
            sentences.append(_render(template, params, w, b, order))
    last_motif, _, last_ctx = stages[-1]
    sentences.append(_render(last_motif.ask[variant], {}, dict(words, years=_YEAR_WORDS[last_ctx["years"]]), b, order))
    question = " ".join(s[0].upper() + s[1:] for s in sentences)
    if len(order) != len(b.slot_fmt):
        raise AssertionError("every drawn number must appear in the question exactly once")
    names = {slot: f"n{k}" for k, slot in enumerate(order)}
    return _finish(seed, split, index, b, names, question, chain, x)


def _finish(seed, split, index, b: _Builder, names, question, chain, out) -> MathTask:
    def arg_text(a):
        if isinstance(a, list):
            return "[" + ", ".join(arg_text(v) for v in a) + "]"
        return names[a] if _is_slot(a) else f"x{a}"

    def arg_shape(a):
        if isinstance(a, list):
            return tuple(arg_shape(v) for v in a)
        return "n" if _is_slot(a) else a

    lines = [f"x{i} = {fn}({', '.join(arg_text(a) for a in args)})" for i, (fn, args) in enumerate(b.lines)]
    lines.append(f"answer = x{out}")
    inputs = tuple(sorted(((names[s], b.values[s]) for s in names), key=lambda kv: int(kv[0][1:])))
    return MathTask(
        id=f"math-{split}-{seed}-{index}",
        split=split,
        question=question,
        inputs=inputs,
        program="\n".join(lines) + "\n",
        answer=b.values[out],
        answer_type=ANSWER_TYPES.get(chain[-1].out_kind, "float"),
        intermediates=tuple((f"x{i}", b.values[i]) for i in range(len(b.lines))),
        skeleton=tuple((fn, tuple(arg_shape(a) for a in args)) for fn, args in b.lines),
        difficulty=len(b.lines),
        motifs=tuple(m.name for m in chain),
    )


def generate(n: int, seed: int = 0, split: str = "train", *, start: int = 0,
             max_depth: int | None = None) -> list[MathTask]:
    """``n`` tasks of ``split``: task ``i`` is :func:`make_task` ``(seed, split, start + i)``.

    ``max_depth`` (a smaller curriculum, e.g. for the CPU planner): task ``i`` instead has depth
    ``1 + (start + i) % max_depth``, so every depth up to it is equally frequent."""
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; expected one of {SPLITS}")
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    if max_depth is None:
        return [make_task(seed, split, start + i) for i in range(n)]
    if not 1 <= max_depth <= MAX_DEPTH:
        raise ValueError(f"max_depth must be in 1..{MAX_DEPTH}, got {max_depth}")
    return [make_task(seed, split, start + i, depth=1 + (start + i) % max_depth) for i in range(n)]


def motif_recurrence(tasks: Sequence[MathTask]) -> dict[str, int]:
    """How many times each motif occurs over ``tasks`` (with repeats inside a task)."""
    counts = Counter(m for t in tasks for m in t.motifs)
    return {m.name: counts.get(m.name, 0) for m in MOTIFS}


# ------------------------------------------------------------------------------------------------
# The starting library
# ------------------------------------------------------------------------------------------------

def primitive_library(runner: Any = None) -> LibrarySnapshot:
    """The domain's starting library: every primitive of :mod:`.math_primitives` inserted through
    INSERTTOOL with its example and spec checks run by ``runner`` (``None``: the default sandbox).

    The first verified library is kept; later calls return the same immutable value.
    """
    from cocoda_jax.data.library_build import verified_library
    return verified_library("synthetic_math", PRIMITIVES, runner=runner)


def generation_stats(n: int = 10000, seed: int = 0, split: str = "train") -> dict[str, Any]:
    """Measured generation rate and motif recurrence over ``n`` tasks (what the closing note reports)."""
    import time
    start = time.perf_counter()
    tasks = generate(n, seed, split)
    seconds = time.perf_counter() - start
    skeleton_counts = Counter(t.skeleton for t in tasks)
    return {
        "split": split, "seed": seed, "tasks": n, "seconds": round(seconds, 3),
        "tasks_per_second": round(n / seconds, 1),
        "motif_occurrences": motif_recurrence(tasks),
        "tasks_with_motif": {m.name: sum(m.name in t.motifs for t in tasks) for m in MOTIFS},
        "depth_counts": dict(sorted(Counter(t.depth for t in tasks).items())),
        "mean_difficulty": round(sum(t.difficulty for t in tasks) / max(n, 1), 2),
        "distinct_skeletons": len(skeleton_counts),
        "distinct_motif_chains": len({t.motifs for t in tasks}),
        "top_call_trigrams": {" > ".join(k): v for k, v in _call_ngrams(tasks, 3).most_common(8)},
    }


def _call_ngrams(tasks: Sequence[MathTask], n: int) -> Counter:
    """In how many tasks each run of ``n`` consecutive primitive calls occurs."""
    counts: Counter = Counter()
    for t in tasks:
        fns = [fn for fn, _ in t.skeleton]
        counts.update({tuple(fns[i:i + n]) for i in range(len(fns) - n + 1)})
    return counts



# ------------------------------------------------------------------------------------------------
# The domain (cocoda_jax.data.domain)
# ------------------------------------------------------------------------------------------------


#: ``config.domain.demos``: every training task demonstrated, or only those of demonstrated structure.
DEMOS = ("all", "seen_pairs")


def _mark_structure(task: MathTask) -> MathTask:
    seen = structure_demonstrated(task.motifs)
    return task if seen else dataclasses.replace(task, seen_structure=False)


class SyntheticMath(DomainBase):
    """The synthetic-math domain: splits from :func:`generate`, variants on the parent's motif chain,
    a question's numbers are its inputs.

    Config keys (``config.domain``): ``seed``, ``n_train``, ``n_val``, ``n_test``, ``max_depth`` (0:
    every depth), ``heldout`` (``"instances"``: validation and test are unseen instances in the
    training wording, indices far past the training ones; ``"wording"``: the generator's held-out
    splits, new templates and entities), ``grow_library_to`` (0: the primitives alone; N: N tools
    with distractors), ``n_dev`` (held-out tasks no decision reads, 0: none) and ``demos``: which training tasks come with their program (``"all"``; or
    ``"seen_pairs"``: only those whose adjacent motif pairs are all on the demonstrated side of
    :func:`pair_demonstrated`, the rest have answers only and are learned from reward, as on a real
    benchmark where programs exist for few tasks; held-out tasks of an undemonstrated structure are
    categorised ``depth_<d>_unseen``)."""

    name, kind, task_type = "synthetic_math", "math", MathTask

    @staticmethod
    def categories(task: MathTask) -> str:
        """A task's category is its depth (``depth_3``: three motifs), with ``_unseen`` when no
        demonstration showed its structure: accuracy per depth is where composition must show, and
        the unseen part is what only reinforcement learning (and the composites it finds) can reach."""
        return f"depth_{task.depth}" if task.seen_structure else f"depth_{task.depth}_unseen"

    def build(self, section: Any, sandbox: Any) -> DomainSplits:
        heldout = section["heldout"]
        if heldout not in ("instances", "wording"):
            raise DomainConfigError(f"config.domain.heldout must be 'instances' or 'wording', got {heldout!r}")
        grow_to = int(section.get("grow_library_to", 0))
        if grow_to < 0:
            raise DomainConfigError(f"config.domain.grow_library_to must be >= 0, got {grow_to}")
        seed, md = section["seed"], section["max_depth"] or None
        train = generate(section["n_train"], seed=seed, split="train", max_depth=md)
        n_dev = int(section.get("n_dev", 0))
        if n_dev < 0:
            raise DomainConfigError(f"config.domain.n_dev must be >= 0, got {n_dev}")
        if heldout == "instances":
            val = generate(section["n_val"], seed=seed, split="train", start=1_000_000, max_depth=md)
            test = generate(section["n_test"], seed=seed, split="train", start=2_000_000, max_depth=md)
            dev = generate(n_dev, seed=seed, split="train", start=3_000_000, max_depth=md)
        else:
            val = generate(section["n_val"], seed=seed, split="validation", max_depth=md)
            test = generate(section["n_test"], seed=seed, split="test", max_depth=md)
            dev = generate(n_dev, seed=seed, split="validation", start=1_000_000, max_depth=md)
        demos = section.get("demos", "all")
        if demos not in DEMOS:
            raise DomainConfigError(f"config.domain.demos must be one of {DEMOS}, got {demos!r}")
        demonstrated = None
        if demos == "seen_pairs":
            train, val, test, dev = (tuple(_mark_structure(t) for t in part) for part in (train, val, test, dev))
            demonstrated = frozenset(str(t.id) for t in train if t.seen_structure)
        library = primitive_library(sandbox)
        if grow_to:
            from cocoda_jax.retrieval.synthetic_library import with_distractors
            try:
                library = with_distractors(library, grow_to, seed=int(seed))
            except ValueError as e:
                raise DomainConfigError(f"config.domain.grow_library_to: {e}") from e
        return DomainSplits(tuple(train), tuple(val), tuple(test), library, demonstrated=demonstrated, dev=tuple(dev))

    def propose_variant(self, parent: MathTask, stream_seed: int, draw: int) -> MathTask:
        variant = make_task_from_chain(stream_seed, parent.split, draw, parent.motifs)
        return dataclasses.replace(variant, seen_structure=parent.seen_structure)

    def task_to_dict(self, task: MathTask) -> dict:
        """The record, without ``seen_structure`` when it is the default (records of a run that shows
        every structure read and write exactly as before the field existed)."""
        d = super().task_to_dict(task)
        if d.get("seen_structure", True) is True:
            d.pop("seen_structure", None)
        return d

    def task_from_dict(self, d: Mapping[str, Any]) -> MathTask:
        return dataclass_from_dict(MathTask, d, {"skeleton": tuplify, "motifs": tuple, "inputs": pairs,
                                                 "intermediates": pairs})

    def stated_numbers(self, task: MathTask) -> tuple[tuple[str, float], ...]:
        return tuple((n, v) for n, v in task.inputs if is_number(v))


register_domain("synthetic_math", SyntheticMath)

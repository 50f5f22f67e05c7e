r"""The foundation demo: a typed tool DAG built through INSERTTOOL, searched by type, run in the sandbox.

    python -m launch.demo_foundation --workdir=/tmp/cocoda_demo [--config=configs/demo_foundation.py]

It stands in for the co-evolution launcher until that exists: every step goes through the real
components (type parser and index, LibrarySnapshot with its INSERTTOOL checks, the sandboxed executor),
prints what happened, and writes `library.json` and `dag.svg` to the workdir.
"""

from __future__ import annotations

import json
import pathlib

from absl import app, flags
from ml_collections import config_flags

from cocoda_jax.execution import Sandbox
from cocoda_jax.library import InsertRejected, LibrarySnapshot, Tool, draw_subgraph
from cocoda_jax.types import parse_signature, why_not

_CONFIG = config_flags.DEFINE_config_file("config", "configs/demo_foundation.py", "Demo config file.")
_WORKDIR = flags.DEFINE_string("workdir", "/tmp/cocoda_demo", "Where library.json and dag.svg are written.")

# (source, description, pre, post, examples): atomic primitives of arithmetic word problems.
PRIMITIVES = [
    ("def add(a: float, b: float) -> float:\n    return a + b\n",
     "Add two numbers.", (), (), [({"a": 2, "b": 3}, 5)]),
    ("def subtract(a: float, b: float) -> float:\n    return a - b\n",
     "Subtract b from a.", (), (), [({"a": 5, "b": 3}, 2)]),
    ("def multiply(a: float, b: float) -> float:\n    return a * b\n",
     "Multiply two numbers.", (), (), [({"a": 4, "b": 2.5}, 10.0)]),
    ("def divide(a: float, b: float) -> float:\n    return a / b\n",
     "Divide a by b.", ("b != 0",), (), [({"a": 9, "b": 3}, 3.0)]),
    ("def percent_of(p: float, x: float) -> float:\n    return p * x / 100\n",
     "The p percent of x.", (), (), [({"p": 20, "x": 50}, 10.0)]),
    ("def round_to(x: float, digits: int) -> float:\n    return round(x, digits)\n",
     "Round x to a number of decimal digits.", ("digits >= 0",), (), [({"x": 2.345, "digits": 1}, 2.3)]),
    ("def mean(xs: list[float]) -> float:\n    return sum(xs) / len(xs)\n",
     "The arithmetic mean of a list of numbers.", ("len(xs) > 0",), ("min(xs) <= result <= max(xs)",),
     [({"xs": [1, 2, 3]}, 2.0)]),
]

# Composites: their edges (and so depth, flat size and Phi) come from the calls in their code.
COMPOSITES = [
    ("def discount(price: float, pct: float) -> float:\n"
     "    cut = percent_of(pct, price)\n"
     "    return subtract(price, cut)\n",
     "Price after taking pct percent off.", ("pct >= 0", "pct <= 100"), ("result <= price",),
     [({"price": 80, "pct": 25}, 60.0)]),
    ("def discount_then_tax(price: float, pct: float, tax: float) -> float:\n"
     "    sale = discount(price, pct)\n"
     "    return add(sale, percent_of(tax, sale))\n",
     "Price after a percent discount, then a percent sales tax on the sale price.", ("price >= 0",), (),
     [({"price": 100, "pct": 20, "tax": 10}, 88.0)]),
    ("def average_speed(d1: float, t1: float, d2: float, t2: float) -> float:\n"
     "    return divide(add(d1, d2), add(t1, t2))\n",
     "Average speed over two legs of a trip, given each leg's distance and time.",
     ("t1 + t2 > 0",), ("result >= 0",), [({"d1": 60, "t1": 1, "d2": 120, "t2": 3}, 45.0)]),
]

# Each of these is refused by INSERTTOOL with its own reason code.
BAD_TOOLS = [
    ("def tip(bill: float) -> float:\n    return percentage(15, bill)\n", "Calls a tool that does not exist.",
     [({"bill": 10}, 1.5)]),
    ("def halve(x: float) -> float:\n    return divide(x, 'two')\n", "Passes a str where a float is expected.",
     [({"x": 4}, 2.0)]),
    ("def double(x: float) -> float:\n    return add(x, x)\n", "Its example is wrong.", [({"x": 2}, 5)]),
    ("def plus(a: float, b: float) -> float:\n    return a + b\n", "Same code as add, under another name.",
     [({"a": 1, "b": 1}, 2)]),
]

PROGRAM = """\
x0 = discount_then_tax(n0, n1, n2)
x1 = round_to(x0, 2)
answer = x1
"""


def main(argv):
    del argv
    config = _CONFIG.value
    workdir = pathlib.Path(_WORKDIR.value)
    workdir.mkdir(parents=True, exist_ok=True)

    with Sandbox(workers=config.sandbox_workers, timeout_s=config.timeout_s) as sandbox:
        snap = LibrarySnapshot.empty(max_depth=config.max_depth)
        for source, description, pre, post, examples in PRIMITIVES + COMPOSITES:
            tool = Tool.from_source(source, description, pre=pre, post=post, examples=examples)
            snap = snap.insert(tool, runner=sandbox)
        print(f"library: {len(snap)} tools, sandbox containment {sandbox.containment}")
        for name in snap.topological_order():
            print(f"  {name:<18} {str(snap.tool(name).signature):<55} depth={snap.depth(name)} "
                  f"flat={snap.flat(name)} phi={snap.phi(name)} children={list(snap.children(name))}")

        print("INSERTTOOL rejections:")
        for source, description, examples in BAD_TOOLS:
            try:
                snap.insert(Tool.from_source(source, description, examples=examples), runner=sandbox)
                print(f"  UNEXPECTED: accepted {description}")
            except InsertRejected as err:
                print(f"  {err.reason:<18} {err}")

        query = parse_signature("(rate: float, prices: list[int]) -> float")
        print(f"type-directed lookup for {query}:")
        for name, match in snap.signature_index.lookup(query, limit=config.lookup_limit):
            print(f"  {name:<18} cost={match.cost:<5} {'; '.join(match.explanation)}")
        print("  why not round_to? " + " | ".join(why_not(snap.tool("round_to").signature, query)))

        print("a planner-style program in the sandbox, numbers bound to n0, n1, n2:")
        bound = "n0 = 250.0\nn1 = 12.0\nn2 = 8.0\n"
        result = sandbox.run(bound + PROGRAM, snap)
        saved = sum(snap.phi(name) for name in result.calls)
        print(f"  ok={result.ok} answer={result.value} calls={list(result.calls)} sum_phi={saved}")
        hostile = sandbox.run("answer = open('/etc/passwd').read()", snap)
        print(f"  a hostile program: ok={hostile.ok} error={hostile.error}")

    (workdir / "library.json").write_text(snap.to_json())
    draw_subgraph(snap, "discount_then_tax", workdir / "dag.svg")
    print(json.dumps({"tools": len(snap), "max_depth": max(snap.depth(n) for n in snap.names()),
                      "library_json": str(workdir / "library.json"), "drawing": str(workdir / "dag.svg")}))


if __name__ == "__main__":
    app.run(main)

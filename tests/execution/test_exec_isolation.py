"""Tool state does not persist between programs run in one sandbox worker.

Every test uses the ``solo`` sandbox (``Sandbox(workers=1)``): all of its programs run in the same
worker process, which caches the compiled library between them. The tools define the state a
program could leave behind: mutable default arguments (positional, keyword-only, a dict, a nested
function's), a closure cell made by a decorator tool, an ``lru_cache`` handing out a mutable
result, and an iterator as a default.
"""

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

STATEFUL_TOOLS = (
    "def push(x: int, acc: list = []) -> int:\n"
    "    acc.append(x)\n"
    "    return len(acc)\n",
    "def tally(k: str, seen: dict = {}) -> int:\n"
    "    seen[k] = seen.get(k, 0) + 1\n"
    "    return seen[k]\n",
    "def push_kw(x: int, *, acc: list = []) -> int:\n"
    "    acc.append(x)\n"
    "    return sum(acc)\n",
    "def nested(x: int) -> int:\n"
    "    def inner(y, acc=[]):\n"
    "        acc.append(y)\n"
    "        return len(acc)\n"
    "    return inner(x)\n",
    "def nested_shared(x: int, store: list = []) -> int:\n"
    "    def inner(y, acc=store):\n"
    "        acc.append(y)\n"
    "        return len(acc)\n"
    "    return inner(x)\n",
    "def counted(fn):\n"
    "    cell = [0]\n"
    "    def wrapper(*args):\n"
    "        cell[0] += 1\n"
    "        return cell[0]\n"
    "    return wrapper\n"
    "\n"
    "@counted\n"
    "def ticks(x: int) -> int:\n"
    "    return x\n",
    "import functools\n"
    "\n"
    "@functools.lru_cache(maxsize=None)\n"
    "def table(n: int) -> list:\n"
    "    return list(range(n))\n",
    "import itertools\n"
    "\n"
    "def next_id(counter=itertools.count()) -> int:\n"
    "    return next(counter)\n",
)

#: Each stateful tool: a program that changes its state, and what a fresh program reads back.
CASES = {
    "list default": ("a = push(1)\nb = push(2)\nanswer = b", "answer = push(7)", 1),
    "dict default": ("a = tally('k')\nb = tally('k')\nanswer = b", "answer = tally('k')", 1),
    "keyword-only default": ("a = push_kw(5)\nanswer = push_kw(5)", "answer = push_kw(1)", 1),
    "nested function default": ("a = nested(1)\nanswer = nested(2)", "answer = nested(3)", 1),
    "nested default bound to an outer default": ("a = nested_shared(1)\nanswer = nested_shared(2)",
                                                 "answer = nested_shared(3)", 1),
    "closure cell of a decorator": ("a = ticks(1)\nanswer = ticks(1)", "answer = ticks(1)", 1),
    "lru_cache result": ("t = table(3)\nt.append(99)\nanswer = len(table(3))", "answer = len(table(3))", 3),
    "iterator default": ("a = next_id()\nanswer = next_id()", "answer = next_id()", 0),
}


def test_state_still_lives_within_one_program(solo):
    """Python's semantics inside a program are untouched: the second call sees the first."""
    replies = solo.run_many([change for change, _, _ in CASES.values()], STATEFUL_TOOLS)
    assert [r.value for r in replies] == [2, 2, 10, 1, 2, 2, 4, 1], replies


def test_a_program_cannot_change_what_the_next_program_sees(solo):
    for name, (change, read, fresh) in CASES.items():
        first = solo.run(read, STATEFUL_TOOLS)
        for _ in range(3):
            assert solo.run(change, STATEFUL_TOOLS).ok, name
        again = solo.run(read, STATEFUL_TOOLS)
        assert (first.value, again.value) == (fresh, fresh), name


def test_nor_within_one_batch(solo):
    programs = []
    for change, read, _ in CASES.values():
        programs += [change, change, read]
    replies = solo.run_many(programs, STATEFUL_TOOLS)
    assert all(r.ok for r in replies), replies
    assert [r.value for r in replies[2::3]] == [fresh for _, _, fresh in CASES.values()]


def _alone(program: str):
    """The answer of ``program`` run alone: the tools and the program in a brand-new namespace
    (our own fixture text, so plain ``exec`` is fine here)."""
    namespace: dict = {}
    exec("\n".join(STATEFUL_TOOLS) + "\n" + program, namespace)  # noqa: S102
    return namespace["answer"]


_CALLS = st.sampled_from(["push({})", "tally('k{}')", "push_kw({})", "nested({})", "nested_shared({})",
                          "ticks({})", "len(table({}))", "next_id()"])
_PROGRAMS = st.lists(st.tuples(_CALLS, st.integers(0, 3)), min_size=1, max_size=6).map(
    lambda calls: "".join(f"x{i} = {call.format(arg)}\n" for i, (call, arg) in enumerate(calls))
    + "answer = [" + ", ".join(f"x{i}" for i in range(len(calls))) + "]\n")
_MUTATIONS = st.sampled_from(["", "table(2).append(-1)\n", "table(3).clear()\n"])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(a=_PROGRAMS, mutation=_MUTATIONS, b=_PROGRAMS)
def test_running_a_then_b_gives_b_the_result_of_b_alone(solo, a, mutation, b):
    a = mutation + a
    first, second = solo.run_many([a, b], STATEFUL_TOOLS)
    assert first.ok and second.ok, (first, second)
    assert first.value == _alone(a)
    assert second.value == _alone(b)
    assert solo.run(b, STATEFUL_TOOLS).value == _alone(b)

"""LibrarySnapshot: the DAG facts of docs/papers.md §A.2, immutability, removal, and the static INSERTTOOL checks."""

import copy
import dataclasses
import pickle

import pytest

from cocoda_jax.library import (
    InsertRejected, LibrarySnapshot, RemoveRefused, Tool, UnknownTool, depth_and_flat, find_cycle,
)
from tests.library.library_corpus import CORPUS, EXPECTED, bare, build, corpus_tool


def test_depth_children_flat_phi_match_the_definitions(static_library):
    snap = static_library
    for name, (depth, children, flat) in EXPECTED.items():
        assert snap.depth(name) == depth, name
        assert snap.children(name) == children, name
        assert snap.flat(name) == flat, name
        assert snap.phi(name) == flat - 1, name
        assert snap.is_composite(name) == bool(children)


def test_stored_facts_equal_a_from_scratch_recomputation(static_library):
    snap = static_library
    depth, flat = depth_and_flat({n: snap.children(n) for n in snap.names()})
    assert depth == {n: snap.depth(n) for n in snap.names()}
    assert flat == {n: snap.flat(n) for n in snap.names()}


def test_flat_counts_multiplicity():
    snap = build(["mul", "square"], with_examples=False)
    snap = snap.insert(bare("def fourth(x: float) -> float:\n    return mul(square(x), square(x))\n"))
    snap = snap.insert(bare("def eighth(x: float) -> float:\n"
                            "    y = fourth(x)\n    z = fourth(x)\n    return mul(y, z)\n"))
    assert snap.children("fourth") == ("square", "square", "mul")
    assert (snap.flat("fourth"), snap.phi("fourth"), snap.depth("fourth")) == (3, 2, 2)
    assert (snap.flat("eighth"), snap.phi("eighth"), snap.depth("eighth")) == (7, 6, 3)


def test_relations(static_library):
    snap = static_library
    assert snap.parents("add") == {"sum_sq", "mean2", "quad"}
    assert snap.dependents("square") == {"sum_sq", "quad"}
    assert snap.parents("spread") == frozenset()
    assert snap.ancestors("mul") == {"square", "sum_sq", "quad", "spread"}
    assert snap.descendants("spread") == {"sum_sq", "square", "mul", "add", "mean2", "div", "sub"}
    assert snap.descendants("add") == frozenset()


def test_topological_order_and_sources(static_library):
    snap = static_library
    order = snap.topological_order()
    assert order == ("add", "div", "mul", "sub", "mean2", "square", "quad", "sum_sq", "spread")
    position = {n: i for i, n in enumerate(order)}
    assert all(position[c] < position[n] for n in order for c in snap.children(n))
    assert snap.sources() == tuple(snap.tool(n).source for n in order)
    assert tuple(snap) == order
    assert snap.names() == tuple(sorted(CORPUS))
    assert len(snap) == len(CORPUS) and "spread" in snap and "nope" not in snap


def test_insert_returns_a_new_snapshot_and_keeps_the_old_one():
    before = build(["add", "mul"], with_examples=False)
    text = before.to_json()
    after = before.insert(corpus_tool("square", with_examples=False))
    assert "square" in after and "square" not in before
    assert before.to_json() == text and len(before) == 2
    assert after.parents("mul") == {"square"} and before.parents("mul") == frozenset()
    assert all(after.tool(n) is before.tool(n) for n in before.names())  # records are shared, not copied
    with pytest.raises(AttributeError):
        before._tools = None


def test_snapshots_pickle_and_copy_as_values(static_library):
    clone = pickle.loads(pickle.dumps(static_library))
    assert clone == static_library and clone.to_json() == static_library.to_json()
    assert clone.signature_index.lookup(static_library.tool("add").signature, limit=1)
    assert copy.copy(static_library) is static_library and copy.deepcopy(static_library) is static_library


def test_remove_leaf_and_refusal_with_dependents(static_library):
    snap = static_library
    with pytest.raises(RemoveRefused) as info:
        snap.remove("square")
    assert info.value.reason == "has_dependents" and info.value.dependents == ("quad", "sum_sq")
    smaller = snap.remove("quad")
    assert "quad" not in smaller and smaller.parents("square") == {"sum_sq"}
    assert smaller.parents("add") == {"sum_sq", "mean2"}
    assert "quad" in snap  # the original is untouched
    # removing the only dependent makes a tool removable; re-inserting gives an equal snapshot
    again = smaller.remove("spread").remove("sum_sq").remove("square")
    assert again.parents("mul") == frozenset()
    assert again.insert(corpus_tool("square", with_examples=False)).parents("mul") == {"square"}
    assert smaller.insert(corpus_tool("quad", with_examples=False)) == snap
    with pytest.raises(UnknownTool, match="no tool named 'nope'"):
        snap.remove("nope")


def test_unknown_names_raise_unknown_tool(static_library):
    for query in ("tool", "depth", "flat", "phi", "children", "parents", "ancestors", "descendants"):
        with pytest.raises(UnknownTool):
            getattr(static_library, query)("nope")
    with pytest.raises(KeyError):  # UnknownTool is a KeyError too
        static_library.tool("nope")


def test_empty_validates_its_bound():
    assert LibrarySnapshot.empty().max_depth == 8
    assert LibrarySnapshot.empty(max_depth=0).max_depth == 0
    for bad in (-1, 2.0, True, "3"):
        with pytest.raises(ValueError):
            LibrarySnapshot.empty(max_depth=bad)


def reject(snap, tool, reason):
    before = snap.to_json()
    with pytest.raises(InsertRejected) as info:
        snap.insert(tool)
    assert info.value.reason == reason, str(info.value)
    assert info.value.tool_name == tool.name
    assert snap.to_json() == before
    return str(info.value)


def test_duplicate_code_under_any_name_or_format(static_library):
    msg = reject(static_library, bare("def plus(a: float, b: float) -> float:\n    'Same.'\n    return (a+b)\n"),
                 "duplicate_code")
    assert "'add'" in msg


def test_name_clash(static_library):
    msg = reject(static_library, bare("def add(a: float, b: float) -> float:\n    return b + a\n"), "name_clash")
    assert "already in the library" in msg


def test_unknown_dependency_lists_the_names(static_library):
    msg = reject(static_library, bare("def f(x: float) -> float:\n    return percentage(add(x, pi), 3)\n"),
                 "unknown_dependency")
    assert "'percentage'" in msg and "'pi'" in msg


def test_recursion_is_a_cycle(static_library):
    msg = reject(static_library, bare("def fact(n: int) -> int:\n    return 1 if n < 2 else mul(n, fact(n - 1))\n"),
                 "cycle")
    assert "line 2" in msg


def test_tool_used_as_a_value_is_malformed(static_library):
    msg = reject(static_library, bare("def f(x: float) -> float:\n    op = add\n    return op(x, x)\n"), "malformed")
    assert "'add'" in msg


def test_depth_bound():
    snap = build(["mul", "square"], with_examples=False, max_depth=1)
    msg = reject(snap, bare("def fourth(x: float) -> float:\n    return square(square(x))\n"), "depth_exceeded")
    assert "depth would be 2" in msg and "max_depth=1" in msg
    flat_only = LibrarySnapshot.empty(max_depth=0).insert(corpus_tool("mul", with_examples=False))
    reject(flat_only, corpus_tool("square", with_examples=False), "depth_exceeded")


def test_a_hand_built_record_that_disagrees_with_its_source_is_malformed(static_library):
    good = bare("def twice(x: float) -> float:\n    return add(x, x)\n")
    for change in (dict(name="thrice"), dict(id="0" * 16), dict(signature=corpus_tool("add").signature)):
        reject(static_library, dataclasses.replace(good, **change), "malformed")
    with pytest.raises(TypeError):
        static_library.insert("def f(): pass")


def test_reason_precedence_is_cheapest_first(static_library):
    # a copy of add's code under add's own name is a duplicate, not a name clash
    reject(static_library, bare(CORPUS["add"][0]), "duplicate_code")


def test_graph_reference_functions():
    assert find_cycle({"a": ("b",), "b": ("c",), "c": ("a",), "d": ()}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": ("b", "b"), "b": ()}) is None
    assert find_cycle({"a": ("a",)}) == ["a", "a"]
    depth, flat = depth_and_flat({"p": (), "q": (), "c": ("p", "q", "p"), "r": ("c", "c")})
    assert depth == {"p": 0, "q": 0, "c": 1, "r": 2} and flat == {"p": 1, "q": 1, "c": 3, "r": 6}
    with pytest.raises(ValueError, match="cycle"):
        depth_and_flat({"a": ("b",), "b": ("a",)})
    with pytest.raises(ValueError, match="unknown"):
        depth_and_flat({"a": ("zz",)})


def test_runner_is_not_needed_when_nothing_runs(static_library):
    class Forbidden:
        def run_many(self, *args):
            raise AssertionError("no check program should run")

    # no examples on either side: nothing to run, so no runner (and no default sandbox) is touched
    snap = static_library.insert(bare("def cube(x: float) -> float:\n    return mul(square(x), x)\n"),
                                 runner=Forbidden())
    assert snap.children("cube") == ("square", "mul")


def test_check_programs_see_the_library_in_topological_order(static_library):
    batches = []

    class Recording:
        """A test double that records what INSERTTOOL hands the runner and answers 8 to everything."""

        def run_many(self, programs, library, timeout_s):
            batches.append((list(programs), tuple(library), timeout_s))
            return [type("R", (), {"ok": True, "value": ([], None, 8.0, []) if "_result" in p else 8.0,
                                   "error": None})() for p in programs]

    tool = Tool.from_source("def cube(x: float) -> float:\n    return mul(square(x), x)\n", "Cube.",
                            examples=[({"x": 2}, 8)])
    with pytest.raises(InsertRejected) as info:
        static_library.insert(tool, runner=Recording(), timeout_s=1.5)
    (first, library, timeout_s), (second, library2, _) = batches
    assert library == library2 == static_library.sources() + (tool.source,)
    assert timeout_s == 1.5
    # round one: cube's own example (the same-shape tools quad and square have no examples to replay)
    assert len(first) == 1 and "_result = cube(2)" in first[0]
    # round two: quad and square, which nothing contradicts yet, replay cube's example
    assert second == ["answer = quad(2)\n", "answer = square(2)\n"]
    # the double answered 8 for both, so the first of them is reported as a duplicate
    assert info.value.reason == "duplicate_behaviour" and "'quad'" in str(info.value)


def test_a_runner_returning_the_wrong_number_of_results_is_an_error(static_library):
    class Short:
        def run_many(self, programs, library, timeout_s):
            return []

    tool = Tool.from_source("def cube(x: float) -> float:\n    return mul(square(x), x)\n", "Cube.",
                            examples=[({"x": 2}, 8)])
    with pytest.raises(RuntimeError, match="0 results for 1 programs"):
        static_library.insert(tool, runner=Short())


@pytest.mark.parametrize("source, pre, fragment", [
    ("def peek(x: float) -> float:\n    import os\n    return x\n", (), "its source: line 2"),
    ("def peek(x: float) -> float:\n    return x.__class__\n", (), "its source"),
    ("def peek(x: float) -> float:\n    return eval('x')\n", (), "its source"),
    ("def peek(x: float) -> float:\n    return x\n", ("open('/etc/passwd') is not None",), "its pre[0]"),
])
def test_code_the_sandbox_refuses_is_malformed_even_without_examples(static_library, source, pre, fragment):
    tool = Tool.from_source(source, "Peek.", pre=pre)
    with pytest.raises(InsertRejected) as info:
        static_library.insert(tool)
    assert info.value.reason == "malformed" and fragment in str(info.value), str(info.value)

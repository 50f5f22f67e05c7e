"""Hypothesis stateful test of LibrarySnapshot under random inserts and removals (real sandbox).

The machine keeps its own model of the library: for every tool the calls it *wrote* into the code
and a Python closure that computes the tool's value. After every step it checks, against that
model and not against the snapshot's own bookkeeping:

* the graph stays acyclic (every tool after its children in topological order);
* depth, flat and Phi equal their definitions recomputed from scratch;
* edges equal the calls in the code (both the generator's intent and a re-parse of the source);
* dependents are exactly the tools whose code calls them;
* JSON round-trips exactly (same snapshot, same text);
* a rejected insert or a refused removal leaves the snapshot unchanged, and the reason is the
  one the model predicts.
"""

from __future__ import annotations

import functools

import pytest
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from cocoda_jax.library import InsertRejected, LibrarySnapshot, RemoveRefused, Tool, analyse

MAX_DEPTH = 3
INPUTS = st.tuples(st.integers(-3, 3), st.integers(-3, 3))
PRIMITIVES = {"p_add": lambda x, y: x + y, "p_sub": lambda x, y: x - y, "p_mul": lambda x, y: x * y}
PRIMITIVE_OPS = {"p_add": "+", "p_sub": "-", "p_mul": "*"}


def composite_source(name: str, statements: list[tuple[str, str, str]]) -> str:
    lines = [f"def {name}(x: int, y: int) -> int:"]
    for i, (callee, a, b) in enumerate(statements):
        lines.append(f"    v{i} = {callee}({a}, {b})")
    lines.append(f"    return v{len(statements) - 1}")
    return "\n".join(lines) + "\n"


def composite_fn(statements, fns):
    def run(x, y):
        env = {"x": x, "y": y}
        for i, (callee, a, b) in enumerate(statements):
            env[f"v{i}"] = fns[callee](env[a], env[b])
        return env[f"v{len(statements) - 1}"]

    return run


class LibraryMachine(RuleBasedStateMachine):
    sandbox = None  # set by the test function below

    def __init__(self):
        super().__init__()
        self.snap = LibrarySnapshot.empty(max_depth=MAX_DEPTH)
        self.calls: dict[str, tuple[str, ...]] = {}
        self.fns: dict[str, callable] = {}
        self.examples: dict[str, list] = {}
        self.counter = 0
        for name, fn in PRIMITIVES.items():
            source = f"def {name}(x: int, y: int) -> int:\n    return x {PRIMITIVE_OPS[name]} y\n"
            examples = [({"x": 2, "y": 3}, fn(2, 3))]
            self.snap = self.snap.insert(Tool.from_source(source, name, examples=examples), runner=self.sandbox)
            self.calls[name], self.fns[name], self.examples[name] = (), fn, examples

    # -- the model's own definitions -------------------------------------------------------------
    def model_depth(self, name: str) -> int:
        return _depth(name, tuple(sorted(self.calls.items())))

    def model_flat(self, name: str) -> int:
        return _flat(name, tuple(sorted(self.calls.items())))

    def same_behaviour_as(self, fn, examples) -> list[str]:
        """Existing tools (all share the signature) that agree with ``fn`` on the union of examples."""
        found = []
        for other, other_fn in self.fns.items():
            union = [args for args, _ in examples + self.examples[other]]
            if all(fn(a["x"], a["y"]) == other_fn(a["x"], a["y"]) for a in union):
                found.append(other)
        return found

    # -- rules ----------------------------------------------------------------------------------
    @precondition(lambda self: len(self.fns) > 0)
    @rule(data=st.data())
    def insert_composite(self, data):
        names = sorted(self.fns)
        n_statements = data.draw(st.integers(1, 3), label="statements")
        statements, variables = [], ["x", "y"]
        for i in range(n_statements):
            callee = data.draw(st.sampled_from(names), label="callee")
            a, b = data.draw(st.sampled_from(variables)), data.draw(st.sampled_from(variables))
            statements.append((callee, a, b))
            variables.append(f"v{i}")
        self.counter += 1
        name = f"t{self.counter}"
        fn = composite_fn(statements, self.fns)
        inputs = data.draw(st.lists(INPUTS, min_size=1, max_size=2, unique=True), label="inputs")
        examples = [({"x": x, "y": y}, fn(x, y)) for x, y in inputs]
        tool = Tool.from_source(composite_source(name, statements), f"composite {name}", examples=examples)
        self.try_insert(tool, fn, tuple(callee for callee, _, _ in statements))

    @precondition(lambda self: sum(1 for calls in self.calls.values() if not calls) < 4)
    @rule(op=st.sampled_from(["+", "-", "*"]), k=st.integers(0, 5), inputs=st.lists(INPUTS, max_size=2, unique=True))
    def insert_primitive(self, op, k, inputs):
        """A primitive (no library calls), while there are few: it lets an emptied library regrow.
        The same op and k as an existing primitive under a new name is a duplicate of its code."""
        self.counter += 1
        name = f"q{self.counter}"
        fn = {"+": lambda x, y: x + y + k, "-": lambda x, y: x - y + k, "*": lambda x, y: x * y + k}[op]
        source = f"def {name}(x: int, y: int) -> int:\n    return x {op} y + {k}\n"
        examples = [({"x": x, "y": y}, fn(x, y)) for x, y in inputs]
        self.try_insert(Tool.from_source(source, f"primitive {name}", examples=examples), fn, ())

    def try_insert(self, tool: Tool, fn, written: tuple[str, ...]) -> None:
        """Inserts and checks the outcome against the model: accepted exactly when the model
        expects no rejection; a rejection leaves the snapshot unchanged."""
        name, examples = tool.name, list(tool.examples)
        depth = 1 + max(self.model_depth(c) for c in written) if written else 0
        same_code = [n for n in self.fns if self.snap.tool(n).id == tool.id]
        # duplicate behaviour needs examples on at least one side of the comparison
        same_behaviour = [n for n in self.same_behaviour_as(fn, examples) if examples or self.examples[n]]
        before = self.snap.to_json()
        try:
            self.snap = self.snap.insert(tool, runner=self.sandbox)
        except InsertRejected as err:
            event(f"insert rejected: {err.reason}")
            assert self.snap.to_json() == before
            if err.reason == "duplicate_code":
                assert same_code, str(err)
            elif err.reason == "depth_exceeded":
                assert not same_code and depth > MAX_DEPTH, str(err)
            else:
                assert err.reason == "duplicate_behaviour", str(err)
                assert not same_code and depth <= MAX_DEPTH and same_behaviour, str(err)
            return
        event("insert accepted" + (" (composite)" if written else " (primitive)"))
        assert not same_code and depth <= MAX_DEPTH and not same_behaviour
        self.calls[name], self.fns[name], self.examples[name] = written, fn, examples

    @precondition(lambda self: len(self.fns) > 0)
    @rule(data=st.data(), kind=st.sampled_from(["example_failed", "unknown_dependency", "cycle", "ill_typed_call"]))
    def insert_bad(self, data, kind):
        # a callee below the depth bound, so that the fault under test is the first one found
        callee = data.draw(st.sampled_from(sorted(n for n in self.fns if self.model_depth(n) < MAX_DEPTH)))
        self.counter += 1
        name = f"bad{self.counter}"
        expected = self.fns[callee](1, 2)
        call = {"example_failed": f"{callee}(x, y)", "unknown_dependency": f"missing_{callee}(x, y)",
                "cycle": f"{name}({callee}(x, y), y)", "ill_typed_call": f"{callee}(x, 'y')"}[kind]
        source = f"def {name}(x: int, y: int) -> int:\n    return {call}\n"
        tool = Tool.from_source(source, "a broken tool", examples=[({"x": 1, "y": 2}, expected + 1)])
        before = self.snap
        with pytest.raises(InsertRejected) as info:
            self.snap.insert(tool, runner=self.sandbox)
        assert info.value.reason == kind, str(info.value)
        assert self.snap == before and self.snap.to_json() == before.to_json()

    @precondition(lambda self: len(self.fns) > 0)
    @rule(data=st.data())
    def remove(self, data):
        name = data.draw(st.sampled_from(sorted(self.fns)))
        users = sorted(n for n, calls in self.calls.items() if name in calls)
        before = self.snap.to_json()
        if users:
            with pytest.raises(RemoveRefused) as info:
                self.snap.remove(name)
            assert info.value.dependents == tuple(users)
            assert self.snap.to_json() == before
            return
        self.snap = self.snap.remove(name)
        for table in (self.calls, self.fns, self.examples):
            del table[name]

    # -- invariants -----------------------------------------------------------------------------
    @invariant()
    def same_tools(self):
        assert set(self.snap.names()) == set(self.calls)

    @invariant()
    def acyclic_in_topological_order(self):
        position = {n: i for i, n in enumerate(self.snap.topological_order())}
        assert all(position[c] < position[n] for n in position for c in self.snap.children(n))

    @invariant()
    def edges_are_the_calls_in_the_code(self):
        for name, written in self.calls.items():
            assert self.snap.children(name) == written
            assert analyse(self.snap.tool(name).source).calls == written
            assert self.snap.dependents(name) == {n for n, calls in self.calls.items() if name in calls}

    @invariant()
    def depth_flat_phi_match_the_definitions(self):
        for name in self.calls:
            assert self.snap.depth(name) == self.model_depth(name) <= MAX_DEPTH
            assert self.snap.flat(name) == self.model_flat(name)
            assert self.snap.phi(name) == self.model_flat(name) - 1

    @invariant()
    def json_round_trips_exactly(self):
        text = self.snap.to_json()
        loaded = LibrarySnapshot.from_json(text)
        assert loaded == self.snap and loaded.to_json() == text


@functools.lru_cache(maxsize=None)
def _depth(name: str, calls: tuple) -> int:
    children = dict(calls)[name]
    return 1 + max(_depth(c, calls) for c in children) if children else 0


@functools.lru_cache(maxsize=None)
def _flat(name: str, calls: tuple) -> int:
    children = dict(calls)[name]
    return sum(_flat(c, calls) for c in children) if children else 1


def test_library_state_machine(sandbox):
    LibraryMachine.sandbox = sandbox
    LibraryMachine.TestCase.settings = settings(max_examples=25, stateful_step_count=20, deadline=None,
                                                suppress_health_check=[HealthCheck.too_slow])
    LibraryMachine.TestCase().runTest()

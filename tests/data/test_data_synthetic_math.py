"""The embedded synthetic math domain: primitives, generator, splits, gold programs in the sandbox."""

import ast
import dataclasses
import pickle

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cocoda_jax.data import math_primitives, synthetic_math as sm
from cocoda_jax.library import LibrarySnapshot
from cocoda_jax.values import values_equal


@pytest.fixture(scope="module")
def library(sandbox):
    return sm.primitive_library(sandbox)


@pytest.fixture(scope="module")
def tasks():
    return {split: sm.generate(400, seed=7, split=split) for split in sm.SPLITS}


# -- the starting library ------------------------------------------------------------------------

def test_primitive_library_is_a_valid_snapshot_of_atomic_tools(library):
    assert isinstance(library, LibrarySnapshot)
    assert 25 <= len(library) <= 40
    for name in library.names():
        tool = library.tool(name)
        assert library.depth(name) == 0 and library.phi(name) == 0 and not library.is_composite(name)
        assert tool.description and tool.examples, name
    assert sum(bool(library.tool(n).pre or library.tool(n).post) for n in library.names()) >= 15
    assert LibrarySnapshot.from_json(library.to_json()) == library
    assert sm.primitive_library() is library  # later calls return the same verified value


def test_no_motif_is_a_primitive(library):
    assert not set(sm.MOTIF_BY_NAME) & set(library.names())


def test_local_functions_are_the_library_sources(library):
    assert set(math_primitives.local_functions()) == set(library.names())
    assert {s.source for s in math_primitives.PRIMITIVES} == set(library.sources())


# -- gold programs in the real sandbox -----------------------------------------------------------

def test_every_gold_program_gives_gold_answer_and_intermediates_in_the_sandbox(sandbox, library, tasks):
    batch = [t for split in sm.SPLITS for t in tasks[split]]
    results = sandbox.run_many([t.program for t in batch], library, inputs=[t.input_dict for t in batch])
    for task, result in zip(batch, results):
        assert result.ok, (task.id, result.error, task.program)
        assert values_equal(result.value, task.answer), task.id
        assert [n for n, _ in result.values] == [n for n, _ in task.intermediates] + ["answer"]
        assert all(values_equal(a, b) for (_, a), (_, b) in zip(result.values, task.intermediates)), task.id
        assert result.calls == tuple(fn for fn, _ in task.skeleton)


def test_a_wrong_binding_changes_the_answer(sandbox, library, tasks):
    # the inputs really drive the program: swapping in other numbers gives another answer
    task = next(t for t in tasks["train"] if len(t.inputs) >= 2 and len({v for _, v in t.inputs}) == len(t.inputs))
    inputs = {k: v + 1 for k, v in task.inputs}
    result = sandbox.run(task.program, library, inputs=inputs)
    assert result.ok and not values_equal(result.value, task.answer)


# -- the task record -----------------------------------------------------------------------------

def test_program_format_one_primitive_call_per_line(tasks):
    names = {s.source.split("(")[0][4:] for s in math_primitives.PRIMITIVES}
    for task in tasks["train"]:
        lines = task.program.splitlines()
        assert lines[-1] == f"answer = x{task.difficulty - 1}"
        assert len(lines) == task.difficulty + 1 == len(task.intermediates) + 1 == len(task.skeleton) + 1
        defined = {n for n, _ in task.inputs}
        for i, line in enumerate(lines[:-1]):
            stmt = ast.parse(line).body[0]
            assert isinstance(stmt, ast.Assign) and stmt.targets[0].id == f"x{i}"
            call = stmt.value
            assert isinstance(call, ast.Call) and call.func.id in names and not call.keywords
            used = {n.id for n in ast.walk(call) if isinstance(n, ast.Name)} - {call.func.id}
            assert used <= defined, line
            assert not any(isinstance(n, ast.Call) for arg in call.args for n in ast.walk(arg))
            assert not any(isinstance(n, ast.Constant) for n in ast.walk(call)), "no literals: numbers come from the question"
            defined.add(f"x{i}")


def test_question_numbers_are_the_inputs_in_order(tasks):
    for split in sm.SPLITS:
        for task in tasks[split]:
            assert sm.question_numbers(task.question) == [float(v) for _, v in task.inputs], task.question
            assert [n for n, _ in task.inputs] == [f"n{i}" for i in range(len(task.inputs))]


def test_fields_are_consistent(tasks):
    for task in tasks["train"]:
        assert task.answer == task.intermediates[-1][1]
        assert task.difficulty == len(task.skeleton) >= task.depth >= 1
        assert task.depth <= sm.MAX_DEPTH and all(m in sm.MOTIF_BY_NAME for m in task.motifs)
        assert task.answer_type in ("int", "float")
        if task.answer_type == "int":
            assert float(task.answer).is_integer()
        hash(task.skeleton)
        assert task.question.endswith("?") and "{" not in task.question and "}" not in task.question
    assert {t.depth for t in tasks["train"]} == set(range(1, sm.MAX_DEPTH + 1))
    with pytest.raises(dataclasses.FrozenInstanceError):
        tasks["train"][0].answer = 0


def test_tasks_pickle_and_compare():
    t = sm.make_task(3, "train", 11)
    assert pickle.loads(pickle.dumps(t)) == t


# -- determinism and splits ----------------------------------------------------------------------

@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**31), index=st.integers(0, 10**6), split=st.sampled_from(sm.SPLITS))
def test_a_task_depends_only_on_seed_split_index(seed, index, split):
    a = sm.make_task(seed, split, index)
    assert a == sm.make_task(seed, split, index)
    assert sm.generate(1, seed, split, start=index) == [a]
    assert sm.question_numbers(a.question) == [float(v) for _, v in a.inputs]


def test_seeds_give_different_tasks():
    a, b = sm.generate(50, 0, "train"), sm.generate(50, 1, "train")
    assert sum(x.question == y.question for x, y in zip(a, b)) < 5


def test_training_chains_hold_no_held_out_pair_and_others_hold_theirs(tasks):
    def pairs(t):
        return [sm.pair_split(a, b) for a, b in zip(t.motifs, t.motifs[1:])]

    assert all(p == "train" for t in tasks["train"] for p in pairs(t))
    for split in ("validation", "test"):
        deep = [t for t in tasks[split] if t.depth >= 2]
        assert deep and all(split in pairs(t) for t in deep)
    train_combos = {t.motifs for t in tasks["train"] if t.depth >= 2}
    assert not train_combos & {t.motifs for t in tasks["test"] if t.depth >= 2}


def test_held_out_number_ranges():
    for motif in sm.MOTIFS:
        for _, num in motif.params:
            if isinstance(num, sm.Num):
                tr, va, te = (num.bounds(s) for s in sm.SPLITS)
                assert tr[1] < va[0] <= va[1] < te[0] <= te[1], (motif.name, num)
    task = next(t for t in sm.generate(200, 0, "test") if t.motifs[0] == "discount_tax")
    assert task.inputs[1][1] > 40  # the discount percent is above every training discount


def test_held_out_phrasings_and_names(tasks):
    train_names = set(sm._NAMES["train"])
    for t in tasks["test"]:
        assert not any(f"{n} " in t.question for n in train_names)
    for t in tasks["train"]:
        assert not any(f"{n} " in t.question for n in sm._NAMES["heldout"])
    asks = {split: {t.question.rsplit(". ", 1)[-1] for t in tasks[split]} for split in ("train", "test")}
    assert not asks["train"] & asks["test"]


def test_invalid_arguments():
    with pytest.raises(ValueError, match="split"):
        sm.generate(3, 0, "dev")
    with pytest.raises(ValueError, match="depth"):
        sm.make_task(0, "train", 0, depth=6)
    with pytest.raises(ValueError):
        sm.generate(-1, 0, "train")


def test_depth_argument_controls_the_chain_length():
    for depth in range(1, 6):
        t = sm.make_task(5, "validation", depth, depth=depth)
        assert t.depth == depth


# -- recurrence and speed ------------------------------------------------------------------------

def test_motifs_and_their_sub_computations_recur(tasks):
    counts = sm.motif_recurrence(tasks["train"])
    assert set(counts) == set(sm.MOTIF_BY_NAME)
    assert sum(c >= 10 for c in counts.values()) >= 15
    # a motif's call sequence recurs verbatim across tasks with other numbers and wording, and some
    # sub-computations are shared by several motifs (a percent added on: the tax and each growth year)
    def has(task, seq):
        fns = [fn for fn, _ in task.skeleton]
        return any(tuple(fns[i:i + len(seq)]) == seq for i in range(len(fns)))

    discount_then_tax = ("percent_of", "subtract", "percent_of", "add")
    assert sum(has(t, discount_then_tax) for t in tasks["train"]) >= 40
    add_percent = [t for t in tasks["train"] if has(t, ("percent_of", "add"))]
    assert {"discount_tax", "compound_growth"} <= {m for t in add_percent for m in t.motifs}
    assert len(add_percent) >= 80


def test_generation_stats_report():
    stats = sm.generation_stats(300, seed=1)
    assert stats["tasks"] == 300 and stats["tasks_per_second"] > 0
    assert sum(stats["depth_counts"].values()) == 300
    assert sum(stats["motif_occurrences"].values()) == sum(int(k) * v for k, v in stats["depth_counts"].items())
    assert all(stats["tasks_with_motif"][m] <= stats["motif_occurrences"][m] for m in sm.MOTIF_BY_NAME)
    assert max(stats["top_call_trigrams"].values()) > 30


def test_make_task_from_chain_keeps_the_chain_and_is_deterministic():
    from cocoda_jax.data import synthetic_math as sm

    for seed_task in sm.generate(20, seed=3, split="train"):
        a = sm.make_task_from_chain(11, "train", 5, seed_task.motifs)
        assert a.motifs == seed_task.motifs
        assert a == sm.make_task_from_chain(11, "train", 5, seed_task.motifs)
    import pytest
    with pytest.raises(ValueError, match="unknown"):
        sm.make_task_from_chain(0, "train", 0, ("no_such_motif",))

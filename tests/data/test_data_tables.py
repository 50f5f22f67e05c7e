"""The tables domain: the Table value, table primitives, generated tasks checked in the sandbox."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cocoda_jax import values
from cocoda_jax.data import tables as tb
from cocoda_jax.library import LibrarySnapshot
from cocoda_jax.types import TCon
from cocoda_jax.values import values_equal


@pytest.fixture(scope="module")
def library(sandbox):
    return tb.primitive_library(sandbox)


@pytest.fixture(scope="module")
def tasks():
    return {split: tb.generate(250, seed=5, split=split) for split in tb.SPLITS}


_cells = {"str": st.text(max_size=8), "int": st.integers(-10**9, 10**9),
          "float": st.floats(-1e9, 1e9, allow_nan=False, allow_infinity=False)}


@st.composite
def tables(draw):
    types = draw(st.lists(st.sampled_from(tb.COLUMN_TYPES), min_size=1, max_size=4))
    columns = [f"c{i}" for i in range(len(types))]
    rows = draw(st.lists(st.tuples(*(_cells[t] for t in types)).map(list), max_size=6))
    return tb.make_table(columns, rows, types)


@settings(max_examples=60, deadline=None)
@given(table=tables())
def test_a_table_survives_the_value_codec_unchanged(table):
    text = values.dumps(table, lossy=False)
    back = values.loads(text)
    assert back == table and type(back) is dict
    tb.check_table(back)
    assert values.dumps(back) == text


def test_a_table_crosses_the_sandbox_both_ways(sandbox, library):
    table = tb.make_table(["k", "v"], [["a", 1.5], ["b", 2]], ["str", "float"])
    result = sandbox.run("x0 = filter_greater(table, 'v', 1.6)\nanswer = x0\n", library, inputs={"table": table})
    assert result.ok and result.value == {"columns": ["k", "v"], "types": ["str", "float"], "rows": [["b", 2]]}


@pytest.mark.parametrize("bad, message", [
    ({"columns": ["a"], "rows": []}, "exactly the keys"),
    ({"columns": ["a"], "types": ["date"], "rows": []}, "types"),
    ({"columns": ["a"], "types": ["int"], "rows": [["x"]]}, "row 0, column 'a'"),
    ({"columns": ["a"], "types": ["int"], "rows": [[1, 2]]}, "row 0 must be"),
    ({"columns": ["a"], "types": ["float"], "rows": [[float("nan")]]}, "not a float"),
    ({"columns": ["a"], "types": ["int"], "rows": [[True]]}, "not a int"),
    ([1, 2], "exactly the keys"),
])
def test_check_table_names_what_is_wrong(bad, message):
    with pytest.raises(tb.TableError, match=message):
        tb.check_table(bad)


def test_make_table_infers_types_and_refuses_bad_shapes():
    t = tb.make_table(["a", "b", "c"], [["x", 1, 1.5], ["y", 2, 3]])
    assert t["types"] == ["str", "int", "float"]
    with pytest.raises(tb.TableError, match="duplicate"):
        tb.make_table(["a", "a"], [])
    with pytest.raises(tb.TableError, match="row 1 has 1 cells"):
        tb.make_table(["a", "b"], [["x", 1], ["y"]])
    assert tb.table_to_text(t) == "a | b | c\nx | 1 | 1.5\ny | 2 | 3"


def test_primitive_library(library):
    assert isinstance(library, LibrarySnapshot) and 15 <= len(library) <= 40
    assert all(library.depth(n) == 0 and library.tool(n).examples for n in library.names())
    typed = [n for n in library.names() if TCon("Table") in library.tool(n).signature.param_types
             or library.tool(n).signature.result == TCon("Table")]
    assert {"select_column", "filter_equals", "group_sum", "count_rows", "lookup", "sort_rows"} <= set(typed)
    assert tb.primitive_library() == library


def test_every_gold_program_runs_to_its_answer_in_the_sandbox(sandbox, library, tasks):
    batch = [t for split in tb.SPLITS for t in tasks[split]]
    results = sandbox.run_many([t.program for t in batch], library, inputs=[t.input_dict for t in batch])
    for task, result in zip(batch, results):
        assert result.ok, (task.id, result.error, task.program)
        assert values_equal(result.value, task.answer), task.id
        assert all(values_equal(a, b) for (_, a), (_, b) in zip(result.values, task.intermediates))
        assert len(result.values) == len(task.intermediates) + 1
        assert result.calls == tuple(fn for fn, _ in task.skeleton)


def test_task_fields(tasks):
    families = set()
    for task in tasks["train"]:
        tb.check_table(task.table)
        assert task.difficulty == len(task.skeleton) == len(task.intermediates) >= 1
        assert task.program.splitlines()[-1] == f"answer = x{task.difficulty - 1}"
        assert task.answer_type == {str: "str", int: "int", float: "float"}[type(task.answer)]
        assert task.question.endswith(("?", "."))
        assert "{" not in task.question
        hash(task.skeleton)
        families.add(task.motifs[0])
    assert families == set(tb.FAMILIES)


def test_determinism_and_seeds():
    assert tb.generate(20, 3, "test") == tb.generate(20, 3, "test")
    assert len({hash(t) for t in tb.generate(5, 3, "test")}) == 5
    assert tb.make_task(3, "validation", 7) == tb.generate(1, 3, "validation", start=7)[0]
    assert sum(a.question == b.question for a, b in zip(tb.generate(40, 0), tb.generate(40, 1))) < 10


def test_splits_hold_out_vocabulary_phrasing_sizes_and_combinations(tasks):
    train_vocab = {v for s in tb.SCHEMAS for vals in s.vocab("train").values() for v in vals}
    for task in tasks["test"]:
        cells = {c for row in task.table["rows"] for c in row if isinstance(c, str)}
        assert not cells & train_vocab
        assert len(task.table["rows"]) > 10
    train_q = {tb.FAMILIES[t.motifs[0]][0].index(_template_of(t)) for t in tasks["train"]}
    assert train_q <= {0, 1}
    assert all(_template_of(t) == tb.FAMILIES[t.motifs[0]][0][2] for t in tasks["test"])
    assert all(tb.combo_split(t.motifs[0], t.schema) == "train" for t in tasks["train"])
    assert all(tb.combo_split(t.motifs[0], t.schema) in ("train", "test") for t in tasks["test"])


def _template_of(task):
    import re
    for template in tb.FAMILIES[task.motifs[0]][0]:
        pattern = re.escape(template)
        pattern = re.sub(r"\\\{\w+\\\}", ".+?", pattern)
        if re.fullmatch(pattern, task.question):
            return template
    raise AssertionError(task.question)


def test_bad_arguments():
    with pytest.raises(ValueError, match="split"):
        tb.generate(1, 0, "dev")
    with pytest.raises(ValueError):
        tb.generate(-2)

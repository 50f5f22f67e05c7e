"""RODS through the domain protocol: a toy domain defined only here plugs in (variants proposed,
checked, persisted and resumed) with no change to rods/; BFCL tasks get no variants, as a counted
rejection; records written before the protocol still load."""

from __future__ import annotations

import dataclasses
import json
import random

import pytest

from cocoda_jax.data.domain import DomainBase, dataclass_from_dict, pairs, register_domain, tuplify, unregister_domain
from cocoda_jax.data.task import GoldProgramTask
from cocoda_jax.rods import Curriculum, persistence
from cocoda_jax.rods.config import RodsConfig
from cocoda_jax.rods.synthesis import Job, Synthesizer, propose, rejection_counts, stated_numbers
from cocoda_jax.rods.tasks import call_graph, content_keys, task_from_dict, task_to_dict

CFG = RodsConfig(p_max=10, beta=0.5, synth_per_epoch=4, variants_per_seed=2, stale_epochs=3, window=3,
                 hard_patience=2, max_draws=200)


# -- a toy domain: counting stories over the math library's add and subtract ----------------------------


@dataclasses.dataclass(frozen=True)
class CountTask(GoldProgramTask):
    id: str
    split: str
    question: str
    inputs: tuple[tuple[str, int], ...]
    program: str
    answer: int
    answer_type: str
    intermediates: tuple[tuple[str, int], ...]
    skeleton: tuple


def make_count_task(seed: int, split: str, index: int) -> CountTask:
    """One or two steps: ``a`` things, ``b`` more found, then maybe ``c`` given away."""
    rng = random.Random(f"toy-count/{seed}/{split}/{index}")
    name, things = rng.choice(("Rosa", "Omar", "Lena", "Tariq")), rng.choice(("shells", "stamps", "coins"))
    a, b = rng.randint(10, 60), rng.randint(2, 9)
    question = f"{name} has {a} {things} and finds {b} more."
    lines, values = ["x0 = add(n0, n1)"], [a + b]
    skeleton = [("add", ("n", "n"))]
    inputs = [("n0", a), ("n1", b)]
    if rng.random() < 0.5:
        c = rng.choice([x for x in range(2, 10) if x != b])
        question += f" Then {name} gives away {c}."
        lines.append("x1 = subtract(x0, n2)")
        values.append(a + b - c)
        skeleton.append(("subtract", (0, "n")))
        inputs.append(("n2", c))
    question += f" How many {things} does {name} have now?"
    program = "\n".join(lines + [f"answer = x{len(lines) - 1}"]) + "\n"
    return CountTask(id=f"count-{split}-{seed}-{index}", split=split, question=question, inputs=tuple(inputs),
                     program=program, answer=values[-1], answer_type="int",
                     intermediates=tuple((f"x{i}", v) for i, v in enumerate(values)), skeleton=tuple(skeleton))


class Counting(DomainBase):
    name, kind, task_type = "toy_counting", "toy", CountTask

    def propose_variant(self, parent: CountTask, stream_seed: int, draw: int) -> CountTask:
        return make_count_task(stream_seed, parent.split, draw)

    def task_from_dict(self, d):
        return dataclass_from_dict(CountTask, d, {"inputs": pairs, "intermediates": pairs, "skeleton": tuplify})

    def stated_numbers(self, task):
        return task.inputs


@pytest.fixture(scope="module", autouse=True)
def toy_domain():
    register_domain("toy_counting", Counting)
    yield
    unregister_domain("toy_counting")


@pytest.fixture(scope="module")
def toy_seeds():
    return [make_count_task(0, "train", i) for i in range(12)]


def test_the_toy_domain_is_found_by_its_tasks(toy_seeds):
    t = toy_seeds[0]
    assert stated_numbers(t) == t.inputs
    record = task_to_dict(t)
    assert record["kind"] == "toy"
    back = task_from_dict(json.loads(json.dumps(record)))
    assert back == t and type(back) is CountTask and content_keys(back) == content_keys(t)


def test_toy_variants_are_proposed_and_pass_the_rules(toy_seeds, sandbox, library):
    syn = Synthesizer(sandbox, library, CFG, run_seed=4)
    outs = [syn.run(Job(s, 0, frozenset(content_keys(s)))) for s in toy_seeds[:4]]
    assert all(o.accepted for o in outs), [o.rounds for o in outs]
    for seed, o in zip(toy_seeds, outs):
        v = o.task
        assert type(v) is CountTask and v.id.startswith("rods-") and v.question != seed.question
        assert call_graph(v.program) == call_graph(seed.program)
    assert propose(toy_seeds[0], 0, 0, run_seed=4, max_draws=CFG.max_draws) == outs[0].task


def _rewards(task_id, epoch):
    """Half-solved groups: every observed task sits on the boundary, so synthesis is planned."""
    return [1.0, 0.0] * 4


def _play(cur):
    e = cur.epoch
    batch = cur.sample(len(cur.tasks()), seed=e)
    cur.observe({t.id: _rewards(t.id, e) for t in batch})
    return cur.end_epoch()


def test_a_curriculum_persists_and_resumes_toy_variants(tmp_path, toy_seeds, sandbox, library):
    with Curriculum(toy_seeds, CFG, tmp_path, run_seed=1, library=library, sandbox=sandbox) as cur:
        metrics = [_play(cur) for _ in range(3)]
        state = cur.state_hash()
        generated = dict(cur.parents)
    accepted = sum(m["synthesis"]["accepted"] for m in metrics)
    assert accepted > 0 and len(generated) == accepted
    files = sorted((persistence.rods_dir(tmp_path) / "generated").glob("*.jsonl"))
    records = [json.loads(line) for f in files for line in f.read_text().splitlines()]
    assert len(records) == accepted and {r["task"]["kind"] for r in records} == {"toy"}
    restored = persistence.load(tmp_path)
    assert {type(r.task) for r in restored.generated} == {CountTask}
    with Curriculum(toy_seeds, CFG, tmp_path, run_seed=1, library=library, sandbox=sandbox) as again:
        assert again.state_hash() == state and dict(again.parents) == generated
        assert all(type(again.task(t)) is CountTask for t in generated)


# -- BFCL: no generator -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def bfcl_tasks():
    pytest.importorskip("bfcl_eval")
    from third_party.benchmarks import bfcl as loader
    from third_party.benchmarks import bfcl_domain as D
    snapshot = D.primitive_library()
    entries = loader.load_category("multi_turn_base")[:8]
    return snapshot, [D.unplayed_task(e, snapshot, split="train") for e in entries]


def test_bfcl_tasks_get_no_variants_as_a_counted_rejection(bfcl_tasks):
    snapshot, tasks = bfcl_tasks
    assert propose(tasks[0], 0, 0, run_seed=0, max_draws=CFG.max_draws) is None
    out = Synthesizer(None, snapshot, CFG).run(Job(tasks[0], 0))
    assert not out.accepted and [[e.kind for e in r] for r in out.rounds] == [["no_generator"]]
    assert rejection_counts([out])["no_generator"] == 1


def test_a_curriculum_of_bfcl_tasks_runs_without_variants(tmp_path, bfcl_tasks):
    snapshot, tasks = bfcl_tasks
    # the sandbox is never asked to run anything: nothing is drawn
    with Curriculum(tasks, CFG, tmp_path, run_seed=0, library=snapshot, sandbox=object()) as cur:
        metrics = [_play(cur) for _ in range(3)]
        assert not cur.parents and {t.id for t in cur.tasks()} <= {t.id for t in tasks}
    jobs = sum(m["synthesis"]["jobs"] for m in metrics)
    assert jobs > 0 and sum(m["synthesis"]["accepted"] for m in metrics) == 0
    assert sum(m["synthesis"]["rejections"]["no_generator"] for m in metrics) == jobs


# -- records written before the protocol ------------------------------------------------------------

LEGACY_MATH = (
    '{"answer": 177.69543750000003, "answer_type": "float", "difficulty": 6, "id": "math-train-0-0", "inputs": '
    '[["n0", 153.5], ["n1", 5]], "intermediates": [["x0", 7.675], ["x1", 161.175], ["x2", 8.05875], ["x3", '
    '169.23375000000001], ["x4", 8.4616875], ["x5", 177.69543750000003]], "kind": "math", "motifs": '
    '["compound_growth"], "program": "x0 = percent_of(n1, n0)\\nx1 = add(n0, x0)\\nx2 = percent_of(n1, x1)\\nx3 = '
    'add(x1, x2)\\nx4 = percent_of(n1, x3)\\nx5 = add(x3, x4)\\nanswer = x5\\n", "question": "Chloe puts $153.50 '
    'in a savings account that pays 5% interest per year, compounded yearly, for three years. How much money is '
    'there at the end?", "skeleton": [["percent_of", ["n", "n"]], ["add", ["n", 0]], ["percent_of", ["n", 1]], '
    '["add", [1, 2]], ["percent_of", ["n", 3]], ["add", [3, 4]]], "split": "train"}')
LEGACY_TABLE = (
    '{"answer": 9, "answer_type": "int", "difficulty": 5, "id": "table-train-0-0", "intermediates": [["x0", '
    '{"columns": ["athlete", "country", "sport", "gold", "points"], "rows": [["Kim Vale", "Norway", "judo", 0, '
    '50.0], ["Lou Park", "Norway", "judo", 9, 80.0], ["Ida Frost", "Norway", "rowing", 8, 38.0], ["Max Cole", '
    '"Norway", "cycling", 8, 94.0], ["Bo Lind", "Norway", "judo", 0, 51.5]], "types": ["str", "str", "str", "int", '
    '"float"]}], ["x1", [0, 9, 8, 8, 0]], ["x2", 9], ["x3", 0], ["x4", 9]], "kind": "table", "motifs": '
    '["range_where"], "program": "x0 = filter_equals(table, \'country\', \'Norway\')\\nx1 = select_column(x0, '
    '\'gold\')\\nx2 = max_values(x1)\\nx3 = min_values(x1)\\nx4 = subtract_values(x2, x3)\\nanswer = x4\\n", '
    '"question": "What is the gap between the highest and lowest gold among athletes with country Norway?", '
    '"schema": "athletes", "skeleton": [["filter_equals", ["table", "c", "c"]], ["select_column", [0, "c"]], '
    '["max_values", [1]], ["min_values", [1]], ["subtract_values", [2, 3]]], "split": "train", "table": '
    '{"columns": ["athlete", "country", "sport", "gold", "points"], "rows": [["Hal Stone", "Japan", "judo", 6, '
    '29.5], ["Nia Ford", "Japan", "rowing", 8, 59.0], ["Kim Vale", "Norway", "judo", 0, 50.0], ["Eve Hart", '
    '"Kenya", "rowing", 9, 36.5], ["Jon Marsh", "Japan", "judo", 6, 62.5], ["Lou Park", "Norway", "judo", 9, '
    '80.0], ["Ida Frost", "Norway", "rowing", 8, 38.0], ["Max Cole", "Norway", "cycling", 8, 94.0], ["Bo Lind", '
    '"Norway", "judo", 0, 51.5], ["Ada Moss", "Japan", "cycling", 4, 35.0]], "types": ["str", "str", "str", '
    '"int", "float"]}}')


def test_records_written_before_the_protocol_still_load_and_are_written_the_same():
    """Two records as the pre-protocol ``task_to_dict`` wrote them (``json.dumps(..., sort_keys=True)``)."""
    from cocoda_jax.data import synthetic_math as sm
    from cocoda_jax.data import tables
    for text, task in ((LEGACY_MATH, sm.generate(1, seed=0, max_depth=1)[0]), (LEGACY_TABLE, tables.generate(1)[0])):
        assert task_from_dict(json.loads(text)) == task
        assert json.dumps(task_to_dict(task), sort_keys=True) == text


def test_an_unknown_kind_is_not_a_task_record():
    with pytest.raises(ValueError, match="not a task record.*registered kinds"):
        task_from_dict({"kind": "nope", "id": "x"})

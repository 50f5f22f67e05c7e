"""Stage 0 (cocoda_jax.demos): programs asked of a model, played in the sandbox, kept only when the
benchmark's verifier accepts them; stored with provenance; resumed without asking again; endpoint
failures typed; the GSM8K and MATH domains read from local files."""

import json

import ml_collections
import pytest

from cocoda_jax import demos as DM
from cocoda_jax.data.domain import DomainConfigError
from tests.demos.word_problem_files import Oracle, synthetic_tasks, write_gsm8k, write_math
from third_party.benchmarks import word_problems as W


@pytest.fixture(scope="module")
def sandbox():
    from cocoda_jax.execution import Sandbox

    with Sandbox(workers=2, timeout_s=30.0) as sb:
        yield sb


@pytest.fixture(scope="module")
def gsm8k(tmp_path_factory, sandbox):
    train, test = synthetic_tasks(24, 6)
    directory = write_gsm8k(tmp_path_factory.mktemp("gsm8k"), train, test)
    section = ml_collections.ConfigDict(dict(name="gsm8k", data_dir=str(directory), seed=0, n_train=0, n_val=4,
                                             n_test=0))
    return W.GSM8K(), W.GSM8K().build(section, sandbox), train


def test_parse_program_reads_action_lines_only():
    reply = "Sure!\n```python\nProgram:\nx0 = add(n0, n1)  # sum\n-> 5\nx1 = multiply(x0, 2)\nanswer = x1\nx2 = add(1, 2)\n```"
    assert DM.parse_program(reply) == ("x0 = add(n0, n1)", "x1 = multiply(x0, 2)", "answer = x1")
    assert DM.parse_program("The answer is 12.") == ()
    assert DM.parse_program("if x == 3: pass") == ()


def test_the_gsm8k_domain_reads_local_files(gsm8k):
    spec, splits, train = gsm8k
    assert (len(splits.train), len(splits.val), len(splits.test)) == (20, 4, 6)
    assert not {t.id for t in splits.train} & {t.id for t in splits.val}
    task = splits.train[0]
    assert isinstance(task, W.GSM8KTask) and task.program == "" and task.inputs
    source = next(t for t in train if t.question == task.question)
    assert task.inputs == tuple(source.inputs)  # the question's numbers, as the generator bound them
    assert spec.verify(task.gold, task) == 1.0 and spec.verify(task.gold + 1, task) == 0.0
    assert spec.verify("text", task) == 0.0
    assert spec.task_from_dict(json.loads(json.dumps(spec.task_to_dict(task)))) == task


def test_the_math_domain_uses_math_verify(tmp_path, sandbox):
    train, test = synthetic_tasks(6, 4)
    write_math(tmp_path, train, test)
    section = ml_collections.ConfigDict(dict(name="math", data_dir=str(tmp_path), seed=0, n_train=0, n_val=2, n_test=0))
    splits = W.MATH().build(section, sandbox)
    task = splits.test[0]
    assert isinstance(task, W.MATHTask) and W.MATH.categories(task) in ("Algebra", "Prealgebra")
    assert W.MATH().verify(float(task.gold), task) == 1.0
    half = W.MATHTask("m", "test", "q", (), "\\frac{1}{2}", "Algebra")
    assert W.MATH().verify(0.5, half) == 1.0 and W.MATH().verify(0.25, half) == 0.0


@pytest.mark.parametrize("keys, fragment", [
    (dict(data_dir=""), "data_dir"), (dict(data_dir="/no/such/dir"), "not a directory"),
    (dict(colour="red"), "unknown keys"),
])
def test_bad_domain_sections_are_refused(tmp_path, keys, fragment):
    section = ml_collections.ConfigDict({**dict(name="gsm8k", data_dir=str(tmp_path), seed=0), **keys})
    with pytest.raises(DomainConfigError, match=fragment):
        W.GSM8K().build(section, None)


def test_collect_keeps_verified_programs_with_provenance_and_resumes(tmp_path, gsm8k, sandbox):
    spec, splits, train = gsm8k
    wrong = {splits.train[0].question}
    oracle = Oracle(train, wrong=wrong, garble=lambda seed: seed % 2 == 0)
    store = DM.DemoStore(tmp_path / "d.jsonl")
    config = DM.CollectConfig(k=3, concurrency=4, chunk=8, seed=7)
    summary = DM.collect(splits.train, splits.library, sandbox, oracle, store, verify=spec.verify, config=config,
                         provenance={"source": "teacher", "model": "oracle"})
    assert summary.asked_tasks == 20 and summary.requests == 60 == len(oracle.requests)
    records = DM.read_records(tmp_path / "d.jsonl")
    assert len(records) == 20 and not records[splits.train[0].id].solved
    garbled = sum(DM.request_seed(7, splits.train[0].id, s) % 2 == 0 for s in range(3))
    expected = {"no_program": garbled, "wrong_answer": 3 - garbled}
    assert dict(records[splits.train[0].id].failures) == {k: v for k, v in expected.items() if v}
    solved = [r for r in records.values() if r.solved]
    assert summary.solved == len(solved) >= 10
    for r in solved:
        assert oracle.garble(DM.request_seed(7, r.task_id, r.sample)) is False
        assert dict(r.provenance)["model"] == "oracle" and dict(r.provenance)["request_seed"] == DM.request_seed(
            7, r.task_id, r.sample)
    # every request carried its own stable seed
    assert {e["seed"] for _, e in oracle.requests} == {DM.request_seed(7, t.id, s) for t in splits.train for s in range(3)}
    # attached programs replay to the gold answer through the real loop
    from cocoda_jax.rl.trajectory import gold_demonstration
    attached = DM.attach(splits.train, records)
    assert len(attached) == len(solved)
    for task in attached[:4]:
        ep = gold_demonstration(task, splits.library, sandbox)
        assert ep.answered and spec.verify(ep.answer, task) == 1.0 and task.program.endswith("\n")
    again = DM.collect(splits.train, splits.library, sandbox, oracle, DM.DemoStore(tmp_path / "d.jsonl"),
                       verify=spec.verify, config=config)
    assert again.asked_tasks == 0 and len(oracle.requests) == 60 and again.stored_solved == summary.solved


def test_a_cut_last_line_is_asked_again_and_a_bad_middle_line_is_an_error(tmp_path, gsm8k, sandbox):
    spec, splits, train = gsm8k
    path = tmp_path / "d.jsonl"
    DM.collect(splits.train[:3], splits.library, sandbox, Oracle(train), DM.DemoStore(path), verify=spec.verify,
               config=DM.CollectConfig(k=1))
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines[:2]) + "\n" + lines[2][:25])  # a crash while writing the third
    store = DM.DemoStore(path)
    assert len(store.records) == 2 and path.read_text().count("\n") == 2
    oracle = Oracle(train)
    DM.collect(splits.train[:3], splits.library, sandbox, oracle, store, verify=spec.verify,
               config=DM.CollectConfig(k=1))
    assert len(oracle.requests) == 1 and len(DM.read_records(path)) == 3
    path.write_text(lines[0] + "\n{not json\n" + lines[1] + "\n")
    with pytest.raises(DM.DemoStoreError, match=r"d\.jsonl:2"):
        DM.read_records(path)


def test_an_endpoint_failure_is_typed_and_keeps_what_was_decided(tmp_path, gsm8k, sandbox):
    spec, splits, train = gsm8k

    class Down(Exception):
        pass

    oracle = Oracle(train)

    def complete(messages, extra):
        if len(oracle.requests) >= 4:
            raise Down("connection refused")
        return oracle(messages, extra)

    with pytest.raises(DM.DemoEndpointError, match="connection refused"):
        DM.collect(splits.train, splits.library, sandbox, complete, DM.DemoStore(tmp_path / "d.jsonl"),
                   verify=spec.verify, config=DM.CollectConfig(k=1, chunk=4, concurrency=1), endpoint_errors=(Down,))
    assert len(DM.read_records(tmp_path / "d.jsonl")) == 4  # the first chunk was stored


def test_requests_carry_the_seed_over_http(tmp_path, gsm8k, sandbox):
    from tests.coevolve.test_coevolve_teacher import Teacher
    from third_party.teacher import ChatClient, TeacherEndpointConfig

    spec, splits, train = gsm8k
    teacher = Teacher()
    task = splits.train[1]
    teacher.script = [(200, Oracle(train).reply_for(task.question, 1), 0)]
    try:
        client = ChatClient(TeacherEndpointConfig(base_url=teacher.url, model="t", api_key_env=None, timeout_s=5))
        summary = DM.collect([task], splits.library, sandbox, lambda m, e: client.complete(m, e),
                             DM.DemoStore(tmp_path / "d.jsonl"), verify=spec.verify, config=DM.CollectConfig(k=1))
    finally:
        teacher.close()
    body = teacher.requests[0]["body"]
    assert body["seed"] == DM.request_seed(0, task.id, 0) and body["messages"][0]["role"] == "system"
    assert summary.solved == 1
    with pytest.raises(ValueError, match="replace"):
        client.request_body([{"role": "user", "content": "x"}], {"model": "other"})

"""The domain protocol and its registry: the embedded domains and BFCL are registered domains, the
launcher builds whatever is registered under ``config.domain.name``, and an unknown name is a
ConfigError that lists the registered ones."""

from __future__ import annotations

import dataclasses
import importlib
import json

import pytest

from cocoda_jax.data import domain as D
from cocoda_jax.data import synthetic_math as sm
from cocoda_jax.data import tables
from cocoda_jax.data.task import GoldProgramTask
from cocoda_jax.runs import domains
from cocoda_jax.errors import ConfigError


def _config(name="default"):
    return importlib.import_module(f"configs.{name}").get_config()


def test_the_embedded_domains_are_registered_by_name_kind_and_task_type():
    assert {"synthetic_math", "tables"} <= set(D.domain_names())
    math, table = D.get_domain("synthetic_math"), D.get_domain("tables")
    assert isinstance(math, D.TaskDomain) and isinstance(table, D.TaskDomain)
    assert D.domain_of_kind("math") is math and D.domain_of_kind("table") is table
    assert D.domain_of(sm.generate(1)[0]) is math and D.domain_of(tables.generate(1)[0]) is table
    assert table.categories is None and math.categories(sm.make_task(0, "train", 0, depth=3)) == "depth_3"
    for d in (math, table):
        assert d.barrier_tools is None and d.environment_plugin() is None
        assert d.propose_variant is not None


def test_unknown_names_kinds_and_task_types_are_refused():
    with pytest.raises(D.UnknownDomainError, match="synthetic_math"):
        D.get_domain("nope")
    with pytest.raises(D.UnknownDomainError, match="registered kinds"):
        D.domain_of_kind("nope")
    with pytest.raises(TypeError, match="no registered domain"):
        D.domain_of(object())


def test_registration_refuses_a_taken_kind_a_wrong_name_and_a_missing_task_type():
    class Clash(D.DomainBase):
        name, kind, task_type = "clash", "math", type("ClashTask", (), {})

    class Untyped(D.DomainBase):
        name, kind = "untyped", "untyped"

    with pytest.raises(ValueError, match="kind"):
        D.register_domain("clash", Clash)
    with pytest.raises(ValueError, match="registered as"):
        D.register_domain("other_name", Clash)
    with pytest.raises(ValueError, match="task_type"):
        D.register_domain("untyped", Untyped)
    assert "clash" not in D.domain_names() and "untyped" not in D.domain_names()
    D.register_domain("synthetic_math", sm.SyntheticMath)  # the same class again: fine
    assert isinstance(D.get_domain("synthetic_math"), sm.SyntheticMath)


def test_the_verifier_scores_values_for_pure_domains():
    math = D.get_domain("synthetic_math")
    t = sm.generate(1)[0]
    assert math.score(t, t.answer, True) == 1.0 and math.verify(t.answer, t) == 1.0
    assert math.score(t, t.answer + 1, True) == 0.0 and math.score(t, t.answer, False) == 0.0


# -- the launcher's build_domain ------------------------------------------------------------------------


def test_an_unknown_domain_name_is_a_config_error_listing_the_registered_ones():
    c = _config()
    c.domain.name = "no_such_domain"
    with pytest.raises(ConfigError, match=r"not a registered domain.*bfcl_multi_turn.*gsm8k.*math.*synthetic_math"):
        domains.build_domain(c, sandbox=None)
    with pytest.raises(ConfigError, match="not a registered domain"):
        domains.sandbox_for(c)
    c.domain.name = "gsm8k"  # a benchmark domain refuses the synthetic domain's keys, naming its own
    with pytest.raises(ConfigError, match=r"unknown keys \['demos', 'grow_library_to', 'heldout', 'max_depth', 'n_dev'\].*data_dir"):
        domains.build_domain(c, sandbox=None)


def test_a_domain_module_that_does_not_import_is_a_config_error():
    c = _config()
    c.domain.module = "no.such.module"
    with pytest.raises(ConfigError, match="config.domain.module"):
        domains.build_domain(c, sandbox=None)


def test_synthetic_math_builds_as_before(sandbox):
    c = _config()
    c.domain.update(dict(n_train=5, n_val=3, n_test=2, max_depth=2, demos="all"))
    dom = domains.build_domain(c, sandbox)
    assert dom.name == "synthetic_math" and isinstance(dom.spec, sm.SyntheticMath)
    assert dom.categories(dom.train[1]) == f"depth_{dom.train[1].depth}" and dom.barrier_tools is None
    assert dom.train == tuple(sm.generate(5, seed=c.domain.seed, max_depth=2))
    assert len(dom.val) == 3 and len(dom.test) == 2 and "add" in dom.library
    c.domain.heldout = "sometimes"
    with pytest.raises(ConfigError, match="heldout"):
        domains.build_domain(c, sandbox)


@dataclasses.dataclass(frozen=True)
class EchoTask(GoldProgramTask):
    id: str
    question: str
    inputs: tuple
    program: str
    intermediates: tuple
    answer: int


class Echo(D.DomainBase):
    """A domain defined here only: the launcher builds it by name."""

    name, kind, task_type = "echo", "echo", EchoTask

    def build(self, section, sandbox):
        make = lambda i: EchoTask(f"echo-{i}", f"Repeat {i}.", (("n0", i),), "x0 = add(n0, 0)\nanswer = x0\n",
                                  (("x0", i),), i)
        n = int(section["n_train"])
        return D.DomainSplits(tuple(map(make, range(n))), (make(n),), (make(n + 1),), library="echo library")


def test_a_registered_domain_is_built_by_the_launcher():
    D.register_domain("echo", Echo)
    try:
        c = _config()
        c.domain.name = "echo"
        dom = domains.build_domain(c, sandbox=None)
        assert dom.name == "echo" and len(dom.train) == c.domain.n_train and dom.library == "echo library"
        assert dom.test[0].id == f"echo-{c.domain.n_train + 1}"
        assert domains.sandbox_for(c).environment is None
    finally:
        D.unregister_domain("echo")
    assert "echo" not in D.domain_names()


# -- BFCL, registered from third_party ------------------------------------------------------------------


@pytest.fixture(scope="module")
def bfcl():
    pytest.importorskip("bfcl_eval")
    from third_party.benchmarks import bfcl_domain
    return bfcl_domain


def test_bfcl_is_a_registered_stateful_domain_without_a_generator(bfcl):
    spec = domains.domain_spec("bfcl_multi_turn")
    assert isinstance(spec, bfcl.BfclMultiTurn) and D.domain_of_kind("bfcl") is spec
    assert spec.barrier_tools == ("end_turn",) and spec.propose_variant is None
    assert spec.environment_plugin() == bfcl.plugin()
    sandbox = domains.sandbox_for(_config("bfcl_multi_turn"))
    assert sandbox.environment == bfcl.plugin()


def test_bfcl_tasks_are_scored_by_their_calls_and_round_trip_as_records(bfcl):
    from third_party.benchmarks import bfcl as loader
    from cocoda_jax.rods.tasks import task_from_dict, task_to_dict
    snapshot = bfcl.primitive_library()
    tasks = [bfcl.unplayed_task(e, snapshot) for e in loader.load_category("multi_turn_miss_func")[:3]]
    spec = D.domain_of(tasks[0])
    assert spec.categories(tasks[0]) == "multi_turn_miss_func"
    assert spec.score(tasks[0], "", True, ()) == 0.0  # nothing done: BFCL's checker refuses, whatever the answer
    for t in tasks:
        back = task_from_dict(json.loads(json.dumps(task_to_dict(t))))
        assert back == t and back.entry == t.entry and back.environment == t.environment

"""cocoda_jax.study.ceiling and launch.turn_ceiling: the turn-limit ceiling with the primitives, the warm library and a run's final library."""

import json

import pytest

from cocoda_jax.coevolve.traces import gold_trace
from cocoda_jax.data import synthetic_math as sm
from cocoda_jax.execution import Sandbox
from cocoda_jax.runs import domains
from cocoda_jax.runs.settings import RunSettings
from cocoda_jax.study import ceiling as C
from configs import tiny


@pytest.fixture(scope="module")
def sandbox():
    with Sandbox(workers=2, timeout_s=10.0) as sb:
        yield sb


def _config(max_steps):
    c = tiny.get_config()
    c.domain.update(dict(max_depth=4, n_train=120, n_test=40, demos="all"))
    c.sft.n_demos = 120
    c.rollout.max_steps = max_steps
    return c


def test_turns_count_calls_and_the_answer_line():
    t = sm.make_task(0, "train", 3, depth=4)
    assert C.turns(gold_trace(t)) == len(t.program.strip().splitlines())


def test_ceilings_are_counts_and_the_library_never_lengthens_a_program(sandbox):
    out = C.turn_ceilings(_config(8), sandbox)
    assert out["composites"] and out["max_steps"] == 8
    assert set(out["per_category"]) == {"depth_1", "depth_2", "depth_3", "depth_4"}
    assert out["all"]["tasks"] == 40 == sum(r["tasks"] for r in out["per_category"].values())
    for row in out["per_category"].values():
        assert 0 <= row["fit_primitives"] <= row["fit_warm_library"] <= row["tasks"]
    # depth-4 gold programs are 9-17 turns: none fits 8 from the primitives alone
    assert out["per_category"]["depth_4"]["fit_primitives"] == 0
    assert out["ceiling_primitives"] <= out["ceiling_warm_library"]


def test_a_one_turn_limit_fits_nothing(sandbox):
    out = C.turn_ceilings(_config(1), sandbox)
    assert out["all"]["fit_primitives"] == 0 == out["all"]["fit_warm_library"]


def test_a_library_of_primitives_fits_what_the_primitives_fit_and_the_warm_one_more(sandbox):
    config = _config(4)
    out = C.turn_ceilings(config, sandbox)
    built = domains.build_domain(RunSettings.of(config), sandbox)
    bare = C.library_ceilings(config, sandbox, built.library)
    assert bare["composites"] == []
    for cat, row in out["per_category"].items():
        assert bare["per_category"][cat]["tasks"] == row["tasks"]
        assert bare["per_category"][cat]["fit_library"] == row["fit_primitives"]


def test_a_finished_run_is_measured_with_its_own_library_beside_its_accuracy(tiny_run, sandbox):
    from launch.turn_ceiling import run_ceiling
    workdir, report, _ = tiny_run
    out = run_ceiling(str(workdir), sandbox, "test")
    assert out["planner_accuracy"] == report["test_per_category"]
    assert set(out["per_category"]) == set(report["test_per_category"])
    for cat, row in out["per_category"].items():
        assert 0 <= row["fit_library"] <= row["tasks"] == report["test_per_category"][cat]["n"]
    final = json.loads(sorted((workdir / "library").glob("round_*.json"))[-1].read_text())
    assert set(out["composites"]) == {t["name"] for t in final["tools"] if t["calls"]}
    dev = run_ceiling(str(workdir), sandbox, "dev")  # the kept pair's dev accuracy, from the last round
    assert dev["split"] == "dev" and dev["planner_accuracy"] == report["per_round"][-1]["dev_per_category"]
    assert dev["planner_accuracy"] and set(dev["per_category"]) >= set(dev["planner_accuracy"])
    assert "planner_accuracy" not in run_ceiling(str(workdir), sandbox, "val")


def test_a_directory_without_checkpoints_is_a_config_error(tmp_path, sandbox):
    from cocoda_jax.errors import ConfigError
    from launch.turn_ceiling import run_ceiling
    with pytest.raises(ConfigError, match="holds no checkpoint"):
        run_ceiling(str(tmp_path), sandbox, "test")

"""The co-evolution job on BFCL multi-turn, end to end on a tiny budget: the warm library mines
composites of real stateful tools, the report gives accuracy per BFCL category, a stopped run
resumes to the same library, and launch.evaluate_bfcl's planner policy scores the finished run."""

import json

import pytest

from cocoda_jax.library import LibrarySnapshot
from cocoda_jax.runs import coevolve
from cocoda_jax.runs.evaluate import evaluate_run
from configs import bfcl_multi_turn

pytestmark = pytest.mark.filterwarnings("ignore:Some donated buffers were not usable")


def tiny_bfcl_config():
    c = bfcl_multi_turn.get_config()
    c.domain.n_train, c.domain.n_val, c.domain.n_test = 24, 4, 4
    c.model.vocab_size = 600
    c.sft.steps, c.sft.batch_size, c.sft.warmup_steps = 2, 2, 1
    c.grpo.iterations, c.grpo.iterations_per_round = 1, 1
    c.grpo.tasks_per_iteration, c.grpo.group_size = 1, 2
    c.rollout.max_steps, c.rollout.max_new_tokens, c.rollout.max_len, c.rollout.length_multiple = 3, 8, 1024, 1024
    c.coevolve.rounds, c.coevolve.refresh_sft_steps, c.coevolve.refresh_demos = 1, 1, 4
    c.warm.rounds = 1
    c.mesh.data = 1
    c.report.retrieval_queries = 2
    return c


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    wd = tmp_path_factory.mktemp("bfcl_run")
    return wd, coevolve.run(tiny_bfcl_config(), wd, progress=False)


@pytest.mark.slow
def test_the_report_gives_accuracy_per_bfcl_category_and_the_warm_library_learned_composites(run):
    wd, report = run
    assert report == json.loads((wd / "report.json").read_text())
    per = report["test_per_category"]
    assert set(per) == {"multi_turn_base", "multi_turn_miss_func", "multi_turn_miss_param",
                        "multi_turn_long_context"}
    assert all(v["n"] == 1 and 0.0 <= v["accuracy"] <= 1.0 for v in per.values())
    shares = report["test_turns_passed"]  # one test conversation a category: its share is the category's
    assert set(shares) == set(report["test_outcomes"]) and all(0.0 <= x <= 1.0 for x in shares.values())
    assert sorted(shares.values()) == sorted(v["turns_passed_share"] for v in per.values())
    warm = report["warm"]["rounds"][0]
    assert warm["accepted"], warm["rejections"]
    library = LibrarySnapshot.from_json((wd / "library" / "round_000.json").read_text())
    for name in warm["accepted"]:
        tool = library.tool(name)
        assert library.depth(name) >= 1 and "end_turn" not in library.children(name)
        assert tool.examples == ()  # stateful: validated in context, not on replayed examples


def test_a_stopped_bfcl_run_resumes_to_the_same_library(run, tmp_path):
    wd, _ = run
    assert coevolve.run(tiny_bfcl_config(), tmp_path, progress=False, stop_after_round=0) == {"stopped_after_round": 0}
    coevolve.run(tiny_bfcl_config(), tmp_path, progress=False)
    assert (tmp_path / "library" / "round_001.json").read_bytes() == (wd / "library" / "round_001.json").read_bytes()
    assert json.loads((tmp_path / "report.json").read_text())["test_outcomes"] == \
        json.loads((wd / "report.json").read_text())["test_outcomes"]


def test_the_planner_policy_scores_a_finished_run_per_category(run):
    wd, report = run
    result = evaluate_run(wd, categories=["multi_turn_base", "multi_turn_miss_func"])
    assert result["policy"] == "planner" and set(result["per_category"]) == {"multi_turn_base", "multi_turn_miss_func"}
    for c in ("multi_turn_base", "multi_turn_miss_func"):
        assert result["per_category"][c] == report["test_per_category"][c]
    assert result["turns_passed"] == {i: report["test_turns_passed"][i] for i in result["outcomes"]}
    with pytest.raises(ValueError, match="no test task"):
        evaluate_run(wd, categories=["simple_python"])

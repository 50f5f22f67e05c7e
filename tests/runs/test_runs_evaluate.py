"""launch.evaluate_run: a finished run's planner scored again, at an earlier checkpoint, and on a
dev set drawn with another seed (what stage-3 settings are chosen on instead of the test split)."""

import json

import pytest

from cocoda_jax import checkpoint as ckpt
from cocoda_jax.report.stats import compare_runs
from cocoda_jax.runs import domains
from cocoda_jax.runs.settings import RunSettings
from cocoda_jax.errors import ConfigError
from cocoda_jax.runs.evaluate import dev_tasks, evaluate_run

pytestmark = pytest.mark.filterwarnings("ignore:Some donated buffers were not usable")


def test_the_last_checkpoint_scores_what_the_report_says(tiny_run):
    wd, report, _ = tiny_run
    result = evaluate_run(wd)
    assert result["outcomes"] == report["test_outcomes"]
    assert result["accuracy"] == pytest.approx(report["test_accuracy"])
    assert result["n"] == len(report["test_outcomes"])
    assert result["composite_uses"] == report["test_composite_uses"]  # the same rollouts, the same calls


def test_an_earlier_checkpoint_and_a_dev_set_are_scored_and_compare_by_task(tiny_run, tmp_path):
    wd, report, _ = tiny_run
    steps = ckpt.all_steps(wd / "checkpoints")
    settings = RunSettings.parse(ckpt.restore(wd / "checkpoints").config)
    first = evaluate_run(wd, step=steps[0], domain_seed=settings.domain.get("seed") + 1)
    last = evaluate_run(wd, domain_seed=settings.domain.get("seed") + 1)
    assert first["checkpoint_step"] == steps[0] and last["checkpoint_step"] == steps[-1]
    assert first["n"] == last["n"] == len(first["outcomes"]) > 0
    assert set(first["outcomes"]) == set(last["outcomes"])
    assert first["accuracy"] == pytest.approx(sum(first["outcomes"].values()) / first["n"])
    a, b = tmp_path / "first.json", tmp_path / "last.json"
    a.write_text(json.dumps(first))
    b.write_text(json.dumps(last))
    paired = compare_runs([a, b])["paired_vs_first"][0]
    assert paired["n"] == first["n"]
    assert paired["diff"] == pytest.approx(last["accuracy"] - first["accuracy"])


def test_the_dev_set_holds_no_question_the_run_saw(tiny_run):
    wd, _, _ = tiny_run
    settings = RunSettings.parse(ckpt.restore(wd / "checkpoints").config)
    domain = domains.build_domain(settings, None)
    seen = {t.question for t in (*domain.train, *domain.val, *domain.test)}
    dev = dev_tasks(settings, None, domain, "test", settings.domain.get("seed") + 1)
    assert dev and not {t.question for t in dev} & seen
    # the run's own seed gives its own tasks back, so nothing is left
    assert dev_tasks(settings, None, domain, "test", settings.domain.get("seed")) == []


def test_a_missing_checkpoint_and_a_bad_split_are_clear_errors(tiny_run, tmp_path):
    wd, _, _ = tiny_run
    with pytest.raises(ConfigError, match="no checkpoint 999999"):
        evaluate_run(wd, step=999999)
    with pytest.raises(ConfigError, match="holds no checkpoint"):
        evaluate_run(tmp_path)
    with pytest.raises(ValueError, match="split"):
        evaluate_run(wd, split="train")


def test_an_opened_run_holds_the_checkpoints_library_demonstrations_and_planner(tiny_run):
    from cocoda_jax.runs.evaluate import open_run
    wd, report, _ = tiny_run
    saved = ckpt.restore(wd / "checkpoints")
    with open_run(wd) as run:
        assert run.step == saved.step == ckpt.all_steps(wd / "checkpoints")[-1]
        assert run.library.to_json() == saved.payloads["library"].to_json()
        d = run.domain
        assert set(run.tasks_by_id) == {str(t.id) for t in (*d.train, *d.val, *d.test, *d.dev)}
        # the stored demonstrations of the domain's own tasks (a curriculum variant's has no task to show)
        stored = [tuple(p) for p in saved.payloads["progress"]["demo_programs"]]
        assert list(run.programs) == [p for p in stored if p[0] in run.tasks_by_id] and run.programs
        assert run.sandbox is not None and run.model() is not None
    with pytest.raises(ConfigError, match="no checkpoint 999999"):
        with open_run(wd, 999999):
            pass

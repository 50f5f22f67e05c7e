"""Intervals for accuracies and paired comparisons, and the launcher that compares finished runs."""

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cocoda_jax.report.stats import accuracy_interval, compare_runs, paired_difference, run_outcomes


def test_wilson_interval_known_values():
    r = accuracy_interval(75, 128)
    assert r["accuracy"] == pytest.approx(0.5859375)
    # Wilson 95% for 75/128 (textbook formula, computed by hand): [0.4993, 0.6676]
    assert r["low"] == pytest.approx(0.4993, abs=1e-3) and r["high"] == pytest.approx(0.6676, abs=1e-3)
    assert accuracy_interval(0, 10)["low"] == 0.0 and accuracy_interval(10, 10)["high"] == 1.0
    with pytest.raises(ValueError):
        accuracy_interval(3, 2)


@given(st.integers(1, 300).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n))))
def test_wilson_interval_contains_the_estimate(nk):
    n, k = nk
    r = accuracy_interval(k, n)
    assert 0.0 <= r["low"] <= r["accuracy"] <= r["high"] <= 1.0


def test_paired_difference_counts_discordant_tasks():
    a = {"t1": 1, "t2": 1, "t3": 0, "t4": 1, "extra": 1}
    b = {"t1": 1, "t2": 0, "t3": 0, "t4": 0}
    r = paired_difference(a, b)
    assert r["n"] == 4 and r["only_a"] == 2 and r["only_b"] == 0 and r["diff"] == 0.5
    assert r["low"] < 0.5 < r["high"]
    same = paired_difference(b, b)
    assert same["diff"] == same["low"] == same["high"] == 0.0
    with pytest.raises(ValueError, match="share no task"):
        paired_difference({"x": 1}, {"y": 1})


def test_compare_runs_reads_reports_and_summaries(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "report.json").write_text(json.dumps({"test_outcomes": {"t1": 1, "t2": 0, "t3": 1}}))
    (tmp_path / "b" / "train_summary.json").write_text(json.dumps({"test_outcomes": {"t1": 0, "t2": 0, "t3": 1}}))
    out = compare_runs([str(tmp_path / "a"), str(tmp_path / "b")])
    assert [r["n"] for r in out["runs"]] == [3, 3]
    assert out["paired_vs_first"][0]["diff"] == pytest.approx(-1 / 3) and out["paired_vs_first"][0]["only_b"] == 1
    with pytest.raises(FileNotFoundError):
        run_outcomes(tmp_path)


def test_an_evaluation_file_gives_its_outcomes_and_one_without_them_is_refused(tmp_path):
    good, bad = tmp_path / "eval.json", tmp_path / "other.json"
    good.write_text(json.dumps({"accuracy": 0.5, "outcomes": {"t1": 1, "t2": 0}}))
    bad.write_text(json.dumps({"accuracy": 0.5}))
    assert run_outcomes(good) == {"t1": 1, "t2": 0}
    with pytest.raises(ValueError, match="no outcomes"):
        run_outcomes(bad)


def test_turns_passed_is_compared_task_by_task_as_a_graded_score(tmp_path):
    """``measure="turns_passed"`` reads the per-task share of turns passed: means with normal intervals,
    the paired difference over shared tasks; a run without it (one-turn domain) is refused by name."""
    for name, shares in (("a", {"t1": 0.0, "t2": 0.5, "t3": 0.25}), ("b", {"t1": 0.25, "t2": 0.5, "t3": 0.75})):
        (tmp_path / name).mkdir()
        (tmp_path / name / "report.json").write_text(json.dumps(
            {"test_outcomes": {t: 0 for t in shares}, "test_turns_passed": shares}))
    out = compare_runs([str(tmp_path / "a"), str(tmp_path / "b")], measure="turns_passed")
    assert out["measure"] == "turns_passed"
    assert [r["mean"] for r in out["runs"]] == pytest.approx([0.25, 0.5])
    assert out["runs"][0]["low"] < 0.25 < out["runs"][0]["high"]
    pair = out["paired_vs_first"][0]
    assert pair["diff"] == pytest.approx(0.25) and (pair["only_a"], pair["only_b"]) == (2, 0)
    assert compare_runs([str(tmp_path / "a"), str(tmp_path / "b")])["paired_vs_first"][0]["diff"] == 0.0
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "report.json").write_text(json.dumps({"test_outcomes": {"t1": 1}, "test_turns_passed": None}))
    with pytest.raises(ValueError, match="test_turns_passed"):
        run_outcomes(tmp_path / "c", "turns_passed")
    with pytest.raises(ValueError, match="measure"):
        run_outcomes(tmp_path / "a", "steps")

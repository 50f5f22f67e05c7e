"""cocoda_jax.study.rounds: what an arm's rounds did, from hand-made cell reports."""

import pytest

from cocoda_jax.errors import ConfigError
from cocoda_jax.study import arms as A
from cocoda_jax.study import rounds
from cocoda_jax.study import run as R
from cocoda_jax.study import table as T


def _report(*, final, inserted, uses, mechanism=(), outcomes=None):
    """A cell's report: ``inserted[r]`` the composites round r inserted (round 0: stage 1), ``final``
    the final library's composites, ``uses`` their test calls, ``mechanism[r - 1]`` round r's record."""
    per_round = []
    for r, names in enumerate(inserted):
        rec = {"round": r, "inserted": list(names), "outcome": "initial" if r == 0 else "accept"}
        if r >= 1 and r - 1 < len(mechanism):
            rec["mechanism"] = mechanism[r - 1]
        per_round.append(rec)
    return {"composites": [{"name": n} for n in final], "test_composite_uses": dict(uses), "per_round": per_round,
            "test_outcomes": outcomes or {"t0": 1, "t1": 0}}


def _mech(uniform, entropy, norm, draws):
    return {"uniform_group_share": uniform, "entropy": entropy, "update_norm": norm, "rods_draws_by_region": draws}


def test_round_composites_count_only_what_the_rounds_mined_and_the_final_library_keeps():
    report = _report(final=["warm_a", "r1_kept_called", "r1_kept_idle"],
                     inserted=[["warm_a"], ["r1_kept_called", "r1_kept_idle"], ["r2_refused"]],
                     uses={"warm_a": 9, "r1_kept_called": 3, "r2_refused": 5})
    assert rounds.round_composites(report) == {"kept": 2, "called_on_test": 1}
    assert rounds.kept_round_composites(report) == {"r1_kept_called": 3, "r1_kept_idle": 0}
    assert rounds.round_composites({"per_round": []}) is None  # a report without the records


def test_mechanism_by_round_averages_the_cells_and_sums_the_draws():
    a = _report(final=[], inserted=[[], [], []], uses={},
                mechanism=[_mech(1.0, 0.0, None, {"unobserved": 10}), _mech(0.5, 0.2, 0.4, {"boundary": 2, "hard": 8})])
    b = _report(final=[], inserted=[[], []], uses={}, mechanism=[_mech(0.5, 0.1, 0.2, {"unobserved": 6, "boundary": 4})])
    by_round = rounds.mechanism_by_round([a, b])
    assert [m["round"] for m in by_round] == [1, 2] and [m["cells"] for m in by_round] == [2, 1]
    assert by_round[0]["uniform_group_share"] == pytest.approx(0.75)
    assert by_round[0]["entropy"] == pytest.approx(0.05)
    assert by_round[0]["update_norm"] == pytest.approx(0.2)  # the cell that trained nothing (None) is left out
    assert by_round[0]["rods_draws_by_region"] == {"boundary": 4, "unobserved": 16}
    assert by_round[1]["update_norm"] == pytest.approx(0.4)


def test_summary_counts_the_seeds_where_some_stream_calls_a_round_composite():
    mech = [_mech(0.9, 0.01, 0.1, {"boundary": 1, "unobserved": 9})]
    reports = {
        ("cocoda", 13): _report(final=["x"], inserted=[[], ["x"]], uses={"x": 2}, mechanism=mech),
        ("cocoda@1", 13): _report(final=[], inserted=[[], ["y"]], uses={}, mechanism=mech),
        ("cocoda", 42): _report(final=["z"], inserted=[[], ["z"]], uses={}, mechanism=mech),   # kept, never called
        ("cocoda@1", 42): _report(final=[], inserted=[[], []], uses={}, mechanism=mech),
        ("sft_only", 13): _report(final=["w"], inserted=[["w"]], uses={"w": 4}),
        ("sft_only", 42): _report(final=["w"], inserted=[["w"]], uses={"w": 4}),
    }
    did = rounds.summary(reports, ["cocoda", "cocoda@1"], [13, 42])
    assert did["seeds_with_a_round_composite_called"] == 1
    assert [(c["cell"], c["seed"], c["kept"], c["called_on_test"]) for c in did["composites"]] == [
        ("cocoda", 13, 1, 1), ("cocoda@1", 13, 0, 0), ("cocoda", 42, 1, 0), ("cocoda@1", 42, 0, 0)]
    assert did["mechanism"][0]["cells"] == 4
    assert rounds.summary(reports, ["sft_only"], [13, 42]) is None  # no rounds: nothing to say


def test_summarize_and_study_md_carry_what_the_rounds_did():
    mech = [_mech(0.8, 0.02, 0.3, {"boundary": 3, "unobserved": 7})]
    reports = {(arm, s): _report(final=["x"], inserted=[[], ["x"]] if arm == "cocoda" else [["x"]],
                                 uses={"x": 1}, mechanism=mech if arm == "cocoda" else ())
               for arm in ("cocoda", "sft_only") for s in (13, 42)}
    depths = {s: {"t0": 1, "t1": 2} for s in (13, 42)}
    study = R.summarize(A.select(["cocoda", "sft_only"]), [13, 42], reports, depths, n_test=2, wall_s=1.0, b=50)
    assert study["arms"]["cocoda"]["rounds"]["seeds_with_a_round_composite_called"] == 2
    assert "rounds" not in study["arms"]["sft_only"]
    md = T.markdown(study)
    assert "## What the rounds did" in md
    row = next(line for line in md.splitlines() if line.startswith("| `cocoda` | 1.0 / 1.0"))
    assert "2 of 2" in row and "0.80" in row and "0.30" in row  # boundary share 3 of 10 draws


def test_every_arm_is_also_measured_against_sft_only():
    """study.json's ``vs_sft_only`` (the goal of the rounds is stated against the stage-2 planner): the arm
    minus ``sft_only`` on the same (seed, task) pairs, with both intervals; none for ``sft_only`` itself or
    when the study ran no ``sft_only``; study.md gives it its own table."""
    solved = {"cocoda": {13: {"t0": 1, "t1": 1}, 42: {"t0": 1, "t1": 0}},
              "sft_only": {13: {"t0": 1, "t1": 0}, 42: {"t0": 1, "t1": 0}}}  # per seed +0.5, +0.0
    reports = {(arm, s): _report(final=[], inserted=[[]], uses={}, outcomes=solved[arm][s])
               for arm in solved for s in (13, 42)}
    depths = {s: {"t0": 1, "t1": 2} for s in (13, 42)}
    study = R.summarize(A.select(["cocoda", "sft_only"]), [13, 42], reports, depths, n_test=2, wall_s=1.0, b=50)
    vs = study["arms"]["cocoda"]["vs_sft_only"]
    assert vs["delta"] == pytest.approx(0.25) and vs["ci95"][0] <= 0.25 <= vs["ci95"][1]
    assert vs["seed_t95"][0] < 0.0 < 0.5 < vs["seed_t95"][1]  # two seeds that disagree: a wide t interval
    assert "vs_sft_only" not in study["arms"]["sft_only"]
    alone = R.summarize(A.select(["cocoda"]), [13, 42], reports, depths, n_test=2, wall_s=1.0, b=50)
    assert "vs_sft_only" not in alone["arms"]["cocoda"]
    md = T.markdown(study)
    assert "## Against `sft_only`" in md and "| `cocoda` | +0.250" in md


def test_the_comparisons_the_study_names_are_paired_like_the_others():
    """``compare`` (``ARM=OTHER,...``): study.json's ``arms.ARM.vs.OTHER`` on the same (seed, task) pairs, and
    study.md's table; a malformed pair, an unknown arm or one the study does not run is a ConfigError."""
    solved = {"no_search": {13: {"t0": 1, "t1": 1}, 42: {"t0": 1, "t1": 1}},
              "cocoda": {13: {"t0": 1, "t1": 0}, 42: {"t0": 0, "t1": 1}}}  # per seed +0.5, +0.5
    reports = {(arm, s): _report(final=[], inserted=[[]], uses={}, outcomes=solved[arm][s])
               for arm in solved for s in (13, 42)}
    depths = {s: {"t0": 1, "t1": 2} for s in (13, 42)}
    compare = A.comparisons("no_search=cocoda, no_search=cocoda", ["cocoda", "no_search"])
    assert compare == {"no_search": ("cocoda",)}
    study = R.summarize(A.select(["cocoda", "no_search"]), [13, 42], reports, depths, n_test=2, wall_s=1.0, b=50,
                        compare=compare)
    vs = study["arms"]["no_search"]["vs"]["cocoda"]
    assert vs["delta"] == pytest.approx(0.5) == study["arms"]["no_search"]["delta_vs_cocoda"]
    assert "vs" not in study["arms"]["cocoda"]
    assert "| `no_search` | `cocoda` | +0.500" in T.markdown(study)
    for spec, match in (("no_search", "not ARM=OTHER"), ("no_search=no_search", "not ARM=OTHER"),
                        ("no_search=nope", "unknown arm 'nope'"), ("no_search=no_gar", "'no_gar' is not among")):
        with pytest.raises(ConfigError, match=match):
            A.comparisons(spec, ["cocoda", "no_search"])

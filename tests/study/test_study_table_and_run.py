"""cocoda_jax.study.table and run: files written, study.json's schema, resumption (fake runner:
no training)."""

import json
from pathlib import Path

import numpy as np
import pytest

from cocoda_jax.errors import ConfigError
from cocoda_jax.study import arms as A
from cocoda_jax.study import run as R
from cocoda_jax.study import table as T
from configs import study as study_config
from tests.study.fake_cells import coin_report


def _fake_runner(calls):
    def runner(config, workdir):
        calls.append((config.seed, str(workdir)))
        rng = np.random.default_rng(config.seed + (100 if config.coevolve.frozen_library else 0))
        return coin_report(config, workdir, rng, per_round=[
            {"round": r, "val_accuracy": 0.1 * r,
             "val_per_category": {"depth_1": {"n": 2, "accuracy": 0.2 * r}, "depth_2": {"n": 2, "accuracy": 0.0},
                                  "depth_2_unseen": {"n": 1, "accuracy": 0.0}}} for r in range(3)])
    return runner


def _depths(config):
    return {f"math-{config.domain.seed}-{i}": 1 + i % 2 for i in range(config.domain.n_test)}


@pytest.fixture
def an_unavailable_arm(monkeypatch):
    """A registry with one arm that has no knob (every real arm has one now): how such a row is
    reported is still the study's business."""
    arm = A.Arm("imaginary", "an arm without a knob", available=False, reason="no knob")
    monkeypatch.setattr(A, "ARMS", (*A.ARMS, arm))
    monkeypatch.setattr(A, "_BY_NAME", {**A._BY_NAME, arm.name: arm})
    return arm


def test_run_study_schema_files_and_resume(tmp_path, an_unavailable_arm):
    cfg = study_config.get_config("smoke")
    cfg.bootstrap = 200
    calls, lines = [], []
    study = R.run_study(cfg, tmp_path, arms=["cocoda", "frozen_library", "imaginary"], seeds=[13, 42],
                        runner=_fake_runner(calls), depth_fn=_depths, log=lines.append)
    assert len(calls) == 4
    assert any("ETA" in line for line in lines)
    assert "elapsed with 1 worker(s)" in lines[-1]
    assert set(study) == {"seeds", "n_test", "streams", "arms", "wall_s", "float_paths"}
    assert study["float_paths"] == {"not recorded": ["cocoda/seed_13", "cocoda/seed_42", "frozen_library/seed_13",
                                                     "frozen_library/seed_42"]}  # the fake reports record none
    assert study["seeds"] == [13, 42] and study["n_test"] == cfg.run.domain.n_test and study["streams"] == 1
    keys = {"test_acc", "ci95", "per_seed", "per_depth", "delta_vs_cocoda", "delta_ci95", "delta_seed_t95",
            "per_depth_delta", "available", "streams"}
    for name in ("cocoda", "frozen_library"):
        a = study["arms"][name]
        assert set(a) == keys and a["available"] is True
        assert a["ci95"][0] <= a["test_acc"] <= a["ci95"][1]
        assert len(a["per_seed"]) == 2 and set(a["per_depth"]) == {"1", "2"}
    assert study["arms"]["cocoda"]["delta_vs_cocoda"] == 0.0 and study["arms"]["cocoda"]["delta_ci95"] == [0.0, 0.0]
    assert study["arms"]["cocoda"]["delta_seed_t95"] == [0.0, 0.0]
    fz_t = study["arms"]["frozen_library"]["delta_seed_t95"]  # the t interval over the two seeds' deltas
    assert fz_t[0] <= study["arms"]["frozen_library"]["delta_vs_cocoda"] <= fz_t[1]
    imaginary = study["arms"]["imaginary"]
    assert imaginary["available"] is False and imaginary["reason"] and imaginary["test_acc"] is None
    assert json.loads((tmp_path / "study.json").read_text()) == study
    fz = study["arms"]["frozen_library"]["per_depth_delta"]
    assert set(fz) == {"1", "2"} and sum(e["n"] for e in fz.values()) == 2 * cfg.run.domain.n_test
    assert "Paired delta vs `cocoda` per task depth" in (tmp_path / "study.md").read_text()
    for f in ("study.md", "plots/accuracy_per_arm.png", "plots/accuracy_per_depth.png", "plots/val_per_round.png",
              "plots/val_per_depth_per_round.png"):
        assert (tmp_path / f).stat().st_size > 0
    assert (tmp_path / "cocoda" / "seed_13" / "report.json").exists()
    # resumed: nothing reruns, the same study comes back
    again = R.run_study(cfg, tmp_path, arms=["cocoda", "frozen_library", "imaginary"], seeds=[13, 42],
                        runner=_fake_runner(calls), depth_fn=_depths, log=lines.append)
    assert len(calls) == 4
    assert again["arms"] == study["arms"]


def test_markdown_rows_and_verdicts(tmp_path):
    study = {"seeds": [1], "n_test": 10, "wall_s": 5.0, "arms": {
        "cocoda": {"test_acc": 0.5, "ci95": [0.4, 0.6], "per_seed": [0.5], "per_depth": {"1": 0.6, "2": 0.4},
                   "delta_vs_cocoda": 0.0, "delta_ci95": [0.0, 0.0], "available": True},
        "no_gar": {"test_acc": 0.45, "ci95": [0.35, 0.55], "per_seed": [0.45], "per_depth": {"1": 0.5},
                   "delta_vs_cocoda": -0.05, "delta_ci95": [-0.1, 0.02], "delta_seed_t95": [-0.2, 0.1],
                   "available": True},
        "frozen_library": {"test_acc": 0.3, "ci95": [0.2, 0.4], "per_seed": [0.3], "per_depth": {"1": 0.3, "2": 0.3},
                           "delta_vs_cocoda": -0.2, "delta_ci95": [-0.3, -0.1], "available": True},
        "direct": {"test_acc": None, "ci95": None, "per_seed": None, "per_depth": None, "delta_vs_cocoda": None,
                   "delta_ci95": None, "available": False, "reason": "no knob"}}}
    md = T.markdown(study)
    assert ("| `no_gar` | 0.450 [0.350, 0.550] | -0.050 [-0.100, +0.020] | not distinguishable | [-0.200, +0.100] "
            "| 0.500 | — |") in md
    assert "| worse | — |" in md  # a study.json written before the seed-level interval
    assert "| worse |" in md and "| reference |" in md
    assert "- `direct`: no knob" in md
    paths = T.write_all(study, tmp_path, {"cocoda": [[{"round": 0, "val_accuracy": 0.2}]]})
    assert len(paths) == 4 and all(p.stat().st_size > 0 for p in paths)


def test_cells_of_two_hosts_are_two_float_paths_and_the_table_says_so():
    """A study gathered from machines with the portable setting off pairs two float paths: study.json
    groups the cells by the path their reports record, and study.md names them; one path adds nothing."""
    outcomes = {f"t{i}": i % 2 for i in range(8)}
    here = {"portable": False, "setting": "off", "jax": "1", "jaxlib": "1", "numpy": "2",
            "cpu": {"machine": "x86_64", "model": "A", "isa": "AVX2", "cores": 1}}
    there = {**here, "cpu": {**here["cpu"], "model": "B", "isa": "AVX512"}}
    reports = {("cocoda", 1): {"test_outcomes": outcomes, "numerics": there},
               ("no_gar", 1): {"test_outcomes": outcomes, "numerics": here}}
    arms = [A.get("cocoda"), A.get("no_gar")]
    study = R.summarize(arms, [1], reports, {1: {}}, n_test=8, wall_s=1.0, b=50)
    assert sorted(study["float_paths"].values()) == [["cocoda/seed_1"], ["no_gar/seed_1"]]
    assert "Float paths: these cells ran on 2" in T.markdown(study)
    same = R.summarize(arms, [1], {k: {**v, "numerics": here} for k, v in reports.items()}, {1: {}}, n_test=8,
                       wall_s=1.0, b=50)
    assert list(same["float_paths"].values()) == [["cocoda/seed_1", "no_gar/seed_1"]]
    assert "Float paths" not in T.markdown(same)


def test_study_config_presets():
    d, s = study_config.get_config(), study_config.get_config("smoke")
    assert d.preset == "default" and d.run.domain.n_test == 1000 and tuple(d.seeds) == (13, 42, 2026)
    assert len(d.arms) == 11
    assert tuple(s.arms) == ("cocoda", "frozen_library") and len(s.seeds) == 1 and s.run.domain.n_test <= 16
    with pytest.raises(ValueError):
        study_config.get_config("nope")


def test_arms_that_differ_only_in_stage_3_share_one_prefix(tmp_path):
    """cocoda, no_ctd, rods_off and no_gar differ only in what stage 3 reads (no_gar's reward: round 0's
    record is restated under it on resume): their stages 1-2 run once and each cell resumes from a copy;
    frozen_library (another warm library) does not."""
    cfg = study_config.get_config("smoke")
    cfg.bootstrap = 50
    base, calls = _fake_runner([]), []

    def runner(config, workdir, **kw):
        calls.append((config.coevolve.mine_in_rounds, config.rods.enabled, config.reward.name, str(workdir), kw))
        if kw.get("stop_after_round") == 0:
            (workdir / "checkpoints").mkdir(parents=True)
            (workdir / "checkpoints" / "stage2").write_text(str(config.seed))
            (workdir / "logs").mkdir()
            return {"stopped_after_round": 0}
        assert ((workdir / "checkpoints" / "stage2").exists()) == bool(kw.get("allow_config_change"))
        return base(config, workdir)

    R.run_study(cfg, tmp_path, arms=["cocoda", "no_ctd", "rods_off", "no_gar", "frozen_library"], seeds=[13],
                runner=runner, depth_fn=_depths, log=lambda line: None)
    prefix = [c for c in calls if c[4].get("stop_after_round") == 0]
    assert len(prefix) == 1 and "_prefix" in prefix[0][3] and len(calls) == 6
    shared = {c[3] for c in calls if c[4].get("allow_config_change")}
    assert shared == {str(R.cell_dir(tmp_path, a, 13)) for a in ("cocoda", "no_ctd", "rods_off", "no_gar")}
    assert not (R.cell_dir(tmp_path, "no_ctd", 13) / "logs").exists()
    times = json.loads((tmp_path / "cell_times.json").read_text())
    assert set(times) == {f"{a}/seed_13" for a in ("cocoda", "no_ctd", "rods_off", "no_gar", "frozen_library")}
    n = len(calls)  # resumed: every cell has its report, nothing runs again
    R.run_study(cfg, tmp_path, arms=["cocoda", "no_ctd", "rods_off", "no_gar", "frozen_library"], seeds=[13],
                runner=runner, depth_fn=_depths, log=lambda line: None)
    assert len(calls) == n


def test_eta_prices_the_cells_left_by_arm_weight():
    # a finished cell of weight 2 took 200 s: 100 s a unit of weight
    assert R.eta_s([(200.0, 2.0)], [1.0, 1.0, 0.5]) == pytest.approx(250.0)
    # two workers halve the total, but never below the heaviest cell left alone
    assert R.eta_s([(200.0, 2.0)], [1.0, 1.0, 0.5], workers=2) == pytest.approx(125.0)
    assert R.eta_s([(100.0, 1.0)], [3.0, 0.5], workers=2) == pytest.approx(300.0)
    # heaviest first, a plain mean overstates the rest: here the weighted price is exact
    done = [(260.0, 2.6), (130.0, 1.3)]
    assert R.eta_s(done, [1.0] * 4, workers=2) == pytest.approx(200.0)
    assert R.eta_s(done, []) == 0.0
    with pytest.raises(ValueError, match="finished cell"):
        R.eta_s([], [1.0])


def test_eta_weights_come_from_the_arms_and_skip_unknown_ones():
    pairs = R._weighted({"large_frozen/seed_13": 1200.0, "cocoda/seed_13": 400.0, "retired_arm/seed_13": 9.0})
    assert sorted(pairs) == sorted([(1200.0, A.get("large_frozen").weight), (400.0, A.get("cocoda").weight)])


def _config_writing_runner(calls):
    """The fake runner that also writes config.json, as a run does (what a finished cell is checked by)."""
    from cocoda_jax import checkpoint as ckpt

    fake = _fake_runner(calls)

    def runner(config, workdir):
        report = fake(config, workdir)
        (workdir / "config.json").write_text(json.dumps(ckpt.to_jsonable(config.to_dict(), "config")))
        return report
    return runner


def test_a_cell_finished_under_another_config_is_refused_not_reused(tmp_path):
    calls = []
    runner = _config_writing_runner(calls)
    cfg = study_config.get_config("smoke")
    cfg.bootstrap = 50
    run = dict(arms=["cocoda"], seeds=[13], runner=runner, depth_fn=_depths, log=lambda _: None)
    R.run_study(cfg, tmp_path, **run)
    R.run_study(cfg, tmp_path, **run)  # the same config: reused
    assert len(calls) == 1
    cfg.run.coevolve.refresh_sft_steps += 1  # e.g. configs/default.py changed since
    with pytest.raises(ConfigError, match="coevolve.refresh_sft_steps"):
        R.run_study(cfg, tmp_path, **run)
    assert len(calls) == 1


def _stream_runner(calls):
    """A fake cell whose outcomes depend on its seed, its replicate stream and whether its library is
    frozen; shared prefixes write a stage-2 marker."""
    def runner(config, workdir, **kw):
        if kw.get("stop_after_round") == 0:
            (workdir / "checkpoints").mkdir(parents=True)
            return {"stopped_after_round": 0}
        calls.append((workdir.parent.name, int(config.coevolve.replicate), int(config.coevolve.rounds)))
        rng = np.random.default_rng([config.seed, config.coevolve.replicate, int(config.coevolve.frozen_library),
                                     config.coevolve.rounds])
        return coin_report(config, workdir, rng)
    return runner


def test_streams_run_each_arm_with_rounds_n_times_and_average_their_outcomes(tmp_path):
    """With streams=2 each arm with rounds runs a second cell (coevolve.replicate=1) at a seed, sharing its
    stages 1-2; an arm without rounds runs once; an arm's outcome per task is the mean of its streams."""
    cfg = study_config.get_config("smoke")
    cfg.bootstrap, cfg.streams = 100, 2
    cfg.run.domain.n_test = 40
    calls = []
    arms = ["cocoda", "sft_only", "frozen_library"]
    study = R.run_study(cfg, tmp_path, arms=arms, seeds=[13, 42], runner=_stream_runner(calls), depth_fn=_depths,
                        log=lambda line: None)
    assert sorted(calls) == sorted([("cocoda", 0, cfg.run.coevolve.rounds), ("cocoda@1", 1, cfg.run.coevolve.rounds),
                                    ("frozen_library", 0, cfg.run.coevolve.rounds),
                                    ("frozen_library@1", 1, cfg.run.coevolve.rounds), ("sft_only", 0, 0)] * 2)
    assert all("@" not in name for name, _, _ in calls[:6])  # every arm's first stream runs first
    assert study["streams"] == 2
    reports = {(c, s): json.loads((R.cell_dir(tmp_path, c, s) / "report.json").read_text())
               for c in ("cocoda", "cocoda@1", "frozen_library", "frozen_library@1", "sft_only") for s in (13, 42)}
    cocoda = study["arms"]["cocoda"]
    assert cocoda["streams"] == 2 and np.shape(cocoda["per_stream"]) == (2, 2)
    for i, s in enumerate((13, 42)):
        pair = [reports[(c, s)]["test_accuracy"] for c in ("cocoda", "cocoda@1")]
        assert cocoda["per_stream"][0][i] == pytest.approx(pair[0]) and cocoda["per_stream"][1][i] == pytest.approx(pair[1])
        assert cocoda["per_seed"][i] == pytest.approx(np.mean(pair))
        assert cocoda["stream_sd"][i] == pytest.approx(np.std(pair, ddof=1))
    assert reports[("cocoda", 13)]["test_outcomes"] != reports[("cocoda@1", 13)]["test_outcomes"]  # two streams
    sft = study["arms"]["sft_only"]
    assert sft["streams"] == 1 and "per_stream" not in sft
    frozen = study["arms"]["frozen_library"]
    want = np.mean([np.mean([reports[(f, s)]["test_accuracy"] for f in ("frozen_library", "frozen_library@1")])
                    - np.mean([reports[(c, s)]["test_accuracy"] for c in ("cocoda", "cocoda@1")]) for s in (13, 42)])
    assert frozen["delta_vs_cocoda"] == pytest.approx(want)
    md = (tmp_path / "study.md").read_text()
    assert "Streams: every arm with rounds ran them 2 times" in md and "| 1 (no rounds) |" in md
    n = len(calls)  # resumed: nothing reruns
    again = R.run_study(cfg, tmp_path, arms=arms, seeds=[13, 42], runner=_stream_runner(calls), depth_fn=_depths,
                        log=lambda line: None)
    assert len(calls) == n and again["arms"] == study["arms"]


def test_arm_streams_give_named_arms_their_own_count_in_one_table(tmp_path):
    """streams=2 with arm_streams="frozen_library=1": cocoda averages two streams, frozen_library runs once
    and is compared with cocoda's mean; study.md says the counts differ and which arm ran how many."""
    cfg = study_config.get_config("smoke")
    cfg.bootstrap, cfg.streams, cfg.arm_streams = 100, 2, "frozen_library=1, no_tdr=3"  # no_tdr: not selected
    cfg.run.domain.n_test = 40
    calls = []
    base = _stream_runner(calls)

    def runner(config, workdir, **kw):  # cells with rounds say what their rounds did, as real ones do
        report = base(config, workdir, **kw)
        if config.coevolve.rounds and kw.get("stop_after_round") != 0:
            report["per_round"] = [{"round": r, "mechanism": {"uniform_group_share": 0.5}} for r in (1, 2)]
            (workdir / "report.json").write_text(json.dumps(report))
        return report

    study = R.run_study(cfg, tmp_path, arms=["cocoda", "frozen_library", "sft_only"], seeds=[13, 42], runner=runner,
                        depth_fn=_depths, log=lambda line: None)
    assert sorted({name for name, _, _ in calls}) == ["cocoda", "cocoda@1", "frozen_library", "sft_only"]
    arms = study["arms"]
    assert (arms["cocoda"]["streams"], arms["frozen_library"]["streams"], arms["sft_only"]["streams"]) == (2, 1, 1)
    assert study["streams"] == 2 and "per_stream" not in arms["frozen_library"]
    acc = {(c, s): json.loads((R.cell_dir(tmp_path, c, s) / "report.json").read_text())["test_accuracy"]
           for c in ("cocoda", "cocoda@1", "frozen_library") for s in (13, 42)}
    want = np.mean([acc[("frozen_library", s)] - np.mean([acc[("cocoda", s)], acc[("cocoda@1", s)]]) for s in (13, 42)])
    assert arms["frozen_library"]["delta_vs_cocoda"] == pytest.approx(want)
    md = (tmp_path / "study.md").read_text()
    assert "ran them up to 2 times (the last column says how many)" in md
    assert "| `frozen_library` |" in md and md.split("| `frozen_library` |")[1].split("\n")[0].endswith("| 1 |")
    assert md.split("| `sft_only` |")[1].split("\n")[0].endswith("| 1 (no rounds) |")


def test_plan_says_what_each_cell_would_do_and_writes_nothing(tmp_path):
    runner = _config_writing_runner([])
    cfg = study_config.get_config("smoke")
    cfg.bootstrap = 50
    run = dict(arms=["cocoda", "frozen_library"], depth_fn=_depths, log=lambda line: None)
    empty = R.plan_study(cfg, tmp_path, arms=run["arms"], seeds=[13])
    assert [c["state"] for c in empty["cells"]] == ["new", "new"] and empty["left"] == 2 and empty["eta_s"] is None
    R.run_study(cfg, tmp_path, seeds=[13], runner=runner, **run)
    (R.cell_dir(tmp_path, "frozen_library", 42) / "checkpoints").mkdir(parents=True)  # an interrupted cell
    R.cell_dir(tmp_path, "cocoda", 42).mkdir(parents=True)
    (R.cell_dir(tmp_path, "cocoda", 42) / R.PREFIX_MARK).write_text("{}")  # a copy of a shared prefix
    before = sorted(str(f) for f in tmp_path.rglob("*"))
    plan = R.plan_study(cfg, tmp_path, arms=run["arms"], seeds=[13, 42], workers=2)
    assert [(c["cell"], c["state"]) for c in plan["cells"]] == [
        ("cocoda/seed_13", "finished"), ("cocoda/seed_42", "from_prefix"),
        ("frozen_library/seed_13", "finished"), ("frozen_library/seed_42", "resumes")]
    times = json.loads((tmp_path / "cell_times.json").read_text())
    want = R.eta_s(R._weighted(times), [A.get("cocoda").weight, A.get("frozen_library").weight], 2)
    assert plan["left"] == 2 and plan["eta_s"] == pytest.approx(want) and plan["eta_s"] > 0
    assert sorted(str(f) for f in tmp_path.rglob("*")) == before  # nothing run, copied or written
    cfg.run.coevolve.refresh_sft_steps += 1  # a finished cell under another config: the run's own error
    with pytest.raises(ConfigError, match="coevolve.refresh_sft_steps"):
        R.plan_study(cfg, tmp_path, arms=run["arms"], seeds=[13])


def test_the_launcher_plans_without_writing(tmp_path):
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-m", "launch.study", "--preset=smoke", f"--workdir={tmp_path / 'w'}",
                          "--plan", "--config.streams=2", "--config.arm_streams=frozen_library=1"],
                         cwd=root, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.splitlines() == ["cocoda/seed_13: new", "frozen_library/seed_13: new", "cocoda@1/seed_13: new",
                                       "3 of 3 cell(s) left; ETA with 1 worker(s): unknown (no cell has finished)"]
    assert not (tmp_path / "w").exists()


@pytest.mark.parametrize("spec, match", [("cocoda=0", "integer N >= 1"), ("cocoda", "ARM=N"), ("cocoda=two", "ARM=N"),
                                         ("imaginary=2", "unknown arm"), ("cocoda=2,cocoda=3", "given twice")])
def test_arm_streams_that_cannot_mean_what_they_say_are_refused_before_anything_runs(tmp_path, spec, match):
    cfg = study_config.get_config("smoke")
    cfg.streams, cfg.arm_streams = 2, spec
    calls = []
    with pytest.raises(ConfigError, match=match):
        R.run_study(cfg, tmp_path, arms=["cocoda"], seeds=[13], runner=_stream_runner(calls), depth_fn=_depths,
                    log=lambda line: None)
    assert calls == [] and not any(tmp_path.iterdir())


@pytest.mark.parametrize("arms, streams", [(["cocoda_replicate"], 2), (["cocoda"], 0), (["cocoda"], True)])
def test_streams_that_cannot_mean_what_they_say_are_refused_before_anything_runs(tmp_path, arms, streams):
    cfg = study_config.get_config("smoke")
    cfg.streams = streams
    calls = []
    with pytest.raises(ConfigError, match="replicate|streams must be"):
        R.run_study(cfg, tmp_path, arms=arms, seeds=[13], runner=_stream_runner(calls), depth_fn=_depths,
                    log=lambda line: None)
    assert calls == [] and not any(tmp_path.iterdir())


def test_a_stream_added_to_a_finished_study_starts_from_its_finished_prefix(tmp_path):
    """cocoda and no_ctd share stages 1-2 (one prefix); asking the finished study for a second stream runs
    no stages 1-2 again: both new cells start from copies of that prefix. A prefix run under another config
    than the study gives its arm now is not reused."""
    from cocoda_jax import checkpoint as ckpt
    from cocoda_jax.runs import rundir

    cfg = study_config.get_config("smoke")
    cfg.bootstrap = 50
    calls = []
    base = _stream_runner(calls)

    def runner(config, workdir, **kw):
        if kw.get("stop_after_round") == 0:
            calls.append(("prefix", str(workdir)))
            workdir.mkdir(parents=True)
            (workdir / rundir.RUN_CONFIG).write_text(json.dumps(ckpt.to_jsonable(config.to_dict(), "config")))
            return base(config, workdir, **kw)
        assert kw.get("allow_config_change") and (workdir / rundir.RUN_CONFIG).exists()
        report = base(config, workdir, **kw)  # the job records the cell's own config, as coevolve.run does
        (workdir / rundir.RUN_CONFIG).write_text(json.dumps(ckpt.to_jsonable(config.to_dict(), "config")))
        return report

    arms, lines = ["cocoda", "no_ctd"], []
    R.run_study(cfg, tmp_path, arms=arms, seeds=[13], runner=runner, depth_fn=_depths, log=lines.append)
    assert [c for c in calls if c[0] == "prefix"] == [("prefix", str(tmp_path / "_prefix" / "cocoda" / "seed_13"))]
    cfg.streams = 2
    study = R.run_study(cfg, tmp_path, arms=arms, seeds=[13], runner=runner, depth_fn=_depths, log=lines.append)
    assert len([c for c in calls if c[0] == "prefix"]) == 1  # no second stages 1-2
    assert {c[0] for c in calls if c[0] != "prefix"} == {"cocoda", "no_ctd", "cocoda@1", "no_ctd@1"}
    assert json.loads((R.cell_dir(tmp_path, "no_ctd@1", 13) / R.PREFIX_MARK).read_text()) == {
        "prefix": "_prefix/cocoda/seed_13", "saved_under": "cocoda"}
    assert any("no_ctd@1/seed_13: starts from the finished prefix _prefix/cocoda/seed_13" in line for line in lines)
    assert study["arms"]["no_ctd"]["streams"] == 2
    # the same prefix saved under another config is not a stage 1-2 this study would compute now
    saved = tmp_path / "_prefix" / "cocoda" / "seed_13" / rundir.RUN_CONFIG
    changed = json.loads(saved.read_text())
    changed["sft"]["steps"] += 1
    saved.write_text(json.dumps(changed))
    cfg.streams = 3
    R.run_study(cfg, tmp_path, arms=arms, seeds=[13], runner=runner, depth_fn=_depths, log=lines.append)
    assert len([c for c in calls if c[0] == "prefix"]) == 2  # cocoda@2 and no_ctd@2 ran a prefix of their own
    assert any("ran under another config (sft.steps" in line for line in lines)


def test_a_prefix_runs_as_an_arm_with_rounds_and_its_copies_hold_no_report(tmp_path):
    """sft_only comes before cocoda_replicate in the registry; their shared stages 1-2 must run as
    cocoda_replicate: under sft_only (no rounds) the job would not stop after stage 2 but finish with a
    report, and a copy of that would read as a finished cell of the wrong arm."""
    cfg = study_config.get_config("smoke")
    cfg.bootstrap = 50
    calls = []
    base = _stream_runner([])

    def runner(config, workdir, **kw):
        calls.append((workdir.parent.name, int(config.coevolve.rounds), kw))
        if kw.get("stop_after_round") == 0:
            (workdir / "checkpoints").mkdir(parents=True)
            if config.coevolve.rounds == 0:  # what coevolve.run does: nothing stops a run without rounds
                return base(config, workdir)
            return {"stopped_after_round": 0}
        assert kw.get("allow_config_change") and not (workdir / "report.json").exists()
        return base(config, workdir)

    study = R.run_study(cfg, tmp_path, arms=["sft_only", "cocoda_replicate"], seeds=[13], runner=runner,
                        depth_fn=_depths, log=lambda line: None)
    prefix = [c for c in calls if c[2].get("stop_after_round") == 0]
    assert [(c[0], c[1] > 0) for c in prefix] == [("cocoda_replicate", True)]
    assert sorted(c[0] for c in calls if c not in prefix) == ["cocoda_replicate", "sft_only"]
    assert study["arms"]["sft_only"]["available"] and study["arms"]["cocoda_replicate"]["available"]
    # a prefix that did write a report (an older study's, run as sft_only) is copied without it
    pdir = tmp_path / "_prefix" / "cocoda_replicate" / "seed_13"
    (pdir / "report.json").write_text("{}")
    R._copy_prefix(tmp_path, 13, [A.get("no_ctd")], pdir, 0.0)
    assert (R.cell_dir(tmp_path, "no_ctd", 13) / "checkpoints").is_dir()
    assert not (R.cell_dir(tmp_path, "no_ctd", 13) / "report.json").exists()

"""cocoda_jax.study.gather: finished cells from other study directories become one study (fake
runner: no training)."""

import json

import numpy as np
import pytest

from cocoda_jax import checkpoint as ckpt
from cocoda_jax.errors import ConfigError
from cocoda_jax.study import arms as A
from cocoda_jax.study import gather as G
from cocoda_jax.study import run as R
from configs import study as study_config
from tests.study.fake_cells import coin_report

ARMS = ["cocoda", "frozen_library"]


def _runner(config, workdir, **kwargs):
    """Writes what a real cell leaves behind and the study reads: config.json (as coevolve.run
    writes it) and report.json with outcomes drawn from the cell's config."""
    rng = np.random.default_rng(config.seed + (100 if config.coevolve.frozen_library else 0))
    report = coin_report(config, workdir, rng)
    (workdir / "config.json").write_text(json.dumps(ckpt.to_jsonable(config.to_dict(), "config"), sort_keys=True))
    return report


def _prefix_aware(config, workdir, **kwargs):
    """``_runner``, but a shared prefix (``stop_after_round=0``) leaves only what stages 1-2 leave."""
    if kwargs.get("stop_after_round") == 0:
        (workdir / "checkpoints").mkdir(parents=True)
        (workdir / "config.json").write_text(json.dumps(ckpt.to_jsonable(config.to_dict(), "config"), sort_keys=True))
        return {"stopped_after_round": 0}
    return _runner(config, workdir, **kwargs)


def _refuse(config, workdir, **kwargs):
    raise AssertionError(f"a gathered cell was run again: {workdir}")


def _depths(config):
    return {f"math-{config.domain.seed}-{i}": 1 + i % 2 for i in range(config.domain.n_test)}


@pytest.fixture
def cfg():
    c = study_config.get_config("smoke")
    c.bootstrap = 100
    return c


def _study(cfg, workdir, seeds, runner=_runner, **kw):
    return R.run_study(cfg, workdir, arms=ARMS, seeds=seeds, runner=runner, depth_fn=_depths, log=lambda _: None, **kw)


def _cells(seeds):
    return [(A.get(a), s) for a in ARMS for s in seeds]


def test_cells_from_two_directories_give_the_table_of_one_invocation(tmp_path, cfg):
    one = _study(cfg, tmp_path / "one", [13, 42])
    _study(cfg, tmp_path / "a", [13])
    _study(cfg, tmp_path / "b", [42])
    lines = []
    merged = R.run_study(cfg, tmp_path / "all", arms=ARMS, seeds=[13, 42], runner=_refuse, depth_fn=_depths,
                         log=lines.append, gather_from=[tmp_path / "a", tmp_path / "b"])
    assert merged["arms"] == one["arms"]
    times = json.loads((tmp_path / "all" / "cell_times.json").read_text())
    a_times = json.loads((tmp_path / "a" / "cell_times.json").read_text())
    b_times = json.loads((tmp_path / "b" / "cell_times.json").read_text())
    assert times == {**a_times, **b_times} and len(times) == 4
    assert merged["wall_s"] == pytest.approx(sum(times.values()))
    assert sum("taken from" in line for line in lines) == 4
    assert not list((tmp_path / "all").rglob("*.gathering"))


def test_the_cells_still_missing_run_and_the_first_source_wins(tmp_path, cfg):
    _study(cfg, tmp_path / "a", [13])
    _study(cfg, tmp_path / "b", [13, 42])
    (tmp_path / "a" / "cell_times.json").unlink()  # no times on record in the first source
    ran = []

    def runner(config, workdir, **kw):
        ran.append(str(workdir))
        return _runner(config, workdir, **kw)

    lines = []
    R.run_study(cfg, tmp_path / "all", arms=ARMS, seeds=[13, 42, 2026], runner=runner, depth_fn=_depths,
                log=lines.append, gather_from=[tmp_path / "a", tmp_path / "b"])
    assert sorted(ran) == sorted(str(tmp_path / "all" / a / "seed_2026") for a in ARMS)
    assert any(f"cocoda/seed_13: taken from {(tmp_path / 'a').resolve()}" in line and "no time on record" in line
               for line in lines)
    times = json.loads((tmp_path / "all" / "cell_times.json").read_text())
    assert "cocoda/seed_13" not in times and "cocoda/seed_42" in times and "cocoda/seed_2026" in times


def test_a_cell_of_another_config_is_refused_before_anything_is_copied(tmp_path, cfg):
    _study(cfg, tmp_path / "a", [13])
    other = study_config.get_config("smoke")
    other.run.sft.steps = cfg.run.sft.steps + 1
    _study(other, tmp_path / "b", [42])
    changed = rf"sft\.steps: {cfg.run.sft.steps + 1} -> {cfg.run.sft.steps}"
    with pytest.raises(ConfigError, match=rf"cocoda/seed_42.*{changed}"):
        G.gather(cfg, tmp_path / "all", _cells([13, 42]), [tmp_path / "a", tmp_path / "b"])
    assert not (tmp_path / "all").exists() or not any((tmp_path / "all").iterdir())


def test_a_started_cell_is_never_replaced_and_a_finished_one_is_kept(tmp_path, cfg):
    _study(cfg, tmp_path / "a", [13])
    started = tmp_path / "all" / "frozen_library" / "seed_13" / "checkpoints"
    started.mkdir(parents=True)
    with pytest.raises(G.GatherError, match="started but unfinished"):
        G.gather(cfg, tmp_path / "all", _cells([13]), [tmp_path / "a"])
    assert started.is_dir() and not (tmp_path / "all" / "cocoda").exists()
    started.rmdir()  # an empty cell directory is filled
    done = tmp_path / "all" / "cocoda" / "seed_13"
    done.mkdir(parents=True)
    (done / "report.json").write_text("{}")
    assert G.gather(cfg, tmp_path / "all", _cells([13]), [tmp_path / "a"]) == ["frozen_library/seed_13"]
    assert (done / "report.json").read_text() == "{}"


def test_bad_sources_are_refused(tmp_path, cfg):
    (tmp_path / "all").mkdir()
    with pytest.raises(G.GatherError, match="not a directory"):
        G.plan(cfg, tmp_path / "all", _cells([13]), [tmp_path / "absent"])
    with pytest.raises(G.GatherError, match="own directory"):
        G.plan(cfg, tmp_path / "all", _cells([13]), [tmp_path / "all"])
    cell = tmp_path / "a" / "cocoda" / "seed_13"
    cell.mkdir(parents=True)
    (cell / "report.json").write_text("{}")
    with pytest.raises(G.GatherError, match="no config.json"):
        G.plan(cfg, tmp_path / "all", _cells([13]), [tmp_path / "a"])


def test_a_stream_is_taken_from_the_cell_that_ran_its_config_under_another_name(tmp_path, cfg):
    """The null arm's cells are cocoda's second stream cell for cell: a two-stream study gathers them
    as cocoda@1; a cell of another config under another name is not taken."""
    R.run_study(cfg, tmp_path / "a", arms=["cocoda", "cocoda_replicate", "no_ctd"], seeds=[13], runner=_prefix_aware,
                depth_fn=_depths, log=lambda _: None)
    cfg.streams = 2
    lines = []
    study = R.run_study(cfg, tmp_path / "all", arms=["cocoda"], seeds=[13], runner=_refuse, depth_fn=_depths,
                        log=lines.append, gather_from=[tmp_path / "a"])
    src = (tmp_path / "a" / "cocoda_replicate" / "seed_13").resolve()
    assert any(line.startswith(f"cocoda@1/seed_13: taken from {src} (the same config under another name)")
               for line in lines)
    assert study["arms"]["cocoda"]["streams"] == 2
    assert (tmp_path / "all" / "cocoda@1" / "seed_13" / "config.json").read_text() == (src / "config.json").read_text()
    times = json.loads((tmp_path / "all" / "cell_times.json").read_text())
    assert times["cocoda@1/seed_13"] == json.loads((tmp_path / "a" / "cell_times.json").read_text())[
        "cocoda_replicate/seed_13"]
    # no_ctd@1 (replicate 1 without in-round mining) was run under no name in "a": nothing to take, so it runs
    ran = []
    R.run_study(cfg, tmp_path / "all", arms=["cocoda", "no_ctd"], seeds=[13], depth_fn=_depths, log=lambda _: None,
                runner=lambda c, w, **kw: ran.append(w.parent.name) or _prefix_aware(c, w, **kw),
                gather_from=[tmp_path / "a"])
    assert ran == ["no_ctd@1"]

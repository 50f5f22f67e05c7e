"""Plots from a metrics JSONL: one panel per key with exactly the logged points; a real PNG."""

import matplotlib.image
import pytest

from cocoda_jax.report import JSONL_NAME, MetricsWriter, metrics_figure, plot_metrics, series


@pytest.fixture
def log(tmp_path):
    with MetricsWriter(tmp_path, tensorboard=False) as w:
        for s in range(6):
            w.write(s, {"reward": s / 10, "library_size": 10 + s // 2})
            if s % 2 == 0:
                w.write(s, {"val_acc": 0.5 + s / 100})
    return tmp_path / JSONL_NAME


def test_each_key_gets_a_panel_with_exactly_its_points(log):
    fig = metrics_figure(log, ["reward", "val_acc", "library_size"], title="run")
    axes = fig.axes
    assert [ax.get_ylabel() for ax in axes] == ["reward", "val_acc", "library_size"]
    (line,) = axes[1].lines
    assert list(line.get_xdata()) == [0, 2, 4] and list(line.get_ydata()) == [0.5, 0.52, 0.54]
    assert list(axes[2].lines[0].get_ydata()) == [10, 10, 11, 11, 12, 12]
    assert series(log, "reward") == ([0, 1, 2, 3, 4, 5], [0.0, 0.1, 0.2, 0.3, 0.4, 0.5])


def test_png_is_written_and_grows_with_the_panels(log, tmp_path):
    one = plot_metrics(log, ["reward"], tmp_path / "plots" / "one.png")
    three = plot_metrics(log, ["reward", "val_acc", "library_size"], tmp_path / "plots" / "three.png")
    assert one.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    h1, h3 = matplotlib.image.imread(one).shape[0], matplotlib.image.imread(three).shape[0]
    assert h3 > 2 * h1 and not list((tmp_path / "plots").glob("*.tmp"))


def test_records_work_as_well_as_files():
    fig = metrics_figure([{"step": 1, "a": 2.0}, {"step": 3, "a": 1.0}], ["a"])
    assert list(fig.axes[0].lines[0].get_xdata()) == [1, 3]


def test_missing_keys_are_named(log, tmp_path):
    with pytest.raises(KeyError, match="nope"):
        plot_metrics(log, ["reward", "nope"], tmp_path / "x.png")
    assert not (tmp_path / "x.png").exists()
    with pytest.raises(ValueError):
        metrics_figure(log, [])

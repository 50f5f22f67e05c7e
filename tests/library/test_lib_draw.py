"""The networkx view of the library and the sub-DAG drawing."""

import networkx as nx
import pytest

from cocoda_jax.library import draw_subgraph


def test_networkx_graph_mirrors_the_snapshot(static_library):
    graph = static_library.to_networkx()
    assert set(graph.nodes) == set(static_library.names())
    assert nx.is_directed_acyclic_graph(graph)
    assert graph.nodes["spread"]["depth"] == 3 and graph.nodes["spread"]["phi"] == 5
    assert graph.nodes["add"]["composite"] is False
    assert graph.edges["sum_sq", "square"]["multiplicity"] == 2
    assert graph.edges["quad", "add"] == {"multiplicity": 2, "order": 1}
    assert set(nx.descendants(graph, "spread")) == static_library.descendants("spread")
    assert set(nx.ancestors(graph, "mul")) == static_library.ancestors("mul")


@pytest.mark.parametrize("suffix, magic", [(".png", b"\x89PNG"), (".svg", b"<?xml")])
def test_draw_subgraph_writes_the_tool_and_its_descendants(static_library, tmp_path, suffix, magic):
    path = tmp_path / f"spread{suffix}"
    assert draw_subgraph(static_library, "spread", path) == str(path)
    data = path.read_bytes()
    assert data.startswith(magic) and len(data) > 1000
    if suffix == ".svg":
        text = data.decode()
        for name in ("spread", "sum_sq", "square", "mul", "mean2", "div", "sub", "add"):
            assert name in text
        assert "quad" not in text  # not a descendant of spread


def test_draw_subgraph_refuses_unknown_formats_and_tools(static_library, tmp_path):
    with pytest.raises(ValueError, match=".png or .svg"):
        draw_subgraph(static_library, "spread", tmp_path / "x.jpg")
    with pytest.raises(KeyError):
        draw_subgraph(static_library, "nope", tmp_path / "x.png")


# -- the whole library: a layered layout whose labels never overlap ------------------------------

import itertools
import json
import pathlib
import random

from matplotlib.backends.backend_agg import FigureCanvasAgg

from cocoda_jax.library.draw import (
    MAX_DRAWN_TOOLS, DrawingError, dag_figure, draw_dag, graph_from_composites, layered_layout, overlaps, short_label,
)

MAIN_JOB = pathlib.Path(__file__).resolve().parents[2] / "docs/results/loop_2026-12-04/main_job/report.json"
WORDS = ("multiply", "add", "subtract", "divide", "percent_of", "floor_div", "remainder", "minutes_to_hours",
         "grams_to_kg", "dozens_to_items", "average", "round_to")


def synthetic_library(tools, primitives, *, seed=0, max_depth=4):
    """report.json-style composite records for ``tools`` tools: long, similar names built from the
    words composites are named after, every primitive called, depths up to ``max_depth``."""
    rng = random.Random(seed)
    prims = [f"{WORDS[i % len(WORDS)]}_{i}" for i in range(primitives)]
    depth = {p: 0 for p in prims}
    records, uncalled = [], list(prims)
    n = tools - primitives
    for i in range(n):
        pool = [t for t in depth if depth[t] < max_depth]
        kids = [uncalled.pop() for _ in range(-(-len(uncalled) // (n - i)))]
        kids += rng.sample(pool, rng.randint(1, 2))
        name = "_".join(k.rsplit("_", 1)[0] for k in kids)[:44] + f"_{i}"
        depth[name] = 1 + max(depth[k] for k in kids)
        records.append({"name": name, "children": kids, "depth": depth[name], "phi": len(kids) - 1,
                        "flat": len(kids)})
    return records, prims


def label_extents(fig):
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    renderer = canvas.get_renderer()
    return {t.get_gid(): t.get_window_extent(renderer) for t in fig.axes[0].texts if (t.get_gid() or "").startswith("tool-")}


def assert_no_label_overlap(extents):
    bad = [(a, b) for (a, ea), (b, eb) in itertools.combinations(extents.items(), 2) if ea.overlaps(eb)]
    assert bad == [], bad[:5]


def test_short_label_keeps_both_ends():
    assert short_label("add") == "add"
    cut = short_label("multiply_multiply_minutes_to_hours_subtract", 20)
    assert len(cut) == 20 and cut.startswith("multiply_m") and cut.endswith("_subtract") and "\u2026" in cut
    with pytest.raises(DrawingError):
        short_label("abcdef", 3)


def test_graph_from_composites_fills_depths_and_refuses_bad_records():
    graph = graph_from_composites([{"name": "ab", "children": ["a", "b", "b"]}, {"name": "abc", "children": ["ab", "c"]}],
                                  primitives=["z"])
    assert graph.nodes["abc"]["depth"] == 2 and graph.nodes["a"]["depth"] == 0 and graph.nodes["z"]["composite"] is False
    assert graph.edges["ab", "b"]["multiplicity"] == 2
    with pytest.raises(DrawingError, match="record #0"):
        graph_from_composites([{"name": "x", "children": "ab"}])
    with pytest.raises(DrawingError, match="cycle"):
        graph_from_composites([{"name": "x", "children": ["y"]}, {"name": "y", "children": ["x"]}])


def test_the_main_jobs_library_is_drawn_without_overlap():
    report = json.loads(MAIN_JOB.read_text())
    graph = graph_from_composites(report["composites"])
    layout = layered_layout(graph)
    assert set(layout.boxes) == set(graph) and overlaps(layout.boxes) == []
    fig = dag_figure(graph)
    extents = label_extents(fig)
    assert len(extents) == len(graph)
    assert_no_label_overlap(extents)


@pytest.mark.parametrize("tools, primitives", [(38, 29), (120, 40)])
def test_labels_do_not_overlap_and_keep_their_size(tools, primitives):
    records, prims = synthetic_library(tools, primitives)
    graph = graph_from_composites(records, prims)
    assert len(graph) == tools
    layout = layered_layout(graph)
    assert len(layout.boxes) == tools and layout.hidden == () and layout.capped == ()
    assert overlaps(layout.boxes) == []
    assert max(x1 for _, _, x1, _ in layout.boxes.values()) <= layout.width     # layers wrap, not widen
    fig = dag_figure(graph)
    extents = label_extents(fig)
    assert len(extents) == tools
    assert_no_label_overlap(extents)
    assert {t.get_fontsize() for t in fig.axes[0].texts if (t.get_gid() or "").startswith("tool-")} == {9.0}


def test_a_bigger_library_makes_a_taller_figure_not_smaller_text():
    small = dag_figure(graph_from_composites(*synthetic_library(38, 29)))
    big = dag_figure(graph_from_composites(*synthetic_library(120, 40)))
    assert big.get_figheight() > small.get_figheight()
    assert big.get_figwidth() == pytest.approx(small.get_figwidth())


def test_uncalled_primitives_are_folded_and_large_libraries_capped():
    records, prims = synthetic_library(60, 20)
    graph = graph_from_composites(records, prims + [f"unused_{i}" for i in range(7)])
    layout = layered_layout(graph)
    assert layout.hidden == tuple(sorted(f"unused_{i}" for i in range(7)))
    assert not set(layout.hidden) & set(layout.boxes)
    flat = graph_from_composites([], [f"tool_{i:03d}" for i in range(MAX_DRAWN_TOOLS + 50)])
    layout = layered_layout(flat)        # nothing calls anything: all are drawn, up to the cap
    assert len(layout.boxes) == MAX_DRAWN_TOOLS and len(layout.capped) == 50 and layout.hidden == ()
    assert overlaps(layout.boxes) == []
    with pytest.raises(DrawingError):
        layered_layout(flat, font_size=0)


def test_draw_dag_writes_png_and_svg(tmp_path):
    graph = graph_from_composites(*synthetic_library(38, 29))
    assert pathlib.Path(draw_dag(graph, tmp_path / "d.png")).read_bytes().startswith(b"\x89PNG")
    text = pathlib.Path(draw_dag(graph, tmp_path / "d.svg")).read_text()
    assert "<svg" in text and 'id="tool-' in text
    with pytest.raises(DrawingError, match=".png or .svg"):
        draw_dag(graph, tmp_path / "d.jpg")

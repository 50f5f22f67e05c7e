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

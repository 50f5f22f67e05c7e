"""The library as a networkx graph, and a drawing of one tool's sub-DAG (PNG or SVG).

Drawing uses matplotlib's object API with the Agg canvas (no pyplot, no global backend switch), so it
works headless and leaves other plotting code alone.
"""

from __future__ import annotations

import os
from collections import Counter
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import networkx as nx

_FORMATS = {".png": "png", ".svg": "svg"}


def to_networkx(snap) -> "nx.DiGraph":
    """Nodes carry ``depth, flat, phi, signature, description, composite``; an edge ``v -> u`` means
    ``v`` calls ``u``, with ``multiplicity`` (call sites) and ``order`` (position of the first call)."""
    import networkx as nx  # imported on use: the library itself stays light
    graph = nx.DiGraph()
    for name in snap.topological_order():
        tool = snap.tool(name)
        graph.add_node(name, depth=snap.depth(name), flat=snap.flat(name), phi=snap.phi(name),
                       signature=str(tool.signature), description=tool.description,
                       composite=bool(snap.children(name)))
    for name in snap.topological_order():
        calls = snap.children(name)
        for child, count in Counter(calls).items():
            graph.add_edge(name, child, multiplicity=count, order=calls.index(child))
    return graph


def draw_subgraph(snap, name: str, path: str | os.PathLike, *, title: str | None = None) -> str:
    """Draws ``name`` and its descendants, layered by depth (primitives at the bottom), to ``path``.

    The format follows the suffix (``.png`` or ``.svg``). Labels show depth and Phi; an edge label
    ``xk`` marks a child called k times. Returns the path written.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    import networkx as nx

    path = os.fspath(path)
    fmt = _FORMATS.get(os.path.splitext(path)[1].lower())
    if fmt is None:
        raise ValueError(f"draw_subgraph writes .png or .svg, not {path!r}")
    nodes = {name, *snap.descendants(name)}
    graph = to_networkx(snap).subgraph(nodes).copy()
    top = max(graph.nodes[n]["depth"] for n in graph)
    for n in graph:
        graph.nodes[n]["layer"] = top - graph.nodes[n]["depth"]
    pos = nx.multipartite_layout(graph, subset_key="layer", align="horizontal")
    pos = {n: (x, -y) for n, (x, y) in pos.items()}  # the root on top

    width = max(4.0, 1.8 * max(Counter(graph.nodes[n]["layer"] for n in graph).values()))
    fig = Figure(figsize=(width, 1.4 * (top + 1) + 1.0))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    ax.set_axis_off()
    colors = ["#f4c27a" if n == name else ("#9ecae1" if graph.nodes[n]["composite"] else "#c7e9c0")
              for n in graph]
    nx.draw_networkx_nodes(graph, pos, ax=ax, node_color=colors, node_size=1800, edgecolors="#444444")
    nx.draw_networkx_edges(graph, pos, ax=ax, arrows=True, arrowsize=14, node_size=1800)
    labels = {n: f"{n}\nd={graph.nodes[n]['depth']} Φ={graph.nodes[n]['phi']}" for n in graph}
    nx.draw_networkx_labels(graph, pos, labels=labels, ax=ax, font_size=8)
    counts = {(u, v): f"x{d['multiplicity']}" for u, v, d in graph.edges(data=True) if d["multiplicity"] > 1}
    if counts:
        nx.draw_networkx_edge_labels(graph, pos, edge_labels=counts, ax=ax, font_size=8)
    ax.set_title(title or f"{name}: flat={snap.flat(name)}, Φ={snap.phi(name)}", fontsize=10)
    ax.margins(0.2)
    fig.savefig(path, format=fmt, bbox_inches="tight")
    return path

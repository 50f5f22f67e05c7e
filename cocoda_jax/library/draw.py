"""The library as a networkx graph, a drawing of one tool's sub-DAG (PNG or SVG), and a layered
layout of the whole library whose labels never overlap (used by the matplotlib drawing and by the
HTML report's inline SVG alike).

Drawing uses matplotlib's object API with the Agg canvas (no pyplot, no global backend switch), so it
works headless and leaves other plotting code alone.
"""

from __future__ import annotations

import dataclasses
import os
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from cocoda_jax.library.errors import LibraryError

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


# -- the whole library, laid out so that no two labels overlap --------------------------------------

#: More tools than this are not drawn (the drawing says how many were left out): past it a person
#: reads the composites table better than a picture.
MAX_DRAWN_TOOLS = 150
#: Labels longer than this are cut in the middle (the whole name stays in the tooltip or table).
MAX_LABEL_CHARS = 26
#: Width of one character of a monospace font, in ems (DejaVu Sans Mono, Menlo, Courier: 0.60).
MONO_EM = 0.61


class DrawingError(LibraryError, ValueError):
    """Input a library drawing cannot use: a bad composite record, a bad format or size."""


def short_label(name: str, limit: int = MAX_LABEL_CHARS) -> str:
    """``name`` cut in the middle to at most ``limit`` characters, so both its head and its tail
    (the first and last tool a composite calls) stay readable."""
    if limit < 5:
        raise DrawingError(f"a label needs at least 5 characters, not {limit}")
    if len(name) <= limit:
        return name
    head = limit // 2
    tail = limit - 1 - head
    return name[:head] + "\u2026" + name[len(name) - tail:]


def graph_from_composites(composites: Sequence[Mapping[str, Any]],
                          primitives: Sequence[str] = ()) -> "nx.DiGraph":
    """The graph :func:`to_networkx` makes, rebuilt from report.json's ``composites`` records
    (``name``, ``children``, ``depth``, ``phi``, ``flat``): a report keeps no library file. Tools
    that are called but not listed are primitives (depth 0); ``primitives`` adds the uncalled ones."""
    import networkx as nx
    graph = nx.DiGraph()
    for p in primitives:
        graph.add_node(str(p), depth=0, flat=1, phi=0, composite=False)
    for i, rec in enumerate(composites):
        name, children = rec.get("name") if isinstance(rec, Mapping) else None, None
        if isinstance(rec, Mapping):
            children = rec.get("children")
        if not isinstance(name, str) or not name or isinstance(children, (str, bytes)) \
                or not isinstance(children, Sequence) or not all(isinstance(c, str) for c in children):
            raise DrawingError(f"composite record #{i} needs a name and a list of child names, got {rec!r}")
        depth = rec.get("depth")
        graph.add_node(name, depth=depth if isinstance(depth, int) and depth >= 1 else None,
                       flat=rec.get("flat"), phi=rec.get("phi"), composite=bool(children))
        for order, (child, count) in enumerate(Counter(children).items()):
            if child not in graph:
                graph.add_node(child, depth=None, flat=1, phi=0, composite=False)
            graph.add_edge(name, child, multiplicity=count, order=order)
    if not nx.is_directed_acyclic_graph(graph):
        raise DrawingError("the composite records call each other in a cycle")
    for n in reversed(list(nx.topological_sort(graph))):  # children first: fill unknown depths
        if graph.nodes[n]["depth"] is None:
            kids = list(graph.successors(n))
            graph.nodes[n]["depth"] = 1 + max(graph.nodes[c]["depth"] for c in kids) if kids else 0
            graph.nodes[n]["composite"] = bool(kids)
    return graph


@dataclasses.dataclass(frozen=True)
class DagLayout:
    """Where each drawn tool's box sits: ``boxes[name] = (x0, y0, x1, y1)`` in points, y downwards
    from the top; ``labels`` the text drawn in each box (one or two lines); ``hidden`` the tools
    called by no composite (folded away, to be listed instead); ``capped`` the tools past
    :data:`MAX_DRAWN_TOOLS`."""

    boxes: dict[str, tuple[float, float, float, float]]
    labels: dict[str, tuple[str, ...]]
    width: float
    height: float
    hidden: tuple[str, ...]
    capped: tuple[str, ...]
    font_size: float

    def centre(self, name: str) -> tuple[float, float]:
        x0, y0, x1, y1 = self.boxes[name]
        return (x0 + x1) / 2, (y0 + y1) / 2


def _drawn_nodes(graph, cap: int) -> tuple[list[str], tuple[str, ...], tuple[str, ...]]:
    """(drawn, hidden, capped): tools called by no composite are hidden unless nothing else is
    left; past ``cap`` the deepest tools and the most-called primitives are kept."""
    uncalled = sorted(n for n in graph if not graph.nodes[n]["composite"] and graph.in_degree(n) == 0)
    drawn = [n for n in graph if n not in set(uncalled)] or list(graph)
    hidden = tuple(n for n in uncalled if n not in set(drawn))
    if len(drawn) <= cap:
        return drawn, hidden, ()
    rank = sorted(drawn, key=lambda n: (-graph.nodes[n]["depth"], -graph.in_degree(n), n))
    keep = set(rank[:cap])
    return [n for n in drawn if n in keep], hidden, tuple(sorted(n for n in drawn if n not in keep))


def _order_layers(graph, layers: dict[int, list[str]]) -> dict[int, list[str]]:
    """Each layer ordered by the mean position of its callers above (then of its children below),
    a barycentre sweep that keeps most edges short and uncrossed."""
    depths = sorted(layers, reverse=True)
    order = {d: sorted(layers[d]) for d in depths}

    def sweep(seq, neighbours):
        for prev, d in zip(seq, seq[1:]):
            index = {n: i / max(len(order[prev]) - 1, 1) for i, n in enumerate(order[prev])}

            def key(n):
                near = [index[m] for m in neighbours(n) if m in index]
                return (sum(near) / len(near) if near else 2.0, n)
            order[d] = sorted(order[d], key=key)

    sweep(depths, graph.predecessors)         # top down: follow the callers
    sweep(depths[::-1], graph.successors)     # bottom up: follow the children
    sweep(depths, graph.predecessors)
    return order


def layered_layout(graph, *, font_size: float = 9.0, max_width: float = 1000.0, cap: int = MAX_DRAWN_TOOLS,
                   label_chars: int = MAX_LABEL_CHARS) -> DagLayout:
    """Boxes for a library graph (:func:`to_networkx` or :func:`graph_from_composites`), layered
    by depth with the deepest composites on top and primitives at the bottom.

    Labels are set in a monospace font, so a box's width follows from its characters
    (:data:`MONO_EM`), and boxes in a row are placed side by side with a gap: no two boxes (and so
    no two labels) can overlap, whatever the library. A layer wider than ``max_width`` wraps onto
    more rows, so the drawing grows downwards, not into a strip no screen can show.
    """
    if not (font_size > 0 and max_width > 0 and cap >= 1):
        raise DrawingError(f"font_size and max_width must be > 0 and cap >= 1, got {font_size}, {max_width}, {cap}")
    drawn, hidden, capped = _drawn_nodes(graph, cap)
    sub = graph.subgraph(drawn)
    labels: dict[str, tuple[str, ...]] = {}
    for n in sub:
        d = sub.nodes[n]
        line = short_label(n, label_chars)
        labels[n] = (line, f"d{d['depth']} \u03a6{d['phi']}") if d["composite"] else (line,)
    char_w, line_h = MONO_EM * font_size, 1.25 * font_size
    pad_x, pad_y, gap, row_gap, layer_gap = 0.6 * font_size, 0.35 * font_size, font_size, 0.8 * font_size, 3 * font_size
    widths = {n: 2 * pad_x + char_w * max(len(s) for s in labels[n]) for n in sub}
    heights = {n: 2 * pad_y + line_h * len(labels[n]) for n in sub}
    layers: dict[int, list[str]] = {}
    for n in sub:
        layers.setdefault(sub.nodes[n]["depth"], []).append(n)
    order = _order_layers(sub, layers)
    width = max([max_width] + [widths[n] for n in sub])
    boxes: dict[str, tuple[float, float, float, float]] = {}
    y = 0.0
    for d in sorted(order, reverse=True):
        rows: list[list[str]] = [[]]
        used = 0.0
        for n in order[d]:
            need = widths[n] + (gap if rows[-1] else 0.0)
            if rows[-1] and used + need > width:
                rows.append([])
                used, need = 0.0, widths[n]
            rows[-1].append(n)
            used += need
        for row in rows:
            row_w = sum(widths[n] for n in row) + gap * (len(row) - 1)
            row_h = max(heights[n] for n in row)
            x = (width - row_w) / 2
            for n in row:
                top = y + (row_h - heights[n]) / 2
                boxes[n] = (x, top, x + widths[n], top + heights[n])
                x += widths[n] + gap
            y += row_h + row_gap
        y += layer_gap - row_gap
    height = max(y - layer_gap, 0.0)
    return DagLayout(boxes, labels, width, height, hidden, capped, font_size)


def overlaps(boxes: Mapping[Any, tuple[float, float, float, float]]) -> list[tuple[Any, Any]]:
    """Every pair of boxes ``(x0, y0, x1, y1)`` whose interiors meet (touching edges do not count)."""
    items = sorted(boxes.items(), key=lambda kv: kv[1][0])
    found = []
    for i, (a, (ax0, ay0, ax1, ay1)) in enumerate(items):
        for b, (bx0, by0, bx1, by1) in items[i + 1:]:
            if bx0 >= ax1:
                break
            if by0 < ay1 and ay0 < by1:
                found.append((a, b))
    return found


def dag_caption(graph, layout: DagLayout) -> str:
    """One line on what the drawing shows and leaves out."""
    composites = sum(1 for n in graph if graph.nodes[n]["composite"])
    text = (f"{len(graph)} tools ({len(graph) - composites} primitives, {composites} composites), "
            f"max depth {max((graph.nodes[n]['depth'] for n in graph), default=0)}")
    if layout.hidden:
        text += f"; {len(layout.hidden)} primitives called by no composite not drawn"
    if layout.capped:
        text += f"; {len(layout.capped)} more tools not drawn (at most {MAX_DRAWN_TOOLS} are)"
    return text


_COLOURS = {"composite": "#9ecae1", "primitive": "#c7e9c0", "learned": "#fdd0a2"}


def node_kind(graph, name: str, primitive_names: Iterable[str] | None = None) -> str:
    """``composite``, ``primitive`` (a starting tool) or ``learned`` (a learned tool without children)."""
    if graph.nodes[name]["composite"]:
        return "composite"
    return "primitive" if primitive_names is None or name in primitive_names else "learned"


def dag_figure(graph, *, primitive_names: Iterable[str] | None = None, title: str | None = None,
               max_width: float = 1000.0, font_size: float = 9.0):
    """A matplotlib figure of the whole library on :func:`layered_layout`'s boxes; one point of the
    layout is one point of the figure, so the figure grows with the library and the font never
    shrinks with it. Edges go from a child's top to its caller's bottom, under the boxes."""
    from matplotlib.figure import Figure
    from matplotlib.patches import FancyBboxPatch

    primitive_names = None if primitive_names is None else set(primitive_names)
    layout = layered_layout(graph, font_size=font_size, max_width=max_width)
    margin, head = 12.0, 2.2 * font_size
    w_pt, h_pt = layout.width + 2 * margin, layout.height + 2 * margin + head
    fig = Figure(figsize=(w_pt / 72.0, h_pt / 72.0))
    ax = fig.add_axes((0.0, 0.0, 1.0, 1.0))
    ax.set_axis_off()
    ax.set_xlim(-margin, layout.width + margin)
    ax.set_ylim(layout.height + margin, -margin - head)       # y downwards, as the layout
    ax.text(layout.width / 2, -margin - head / 2, title or dag_caption(graph, layout), ha="center",
            va="center", fontsize=font_size + 1)
    for u, v, d in graph.edges(data=True):
        if u in layout.boxes and v in layout.boxes:
            (ux, _), (vx, _) = layout.centre(u), layout.centre(v)
            ax.plot([vx, ux], [layout.boxes[v][1], layout.boxes[u][3]], color="#777777",
                    linewidth=0.6 * d.get("multiplicity", 1), alpha=0.6, zorder=1)
    for n, (x0, y0, x1, y1) in layout.boxes.items():
        colour = _COLOURS[node_kind(graph, n, primitive_names)]
        ax.add_patch(FancyBboxPatch((x0, y0), x1 - x0, y1 - y0, boxstyle="round,pad=0,rounding_size=3",
                                    facecolor=colour, edgecolor="#444444", linewidth=0.6, zorder=2))
        ax.text((x0 + x1) / 2, (y0 + y1) / 2, "\n".join(layout.labels[n]), ha="center", va="center",
                family="DejaVu Sans Mono", fontsize=font_size, linespacing=1.1, zorder=3, gid=f"tool-{n}")
    return fig


def draw_dag(graph, path: str | os.PathLike, *, primitive_names: Iterable[str] | None = None,
             title: str | None = None) -> str:
    """Saves :func:`dag_figure` to ``path`` (``.png`` or ``.svg``, written atomically) and returns it."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    path = os.fspath(path)
    fmt = _FORMATS.get(os.path.splitext(path)[1].lower())
    if fmt is None:
        raise DrawingError(f"draw_dag writes .png or .svg, not {path!r}")
    fig = dag_figure(graph, primitive_names=primitive_names, title=title)
    FigureCanvasAgg(fig)
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    tmp = path + ".tmp"
    fig.savefig(tmp, format=fmt, dpi=100)
    os.replace(tmp, path)
    return path

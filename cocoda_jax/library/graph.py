"""Pure graph definitions over a children map ``name -> ordered calls (with multiplicity)``.

These are the definitions of the CoCoDA paper, §A.2 of the paper digest, written plainly and recursively. The snapshot stores
depth and flat size per node at insert time instead (a node's children are already present and
immutable, so one step of the recursion suffices); these functions are the from-scratch reference
that loading and the tests compare against.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence


def depth_and_flat(children: Mapping[str, Sequence[str]]) -> tuple[dict[str, int], dict[str, int]]:
    """``d(v) = 0`` and ``flat(v) = 1`` for primitives (no calls); for composites
    ``d(v) = 1 + max d(u)`` and ``flat(v) = sum flat(u)`` over the calls ``u`` with multiplicity.

    Raises ``ValueError`` on a cycle or a call to a name that is not a key of ``children``.
    """
    cycle = find_cycle(children)
    if cycle is not None:
        raise ValueError(f"cycle: {' -> '.join(cycle)}")
    depth: dict[str, int] = {}
    flat: dict[str, int] = {}

    def visit(root: str) -> None:
        stack = [root]
        while stack:
            node = stack[-1]
            pending = [c for c in children[node] if c not in depth]
            if pending:
                missing = [c for c in pending if c not in children]
                if missing:
                    raise ValueError(f"{node!r} calls unknown {missing[0]!r}")
                stack.extend(pending)
                continue
            stack.pop()
            calls = children[node]
            depth[node] = 1 + max(depth[c] for c in calls) if calls else 0
            flat[node] = sum(flat[c] for c in calls) if calls else 1

    for name in children:
        if name not in depth:
            visit(name)
    return depth, flat


def find_cycle(children: Mapping[str, Sequence[str]]) -> list[str] | None:
    """A cycle as a path ``[a, b, ..., a]`` (first one found in name order), or ``None``.
    Calls to names outside ``children`` are ignored here."""
    state: dict[str, int] = {}  # 1 on the current path, 2 finished
    for root in sorted(children):
        if state.get(root):
            continue
        path = [root]
        iters = [iter(children[root])]
        state[root] = 1
        while iters:
            nxt = next(iters[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                iters.pop()
            elif nxt in children and state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            elif nxt in children and not state.get(nxt):
                state[nxt] = 1
                path.append(nxt)
                iters.append(iter(children[nxt]))
    return None


def reachable(start: str, edges: Mapping[str, Iterable[str]]) -> frozenset[str]:
    """Every node reachable from ``start`` through ``edges`` (``start`` itself excluded)."""
    seen: set[str] = set()
    stack = list(edges.get(start, ()))
    while stack:
        node = stack.pop()
        if node not in seen:
            seen.add(node)
            stack.extend(edges.get(node, ()))
    return frozenset(seen)

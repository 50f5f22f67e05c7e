"""The compositional tool library: Tool records, the immutable LibrarySnapshot DAG and INSERTTOOL.

Quick tour::

    add = Tool.from_source("def add(a: float, b: float) -> float:\\n    return a + b\\n",
                           "Add two numbers.", examples=[({"a": 2, "b": 3}, 5)])
    snap = LibrarySnapshot.empty(max_depth=8).insert(add)     # or raises InsertRejected(.reason)
    snap.depth("add"), snap.flat("add"), snap.phi("add"), snap.children("add")
    text = snap.to_json(); LibrarySnapshot.from_json(text) == snap

Edges, depth, flat size and Phi follow the CoCoDA paper, §A.2 of the paper digest; the rules INSERTTOOL enforces and the
decisions behind them are in :mod:`cocoda_jax.library.snapshot`.
"""

from cocoda_jax.library.analysis import BUILTIN_NAMES, CodeFacts, analyse, code_id
from cocoda_jax.library.draw import draw_subgraph, to_networkx
from cocoda_jax.library.errors import (
    InsertRejected, LibraryError, LibraryFormatError, MalformedTool, Reason, RemoveRefused, UnknownTool,
)
from cocoda_jax.library.graph import depth_and_flat, find_cycle
from cocoda_jax.library.serialize import SCHEMA
from cocoda_jax.library.snapshot import DEFAULT_MAX_DEPTH, LibrarySnapshot, shape_key
from cocoda_jax.library.tool import Tool

__all__ = [
    "BUILTIN_NAMES", "CodeFacts", "analyse", "code_id", "draw_subgraph", "to_networkx", "InsertRejected",
    "LibraryError", "LibraryFormatError", "MalformedTool", "Reason", "RemoveRefused", "UnknownTool",
    "depth_and_flat", "find_cycle", "SCHEMA", "DEFAULT_MAX_DEPTH", "LibrarySnapshot", "shape_key", "Tool",
]

"""Building a domain's starting LibrarySnapshot from primitive records, through the real INSERTTOOL."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from cocoda_jax.library import LibrarySnapshot, Tool


def snapshot_from_specs(specs: Iterable[Any], runner: Any = None, *, max_depth: int = 8) -> LibrarySnapshot:
    """Inserts every ``(source, description, pre, post, examples)`` record with all INSERTTOOL checks.

    ``runner`` runs the example/spec checks (``None``: the process-wide default sandbox). A record the
    checks refuse raises :class:`~cocoda_jax.library.InsertRejected` naming the tool and the reason.
    """
    snap = LibrarySnapshot.empty(max_depth=max_depth)
    for source, description, pre, post, examples in specs:
        tool = Tool.from_source(source, description, pre=pre, post=post, examples=examples)
        snap = snap.insert(tool, runner=runner)
    return snap


_VERIFIED: dict[str, LibrarySnapshot] = {}


def verified_library(domain: str, specs: Iterable[Any], runner: Any = None) -> LibrarySnapshot:
    """``domain``'s starting library, built by :func:`snapshot_from_specs` on the first call only.

    The snapshot is an immutable value, so later calls return the same one: the example and spec
    checks (sandbox runs) are paid once per process, not once per caller.
    """
    if domain not in _VERIFIED:
        _VERIFIED[domain] = snapshot_from_specs(specs, runner=runner)
    return _VERIFIED[domain]

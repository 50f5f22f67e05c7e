"""Trusted stateful environments inside the sandbox (BFCL's file system, message board, ...).

Some tools act on state that is not a value: ``cd(folder)`` changes a file system that ``ls()`` then
reads. Such backends are trusted code (an installed package, not the planner's or the teacher's text),
so they do not go through the static checker; they live in the worker, and sandboxed code reaches
them through one builtin, ``environment_call(kind, method, **kwargs)`` (see ``runtime.py``).

An :class:`EnvironmentPlugin` names the module the workers load, by file path, before their kernel
layers close the file system (plus the import path its own imports need). The module provides::

    warm_up() -> None            # import every backend now, while files can still be read
    open(spec) -> session        # a fresh session for one run

and a session provides ``call(kind, method, kwargs) -> value`` and ``calls``: the list of
``(kind, method, kwargs)`` this run made. A spec is a plain value (it crosses the pipe through the
value codec) holding the initial state and the calls of earlier steps, which ``open`` replays: the
state of an episode is a pure function of its spec, so steps can run on any worker, a worker never
carries state from one run to the next, and an episode replays exactly.
"""

from __future__ import annotations

import dataclasses
import os


@dataclasses.dataclass(frozen=True)
class EnvironmentPlugin:
    """The environment module every worker of a :class:`~cocoda_jax.execution.Sandbox` loads."""

    path: str
    sys_path: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not os.path.isfile(self.path):
            raise FileNotFoundError(f"environment module {self.path!r} does not exist")
        object.__setattr__(self, "sys_path", tuple(str(p) for p in self.sys_path))

    def to_config(self) -> dict:
        return {"path": os.path.abspath(self.path), "sys_path": list(self.sys_path)}

"""What a sandboxed run gives back: a structured result, never an exception from the program."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cocoda_jax.errors import CocodaError

#: Why a run failed. ``timeout``: wall clock or CPU time ran out (the worker was replaced);
#: ``memory``: the address-space limit was hit; ``syntax``: the program or a tool does not parse;
#: ``forbidden``: the static checker or a runtime check refused an operation; ``runtime``: the code
#: raised; ``no_answer``: it finished without binding ``answer``; ``worker_died``: the worker process
#: ended while running it; ``output_limit``: ``answer`` is too large or too deeply nested to return.
ERROR_KINDS = frozenset({
    "timeout", "memory", "syntax", "forbidden", "runtime", "no_answer", "worker_died", "output_limit",
})


@dataclass(frozen=True)
class ExecError:
    """A typed reason for a failed run: ``kind`` (one of :data:`ERROR_KINDS`) and a short message."""

    kind: str
    message: str

    def __post_init__(self) -> None:
        if self.kind not in ERROR_KINDS:
            raise ValueError(f"unknown error kind {self.kind!r}; expected one of {sorted(ERROR_KINDS)}")

    def __str__(self) -> str:
        return f"{self.kind}: {self.message}"


@dataclass(frozen=True)
class RunResult:
    """One program's run.

    ``value`` is the program's ``answer`` (``None`` when it failed); ``calls`` the library tools the
    program itself called, in call order with repeats (calls made inside tools are not listed);
    ``values`` the ``(name, value)`` pairs bound by the program's top-level assignments, in order;
    ``stdout`` what it printed (truncated); ``elapsed_s`` the run's wall time in the worker;
    ``environment_calls`` the ``(kind, method, kwargs)`` calls the run made on its environment
    session (at any depth, in order; empty without one). On a failure, ``calls``, ``values``,
    ``stdout`` and ``environment_calls`` hold what happened before it.
    """

    ok: bool
    value: Any = None
    error: ExecError | None = None
    calls: tuple[str, ...] = ()
    values: tuple[tuple[str, Any], ...] = ()
    stdout: str = ""
    elapsed_s: float = 0.0
    environment_calls: tuple[tuple[str, str, dict], ...] = ()

    def __post_init__(self) -> None:
        if self.ok == (self.error is not None):
            raise ValueError("a RunResult has an error exactly when it is not ok")

    @classmethod
    def failure(cls, kind: str, message: str, elapsed_s: float = 0.0) -> RunResult:
        return cls(ok=False, error=ExecError(kind, message), elapsed_s=elapsed_s)


class SandboxError(CocodaError, RuntimeError):
    """The sandbox itself cannot serve (a worker cannot start, or the sandbox is closed).

    Never raised for anything a program does: those come back as a failed :class:`RunResult`.
    """

"""Sandboxed execution of untrusted programs and tools (planner actions, teacher-proposed tools).

    from cocoda_jax.execution import Sandbox
    with Sandbox(workers=2) as sb:
        r = sb.run("x0 = add(n0, 2)\\nanswer = x0", snapshot, timeout_s=2.0, inputs={"n0": 3})
        r.ok, r.value, r.error, r.calls, r.values, r.stdout

A program is Python text that may call the library's tools and sets ``answer``. See ``sandbox.py`` for
the layers of containment and ``guard.py`` for the program format the static checker accepts.
This package imports no third-party module; a worker imports only the standard library.
"""

from cocoda_jax.execution.containment import LAYERS
from cocoda_jax.execution.default import default_sandbox
from cocoda_jax.execution.environment import EnvironmentPlugin
from cocoda_jax.execution.guard import ALLOWED_MODULES, Violation, check_source
from cocoda_jax.execution.result import ERROR_KINDS, ExecError, RunResult, SandboxError
from cocoda_jax.execution.sandbox import Sandbox

__all__ = [
    "ALLOWED_MODULES", "ERROR_KINDS", "EnvironmentPlugin", "LAYERS", "ExecError", "RunResult", "Sandbox", "SandboxError",
    "Violation", "check_source", "default_sandbox",
]

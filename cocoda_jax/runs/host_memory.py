"""Transparent huge pages for the host memory XLA:CPU allocates on every execution.

Each execution of a compiled XLA:CPU program allocates its temporary buffer afresh (one block: 98 MB
for the GRPO bench's train step) from one of JAX's worker threads. glibc serves a block that large
from that thread's arena with a fresh ``mmap`` and unmaps it on free, so every 4 KiB page is faulted
in (and zeroed by the kernel) again on every step. Measured on the bench's step, one core: 24,000
minor faults and 52 ms of kernel time per step, a third of its 176 ms.

glibc's ``glibc.malloc.hugetlb=1`` tunable (glibc >= 2.35) advises transparent huge pages on the
memory it maps, so the same block is 49 faults of 2 MiB: the step takes 128 ms. Results are unchanged
(only how pages are mapped); memory is still returned to the system on free. Keeping freed blocks
instead (``mallopt``: one arena, no ``mmap``, no trim) reached the same time but not reliably: small
allocations split the freed block and the heap grew by a whole block again on some steps.

A tunable is read when the process starts, so :func:`reexec_with_huge_pages` re-executes a launcher
(``python -m launch.<name>``: ``launch/__init__.py`` calls it first) with the tunable added to
``GLIBC_TUNABLES``; the launcher's children (a study's cells, sandbox workers) inherit it. Nothing
else is re-executed (a test run, an interpreter importing ``launch``): there, set the variable
yourself. ``COCODA_HOST_MALLOC=system`` leaves the allocator as the C library set it.
"""

from __future__ import annotations

import os
import platform
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

ENV = "COCODA_HOST_MALLOC"
TUNABLE = "glibc.malloc.hugetlb=1"
HUGE_PAGES = "huge pages (GLIBC_TUNABLES=glibc.malloc.hugetlb=1)"
_THP_MODE = Path("/sys/kernel/mm/transparent_hugepage/enabled")


def _setting(environ: Mapping[str, str]) -> str:
    value = environ.get(ENV, "huge_pages").strip().lower()
    if value not in ("huge_pages", "system"):
        raise ValueError(f"{ENV} must be 'huge_pages' or 'system', got {environ[ENV]!r}")
    return value


def unsupported_reason() -> str | None:
    """Why the tunable would do nothing on this machine (``None``: it applies)."""
    name, version = platform.libc_ver()
    if name != "glibc":
        return "not glibc"
    if tuple(int(x) for x in version.split(".")[:2]) < (2, 35):
        return f"glibc {version} < 2.35 has no glibc.malloc.hugetlb"
    try:
        mode = _THP_MODE.read_text()
    except OSError:
        return "no transparent huge pages in this kernel"
    if "[never]" in mode:
        return "transparent huge pages are off ([never])"
    return None


def _has_tunable(environ: Mapping[str, str]) -> bool:
    return any(t.strip().startswith("glibc.malloc.hugetlb=") for t in environ.get("GLIBC_TUNABLES", "").split(":"))


def reexec_command(orig_argv: Sequence[str], environ: Mapping[str, str]) -> tuple[list[str], dict[str, str]] | None:
    """The ``(argv, env)`` to re-execute a ``python [options] -m launch.<name> ...`` process with the
    tunable, or ``None`` when there is nothing to do: not a launcher, the tunable (any value) already
    set, ``COCODA_HOST_MALLOC=system``, or a machine where it does nothing."""
    if _setting(environ) == "system" or _has_tunable(environ) or unsupported_reason() is not None:
        return None
    args = list(orig_argv[1:])
    if "-m" not in args:
        return None
    m = args.index("-m")
    if m + 1 >= len(args) or not args[m + 1].startswith("launch.") or "-c" in args[:m]:
        return None
    tunables = environ.get("GLIBC_TUNABLES", "")
    env = dict(environ, GLIBC_TUNABLES=f"{tunables}:{TUNABLE}" if tunables else TUNABLE)
    return [sys.executable, *args], env


def reexec_with_huge_pages() -> None:
    """Re-execute this launcher process with the tunable when :func:`reexec_command` says so (the
    process image is replaced: same PID, arguments and environment plus the tunable); else return."""
    command = reexec_command(getattr(sys, "orig_argv", ()), os.environ)
    if command is None:
        return
    argv, env = command
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(argv[0], argv, env)


def status(environ: Mapping[str, str] | None = None) -> str:
    """How this process's allocator maps large blocks: :data:`HUGE_PAGES`, or ``"system: <why>"``."""
    environ = os.environ if environ is None else environ
    if _setting(environ) == "system":
        return f"system: {ENV}=system"
    if not _has_tunable(environ) or TUNABLE not in environ.get("GLIBC_TUNABLES", "").split(":"):
        return "system: GLIBC_TUNABLES has no glibc.malloc.hugetlb=1 (not started as python -m launch.<name>)"
    reason = unsupported_reason()
    return f"system: {reason}" if reason else HUGE_PAGES


__all__ = ["ENV", "HUGE_PAGES", "TUNABLE", "reexec_command", "reexec_with_huge_pages", "status",
           "unsupported_reason"]

"""Transparent huge pages for the host blocks XLA:CPU allocates on every execution.

Each execution of a compiled XLA:CPU program allocates its temporary buffer afresh (one block: 98 MB
for the GRPO bench's train step) from one of JAX's worker threads. glibc serves a block that large
from that thread's arena with a fresh ``mmap`` and unmaps it on free, so every 4 KiB page is faulted
in (and zeroed by the kernel) again on every step. Measured on the bench's step, one core: 24,000
minor faults and 52 ms of kernel time per step, a third of its 176 ms.

glibc's ``glibc.malloc.hugetlb=1`` tunable (glibc >= 2.35) advises transparent huge pages on the
memory it maps, so the same block is 49 faults of 2 MiB: the step takes 128 ms. Results are unchanged
(only how pages are mapped). Alone, the tunable slowed PyTorch (TRL's iteration in the same bench:
0.63-0.70 s -> 0.76 s on one core), probably because its heap, trimmed and regrown around its
tensors, then regrows in zeroed 2 MiB pages. So two more tunables keep blocks under 32 MiB in the
heap, not trimmed below 1 GiB of free space (``mmap_threshold``, ``trim_threshold``): reused without
faults; only larger blocks are mapped, in huge pages (TRL back at 0.62-0.66 s, ours unchanged). The
cost: a process keeps up to 1 GiB of freed heap per arena instead of returning it. (Keeping every
freed block instead, with ``mallopt``: one arena, no ``mmap``, no trim, reached the same step time
but not reliably: small allocations split the freed block and the heap grew by a whole block again
on some steps.)

A tunable is read when the process starts, so :func:`reexec_with_huge_pages` re-executes a launcher
(``python -m launch.<name>``: ``launch/__init__.py`` calls it first) with the tunables added to
``GLIBC_TUNABLES``; the launcher's children (a study's cells, sandbox workers) inherit them. Nothing
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
#: What a launcher adds to ``GLIBC_TUNABLES`` (each one only where the user has not set that name).
TUNABLES = ("glibc.malloc.hugetlb=1", "glibc.malloc.mmap_threshold=33554432",
            "glibc.malloc.trim_threshold=1073741824")
HUGETLB = TUNABLES[0]
_HUGETLB_NAME = HUGETLB.split("=", 1)[0]
NO_TUNABLE = "system: GLIBC_TUNABLES has no glibc.malloc.hugetlb=1 (not started as python -m launch.<name>)"
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


def _tunables(environ: Mapping[str, str]) -> list[str]:
    return [t.strip() for t in environ.get("GLIBC_TUNABLES", "").split(":") if t.strip()]


def _names(tunables: Sequence[str]) -> set[str]:
    return {t.split("=", 1)[0] for t in tunables}


def reexec_command(orig_argv: Sequence[str], environ: Mapping[str, str]) -> tuple[list[str], dict[str, str]] | None:
    """The ``(argv, env)`` to re-execute a ``python [options] -m launch.<name> ...`` process with
    :data:`TUNABLES` added to ``GLIBC_TUNABLES`` (a name the user set keeps the user's value), or
    ``None`` when there is nothing to do: not a launcher, ``glibc.malloc.hugetlb`` already set (by the
    user, or by this re-execution), ``COCODA_HOST_MALLOC=system``, or a machine where it does nothing."""
    if _setting(environ) == "system":
        return None
    args = list(orig_argv[1:])
    m = args.index("-m") if "-m" in args else len(args)
    if m + 1 >= len(args) or not args[m + 1].startswith("launch.") or "-c" in args[:m]:
        return None  # not a launcher: checked first, as it costs nothing
    current = _tunables(environ)
    names = _names(current)
    if _HUGETLB_NAME in names or unsupported_reason():
        return None
    added = [t for t in TUNABLES if t.split("=", 1)[0] not in names]
    return [sys.executable, *args], dict(environ, GLIBC_TUNABLES=":".join(current + added))


def reexec_with_huge_pages() -> None:
    """Re-execute this launcher process with the tunables when :func:`reexec_command` says so (the
    process image is replaced: same PID, arguments and environment plus the tunables); else return."""
    command = reexec_command(getattr(sys, "orig_argv", ()), os.environ)
    if command is None:
        return
    argv, env = command
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(argv[0], argv, env)


def status(environ: Mapping[str, str] | None = None) -> str:
    """How this process's allocator maps large blocks: ``"GLIBC_TUNABLES=<its value>"`` where huge
    pages apply, else ``"system: <why>"``."""
    environ = os.environ if environ is None else environ
    if _setting(environ) == "system":
        return f"system: {ENV}=system"
    if HUGETLB not in _tunables(environ):
        return NO_TUNABLE
    reason = unsupported_reason()
    return f"system: {reason}" if reason else f"GLIBC_TUNABLES={environ['GLIBC_TUNABLES']}"


__all__ = ["ENV", "HUGETLB", "NO_TUNABLE", "TUNABLES", "reexec_command", "reexec_with_huge_pages", "status",
           "unsupported_reason"]

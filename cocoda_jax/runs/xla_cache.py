"""A persistent XLA compilation cache on disk, for processes that compile the same programs.

A study's cells all build the same planner at the same batch and bucket shapes, and each runs in a
fresh process, so each compiled every program again: the one-round default job spends ~97 s of its
~630 s (one core) in 76 backend compiles. With the cache, the first cell to compile a program stores
the executable and the others load it (JAX still traces and lowers each program, ~12 s a job).

A loaded executable is the one that was compiled, so a run's numbers do not depend on whether its
programs came from the cache. The cache key covers the program, the compile options, ``XLA_FLAGS``
and the jax/jaxlib versions, so a changed program or flag compiles afresh. JAX trusts the directory's
contents (an executable found there is run): keep it inside a directory only you can write.
"""

from __future__ import annotations

from pathlib import Path


def enable(directory: str | Path) -> Path:
    """Compile through a persistent cache in ``directory`` (created if absent), every program cached
    whatever its compile time; returns the resolved path. Takes effect for programs compiled after the
    call (call it before the first compile of the programs to share)."""
    import jax  # here, not at import: a study's parent process imports this module without needing jax

    path = Path(directory).expanduser().resolve()
    path.mkdir(parents=True, exist_ok=True)
    jax.config.update("jax_compilation_cache_dir", str(path))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    return path


__all__ = ["enable"]

"""Who writes on a multi-host run.

Every process runs the whole job (the same seeds give every host the same tasks, rollouts and
library; the arrays are global across the mesh), except that a GRPO iteration's rollouts are played
in shares, each process its groups, and exchanged (:mod:`cocoda_jax.runs.shares`); every process
takes part in Orbax's checkpoint
writes, which Orbax coordinates. Every other file of the work directory (tokenizer, config.json,
metrics, library JSON, report, plots, stage 0's demonstrations) is written by the primary process
(index 0) alone; a process that must read such a file first waits at :func:`sync`. State a process
keeps for itself between rounds (the RODS pool's files) lives in :func:`host_dir`: the work
directory for the primary, ``WORKDIR/hosts/process_<i>`` for the others.

On one process (the CPU miniature, the tests) all of this reduces to: write everything, never wait.
"""

from __future__ import annotations

from typing import Any

import jax
from etils import epath

from cocoda_jax import storage


def process_index() -> int:
    return int(jax.process_index())


def is_primary() -> bool:
    """Whether this process writes the work directory's files (process 0)."""
    return process_index() == 0


def sync(tag: str) -> None:
    """All processes wait here until every one has arrived (a no-op on one process)."""
    if jax.process_count() > 1:
        from jax.experimental import multihost_utils

        multihost_utils.sync_global_devices(tag)


def host_dir(workdir: epath.Path) -> epath.Path:
    """This process's own files: ``workdir`` for the primary, ``workdir/hosts/process_<i>`` else."""
    workdir = storage.path_of(workdir)
    return workdir if is_primary() else workdir / "hosts" / f"process_{process_index()}"


class NullMetricsWriter:
    """The metrics writer of a non-primary process: takes every call, writes nothing."""

    last_step = None

    def write(self, step: int, scalars: Any) -> None:
        pass

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass


def metrics_writer(workdir: epath.Path, *, resume_step: int | None) -> Any:
    """``MetricsWriter(workdir)`` on the primary, :class:`NullMetricsWriter` elsewhere."""
    from cocoda_jax.report.metrics import MetricsWriter

    return MetricsWriter(workdir, resume_step=resume_step) if is_primary() else NullMetricsWriter()


__all__ = ["NullMetricsWriter", "host_dir", "is_primary", "metrics_writer", "process_index", "sync"]

"""Where a run's log lines go: warnings and errors on the console, everything in the work directory.

Orbax and absl log hundreds of INFO lines per run (every checkpoint write, every compile); on the
console they bury the progress bars and the report. The launchers call :func:`route_logs` once,
after flags are parsed: the console keeps WARNING and above, ``workdir/logs/run.log`` keeps INFO and
above from every logger (absl, orbax, jax, ours), appended across resumptions. On a multi-process
run each process has its own file (:func:`log_name`: ``run.log`` for process 0,
``process_<i>.log`` for process ``i``): the launcher names it when the flags give the process's
index, and :func:`route_process_logs` moves a process's lines there once ``jax.distributed`` has
told it its index. In a bucket work
directory the file is written locally (a :class:`storage.Mirror`) and uploaded whole at most every
:data:`SYNC_SECONDS` and when logging shuts down: an object store has no append.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import Any

from absl import logging as absl_logging

from cocoda_jax import storage

#: How often, at most, a remote run.log is uploaded (it is also uploaded when logging shuts down).
SYNC_SECONDS = 30.0

_FORMAT = "%(asctime)s %(levelname).1s %(name)s %(filename)s:%(lineno)d] %(message)s"


class _MirroredFileHandler(logging.FileHandler):
    """A file handler on a :class:`storage.Mirror` of a remote ``logs/`` folder: uploads the file
    every :data:`SYNC_SECONDS` at most, and on close (``logging.shutdown`` closes every handler)."""

    def __init__(self, mirror: storage.Mirror, name: str = "run.log"):
        self.mirror, self.dest, self._synced_at = mirror, mirror.dest / name, time.monotonic()
        super().__init__(mirror.local / name, encoding="utf-8")

    def emit(self, record: logging.LogRecord) -> None:
        super().emit(record)
        if time.monotonic() - self._synced_at >= SYNC_SECONDS:
            self._synced_at = time.monotonic()
            self.mirror.sync()

    def close(self) -> None:
        super().close()
        self.mirror.close()


def log_name(process_index: int = 0) -> str:
    """The log file of process ``process_index``: ``run.log`` for process 0 (the only one of a
    one-process run), ``process_<i>.log`` for the others."""
    if process_index < 0:
        raise ValueError(f"no process has index {process_index}")
    return "run.log" if process_index == 0 else f"process_{process_index}.log"


def _is_log_of(handler: logging.Handler, logs_dir: Any) -> bool:
    """Whether ``handler`` is one of :func:`route_logs`' file handlers under ``logs_dir``."""
    if isinstance(handler, _MirroredFileHandler):
        return handler.dest.parent == logs_dir
    return isinstance(handler, logging.FileHandler) and not storage.is_remote(logs_dir) and \
        Path(handler.baseFilename).parent == Path(logs_dir).resolve()


def route_process_logs(workdir: str | os.PathLike, process_index: int) -> Any:
    """Moves this process's log file under ``workdir/logs`` to :func:`log_name` of
    ``process_index`` (once the process knows its index); returns the file's path, or ``None``
    when :func:`route_logs` sent nothing there (a caller that keeps its own logging)."""
    logs_dir = storage.path_of(workdir) / "logs"
    root = logging.getLogger()
    ours = [h for h in root.handlers if _is_log_of(h, logs_dir)]
    if not ours:
        return None
    path = logs_dir / log_name(process_index)
    for handler in ours:
        if (handler.dest if isinstance(handler, _MirroredFileHandler) else Path(handler.baseFilename)) != \
                (path if storage.is_remote(path) else Path(path).resolve()):
            root.removeHandler(handler)
            handler.close()
    return route_logs(workdir, process_index=process_index)


def route_logs(workdir: str | os.PathLike, console_level: int = logging.WARNING, *, process_index: int = 0) -> Any:
    """Sends INFO+ of every logger to ``workdir/logs/`` :func:`log_name` of ``process_index``
    (``run.log`` on one process) and only ``console_level``+ to the console; returns the log
    file's path. Idempotent for one work directory."""
    path = storage.path_of(workdir) / "logs" / log_name(process_index)
    root = logging.getLogger()
    if storage.is_remote(path):
        if not any(isinstance(h, _MirroredFileHandler) and h.dest == path for h in root.handlers):
            handler = _MirroredFileHandler(storage.Mirror(path.parent, only=(path.name,)), path.name)
            handler.setLevel(logging.INFO)
            handler.setFormatter(logging.Formatter(_FORMAT))
            root.addHandler(handler)
    elif not any(isinstance(h, logging.FileHandler) and Path(h.baseFilename) == Path(path).resolve()
                 for h in root.handlers):
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        handler = logging.FileHandler(path, encoding="utf-8")
        handler.setLevel(logging.INFO)
        handler.setFormatter(logging.Formatter(_FORMAT))
        root.addHandler(handler)
    root.setLevel(min(root.level or logging.INFO, logging.INFO))
    absl_logging.set_verbosity(absl_logging.INFO)  # what reaches the handlers; the console filters below
    absl_logging.get_absl_handler().setLevel(console_level)
    for handler in root.handlers:
        if isinstance(handler, logging.StreamHandler) and not isinstance(handler, logging.FileHandler):
            handler.setLevel(console_level)
    return path


__all__ = ["log_name", "route_logs", "route_process_logs"]

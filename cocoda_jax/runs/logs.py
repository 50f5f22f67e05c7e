"""Where a run's log lines go: warnings and errors on the console, everything in the work directory.

Orbax and absl log hundreds of INFO lines per run (every checkpoint write, every compile); on the
console they bury the progress bars and the report. The launchers call :func:`route_logs` once,
after flags are parsed: the console keeps WARNING and above, ``workdir/logs/run.log`` keeps INFO and
above from every logger (absl, orbax, jax, ours), appended across resumptions. In a bucket work
directory the file is written locally (a :class:`storage.Mirror`) and uploaded whole at most every
:data:`SYNC_SECONDS` and when logging shuts down: an object store has no append.

On a multi-process run each process has its own file (:func:`log_name`: ``run.log`` for process 0,
``process_<i>.log`` for process ``i``). The launcher names it when the flags give the process's
index; where the cluster tells the index, a process logs to a private temporary file until
``jax.distributed`` has told it, and :func:`route_process_logs` then opens its own file with those
lines: a shared file never holds another process's lines, and a bucket's is never replaced by
another process's copy.
"""

from __future__ import annotations

import logging
import os
import tempfile
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


class _PendingFileHandler(logging.FileHandler):
    """The log of a process that does not know its index yet: a private temporary file, whose lines
    :func:`route_process_logs` moves to the process's own file under ``logs_dir``."""

    def __init__(self, logs_dir: Any):
        self.logs_dir = logs_dir
        fd, name = tempfile.mkstemp(prefix="cocoda-log-", suffix=".log")
        os.close(fd)
        super().__init__(name, encoding="utf-8")

    def take(self) -> str:
        """Closes and deletes the file; returns its lines."""
        self.close()
        text = Path(self.baseFilename).read_text(encoding="utf-8")
        os.unlink(self.baseFilename)
        return text


def log_name(process_index: int = 0) -> str:
    """The log file of process ``process_index``: ``run.log`` for process 0 (the only one of a
    one-process run), ``process_<i>.log`` for the others."""
    if process_index < 0:
        raise ValueError(f"no process has index {process_index}")
    return "run.log" if process_index == 0 else f"process_{process_index}.log"


def _file_handlers(logs_dir: Any) -> list[logging.Handler]:
    """The root logger's handlers that :func:`route_logs` added for ``logs_dir``."""
    out = []
    for h in logging.getLogger().handlers:
        if isinstance(h, _PendingFileHandler):
            ours = h.logs_dir == logs_dir
        elif isinstance(h, _MirroredFileHandler):
            ours = h.dest.parent == logs_dir
        else:
            ours = (isinstance(h, logging.FileHandler) and not storage.is_remote(logs_dir)
                    and Path(h.baseFilename).parent == Path(logs_dir).resolve())
        if ours:
            out.append(h)
    return out


def route_process_logs(workdir: str | os.PathLike, process_index: int) -> Any:
    """Once the process knows its index: its log under ``workdir/logs`` becomes :func:`log_name`
    of ``process_index``, opened with the lines it logged while the index was unknown
    (``route_logs(..., process_index=None)``); returns the file's path, or ``None`` when
    :func:`route_logs` sent nothing there (a caller that keeps its own logging)."""
    logs_dir = storage.path_of(workdir) / "logs"
    handlers = _file_handlers(logs_dir)
    pending = [h for h in handlers if isinstance(h, _PendingFileHandler)]
    if not pending:
        return logs_dir / log_name(process_index) if handlers else None
    root = logging.getLogger()
    carried = ""
    for handler in pending:
        root.removeHandler(handler)
        carried += handler.take()
    path = route_logs(workdir, process_index=process_index)
    if carried:
        own = next(h for h in _file_handlers(logs_dir) if not isinstance(h, _PendingFileHandler))
        own.acquire()
        try:
            own.stream.write(carried)
            own.flush()
        finally:
            own.release()
    return path


def route_logs(workdir: str | os.PathLike, console_level: int = logging.WARNING, *,
               process_index: int | None = 0) -> Any:
    """Sends INFO+ of every logger to ``workdir/logs/`` :func:`log_name` of ``process_index``
    (``run.log`` on one process) and only ``console_level``+ to the console; returns the log
    file's path. ``process_index=None`` (a process of a multi-process run that learns its index
    later): a private temporary file until :func:`route_process_logs`. Idempotent for one work
    directory."""
    logs_dir = storage.path_of(workdir) / "logs"
    root = logging.getLogger()
    if process_index is None:
        pending = next((h for h in _file_handlers(logs_dir) if isinstance(h, _PendingFileHandler)), None)
        if pending is None:
            pending = _PendingFileHandler(logs_dir)
            pending.setLevel(logging.INFO)
            pending.setFormatter(logging.Formatter(_FORMAT))
            root.addHandler(pending)
        _console(root, console_level)
        return Path(pending.baseFilename)
    path = logs_dir / log_name(process_index)
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
    _console(root, console_level)
    return path


def _console(root: logging.Logger, console_level: int) -> None:
    """INFO+ reaches the handlers; the console's handlers show ``console_level``+ only."""
    root.setLevel(min(root.level or logging.INFO, logging.INFO))
    absl_logging.set_verbosity(absl_logging.INFO)  # what reaches the handlers; the console filters below
    absl_logging.get_absl_handler().setLevel(console_level)
    for handler in root.handlers:
        if isinstance(handler, logging.StreamHandler) and not isinstance(handler, logging.FileHandler):
            handler.setLevel(console_level)


__all__ = ["log_name", "route_logs", "route_process_logs"]

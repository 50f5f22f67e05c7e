"""Where a run's log lines go: warnings and errors on the console, everything in the work directory.

Orbax and absl log hundreds of INFO lines per run (every checkpoint write, every compile); on the
console they bury the progress bars and the report. The launchers call :func:`route_logs` once,
after flags are parsed: the console keeps WARNING and above, ``workdir/logs/run.log`` keeps INFO and
above from every logger (absl, orbax, jax, ours), appended across resumptions. In a bucket work
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

    def __init__(self, mirror: storage.Mirror):
        self.mirror, self.dest, self._synced_at = mirror, mirror.dest / "run.log", time.monotonic()
        super().__init__(mirror.local / "run.log", encoding="utf-8")

    def emit(self, record: logging.LogRecord) -> None:
        super().emit(record)
        if time.monotonic() - self._synced_at >= SYNC_SECONDS:
            self._synced_at = time.monotonic()
            self.mirror.sync()

    def close(self) -> None:
        super().close()
        self.mirror.close()


def route_logs(workdir: str | os.PathLike, console_level: int = logging.WARNING) -> Any:
    """Sends INFO+ of every logger to ``workdir/logs/run.log`` and only ``console_level``+ to the
    console; returns the log file's path. Idempotent for one work directory."""
    path = storage.path_of(workdir) / "logs" / "run.log"
    root = logging.getLogger()
    if storage.is_remote(path):
        if not any(isinstance(h, _MirroredFileHandler) and h.dest == path for h in root.handlers):
            handler = _MirroredFileHandler(storage.Mirror(path.parent, only=(path.name,)))
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


__all__ = ["route_logs"]

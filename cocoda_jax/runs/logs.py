"""Where a run's log lines go: warnings and errors on the console, everything in the work directory.

Orbax and absl log hundreds of INFO lines per run (every checkpoint write, every compile); on the
console they bury the progress bars and the report. The launchers call :func:`route_logs` once,
after flags are parsed: the console keeps WARNING and above, ``workdir/logs/run.log`` keeps INFO and
above from every logger (absl, orbax, jax, ours), appended across resumptions.
"""

from __future__ import annotations

import logging
from pathlib import Path

from absl import logging as absl_logging

_FORMAT = "%(asctime)s %(levelname).1s %(name)s %(filename)s:%(lineno)d] %(message)s"


def route_logs(workdir: str | Path, console_level: int = logging.WARNING) -> Path:
    """Sends INFO+ of every logger to ``workdir/logs/run.log`` and only ``console_level``+ to the
    console; returns the log file's path. Idempotent for one work directory."""
    path = Path(workdir) / "logs" / "run.log"
    path.parent.mkdir(parents=True, exist_ok=True)
    root = logging.getLogger()
    if not any(isinstance(h, logging.FileHandler) and Path(h.baseFilename) == path.resolve() for h in root.handlers):
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

"""The process-wide default sandbox: started on first use, closed at exit."""

from __future__ import annotations

import atexit
import os
import threading

from cocoda_jax.execution.sandbox import Sandbox

_lock = threading.Lock()
_instance: Sandbox | None = None
_registered = False


def default_sandbox() -> Sandbox:
    """The shared :class:`Sandbox` of this process (2 workers, default limits).

    A new one is started after ``fork`` (the parent's workers belong to the parent) or after it was closed.
    """
    global _instance, _registered
    with _lock:
        if _instance is None or _instance.closed or _instance._owner_pid != os.getpid():
            _instance = Sandbox().start()
            if not _registered:
                atexit.register(_close_default)
                _registered = True
        return _instance


def _close_default() -> None:
    if _instance is not None:
        _instance.close()

"""The trainer's handle on one worker process: spawn, send a frame, read frames, kill."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from cocoda_jax.execution import framing

WORKER_SCRIPT = str(Path(__file__).with_name("worker.py"))

# -B: never write bytecode (the worker starts as root); -s -S: no user or site packages; -P: no script
# directory on sys.path. Not -I: it would also ignore PYTHONHASHSEED, and a fixed hash seed is what
# makes set iteration order, and so results, the same in every worker. The environment is ours alone.
_FLAGS = ("-B", "-s", "-S", "-P")
_ENV = {"PYTHONHASHSEED": "0", "MALLOC_ARENA_MAX": "1", "LC_ALL": "C.UTF-8"}


class WorkerProcess:
    """A started worker. ``fd`` is the reply pipe to poll; frames come out of :meth:`read`."""

    def __init__(self, config: dict, python: str | None = None):
        self.started = time.monotonic()
        self.proc = subprocess.Popen(
            [python or sys.executable, *_FLAGS, WORKER_SCRIPT, json.dumps(config)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=dict(_ENV),
            cwd="/", close_fds=True, start_new_session=True)
        self.pid = self.proc.pid
        self.fd = self.proc.stdout.fileno()
        flags = fcntl.fcntl(self.proc.stderr.fileno(), fcntl.F_GETFL)
        fcntl.fcntl(self.proc.stderr.fileno(), fcntl.F_SETFL, flags | os.O_NONBLOCK)
        self._reader = framing.FrameReader()
        self.closed = False

    def send(self, message: object) -> bool:
        """Writes one frame; ``False`` if the worker is gone."""
        if self.closed or self.proc.poll() is not None:
            return False
        try:
            framing.write_frame(self.proc.stdin.fileno(), message)
        except (BrokenPipeError, OSError):
            return False
        return True

    def read(self) -> list[object] | None:
        """The frames now complete on the reply pipe (call when it is readable); ``None`` at end of file.

        Raises :class:`framing.FrameError` when the worker sends malformed bytes.
        """
        data = os.read(self.fd, 1 << 20)
        if not data:
            return None
        return self._reader.feed(data)

    def kill(self) -> None:
        """Kills the worker (and anything in its session) and reaps it."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                self.proc.kill()
        self._reap()

    def close(self, grace_s: float = 0.5) -> None:
        """Asks the worker to exit (end of file on its request pipe), then kills it if it lingers."""
        if self.closed:
            return
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            pass
        self.kill()

    def _reap(self) -> None:
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL does not take this long
            pass
        if not self.closed:
            self.closed = True
            for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
                try:
                    stream.close()
                except OSError:
                    pass

    def death(self) -> str:
        """Why the worker ended (exit status or signal) and the tail of what it wrote to stderr."""
        try:
            self.proc.wait(timeout=1)
        except subprocess.TimeoutExpired:
            return "the worker stopped responding"
        code = self.proc.returncode
        if code < 0:
            try:
                what = f"killed by {signal.Signals(-code).name}"
            except ValueError:
                what = f"killed by signal {-code}"
        else:
            what = f"exited with status {code}"
        tail = b""
        if not self.closed:
            try:
                tail = self.proc.stderr.read() or b""
            except OSError:
                pass
        text = tail[-600:].decode("utf-8", "replace").strip()
        return f"the worker {what}" + (f": {text}" if text else "")

"""Length-prefixed JSON frames over pipes: the only language the trainer and a worker share.

A frame is a 4-byte big-endian length followed by that many bytes of ASCII JSON. Values inside are
encoded with :mod:`cocoda_jax.values`, never pickled: the trainer must be able to read a worker's
bytes without running anything the worker chose. This module imports only the standard library: the
sandbox worker loads it by file path.
"""

from __future__ import annotations

import json
import os
import struct

_HEADER = struct.Struct(">I")

#: Frames above this size are a protocol violation (the worker bounds everything it sends far below).
MAX_FRAME_BYTES = 64 * 1024 * 1024


class FrameError(ValueError):
    """Bytes on a pipe that are not a well-formed frame."""


def pack(message: object) -> bytes:
    body = json.dumps(message, separators=(",", ":"), ensure_ascii=True, allow_nan=False).encode("ascii")
    return _HEADER.pack(len(body)) + body


def write_frame(fd: int, message: object) -> None:
    """Writes one whole frame to ``fd`` (blocking)."""
    write_bytes(fd, pack(message))


def write_bytes(fd: int, data: bytes) -> None:
    """Writes all of ``data`` (an already packed frame) to ``fd``."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def read_frame(fd: int) -> object | None:
    """Reads one frame from ``fd`` (blocking); ``None`` at a clean end of file."""
    header = _read_exactly(fd, _HEADER.size)
    if header is None:
        return None
    (size,) = _HEADER.unpack(header)
    if size > MAX_FRAME_BYTES:
        raise FrameError(f"frame of {size} bytes exceeds the limit of {MAX_FRAME_BYTES}")
    body = _read_exactly(fd, size)
    if body is None:
        raise FrameError("end of file inside a frame")
    return json.loads(body)


def _read_exactly(fd: int, size: int) -> bytes | None:
    chunks, got = [], 0
    while got < size:
        chunk = os.read(fd, min(size - got, 1 << 20))
        if not chunk:
            if got:
                raise FrameError("end of file inside a frame")
            return None
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


class FrameReader:
    """Incremental parser for the non-blocking side: feed it bytes, take out whole frames."""

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[object]:
        self._buffer += data
        frames = []
        while len(self._buffer) >= _HEADER.size:
            (size,) = _HEADER.unpack_from(self._buffer)
            if size > MAX_FRAME_BYTES:
                raise FrameError(f"frame of {size} bytes exceeds the limit of {MAX_FRAME_BYTES}")
            end = _HEADER.size + size
            if len(self._buffer) < end:
                break
            body = bytes(self._buffer[_HEADER.size:end])
            del self._buffer[:end]
            try:
                frames.append(json.loads(body))
            except ValueError as exc:
                raise FrameError(f"frame is not JSON: {exc}") from None
        return frames

"""Typed errors of RODS state: bad input names what is wrong and where."""

from __future__ import annotations

from cocoda_jax.errors import CocodaError


class RodsStateError(CocodaError, ValueError):
    """A RODS value (tracker, pool, task record) is malformed. ``where`` says which field or file."""

    def __init__(self, where: str, message: str):
        super().__init__(f"{where}: {message}")
        self.where = where
        self.message = message


class CorruptStateError(RodsStateError):
    """A saved RODS file cannot be read back (truncated, bad JSON, hash mismatch, wrong version)."""

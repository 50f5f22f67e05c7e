"""The root of every error the package raises on purpose.

``except CocodaError`` catches each typed error of cocoda_jax and its third_party adapters (a bad
config, a malformed tool, a corrupt checkpoint, a refused sandbox action, ...) and never a bug. Each
family keeps the builtin base its callers already catch (``ValueError`` for bad input, ``RuntimeError``
for a failed service), so the root adds a handle without taking one away. The modules the sandbox
worker loads by file path (``values``, ``execution.framing``, ``execution.runtime``) import the
standard library only, so their errors stay outside the root; the trainer sees their failures as
``SandboxError``.
"""

from __future__ import annotations


class CocodaError(Exception):
    """A typed error of cocoda_jax: it names what is wrong and where, and nothing saved is lost."""


class ConfigError(CocodaError, ValueError):
    """A config is refused: a key is unknown, missing, inconsistent or names something unsupported
    (the one config error of the project), raised before a run writes anything."""


__all__ = ["CocodaError", "ConfigError"]

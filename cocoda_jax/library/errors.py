"""Typed errors of the library: every refusal names its reason, the tool, and what is wrong."""

from __future__ import annotations

import enum

from cocoda_jax.errors import CocodaError


class Reason(enum.StrEnum):
    """Machine-readable INSERTTOOL rejection codes (a ``StrEnum``: compares equal to its text)."""

    DUPLICATE_CODE = "duplicate_code"
    DUPLICATE_BEHAVIOUR = "duplicate_behaviour"
    UNKNOWN_DEPENDENCY = "unknown_dependency"
    CYCLE = "cycle"
    ILL_TYPED_CALL = "ill_typed_call"
    EXAMPLE_FAILED = "example_failed"
    SPEC_VIOLATED = "spec_violated"
    DEPTH_EXCEEDED = "depth_exceeded"
    NAME_CLASH = "name_clash"
    MALFORMED = "malformed"


class LibraryError(CocodaError):
    """Base of every error this package raises on purpose."""


class InsertRejected(LibraryError):
    """INSERTTOOL refused a tool; the snapshot it was called on is unchanged (it is immutable).

    ``reason`` is a :class:`Reason` (compare with plain strings such as ``"cycle"``), ``tool_name``
    the rejected tool's name (``None`` when the source was too broken to have one), ``detail`` the
    human explanation.
    """

    def __init__(self, reason: Reason | str, tool_name: str | None, detail: str):
        self.reason = Reason(reason)
        self.tool_name = tool_name
        self.detail = detail
        who = f"tool {tool_name!r}" if tool_name else "tool"
        super().__init__(f"{who} rejected ({self.reason}): {detail}")

    def __reduce__(self):
        return (type(self), (str(self.reason), self.tool_name, self.detail))


class MalformedTool(InsertRejected, ValueError):
    """A tool record that cannot be built at all (bad source, signature, spec or examples).

    Raised by :meth:`Tool.from_source`; an ``InsertRejected`` with reason ``malformed`` so that a
    caller that builds and inserts proposals handles both with one ``except``.
    """

    def __init__(self, tool_name: str | None, detail: str):
        super().__init__(Reason.MALFORMED, tool_name, detail)

    def __reduce__(self):
        return (type(self), (self.tool_name, self.detail))


class RemoveRefused(LibraryError):
    """``remove`` refused: ``reason`` is ``"has_dependents"`` and ``dependents`` names them."""

    def __init__(self, reason: str, tool_name: str, dependents: tuple[str, ...] = ()):
        self.reason = reason
        self.tool_name = tool_name
        self.dependents = tuple(dependents)
        super().__init__(f"cannot remove tool {tool_name!r} ({reason}): still called by "
                         f"{', '.join(self.dependents)}")

    def __reduce__(self):
        return (type(self), (self.reason, self.tool_name, self.dependents))


class UnknownTool(LibraryError, KeyError):
    """A name that is not in the snapshot was asked for."""

    def __init__(self, name: str):
        self.tool_name = name
        super().__init__(name)

    def __str__(self) -> str:
        return f"no tool named {self.tool_name!r} in the library"


class LibraryFormatError(LibraryError, ValueError):
    """A serialised library that is not well-formed; ``where`` says which part (e.g. ``tools[3] 'mean'``)."""

    def __init__(self, where: str, detail: str):
        self.where = where
        self.detail = detail
        super().__init__(f"library JSON, {where}: {detail}")

    def __reduce__(self):
        return (type(self), (self.where, self.detail))

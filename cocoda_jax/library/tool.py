"""The tool record: one executable function with its four layers of description.

L1 the typed signature (read from the source's annotations, never typed in twice), L2 a natural-language
description, L3 a specification (pre- and post-conditions as Python boolean expressions over the
arguments and ``result``, plus a free-text complexity note), L4 worked examples
``(args_dict, expected_result)``.

A :class:`Tool` holds no edges: which library tools it calls is a fact about its code relative to a
library, derived by :class:`~cocoda_jax.library.snapshot.LibrarySnapshot`.
"""

from __future__ import annotations

import ast
import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

from cocoda_jax import values
from cocoda_jax.library.analysis import analyse
from cocoda_jax.library.errors import MalformedTool
from cocoda_jax.types import Signature, TypeSyntaxError, signature_from_ast

Example = tuple[dict[str, Any], Any]


@dataclasses.dataclass(frozen=True)
class Tool:
    """An immutable tool record; build it with :meth:`from_source`, which checks and normalises.

    ``id`` is the content hash of the normalised code (see :func:`analysis.code_id`): the same code
    under another name, with other comments or another docstring, has the same id.
    Example values are canonicalised through :mod:`cocoda_jax.values` (``set`` becomes ``frozenset``,
    argument dicts follow the parameter order), so a record survives a JSON round trip unchanged.
    Treat the example dicts as read-only.
    """

    name: str
    source: str
    signature: Signature
    description: str
    pre: tuple[str, ...]
    post: tuple[str, ...]
    examples: tuple[Example, ...]
    complexity: str | None
    id: str

    def __hash__(self) -> int:  # examples hold dicts; everything else identifies the record
        return hash((self.name, self.id, self.signature, self.description, self.pre, self.post,
                     self.complexity, len(self.examples)))

    @classmethod
    def from_source(cls, source: str, description: str, pre: Iterable[str] | str = (),
                    post: Iterable[str] | str = (), examples: Iterable[tuple[Mapping[str, Any], Any]] = (),
                    complexity: str | None = None) -> "Tool":
        """Checks and builds a record; raises :class:`MalformedTool` naming what is wrong.

        Every example must bind exactly the tool's parameters (defaults are not filled in), so that
        it can be replayed positionally against another tool of the same signature.
        """
        facts = analyse(source)
        name = facts.name
        try:
            sig = signature_from_ast(facts.function, source)
        except TypeSyntaxError as err:
            raise MalformedTool(name, f"bad signature: {err}") from None
        if not isinstance(description, str):
            raise MalformedTool(name, f"the description must be a str, got {type(description).__name__}")
        if complexity is not None and not isinstance(complexity, str):
            raise MalformedTool(name, f"complexity must be a str or None, got {type(complexity).__name__}")
        params = tuple(p.name for p in sig.params)
        pre_t = _conditions(name, "pre", pre, params, allow_result=False)
        post_t = _conditions(name, "post", post, params, allow_result=True)
        if post_t and "result" in params:
            raise MalformedTool(name, "a parameter named 'result' clashes with 'result' in the post-conditions")
        examples_t = tuple(_example(name, i, ex, params) for i, ex in enumerate(examples))
        return cls(name=name, source=source, signature=sig, description=description, pre=pre_t,
                   post=post_t, examples=examples_t, complexity=complexity, id=facts.code_id)

    @property
    def param_names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.signature.params)


def _conditions(name: str, kind: str, conditions: Iterable[str] | str, params: tuple[str, ...],
                allow_result: bool) -> tuple[str, ...]:
    if isinstance(conditions, str):  # a lone condition, not a sequence of characters
        conditions = (conditions,)
    out = []
    for i, text in enumerate(conditions):
        if not isinstance(text, str) or not text.strip():
            raise MalformedTool(name, f"{kind}[{i}] must be a non-empty str, got {text!r}")
        try:
            tree = ast.parse(text.strip(), mode="eval")
        except SyntaxError as err:
            caret = " " * max((err.offset or 1) - 1, 0) + "^"
            raise MalformedTool(name, f"{kind}[{i}] is not a Python expression ({err.msg}):\n"
                                      f"    {text.strip()}\n    {caret}") from None
        if not allow_result and "result" not in params and any(
                isinstance(n, ast.Name) and n.id == "result" for n in ast.walk(tree)):
            raise MalformedTool(name, f"pre[{i}] uses 'result', which only post-conditions can see: {text!r}")
        out.append(text.strip())
    return tuple(out)


def _example(name: str, index: int, example: Any, params: tuple[str, ...]) -> Example:
    try:
        args, expected = example
    except (TypeError, ValueError):
        raise MalformedTool(name, f"examples[{index}] must be a pair (args_dict, expected_result)") from None
    if not isinstance(args, Mapping):
        raise MalformedTool(name, f"examples[{index}]: the arguments must be a dict, got {type(args).__name__}")
    if set(args) != set(params):
        missing = [p for p in params if p not in args]
        extra = sorted(map(str, set(args) - set(params)))
        raise MalformedTool(name, f"examples[{index}] must bind exactly the parameters {list(params)}"
                                  f" (missing {missing}, unknown {extra})")
    try:
        canonical_args = {p: _canonical(args[p]) for p in params}
        canonical_expected = _canonical(expected)
    except values.UnencodableValue as err:
        raise MalformedTool(name, f"examples[{index}]: {err}") from None
    return canonical_args, canonical_expected


def _canonical(value: Any) -> Any:
    """The value as it comes back from JSON: a deep, faithful copy in the codec's types."""
    return values.decode(values.encode(value, lossy=False))

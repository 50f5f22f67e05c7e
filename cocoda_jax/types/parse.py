"""Parsing types and signatures from text and from the annotations of Python source.

Grammar of the text form (``str()`` of a term prints exactly this, so parsing round-trips)::

    signature := "(" [param ("," param)* [","]] ")" "->" type
    param     := NAME ":" type | type           # names may be omitted (queries)
    type      := atom ["|" atom]                # only ``X | None`` / ``None | X`` (-> Optional[X])
    atom      := NAME ["[" args "]"]
    args      := "()" | type ("," type)* [","] | type "," "..."

Names: ``int float bool str None Any list dict tuple Optional``, the conveniences ``List Dict Tuple
NoneType`` and ``Union[X, None]``, an optional ``typing.``/``builtins.`` prefix, the domain types of
:data:`~cocoda_jax.types.terms.DOMAIN_TYPES`, and type variables (one capital letter plus optional
digits). A bare ``list``/``dict``/``tuple`` means ``list[Any]``/``dict[Any, Any]``/``tuple[Any, ...]``
(as in Python). Every other name is an error: a typo must not silently become a wildcard.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from cocoda_jax.errors import CocodaError
from cocoda_jax.types.terms import (
    ANY, BUILTIN_ARITY, DOMAIN_TYPES, NONE, VARIADIC_TUPLE, Param, Signature, TCon, TVar, Type,
    is_type_var_name,
)


class TypeSyntaxError(CocodaError, ValueError):
    """A malformed type or signature; points at the offending place.

    ``text`` is the whole input (the type text, or the Python source), ``position`` is a 0-based
    character offset into ``text`` for type text, or a ``(line, column)`` pair (1-based line,
    0-based character column) for Python source. ``reason`` is the message without the location.
    """

    def __init__(self, reason: str, text: str, position: int | tuple[int, int]):
        self.reason = reason
        self.text = text
        self.position = position
        super().__init__(self._render())

    def _render(self) -> str:
        lines = self.text.split("\n")
        if isinstance(self.position, tuple):
            line_no, col = self.position
            where = f"line {line_no}, column {col}"
        else:
            before = self.text[: self.position]
            line_no = before.count("\n") + 1
            col = self.position - (before.rfind("\n") + 1)
            where = f"position {self.position}"
        shown = lines[line_no - 1] if 0 < line_no <= len(lines) else ""
        return f"{self.reason} at {where}\n  {shown}\n  {' ' * col}^"


# ---------------------------------------------------------------------------------------------
# Name resolution, shared by the text parser and the annotation reader.

class _Bad(Exception):
    """Internal: a construction error; the front end adds the position. ``arg`` picks an argument."""

    def __init__(self, reason: str, arg: int | None = None):
        super().__init__(reason)
        self.reason = reason
        self.arg = arg


_ALIASES = {"List": "list", "Dict": "dict", "Tuple": "tuple", "NoneType": "None"}
_MODULE_PREFIXES = ("typing.", "builtins.")
_BARE_DEFAULTS = {"list": TCon("list", (ANY,)), "dict": TCon("dict", (ANY, ANY)),
                  "tuple": TCon(VARIADIC_TUPLE, (ANY,))}


def _canonical_name(name: str) -> str:
    for prefix in _MODULE_PREFIXES:
        if name.startswith(prefix):
            name = name[len(prefix):]
            break
    return _ALIASES.get(name, name)


def _construct(raw: str, args: list[Type] | None, variadic: bool = False) -> Type:
    """Builds the term for ``raw[args]`` (``args is None``: no brackets) or raises :class:`_Bad`."""
    name = _canonical_name(raw)
    if "." in name:
        raise _Bad(f"unknown type name {raw!r}")
    if name == "Any" or is_type_var_name(name):
        if args is not None:
            raise _Bad(f"{name!r} takes no type arguments")
        return ANY if name == "Any" else TVar(name)
    if name == "Union":
        if args is None or len(args) != 2 or variadic or NONE not in args:
            raise _Bad("only Union[X, None] is supported (it means Optional[X])")
        other = args[1] if args[0] == NONE else args[0]
        return TCon("Optional", (other,))
    if name == "tuple":
        if args is None:
            return _BARE_DEFAULTS["tuple"]
        if variadic:
            if len(args) != 1:
                raise _Bad("a variadic tuple has exactly one element type: tuple[T, ...]")
            return TCon(VARIADIC_TUPLE, (args[0],))
        return TCon("tuple", tuple(args))
    if variadic:
        raise _Bad(f"'...' is only allowed in tuple[T, ...], not in {name}")
    if name in BUILTIN_ARITY:
        arity = BUILTIN_ARITY[name]
    elif name in DOMAIN_TYPES:
        arity = DOMAIN_TYPES[name]
    else:
        raise _Bad(f"unknown type name {raw!r}")
    if args is None:
        if arity == 0:
            return TCon(name)
        if name in _BARE_DEFAULTS:
            return _BARE_DEFAULTS[name]
        raise _Bad(f"{name} needs {arity} type argument{'s' if arity != 1 else ''}")
    if len(args) != arity:
        if arity == 0:
            raise _Bad(f"{name} takes no type arguments")
        raise _Bad(f"{name} takes {arity} type argument{'s' if arity != 1 else ''}, got {len(args)}",
                   arg=min(len(args), arity) if len(args) > arity else None)
    return TCon(name, tuple(args))


# ---------------------------------------------------------------------------------------------
# Text front end: tokenizer + recursive descent.

_TOKEN_RE = re.compile(r"""
    (?P<ws>\s+)
  | (?P<name>[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)
  | (?P<arrow>->)
  | (?P<ellipsis>\.\.\.)
  | (?P<punct>[\[\](),:|])
""", re.VERBOSE)


@dataclass(frozen=True, slots=True)
class _Tok:
    kind: str  # "name", "->", "...", one punctuation character, or "end"
    text: str
    pos: int


def _tokenize(text: str) -> list[_Tok]:
    toks: list[_Tok] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN_RE.match(text, pos)
        if m is None:
            raise TypeSyntaxError(f"unexpected character {text[pos]!r}", text, pos)
        kind = m.lastgroup
        if kind == "name":
            toks.append(_Tok("name", m.group(), pos))
        elif kind == "arrow":
            toks.append(_Tok("->", "->", pos))
        elif kind == "ellipsis":
            toks.append(_Tok("...", "...", pos))
        elif kind == "punct":
            toks.append(_Tok(m.group(), m.group(), pos))
        pos = m.end()
    toks.append(_Tok("end", "", len(text)))
    return toks


def _describe(tok: _Tok) -> str:
    return "end of input" if tok.kind == "end" else repr(tok.text)


class _Parser:
    def __init__(self, text: str):
        self.text = text
        self.toks = _tokenize(text)
        self.i = 0

    @property
    def tok(self) -> _Tok:
        return self.toks[self.i]

    def error(self, reason: str, pos: int | None = None) -> TypeSyntaxError:
        return TypeSyntaxError(reason, self.text, self.tok.pos if pos is None else pos)

    def expect(self, kind: str, what: str) -> _Tok:
        tok = self.tok
        if tok.kind != kind:
            raise self.error(f"expected {what}, found {_describe(tok)}")
        self.i += 1
        return tok

    def accept(self, kind: str) -> bool:
        if self.tok.kind == kind:
            self.i += 1
            return True
        return False

    def end(self) -> None:
        if self.tok.kind != "end":
            raise self.error(f"unexpected {_describe(self.tok)} after the end")

    def type(self) -> Type:
        left = self.atom()
        if self.tok.kind == "|":
            bar = self.tok.pos
            self.i += 1
            right = self.atom()
            if self.tok.kind == "|":
                raise self.error("only a two-way union 'X | None' is supported")
            if right == NONE and left != NONE:
                return TCon("Optional", (left,))
            if left == NONE and right != NONE:
                return TCon("Optional", (right,))
            if left == NONE and right == NONE:
                return TCon("Optional", (NONE,))
            raise self.error("only 'X | None' unions are supported (they mean Optional[X])", bar)
        return left

    def atom(self) -> Type:
        tok = self.tok
        if tok.kind != "name":
            raise self.error(f"expected a type, found {_describe(tok)}")
        self.i += 1
        if self.tok.kind != "[":
            try:
                return _construct(tok.text, None)
            except _Bad as bad:
                raise self.error(bad.reason, tok.pos) from None
        self.i += 1
        args: list[Type] = []
        arg_pos: list[int] = []
        variadic = False
        if self.tok.kind == "(":  # tuple[()]
            paren = self.tok.pos
            self.i += 1
            self.expect(")", "')' of the empty tuple '()'")
            if _canonical_name(tok.text) != "tuple":
                raise self.error("'()' is only allowed in tuple[()]", paren)
        else:
            while True:
                arg_pos.append(self.tok.pos)
                args.append(self.type())
                if not self.accept(","):
                    break
                if self.tok.kind == "...":
                    variadic = True
                    self.i += 1
                    break
                if self.tok.kind == "]":
                    break
        self.expect("]", "',' or ']'")
        try:
            return _construct(tok.text, args, variadic)
        except _Bad as bad:
            pos = arg_pos[bad.arg] if bad.arg is not None and bad.arg < len(arg_pos) else tok.pos
            raise self.error(bad.reason, pos) from None

    def signature(self) -> Signature:
        self.expect("(", "'(' starting the parameter list")
        params: list[Param] = []
        seen: dict[str, int] = {}
        while self.tok.kind != ")":
            name = ""
            if self.tok.kind == "name" and self.toks[self.i + 1].kind == ":":
                name_tok = self.tok
                name = name_tok.text
                if not name.isidentifier():
                    raise self.error(f"parameter name {name!r} is not an identifier", name_tok.pos)
                if name in seen:
                    raise self.error(f"duplicate parameter name {name!r}", name_tok.pos)
                seen[name] = name_tok.pos
                self.i += 2
            params.append(Param(name, self.type()))
            if not self.accept(","):
                break
        self.expect(")", "',' or ')'")
        self.expect("->", "'->' before the result type")
        result = self.type()
        self.end()
        return Signature(tuple(params), result)


def parse_type(text: str) -> Type:
    """Parses a type such as ``dict[str, list[float]]``; raises :class:`TypeSyntaxError`."""
    if not isinstance(text, str):
        raise TypeError(f"parse_type expects str, got {type(text).__name__}")
    p = _Parser(text)
    t = p.type()
    p.end()
    return t


def parse_signature(text: str) -> Signature:
    """Parses ``(xs: list[float], k: int) -> float``; raises :class:`TypeSyntaxError`."""
    if not isinstance(text, str):
        raise TypeError(f"parse_signature expects str, got {type(text).__name__}")
    return _Parser(text).signature()


# ---------------------------------------------------------------------------------------------
# Python-source front end: annotations read through ``ast``.

def _char_col(source_lines: list[str] | None, lineno: int, byte_col: int) -> int:
    """``ast`` columns are UTF-8 byte offsets; errors show character columns."""
    if not source_lines or not 0 < lineno <= len(source_lines):
        return byte_col
    return len(source_lines[lineno - 1].encode("utf-8")[:byte_col].decode("utf-8", errors="ignore"))


class _AnnotationReader:
    def __init__(self, source: str | None):
        self.source = source
        self.lines = source.split("\n") if source is not None else None

    def error(self, reason: str, node: ast.AST) -> TypeSyntaxError:
        line = getattr(node, "lineno", 1)
        col = _char_col(self.lines, line, getattr(node, "col_offset", 0))
        text = self.source if self.source is not None else ast.unparse(node)
        if self.source is None:
            line, col = 1, 0
        return TypeSyntaxError(reason, text, (line, col))

    def type(self, node: ast.expr) -> Type:
        if isinstance(node, ast.Constant):
            if node.value is None:
                return NONE
            if isinstance(node.value, str):  # a string (forward-reference) annotation
                try:
                    return parse_type(node.value)
                except TypeSyntaxError as err:
                    relocated = self.error(err.reason, node)
                    line, col = relocated.position
                    if "\n" not in node.value and node.end_lineno == node.lineno:
                        col += 1 + err.position  # past the opening quote
                    raise TypeSyntaxError(err.reason, relocated.text, (line, col)) from None
            raise self.error(f"a constant {node.value!r} is not a type", node)
        if isinstance(node, (ast.Name, ast.Attribute)):
            try:
                return _construct(self.dotted(node), None)
            except _Bad as bad:
                raise self.error(bad.reason, node) from None
        if isinstance(node, ast.Subscript):
            head = node.value
            if not isinstance(head, (ast.Name, ast.Attribute)):
                raise self.error("a subscripted annotation must start with a type name", node)
            elts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            variadic = False
            if len(elts) == 2 and isinstance(elts[1], ast.Constant) and elts[1].value is Ellipsis:
                variadic, elts = True, elts[:1]
            args = [self.type(e) for e in elts]
            try:
                return _construct(self.dotted(head), args, variadic)
            except _Bad as bad:
                at = elts[bad.arg] if bad.arg is not None and bad.arg < len(elts) else node
                raise self.error(bad.reason, at) from None
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
            left, right = self.type(node.left), self.type(node.right)
            if right == NONE:
                return TCon("Optional", (left,))
            if left == NONE:
                return TCon("Optional", (right,))
            raise self.error("only 'X | None' unions are supported (they mean Optional[X])", node)
        raise self.error(f"unsupported annotation {ast.unparse(node)!r}", node)

    def dotted(self, node: ast.expr) -> str:
        parts = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name):
            raise self.error("an annotation name must be a dotted identifier", node)
        parts.append(node.id)
        return ".".join(reversed(parts))


def signature_from_ast(fn: ast.FunctionDef | ast.AsyncFunctionDef, source: str | None = None) -> Signature:
    """The signature declared by a function definition's annotations.

    Positional-only, ordinary and keyword-only parameters all become parameters, in order;
    ``*args``/``**kwargs`` are refused (a tool has a fixed arity). ``source`` (the text ``fn`` was
    parsed from) only improves error messages.
    """
    reader = _AnnotationReader(source)
    a = fn.args
    for star, label in ((a.vararg, "*"), (a.kwarg, "**")):
        if star is not None:
            raise reader.error(f"variadic parameter {label}{star.arg} of {fn.name!r} is not supported", star)
    params = []
    for arg in (*a.posonlyargs, *a.args, *a.kwonlyargs):
        if arg.annotation is None:
            raise reader.error(f"parameter {arg.arg!r} of {fn.name!r} has no type annotation", arg)
        params.append(Param(arg.arg, reader.type(arg.annotation)))
    if fn.returns is None:
        raise reader.error(f"function {fn.name!r} has no return annotation", fn)
    return Signature(tuple(params), reader.type(fn.returns))


def signature_from_source(source: str, name: str | None = None) -> Signature:
    """The signature of the function ``name`` (default: the only top-level function) in ``source``."""
    try:
        module = ast.parse(source)
    except SyntaxError as err:
        line = err.lineno or 1
        col = max((err.offset or 1) - 1, 0)
        raise TypeSyntaxError(f"invalid Python source: {err.msg}", source, (line, col)) from None
    fns = [n for n in module.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    if name is not None:
        fns = [f for f in fns if f.name == name]
        if not fns:
            raise TypeSyntaxError(f"no top-level function named {name!r}", source, (1, 0))
    elif len(fns) != 1:
        found = ", ".join(f.name for f in fns) or "none"
        raise TypeSyntaxError(f"expected exactly one top-level function (found: {found}); pass name=",
                              source, (1, 0))
    return signature_from_ast(fns[-1], source)

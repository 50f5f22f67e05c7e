"""The static checker for untrusted Python: the program and tool format the sandbox accepts.

This is the first of the sandbox's layers (see ``sandbox.py`` for the whole list). It rejects, before
anything runs, the constructs through which Python code reaches objects it was not handed:

* names that start with ``__`` (``__builtins__``, ``__import__``, ``__class__`` ...);
* attributes that start with ``_`` (``random._os`` is the ``os`` module) or that lead to frames and
  code (``gi_frame``, ``f_globals``, ``tb_frame``, ``co_code`` ..., plus ``mro`` and ``register``,
  which mutates the abstract base classes every later program shares);
* imports outside :data:`ALLOWED_MODULES`, relative imports and ``import *``;
* the builtins that evaluate text, open files or expose namespaces (:data:`FORBIDDEN_BUILTINS`),
  unless the code binds that name itself;
* ``getattr``/``hasattr`` with a constant name that the attribute rule forbids;
* assigning or deleting attributes (modules and classes are shared by every program in a worker);
* ``class``, ``global`` and ``async`` code.

Tool sources follow the same rules and may, at their top level, only define functions and import.

The worker applies the same rules at run time where text can become a name (the ``getattr`` it
provides, the import hook). This module imports only the standard library: the sandbox worker loads
it by file path.
"""

from __future__ import annotations

import ast
from typing import NamedTuple

#: Modules a program or tool may import. A module is handed over as a read-only copy of its public,
#: non-module attributes, minus :data:`HIDDEN_ATTRIBUTES`.
ALLOWED_MODULES = (
    "bisect", "cmath", "collections", "copy", "datetime", "decimal", "fractions", "functools", "hashlib", "heapq",
    "itertools", "json", "math", "operator", "random", "re", "statistics", "string", "typing",
)

#: Public attributes of allowed modules that are withheld, and why.
HIDDEN_ATTRIBUTES = {
    # These look attributes up by runtime text, which would bypass the attribute rule.
    "operator": frozenset({"attrgetter", "methodcaller"}),
    "string": frozenset({"Formatter", "Template"}),
    # These set attributes named by runtime text on any object: ``update_wrapper(f, g,
    # assigned=('__code__',))`` would swap the code of a shared standard-library function.
    "functools": frozenset({"update_wrapper", "wraps", "total_ordering"}),
    # Mutable process-wide templates: a change would leak into every later program of the worker.
    "decimal": frozenset({"DefaultContext", "BasicContext", "ExtendedContext"}),
}

#: ``typing`` is handed over as these names only (``get_type_hints`` would evaluate annotation text).
TYPING_NAMES = frozenset({
    "Any", "Callable", "Dict", "FrozenSet", "Iterable", "Iterator", "List", "Mapping", "Optional",
    "Sequence", "Set", "Tuple", "TypeVar", "Union",
})

#: Builtins that the sandbox does not provide, because they evaluate text, open files, expose
#: namespaces or stop the process.
FORBIDDEN_BUILTINS = frozenset({
    "breakpoint", "classmethod", "compile", "copyright", "credits", "delattr", "dir", "eval", "exec",
    "exit", "globals", "help", "id", "input", "license", "locals", "memoryview", "open", "property",
    "quit", "setattr", "staticmethod", "super", "vars",
})

#: Attribute-name prefixes of frames, code, generators, coroutines and tracebacks.
_FRAME_PREFIXES = ("gi_", "cr_", "ag_", "f_", "tb_", "co_")
_DENIED_ATTRIBUTES = frozenset({"mro", "register", "func_globals", "func_code"})


class Violation(NamedTuple):
    """One rule broken at one place of the source."""

    line: int
    col: int
    message: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.message}"


def attribute_allowed(name: str) -> bool:
    """Whether untrusted code may read attribute ``name`` (shared by the checker and the runtime)."""
    return (isinstance(name, str) and not name.startswith("_") and not name.startswith(_FRAME_PREFIXES)
            and name not in _DENIED_ATTRIBUTES)


def module_allowed(dotted: str) -> bool:
    return dotted in ALLOWED_MODULES


def check_source(source: str, *, tool: bool = False, filename: str = "<program>") -> tuple[Violation, ...]:
    """Parses ``source`` and returns its violations (empty when it may run).

    Raises ``SyntaxError`` when it does not parse.
    """
    return check_tree(ast.parse(source, filename=filename), tool=tool)


def check_tree(tree: ast.Module, *, tool: bool = False) -> tuple[Violation, ...]:
    """The violations of a parsed module; ``tool=True`` adds the tool-source layout rule.

    One pass over the tree (this runs for every program, so it is written for speed): names bound
    anywhere are collected on the way, and the uses of forbidden builtins are judged at the end.
    """
    found: list[Violation] = []
    bound: set[str] = set()
    builtin_uses: list[ast.Name] = []
    lookups: list[ast.Call] = []

    def add(node: ast.AST, message: str) -> None:
        found.append(Violation(getattr(node, "lineno", 1), getattr(node, "col_offset", 0), message))

    def name(node: ast.AST, text: str | None, what: str) -> None:
        if text is not None and text.startswith("__"):
            add(node, f"{what} {text!r} is not allowed (names may not start with '__')")

    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if not isinstance(node, ast.AST):
            continue  # None or text inside a field list (Dict keys, Global names, ...)
        kind = type(node)
        if kind is ast.Name:
            name(node, node.id, "name")
            if type(node.ctx) is ast.Load:
                if node.id in FORBIDDEN_BUILTINS:
                    builtin_uses.append(node)
            else:
                bound.add(node.id)
        elif kind is ast.Attribute:
            if not attribute_allowed(node.attr):
                add(node, f"attribute {node.attr!r} is not allowed")
            if type(node.ctx) is not ast.Load:
                add(node, f"assigning or deleting attribute {node.attr!r} is not allowed")
        elif kind is ast.Call:
            func = node.func
            if (type(func) is ast.Name and func.id in ("getattr", "hasattr") and len(node.args) >= 2
                    and type(node.args[1]) is ast.Constant and not attribute_allowed(node.args[1].value)):
                lookups.append(node)
        elif kind is ast.arg:
            name(node, node.arg, "parameter")
            bound.add(node.arg)
        elif kind is ast.keyword:
            name(node, node.arg, "keyword argument")
        elif kind is ast.FunctionDef:
            name(node, node.name, "function name")
            bound.add(node.name)
        elif kind is ast.Import:
            for alias in node.names:
                if not module_allowed(alias.name):
                    add(node, f"import of module {alias.name!r} is not allowed (allowed: {', '.join(ALLOWED_MODULES)})")
                name(node, alias.asname, "name")
                bound.add(alias.asname or alias.name.split(".")[0])
        elif kind is ast.ImportFrom:
            _check_import_from(node, add, name)
            bound.update(alias.asname or alias.name for alias in node.names)
        elif kind is ast.ExceptHandler:
            name(node, node.name, "name")
            if node.name:
                bound.add(node.name)
        elif kind is ast.MatchAs or kind is ast.MatchStar:
            name(node, node.name, "name")
            if node.name:
                bound.add(node.name)
        elif kind is ast.MatchMapping:
            name(node, node.rest, "name")
            if node.rest:
                bound.add(node.rest)
        elif kind is ast.MatchClass:
            for attr in node.kwd_attrs:
                if not attribute_allowed(attr):
                    add(node, f"attribute {attr!r} is not allowed (in a class pattern)")
        elif kind in _REFUSED:
            add(node, f"{_REFUSED[kind]} is not allowed in the sandbox")
            if kind is ast.ClassDef:
                bound.add(node.name)
        for field in node._fields:
            if field == "ctx":
                continue
            child = getattr(node, field, None)
            if type(child) is list:
                stack.extend(child)
            elif isinstance(child, ast.AST):
                stack.append(child)

    for use in builtin_uses:
        if use.id not in bound:
            add(use, f"{use.id!r} is not available in the sandbox")
    for call in lookups:
        if call.func.id not in bound:
            add(call, f"{call.func.id}(..., {call.args[1].value!r}) is not allowed")
    if tool:
        found.extend(_tool_layout(tree))
    return tuple(sorted(set(found)))


_REFUSED = {
    ast.ClassDef: "a class definition",
    ast.Global: "a 'global' statement",
    ast.AsyncFunctionDef: "an async function",
    ast.Await: "'await'",
    ast.AsyncFor: "'async for'",
    ast.AsyncWith: "'async with'",
}


def _check_import_from(node: ast.ImportFrom, add, name) -> None:
    if node.level:
        add(node, "relative imports are not allowed")
        return
    if not module_allowed(node.module or ""):
        add(node, f"import from module {node.module!r} is not allowed (allowed: {', '.join(ALLOWED_MODULES)})")
    for alias in node.names:
        if alias.name == "*":
            add(node, "'import *' is not allowed")
        elif not attribute_allowed(alias.name):
            add(node, f"importing {alias.name!r} is not allowed")
        name(node, alias.asname, "name")


def _tool_layout(tree: ast.Module) -> list[Violation]:
    found = []
    defines = False
    for stmt in tree.body:
        if isinstance(stmt, ast.FunctionDef):
            defines = True
        elif isinstance(stmt, (ast.Import, ast.ImportFrom, ast.Pass)):
            pass
        elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str):
            pass
        else:
            found.append(Violation(stmt.lineno, stmt.col_offset,
                                   f"a tool source may only define functions and import modules, "
                                   f"not a top-level {type(stmt).__name__}"))
    if not defines:
        found.append(Violation(1, 0, "a tool source must define a function"))
    return found

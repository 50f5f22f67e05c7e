"""What a tool's code says about itself: its function definition, normalised form, and calls.

The library keeps one source of truth for its edges: the code. This module reads a tool's source
with :mod:`ast` (never executes it) and derives

* the single function definition (with optional imports) a tool source consists of (:func:`parse_tool`);
* the content id: sha256 of the normalised code (:func:`code_id`);
* the calls to free names, in execution order and with multiplicity (:func:`analyse`).

Name resolution follows Python's scoping: a bare name is *free* when no enclosing scope of the
call (the tool's function, nested functions, lambdas, comprehensions) binds it. A free name that
is a Python builtin is a builtin; every other free name must be a library tool. Calls are counted
statically, once per call site: a call inside a loop counts once, calls in both branches of an
``if`` both count, calls in a nested function or lambda count where the function is defined.
Annotations are types, not uses: they are never read as calls or references.
"""

from __future__ import annotations

import ast
import builtins
import copy
import functools
import hashlib
import keyword
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from cocoda_jax.library.errors import MalformedTool

#: Builtins the sandbox adds to Python's: ``environment_call``, the door of an environment-bodied
#: tool (e.g. a BFCL function) to its trusted stateful backend (cocoda_jax.execution.environment).
SANDBOX_BUILTINS = frozenset({"environment_call"})
#: Names the sandbox and Python resolve to builtins; a tool may not take one of them as its name.
BUILTIN_NAMES = frozenset(dir(builtins)) | SANDBOX_BUILTINS

_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)


@dataclass(frozen=True)
class CallSite:
    """One call of a free name: ``top_level`` is true when it sits directly in the tool's own
    scope (not inside a nested function, lambda, comprehension or class), where the static type
    check knows the types of the tool's parameters and locals."""

    name: str
    node: ast.Call
    top_level: bool


@dataclass(frozen=True)
class CodeFacts:
    """The derived facts of one tool source (cached per source text; treat as read-only)."""

    function: ast.FunctionDef
    name: str
    code_id: str
    call_sites: tuple[CallSite, ...]
    references: tuple[str, ...]  # free non-builtin names used other than as a callee, first use order

    @property
    def calls(self) -> tuple[str, ...]:
        """Free non-builtin callee names in execution order, with multiplicity."""
        return tuple(site.name for site in self.call_sites)


def parse_tool(source: str) -> tuple[ast.FunctionDef, tuple[ast.stmt, ...]]:
    """The tool's one top-level ``def`` and its top-level imports; else :class:`MalformedTool`.

    A tool source is one plain function definition, optionally with ``import`` statements at the
    top level (e.g. ``from typing import Optional`` for its annotations): no decorators, no
    ``*args``/``**kwargs``/keyword-only parameters (a signature is an ordered list of positional
    parameters), no ``global`` statements, and no reserved name (a leading underscore, a Python
    builtin or keyword: the name is global in the sandbox and would shadow them).
    """
    if not isinstance(source, str):
        raise MalformedTool(None, f"the source must be a str, got {type(source).__name__}")
    try:
        module = ast.parse(source)
    except SyntaxError as err:
        line = (err.text or "").rstrip("\n")
        caret = " " * max((err.offset or 1) - 1, 0) + "^"
        raise MalformedTool(None, f"syntax error at line {err.lineno}, column {err.offset}: {err.msg}\n"
                                  f"    {line}\n    {caret}") from None
    except ValueError as err:  # e.g. null bytes
        raise MalformedTool(None, f"unparsable source: {err}") from None
    defs = [node for node in module.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]
    imports = tuple(node for node in module.body if isinstance(node, (ast.Import, ast.ImportFrom)))
    if len(defs) != 1 or len(defs) + len(imports) != len(module.body):
        kinds = ", ".join(type(node).__name__ for node in module.body) or "nothing"
        raise MalformedTool(defs[0].name if len(defs) == 1 else None,
                            f"a tool source must be one function definition (plus imports); found {kinds}")
    fn = defs[0]
    name = fn.name
    if isinstance(fn, ast.AsyncFunctionDef):
        raise MalformedTool(name, "async functions are not tools")
    if fn.decorator_list:
        raise MalformedTool(name, f"line {fn.lineno}: decorators are not allowed on a tool")
    if name.startswith("_") or name in BUILTIN_NAMES or keyword.iskeyword(name):
        raise MalformedTool(name, "a tool name may not start with '_' or shadow a Python builtin")
    if name in _import_names(imports):
        raise MalformedTool(name, f"the tool's name {name!r} is also imported")
    args = fn.args
    if args.vararg or args.kwarg or args.kwonlyargs:
        raise MalformedTool(name, "*args, **kwargs and keyword-only parameters are not supported")
    for node in ast.walk(fn):
        if isinstance(node, ast.Global):
            raise MalformedTool(name, f"line {node.lineno}: 'global' is not allowed in a tool")
    return fn, imports


def parse_function(source: str) -> ast.FunctionDef:
    """The tool's function definition (see :func:`parse_tool` for what a tool source may hold)."""
    return parse_tool(source)[0]


def _import_names(imports: Iterable[ast.stmt]) -> frozenset[str]:
    return frozenset((a.asname or a.name).split(".")[0] for node in imports for a in node.names)


def code_id(fn: ast.FunctionDef, imports: Sequence[ast.stmt] = ()) -> str:
    """Content id: sha256 (hex, first 16) of the imports and the function's AST without its
    docstring and name.

    The name is left out so that the same code under another name is a ``duplicate_code``;
    formatting, comments and the docstring do not change the id.
    """
    body = list(fn.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        body = body[1:]
    normal = copy.copy(fn)  # shallow: the shared children are only read
    normal.name, normal.body, normal.decorator_list = "_", body, []
    text = "\n".join(ast.dump(node, annotate_fields=True, include_attributes=False) for node in (*imports, normal))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


@functools.lru_cache(maxsize=8192)
def analyse(source: str) -> CodeFacts:
    """Parses ``source`` and derives its :class:`CodeFacts` (memoised by source text)."""
    fn, imports = parse_tool(source)
    walker = _CallWalker(top=fn, module_names=_import_names(imports))
    walker.visit_tool(fn)
    refs: dict[str, None] = {}
    for name in walker.references:
        refs.setdefault(name, None)
    return CodeFacts(function=fn, name=fn.name, code_id=code_id(fn, imports), call_sites=tuple(walker.sites),
                     references=tuple(refs))


def _arg_names(args: ast.arguments) -> list[str]:
    every = [*args.posonlyargs, *args.args, *args.kwonlyargs]
    every += [a for a in (args.vararg, args.kwarg) if a is not None]
    return [a.arg for a in every]


def _bound_in(scope: ast.AST) -> frozenset[str]:
    """Names bound directly in ``scope`` (parameters, assignments, imports, ...), not in nested scopes."""
    names: set[str] = set()
    if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        names.update(_arg_names(scope.args))
    if isinstance(scope, _COMPREHENSIONS):
        for gen in scope.generators:
            names.update(n.id for n in ast.walk(gen.target) if isinstance(n, ast.Name))
        return frozenset(names)
    body = scope.body if isinstance(scope.body, list) else [scope.body]
    nonlocal_names: set[str] = set()
    stack: list[ast.AST] = list(body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
            continue  # its body is its own scope (defaults and decorators bind nothing)
        elif isinstance(node, ast.Lambda):
            continue
        elif isinstance(node, _COMPREHENSIONS):
            # only an assignment expression inside a comprehension binds in the enclosing scope
            names.update(n.target.id for n in ast.walk(node) if isinstance(n, ast.NamedExpr))
            continue
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
        elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
            names.add(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            names.add(node.rest)
        elif isinstance(node, ast.Nonlocal):
            nonlocal_names.update(node.names)
        stack.extend(ast.iter_child_nodes(node))
    return frozenset(names - nonlocal_names)


class _CallWalker:
    """Visits a tool in Python's evaluation order, resolving bare names against the scope stack."""

    def __init__(self, top: ast.FunctionDef, module_names: frozenset[str]):
        self.top = top
        self.sites: list[CallSite] = []
        self.references: list[str] = []
        self.scopes: list[frozenset[str]] = [module_names]  # the tool source's own top-level imports
        self.scope_nodes: list[ast.AST | None] = [None]

    # -- scopes ------------------------------------------------------------------------------
    def _free(self, name: str) -> bool:
        return not any(name in scope for scope in self.scopes) and name not in BUILTIN_NAMES

    def _in_scope(self, node: ast.AST, children: list[ast.AST]) -> None:
        self.scopes.append(_bound_in(node))
        self.scope_nodes.append(node)
        try:
            for child in children:
                self.visit(child)
        finally:
            self.scopes.pop()
            self.scope_nodes.pop()

    def _defaults(self, args: ast.arguments) -> None:
        for default in [*args.defaults, *[d for d in args.kw_defaults if d is not None]]:
            self.visit(default)

    def visit_tool(self, fn: ast.FunctionDef) -> None:
        # defaults are evaluated in the module scope when the library is loaded
        self._defaults(fn.args)
        self._in_scope(fn, list(fn.body))

    # -- nodes -------------------------------------------------------------------------------
    def visit(self, node: ast.AST) -> None:
        method = getattr(self, f"_visit_{type(node).__name__}", None)
        if method is not None:
            method(node)
        else:
            for child in ast.iter_child_nodes(node):
                self.visit(child)

    def _visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Load) and self._free(node.id):
            self.references.append(node.id)

    def _visit_Call(self, node: ast.Call) -> None:
        callee = node.func.id if isinstance(node.func, ast.Name) else None
        if callee is None:
            self.visit(node.func)
        for arg in node.args:
            self.visit(arg)
        for kw in node.keywords:
            self.visit(kw.value)
        if callee is not None and self._free(callee):
            self.sites.append(CallSite(callee, node, top_level=self.scope_nodes[-1:] == [self.top]))

    def _visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        for deco in node.decorator_list:
            self.visit(deco)
        self._defaults(node.args)
        self._in_scope(node, list(node.body))

    _visit_AsyncFunctionDef = _visit_FunctionDef

    def _visit_Lambda(self, node: ast.Lambda) -> None:
        self._defaults(node.args)
        self._in_scope(node, [node.body])

    def _visit_ClassDef(self, node: ast.ClassDef) -> None:
        for child in [*node.decorator_list, *node.bases, *(k.value for k in node.keywords)]:
            self.visit(child)
        self._in_scope(node, list(node.body))

    def _visit_comprehension_scope(self, node: ast.AST, results: list[ast.AST]) -> None:
        gens = node.generators
        self.visit(gens[0].iter)  # the first iterable is evaluated in the enclosing scope
        inner: list[ast.AST] = [*gens[0].ifs]
        for gen in gens[1:]:
            inner += [gen.iter, *gen.ifs]
        self._in_scope(node, inner + results)

    def _visit_ListComp(self, node: ast.ListComp) -> None:
        self._visit_comprehension_scope(node, [node.elt])

    _visit_SetComp = _visit_ListComp
    _visit_GeneratorExp = _visit_ListComp

    def _visit_DictComp(self, node: ast.DictComp) -> None:
        self._visit_comprehension_scope(node, [node.key, node.value])

    def _visit_Assign(self, node: ast.Assign) -> None:
        self.visit(node.value)
        for target in node.targets:
            self.visit(target)

    def _visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self.visit(node.value)
        self.visit(node.target)  # local annotations are never evaluated

    def _visit_NamedExpr(self, node: ast.NamedExpr) -> None:
        self.visit(node.value)
        self.visit(node.target)

    def _visit_For(self, node: ast.For | ast.AsyncFor) -> None:
        for child in [node.iter, node.target, *node.body, *node.orelse]:
            self.visit(child)

    _visit_AsyncFor = _visit_For

    def _visit_Dict(self, node: ast.Dict) -> None:
        for key, value in zip(node.keys, node.values):
            if key is not None:
                self.visit(key)
            self.visit(value)

"""Static type check of a tool's calls to library tools (the ``ill_typed_call`` rejection).

Argument types are inferred from what is certain without running anything: the tool's parameter
annotations, literals (also negated numbers, and list/tuple displays of them), locals assigned exactly
once from such an expression, and the result types of nested library calls. Everything else is
``Any``, which the check lets through: the checker refuses only calls it can prove wrong.

Each call site gets fresh copies of the callee's type variables, and the caller's own type variables
are rigid (a caller generic in ``T`` cannot pass its ``T`` where a ``float`` is required). The check is
directional (:func:`cocoda_jax.types.accepts`): an ``int`` may go where a ``float`` is expected, not
the other way round.
"""

from __future__ import annotations

import ast
from collections import Counter
from collections.abc import Callable

from cocoda_jax.library.analysis import CallSite, CodeFacts, analyse
from cocoda_jax.library.errors import InsertRejected, Reason
from cocoda_jax.types import (
    ANY, BOOL, FLOAT, INT, NONE, STR, Signature, TCon, TVar, Type, accepts, apply_subst, rename_vars,
)

_LITERAL_TYPES = {bool: BOOL, int: INT, float: FLOAT, str: STR, type(None): NONE}


def _rigid(t: Type) -> Type:
    """The caller's type variables as constants: ``T`` becomes the opaque constructor ``T``
    (a domain type can never be named like a type variable, so it cannot clash)."""
    if isinstance(t, TVar):
        return TCon(t.name)
    if isinstance(t, TCon) and t.args:
        return TCon(t.name, tuple(_rigid(a) for a in t.args))
    return t


def _store_counts(fn: ast.FunctionDef) -> tuple[Counter, dict[str, ast.expr]]:
    """How often each name is bound in the tool's own scope, and the value of each plain
    ``name = value`` assignment (nested scopes are skipped: their names are not the tool's locals)."""
    counts: Counter = Counter()
    values: dict[str, ast.expr] = {}
    stack: list[ast.AST] = list(fn.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            counts[node.name] += 1
            continue
        if isinstance(node, (ast.Lambda, ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
            counts.update(n.target.id for n in ast.walk(node) if isinstance(n, ast.NamedExpr))
            continue
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            counts[node.id] += 1
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            counts.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            counts[node.name] += 1
        elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
            counts[node.name] += 1
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            values[node.targets[0].id] = node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            values[node.target.id] = node.value
        stack.extend(ast.iter_child_nodes(node))
    return counts, values


class _Checker:
    def __init__(self, facts: CodeFacts, signature: Signature, callee: Callable[[str], "object"]):
        self.facts = facts
        self.callee = callee  # name -> Tool (already known to exist)
        self.sites = {id(site.node): (i, site) for i, site in enumerate(facts.call_sites)}
        self.results: dict[int, Type] = {}
        counts, assigned = _store_counts(facts.function)
        self.params = {p.name: _rigid(p.type) for p in signature.params if counts[p.name] == 0}
        # a reassigned parameter holds two types over time: Any, like every name bound twice
        param_names = {p.name for p in signature.params}
        self.locals = {name: value for name, value in assigned.items()
                       if counts[name] == 1 and name not in param_names}
        self.visiting: set[str] = set()

    def type_of(self, expr: ast.expr, top_level: bool) -> Type:
        if isinstance(expr, ast.Constant):
            return _LITERAL_TYPES.get(type(expr.value), ANY)
        if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, (ast.USub, ast.UAdd)) \
                and isinstance(expr.operand, ast.Constant) and type(expr.operand.value) in (int, float):
            return _LITERAL_TYPES[type(expr.operand.value)]
        if isinstance(expr, ast.Call) and id(expr) in self.sites:
            return self.check_site(id(expr))
        if isinstance(expr, (ast.List, ast.Tuple)):
            elems = [self.type_of(e, top_level) for e in expr.elts]
            if isinstance(expr, ast.Tuple):
                return ANY if any(isinstance(e, ast.Starred) for e in expr.elts) else TCon("tuple", tuple(elems))
            same = elems and all(e == elems[0] for e in elems) and not any(isinstance(e, ast.Starred) for e in expr.elts)
            return TCon("list", (elems[0] if same else ANY,))
        if isinstance(expr, ast.Name) and top_level:
            if expr.id in self.params:
                return self.params[expr.id]
            if expr.id in self.locals and expr.id not in self.visiting:
                self.visiting.add(expr.id)
                try:
                    return self.type_of(self.locals[expr.id], True)
                finally:
                    self.visiting.discard(expr.id)
        return ANY

    def check_site(self, key: int) -> Type:
        if key in self.results:
            return self.results[key]
        index, site = self.sites[key]
        self.results[key] = ANY  # a (impossible) re-entry sees Any rather than recursing
        result = self._check(index, site)
        self.results[key] = result
        return result

    def _reject(self, site: CallSite, detail: str) -> InsertRejected:
        call = ast.unparse(site.node)
        return InsertRejected(Reason.ILL_TYPED_CALL, self.facts.name,
                              f"line {site.node.lineno}: {call}: {detail}")

    def _check(self, index: int, site: CallSite) -> Type:
        tool = self.callee(site.name)
        sig: Signature = rename_vars(tool.signature, f"{site.name}#{index}.")
        params = sig.params
        n_defaults = len(analyse(tool.source).function.args.defaults)
        node = site.node
        bound: dict[int, ast.expr] = {}
        open_ended = False
        for i, arg in enumerate(node.args):
            if isinstance(arg, ast.Starred):
                open_ended = True
                break
            if i >= len(params):
                raise self._reject(site, f"{site.name} takes {len(params)} argument(s) "
                                         f"{tool.signature}, got {len(node.args)} positional")
            bound[i] = arg
        names = [p.name for p in params]
        for kw in node.keywords:
            if kw.arg is None:
                open_ended = True
                continue
            if kw.arg not in names:
                raise self._reject(site, f"{site.name} has no parameter {kw.arg!r} {tool.signature}")
            i = names.index(kw.arg)
            if i in bound:
                raise self._reject(site, f"parameter {kw.arg!r} of {site.name} is given twice")
            bound[i] = kw.value
        if not open_ended:
            missing = [names[i] for i in range(len(params) - n_defaults) if i not in bound]
            if missing:
                raise self._reject(site, f"missing argument(s) {missing} of {site.name} {tool.signature}")
        subst: dict = {}
        for i in sorted(bound):
            actual = self.type_of(bound[i], site.top_level)
            nxt = accepts(params[i].type, actual, subst)
            if nxt is None:
                expected = apply_subst(params[i].type, subst)
                raise self._reject(site, f"argument {names[i]!r} of {site.name} expects {expected}, "
                                         f"but {ast.unparse(bound[i])} has type {actual}")
            subst = nxt
        return apply_subst(sig.result, subst)


def check_calls(facts: CodeFacts, signature: Signature, callee: Callable[[str], "object"]) -> None:
    """Raises :class:`InsertRejected` (``ill_typed_call``) at the first call that cannot type-check.

    ``callee(name)`` returns the library :class:`~cocoda_jax.library.tool.Tool` of each called name
    (all of them must exist: unknown names are rejected before this check).
    """
    checker = _Checker(facts, signature, callee)
    for key in checker.sites:
        checker.check_site(key)

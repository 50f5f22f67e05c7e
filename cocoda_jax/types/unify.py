"""Unification (Robinson, with occurs check) and the directional compatibility check.

Substitutions are plain ``dict[str, Type]`` from type-variable names to types. The functions here
never mutate their inputs; the substitutions they return are *idempotent* (fully resolved: no bound
variable occurs in any binding), so one :func:`apply_subst` makes the two sides agree.

Compatibility rules (``coerce=True`` in :func:`unify`, always on in :func:`accepts`):

1. ``Any`` is a wildcard: it is compatible with every type and binds nothing.
2. Numeric tower ``bool <: int <: float``: an ``int`` (or ``bool``) is usable where a ``float`` is
   expected, a ``bool`` where an ``int`` is. :func:`unify` is symmetric, so there ``int ~ float``
   either way; :func:`accepts` only lets the narrower type flow into the wider one.
3. ``Optional[T]`` accepts ``T`` and ``None``. In :func:`unify` also ``T ~ Optional[T]`` either way;
   in :func:`accepts` an ``Optional[T]`` value is *not* accepted where a plain ``T`` is required.
4. The variadic ``tuple[T, ...]`` accepts every fixed ``tuple[A, B, ...]`` whose elements fit ``T``.
5. Containers are covariant (``list[int]`` fits ``list[float]``): tools are pure functions that read
   their arguments, so the mutation hazard that makes ``list`` invariant for a type checker is absent.

With ``coerce=False``, :func:`unify` is purely syntactic Robinson unification (``Any`` still a
wildcard), so ``apply_subst(a, s) == apply_subst(b, s)`` holds whenever neither side holds ``Any``.
"""

from __future__ import annotations

from typing import Mapping

from cocoda_jax.types.terms import ANY, NONE, VARIADIC_TUPLE, Param, Signature, TCon, TVar, Type

Subst = dict[str, Type]

_NUMERIC_RANK = {"bool": 0, "int": 1, "float": 2}


def free_vars(t: Type | Signature) -> frozenset[str]:
    """Names of the type variables in a type or a signature."""
    if isinstance(t, Signature):
        out: set[str] = set()
        for p in t.params:
            out |= free_vars(p.type)
        return frozenset(out | free_vars(t.result))
    if isinstance(t, TVar):
        return frozenset((t.name,))
    if isinstance(t, TCon) and t.args:
        out = set()
        for a in t.args:
            out |= free_vars(a)
        return frozenset(out)
    return frozenset()


def _resolve(t: Type, s: Mapping[str, Type], active: frozenset[str] = frozenset()) -> Type:
    if isinstance(t, TVar):
        bound = s.get(t.name)
        if bound is None:
            return t
        if t.name in active:
            raise ValueError(f"cyclic substitution through type variable {t.name}")
        return _resolve(bound, s, active | {t.name})
    if isinstance(t, TCon) and t.args:
        new = tuple(_resolve(a, s, active) for a in t.args)
        return t if new == t.args else TCon(t.name, new)
    return t


def apply_subst(t: Type | Signature, subst: Mapping[str, Type]) -> Type | Signature:
    """Replaces bound variables in a type or signature (following chains ``T -> U -> int``)."""
    if isinstance(t, Signature):
        return Signature(tuple(Param(p.name, _resolve(p.type, subst)) for p in t.params),
                         _resolve(t.result, subst))
    return _resolve(t, subst)


def rename_vars(t: Type | Signature, prefix: str) -> Type | Signature:
    """Prefixes every variable name (``T`` -> ``{prefix}T``): keeps two signatures' variables apart."""
    names = free_vars(t)
    if not names:
        return t
    return apply_subst(t, {n: TVar(prefix + n) for n in names})


class _Solver:
    """One unification problem: a substitution with an undo trail, plus notes for explanations.

    Notes are tuples: ``("bind", var, type)``, ``("coerce", actual, expected)`` and
    ``("any", side, other)`` with ``side`` in {"expected", "actual"} (who held the ``Any``).
    """

    __slots__ = ("s", "trail", "notes", "coerce")

    def __init__(self, subst: Mapping[str, Type] | None, coerce: bool):
        self.s: Subst = dict(subst) if subst else {}
        self.trail: list[str] = []
        self.notes: list[tuple] = []
        self.coerce = coerce

    # -- bookkeeping ---------------------------------------------------------------------------
    def mark(self) -> tuple[int, int]:
        return len(self.trail), len(self.notes)

    def undo(self, mark: tuple[int, int]) -> None:
        t, n = mark
        while len(self.trail) > t:
            del self.s[self.trail.pop()]
        del self.notes[n:]

    def walk(self, t: Type) -> Type:
        while isinstance(t, TVar):
            bound = self.s.get(t.name)
            if bound is None:
                return t
            t = bound
        return t

    def occurs(self, name: str, t: Type) -> bool:
        t = self.walk(t)
        if isinstance(t, TVar):
            return t.name == name
        if isinstance(t, TCon):
            return any(self.occurs(name, a) for a in t.args)
        return False

    def bind(self, v: TVar, t: Type) -> bool:
        if self.occurs(v.name, t):
            return False
        self.s[v.name] = t
        self.trail.append(v.name)
        self.notes.append(("bind", v.name, t))
        return True

    def all_of(self, pairs, step) -> bool:
        m = self.mark()
        for x, y in pairs:
            if not step(x, y):
                self.undo(m)
                return False
        return True

    def result(self) -> Subst:
        return {k: _resolve(v, self.s) for k, v in self.s.items()}

    # -- symmetric unification -----------------------------------------------------------------
    def unify(self, a: Type, b: Type) -> bool:
        a, b = self.walk(a), self.walk(b)
        if a is ANY or b is ANY:
            if not (a is ANY and b is ANY):
                self.notes.append(("any", "expected" if a is ANY else "actual", b if a is ANY else a))
            return True
        if a == b:
            return True
        if isinstance(a, TVar) and self.bind(a, b):
            return True
        if isinstance(b, TVar) and self.bind(b, a):
            return True
        if isinstance(a, TCon) and isinstance(b, TCon) and a.name == b.name and len(a.args) == len(b.args):
            if self.all_of(zip(a.args, b.args), self.unify):
                return True
        return self.coerce and self._coerce_sym(a, b)

    def _coerce_sym(self, a: Type, b: Type) -> bool:
        for x, y in ((a, b), (b, a)):
            if isinstance(x, TCon) and isinstance(y, TCon) and x.name in _NUMERIC_RANK and y.name in _NUMERIC_RANK:
                self.notes.append(("coerce", y, x))
                return True
            if isinstance(x, TCon) and x.name == "Optional" and not (isinstance(y, TCon) and y.name == "Optional"):
                m = self.mark()
                if y == NONE or self.unify(x.args[0], y):
                    self.notes.append(("coerce", y, x))
                    return True
                self.undo(m)
            if (isinstance(x, TCon) and x.name == VARIADIC_TUPLE and isinstance(y, TCon) and y.name == "tuple"
                    and self.all_of(((x.args[0], e) for e in y.args), self.unify)):
                self.notes.append(("coerce", y, x))
                return True
        return False

    # -- directional check: a value of type `actual` where `expected` is required ---------------
    def accepts(self, expected: Type, actual: Type) -> bool:
        e, a = self.walk(expected), self.walk(actual)
        if e is ANY or a is ANY:
            if not (e is ANY and a is ANY):
                self.notes.append(("any", "expected" if e is ANY else "actual", a if e is ANY else e))
            return True
        if e == a:
            return True
        if isinstance(e, TVar) and self.bind(e, a):
            return True
        if isinstance(a, TVar) and self.bind(a, e):
            return True
        if isinstance(e, TCon) and isinstance(a, TCon) and e.name == a.name and len(e.args) == len(a.args):
            if self.all_of(zip(e.args, a.args), self.accepts):
                return True
        if not isinstance(e, TCon):
            return False
        if isinstance(a, TCon) and a.name in _NUMERIC_RANK and e.name in _NUMERIC_RANK:
            if _NUMERIC_RANK[a.name] < _NUMERIC_RANK[e.name]:
                self.notes.append(("coerce", a, e))
                return True
            return False
        if e.name == "Optional" and not (isinstance(a, TCon) and a.name == "Optional"):
            m = self.mark()
            if a == NONE or self.accepts(e.args[0], a):
                self.notes.append(("coerce", a, e))
                return True
            self.undo(m)
            return False
        if (e.name == VARIADIC_TUPLE and isinstance(a, TCon) and a.name == "tuple"
                and self.all_of(((e.args[0], x) for x in a.args), self.accepts)):
            self.notes.append(("coerce", a, e))
            return True
        return False


def _check_type(x, what: str) -> None:
    if not isinstance(x, (TCon, TVar)) and x is not ANY:
        raise TypeError(f"{what} must be a Type (TCon, TVar or ANY), got {type(x).__name__}")


def unify(a: Type | Signature, b: Type | Signature, subst: Mapping[str, Type] | None = None, *,
          coerce: bool = True) -> Subst | None:
    """Most general unifier of ``a`` and ``b`` (extending ``subst``), or ``None``.

    Works on two types, or on two signatures of the same arity (parameters positionally, names
    ignored, then the results). See the module docstring for the ``coerce`` rules.
    """
    solver = _Solver(subst, coerce)
    if isinstance(a, Signature) or isinstance(b, Signature):
        if not (isinstance(a, Signature) and isinstance(b, Signature)):
            raise TypeError("unify: cannot unify a Signature with a Type")
        if a.arity != b.arity:
            return None
        pairs = [(p.type, q.type) for p, q in zip(a.params, b.params)] + [(a.result, b.result)]
        return solver.result() if solver.all_of(pairs, solver.unify) else None
    _check_type(a, "unify: first argument")
    _check_type(b, "unify: second argument")
    return solver.result() if solver.unify(a, b) else None


def accepts(expected: Type, actual: Type, subst: Mapping[str, Type] | None = None) -> Subst | None:
    """Can a value of type ``actual`` be passed where ``expected`` is required? The substitution
    that makes it so (type variables on either side bind), or ``None``.

    Directional: ``accepts(FLOAT, INT)`` holds, ``accepts(INT, FLOAT)`` does not. A type variable
    binds to the first type it meets and later uses must fit that binding: passing an ``int`` and
    then a ``float`` for ``(T, T)`` fails (no least-upper-bound search), as for a strict checker.
    """
    _check_type(expected, "accepts: expected")
    _check_type(actual, "accepts: actual")
    solver = _Solver(subst, True)
    return solver.result() if solver.accepts(expected, actual) else None

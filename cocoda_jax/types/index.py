"""A signature index: finds the best matches for a query without scanning the library.

A lookup is *exact*: it returns what a linear scan (:func:`linear_lookup`) returns, sorted by
``(cost, name)``. It is a best-first search over lower bounds on the cost; a candidate is matched in
full only once its bound is among the best, and the search stops when the next bound exceeds the
``limit``-th best (cost, name) found.

**What is indexed.** Each signature's result is reduced to its *key*: its outline to depth 2 with
every type variable, ``Any`` and deeper subterm replaced by ``Any`` (``dict[str, list[T]]`` ->
``dict[str, list[Any]]``). Each parameter is reduced to its *form*: the parameter type itself when
its type variables occur nowhere else in the signature ("exclusive"), else the type with every
variable occurrence replaced by a fresh variable of its own. Signatures with the same tuple of forms
share a *shape*; a *cell* is the names of one (shape, result key). Posting lists map (form, arity) to
shapes, and (result key, arity) to its shapes and, per form, the shapes having it.

**Why forms give tight, sound bounds.** The price of feeding parameter ``j`` from query argument
``i`` is paid inside one substitution shared by the whole match. When the variables of both types
are exclusive, nothing else can bind them, so the price from an empty substitution is *exact*. When
not, renaming every occurrence apart turns each variable position into a free wildcard (its binding
is not charged), which can only make the check succeed more often and more cheaply: a lower bound.
These pair prices (:func:`_pair_lb`, memoised process-wide) are what every bound is built from.

**The search** (:class:`_Lookup`), over units opened in bound order (each unit's bound is below
every bound it queues, so nothing is opened before it could matter):

1. the result keys the query's result accepts (filtered by outline, one level deep), each with a
   lower bound on the result's cost;
2. per arity ``m``: per query argument, the shapes it can feed at each saving level (cumulative
   unions of posting lists; forms are pre-filtered by outline); set algebra gives the shapes fed by
   exactly ``h`` arguments, ``h0`` of them for free, and one *coarse* unit per (h, h0) bounded by
   ``extra * n + missing * m`` minus ``h0`` free savings and the ``min(h, m) - h0`` best other
   savings; plus one *zero* unit for the shapes no argument feeds;
3. a coarse unit splits into *tiers* of one profile: best result part, ``k = min(h, g, m)`` (``g``:
   parameters some argument can feed) and, for the few highest saving levels, how many arguments
   reach each; its bound takes the ``k`` usable arguments from the best levels down;
4. a tier queues its shapes, each ordered by (bound, smallest name), so a shape is only looked at
   when one of its names could still enter the answer; a popped shape is bounded from the pair
   prices (an assignment uses distinct arguments and distinct parameters, so its saving is at most
   the ``k`` best per-argument savings and the ``k`` best per-parameter savings) and queues its
   cells, (shape, result key), at that bound plus the result part, again by smallest name;
5. a popped candidate is refined to its exact result cost plus the *best assignment* over the pair
   prices, argument order included (reordering priced as in the match), computed once per shape;
   if that is higher it is queued again, else the full match runs. A full match also teaches the
   exact *argument part* (its cost less the result's) of every candidate with the same parameter
   types and result-check bindings (:meth:`_Lookup.refine`): those are then refined to their exact
   cost, which matters where pair prices are loosest (shared type variables).

The index is a value: :meth:`SignatureIndex.add` and :meth:`SignatureIndex.remove` return a new
index and leave the old one intact. Its tables are persistent hash tries (:class:`_PDict`) and its
posting lists are :class:`_Bag` values, so an update touches O(arity) entries, each in O(1)
amortised time, and shares the rest; :meth:`SignatureIndex.build` bulk-loads.
"""

from __future__ import annotations

import bisect
import functools
import heapq
import itertools
from collections import Counter
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator, Mapping

from cocoda_jax.types.match import (
    CANDIDATE_PREFIX, DEFAULT_COSTS, QUERY_PREFIX, Match, MatchCosts, Prepared, Scored, _moves, _notes_cost,
    _result_solver, explain, prepare, score_prepared,
)
from cocoda_jax.types.terms import ANY, NONE, VARIADIC_TUPLE, Signature, TCon, TVar, Type, subterms
from cocoda_jax.types.unify import _NUMERIC_RANK, _Solver, apply_subst, free_vars

KEY_DEPTH = 2
_WILD = "*"  # the head of a key that is Any (and of a form that is a type variable)
_FRESH = "~"  # prefix of the renamed-apart variables of a relaxed form; their bindings are free


class _PDict:
    """A persistent dict: a hash trie of two 64-slot tuple levels over small leaf dicts.

    ``set``/``remove`` copy one leaf and two nodes and share everything else, so they cost O(1)
    for any practical size. Written here rather than taken from ``pyrsistent`` because a new version
    of a large ``_PDict`` is a single object that the garbage collector traverses whole while it is
    young (measured: about 85 ms per generation-0 collection after one ``set`` on a 200,000-entry
    map, which made a chain of index updates cost milliseconds per call); a version of this trie
    is three small new objects. Pickled as its items (string hashes differ between processes)."""

    __slots__ = ("_root", "_len")

    def __init__(self, root: tuple | None = None, size: int = 0):
        self._root, self._len = root, size

    @classmethod
    def from_dict(cls, d: Mapping) -> "_PDict":
        if not d:
            return _EMPTY
        root: list = [None] * 64
        for k, v in d.items():
            h = hash(k)
            mid = root[h & 63]
            if mid is None:
                mid = root[h & 63] = [None] * 64
            leaf = mid[(h >> 6) & 63]
            if leaf is None:
                leaf = mid[(h >> 6) & 63] = {}
            leaf[k] = v
        return cls(tuple(None if mid is None else tuple(mid) for mid in root), len(d))

    def __reduce__(self):
        return (_PDict.from_dict, (dict(self.items()),))

    def _leaf(self, key) -> dict | None:
        root = self._root
        if root is None:
            return None
        h = hash(key)
        mid = root[h & 63]
        return None if mid is None else mid[(h >> 6) & 63]

    def get(self, key, default=None):
        leaf = self._leaf(key)
        return default if leaf is None else leaf.get(key, default)

    def __getitem__(self, key):
        leaf = self._leaf(key)
        if leaf is None:
            raise KeyError(key)
        return leaf[key]

    def __contains__(self, key) -> bool:
        leaf = self._leaf(key)
        return leaf is not None and key in leaf

    def __len__(self) -> int:
        return self._len

    def __bool__(self) -> bool:
        return self._len > 0

    def _with_leaf(self, key, leaf: dict | None, size: int) -> "_PDict":
        if size == 0:
            return _EMPTY
        h = hash(key)
        i, j = h & 63, (h >> 6) & 63
        root = self._root or _NONES
        mid = root[i] or _NONES
        mid = mid[:j] + (leaf,) + mid[j + 1:]
        return _PDict(root[:i] + (mid,) + root[i + 1:], size)

    def set(self, key, value) -> "_PDict":
        leaf = self._leaf(key)
        if leaf is None:
            return self._with_leaf(key, {key: value}, self._len + 1)
        if key in leaf and leaf[key] is value:
            return self
        size = self._len if key in leaf else self._len + 1
        leaf = dict(leaf)
        leaf[key] = value
        return self._with_leaf(key, leaf, size)

    def remove(self, key) -> "_PDict":
        leaf = self._leaf(key)
        if leaf is None or key not in leaf:
            raise KeyError(key)
        leaf = dict(leaf)
        del leaf[key]
        return self._with_leaf(key, leaf or None, self._len - 1)

    def __iter__(self) -> Iterator:
        for mid in self._root or ():
            if mid is not None:
                for leaf in mid:
                    if leaf:
                        yield from leaf

    def keys(self) -> Iterator:
        return iter(self)

    def items(self) -> Iterator[tuple]:
        for mid in self._root or ():
            if mid is not None:
                for leaf in mid:
                    if leaf:
                        yield from leaf.items()

    def values(self) -> Iterator:
        for _, v in self.items():
            yield v


_NONES = (None,) * 64
_EMPTY = _PDict()


def type_key(t: Type, depth: int = KEY_DEPTH) -> Type:
    """The outline of ``t`` to ``depth`` levels; variables, ``Any`` and deeper parts become ``Any``."""
    if not isinstance(t, TCon) or depth <= 0:
        return ANY
    if not t.args:
        return t
    return TCon(t.name, tuple(type_key(a, depth - 1) for a in t.args))


def _head(key: Type) -> str:
    return key.name if isinstance(key, TCon) else _WILD


_WIDER = {"bool": ("int", "float"), "int": ("float",)}
_NARROWER = {"float": ("int", "bool"), "int": ("bool",)}


def _expected_heads(actual: Type) -> frozenset[str] | None:
    """Heads of the keys that may accept a value whose key is ``actual`` (``None``: any head)."""
    if not isinstance(actual, TCon):
        return None
    heads = {actual.name, _WILD, "Optional", *_WIDER.get(actual.name, ())}
    if actual.name == "tuple":
        heads.add(VARIADIC_TUPLE)
    return frozenset(heads)


def _actual_heads(expected: Type) -> frozenset[str] | None:
    """Heads of the keys whose values ``expected`` may accept (``None``: any head)."""
    if not isinstance(expected, TCon):
        return None
    heads = {expected.name, _WILD, *_NARROWER.get(expected.name, ())}
    if expected.name == VARIADIC_TUPLE:
        heads.add("tuple")
    if expected.name == "Optional":
        inner = _actual_heads(expected.args[0])
        if inner is None:
            return None
        heads |= inner | {"None"}
    return frozenset(heads)


@functools.lru_cache(maxsize=1 << 12)
def _var_counts(t: Type) -> Counter:
    return Counter(s.name for s in subterms(t) if isinstance(s, TVar))


@functools.lru_cache(maxsize=1 << 17)
def _solver_fit(expected: Type, actual: Type) -> tuple[int, int] | None:
    """Whether ``actual`` fits ``expected`` from an empty substitution, as (coercions used, query
    variables bound to a constructor); ``None`` when it does not. Keys recur across lookups and
    index values, so this is memoised process-wide.

    Only variables that occur once in ``expected`` count as bound: one that occurs twice may, in the
    real types, first meet a candidate variable (a free renaming) where the key had ``Any``.
    """
    solver = _Solver(None, True)
    if not solver.accepts(expected, actual):
        return None
    coercions = sum(1 for note in solver.notes if note[0] == "coerce")
    once = _var_counts(expected)
    specific = sum(1 for note in solver.notes if note[0] == "bind" and note[1].startswith(QUERY_PREFIX)
                   and once[note[1]] == 1 and isinstance(note[2], TCon))
    return coercions, specific


def _ground_notes(expected: Type, actual: Type) -> tuple[int, bool] | None:
    """What :meth:`~cocoda_jax.types.unify._Solver.accepts` notes for two types without type variables
    (result keys never have any, nor do most forms and arguments), found by structure: (coercions,
    whether an ``Any`` of ``expected`` met a non-``Any``); ``None``: does not fit. With nothing to
    bind, its paths check each argument on its own, so this sums the arguments. Not memoised: a
    lookup fits its result to hundreds of keys (884 fixed-tuple keys at 100,000 signatures) and an
    argument to hundreds of forms, and walking these small terms costs less than hashing them."""
    e, a = expected, actual
    if e is ANY or a is ANY:  # a wildcard: matches, with a note unless both are Any
        return 0, e is ANY and a is not ANY
    if e.name == a.name:  # no other path applies to one constructor
        return _ground_notes_all(zip(e.args, a.args), 0) if len(e.args) == len(a.args) else None
    if e.name in _NUMERIC_RANK and a.name in _NUMERIC_RANK:
        return (1, False) if _NUMERIC_RANK[a.name] < _NUMERIC_RANK[e.name] else None
    if e.name == "Optional":
        if a == NONE:
            return 1, False
        inner = _ground_notes(e.args[0], a)
        return None if inner is None else (inner[0] + 1, inner[1])
    if e.name == VARIADIC_TUPLE and a.name == "tuple":
        return _ground_notes_all(((e.args[0], y) for y in a.args), 1)
    return None


def _ground_notes_all(pairs: Iterable[tuple[Type, Type]], coercions: int) -> tuple[int, bool] | None:
    met_any = False
    for e, a in pairs:
        notes = _ground_notes(e, a)
        if notes is None:
            return None
        coercions += notes[0]
        met_any = met_any or notes[1]
    return coercions, met_any


def _ground_fit(expected: Type, actual: Type) -> tuple[int, int] | None:
    """:func:`_solver_fit` of two types without type variables (no query variable to bind)."""
    notes = _ground_notes(expected, actual)
    return None if notes is None else (notes[0], 0)


# ---------------------------------------------------------------------------------------------
# Forms and pair prices

def _outline(t: Type) -> tuple[str, tuple[str, ...], bool]:
    """A form's head, its arguments' heads and whether it is exact: enough to rule most forms out
    for an argument, and to price all forms of a constructor at once for a bare-variable argument."""
    if not isinstance(t, TCon):
        return _WILD, (), True
    return t.name, tuple(_head(a) for a in t.args), _is_exact(t)


def _result_outline_filter(expected: Type) -> Callable[[tuple[str, tuple[str, ...], bool]], bool]:
    """Whether ``expected`` (a type or a key) may accept a result whose key has a given outline (the
    mirror of :func:`_outline_filter`, one level deep). A predicate on outlines: a lookup asks it of
    every result key outline, so the heads ``expected`` and its arguments accept are found once."""
    if not isinstance(expected, TCon):
        return lambda outline: True
    heads = _actual_heads(expected)
    kid_heads = [_actual_heads(e) for e in expected.args]  # None: any head

    def fits(outline: tuple[str, tuple[str, ...], bool]) -> bool:
        head, kids, _ = outline
        if head == _WILD:
            return True
        if heads is not None and head not in heads:
            return False
        if head == expected.name:
            return len(kids) == len(kid_heads) and all(h is None or k in h for k, h in zip(kids, kid_heads))
        if expected.name == VARIADIC_TUPLE and head == "tuple":
            return kid_heads[0] is None or all(k in kid_heads[0] for k in kids)
        return True
    return fits


# For an argument that is a bare variable or Any, the price against a constructor form does not
# depend on the constructor (the variable binds to it whole): one representative per exactness.
_CON_EXACT, _CON_RELAXED = TCon("int"), TCon("list", (TVar(f"{_FRESH}c0"),))


def _outline_filter(actual: Type) -> Callable[[tuple[str, tuple[str, ...], bool]], bool]:
    """Whether a form with a given outline may accept a value of type (or key) ``actual``: the paths
    of :meth:`~cocoda_jax.types.unify._Solver.accepts` (same constructor, argument by argument;
    ``Optional``; the variadic tuple; numeric widening), checked one level deep. A predicate on
    outlines: a lookup asks it of every form outline, so the heads that accept ``actual`` and its
    arguments are found once."""
    if not isinstance(actual, TCon):
        return lambda outline: True
    heads = _expected_heads(actual)
    kid_heads = [_expected_heads(a) for a in actual.args]  # None: any head

    def fits(outline: tuple[str, tuple[str, ...], bool]) -> bool:
        head, kids, _ = outline
        if head == _WILD:
            return True
        if head not in heads:
            return False
        if head == actual.name:
            return len(kids) == len(kid_heads) and all(h is None or k in h for k, h in zip(kids, kid_heads))
        if head == "Optional":
            return actual.name == "None" or kids[0] in heads
        if head == VARIADIC_TUPLE:
            return all(h is None or kids[0] in h for h in kid_heads)
        return True
    return fits


def _rename_apart(t: Type, tag: str) -> Type:
    """``t`` with every variable *occurrence* replaced by its own fresh variable."""
    counter = itertools.count()

    def go(u: Type) -> Type:
        if isinstance(u, TVar):
            return TVar(f"{_FRESH}{tag}{next(counter)}")
        if isinstance(u, TCon) and u.args:
            return TCon(u.name, tuple(go(a) for a in u.args))
        return u

    return go(t)


@functools.lru_cache(maxsize=1 << 16)
def _relaxed(t: Type, tag: str) -> Type:
    return _rename_apart(t, tag) if free_vars(t) else t


def _forms(types: tuple[Type, ...], result: Type, tag: str) -> tuple[Type, ...]:
    """Each type kept when its variables are exclusive to it within the signature, else relaxed."""
    var_sets = [free_vars(t) for t in types]
    result_vars = free_vars(result)
    out = []
    for j, t in enumerate(types):
        if var_sets[j]:
            others = set(result_vars)
            for k, vs in enumerate(var_sets):
                if k != j:
                    others |= vs
            if var_sets[j] & others:
                t = _relaxed(t, tag)
        out.append(t)
    return tuple(out)


@functools.lru_cache(maxsize=1 << 16)
def _is_exact(form: Type) -> bool:
    return not any(v.startswith(_FRESH) for v in free_vars(form))


@functools.lru_cache(maxsize=1 << 18)
def _pair_counts(expected: Type, actual: Type) -> tuple[int, int, int] | None:
    """Notes of ``accepts(expected, actual)`` from an empty substitution, as (coercions, candidate
    generalities, query specialisations), priced like a parameter location in the match; bindings
    of renamed-apart variables are free. ``None``: does not fit. Memoised process-wide."""
    solver = _Solver(None, True)
    if not solver.accepts(expected, actual):
        return None
    coerce = general = specific = 0
    seen_any = False
    for note in solver.notes:
        kind = note[0]
        if kind == "coerce":
            coerce += 1
        elif kind == "bind":
            if not isinstance(note[2], TVar) and not note[1].startswith(_FRESH):
                if note[1].startswith(CANDIDATE_PREFIX):
                    general += 1
                else:
                    specific += 1
        elif kind == "any" and not seen_any and note[1] == "expected":
            seen_any = True
            general += 1
    return coerce, general, specific


def _ground_pair_counts(expected: Type, actual: Type) -> tuple[int, int, int] | None:
    """:func:`_pair_counts` of two types without type variables (an ``Any`` counts once)."""
    notes = _ground_notes(expected, actual)
    return None if notes is None else (notes[0], int(notes[1]), 0)


def _pair_lb(form: Type, arg: Type, arg_exact: bool) -> tuple[int, int, int] | None:
    """A lower bound on the price of feeding a parameter of ``form`` from a query argument of form
    ``arg`` inside any match (exact when both forms are exact); ``None``: never fits."""
    if arg_exact and _is_exact(form):
        return _pair_counts(form, arg)
    return _pair_counts(_relaxed(form, "c"), _relaxed(arg, "q"))


# ---------------------------------------------------------------------------------------------
# Immutable building blocks

class _Bag:
    """An immutable set with O(1) amortised ``with_``/``without``: a frozen base plus small
    persistent deltas, folded into a new base once they outgrow a quarter of it (so every fold is
    paid for by the updates before it). Lookups read :meth:`members`, computed once per value."""

    __slots__ = ("_base", "_plus", "_minus", "_members", "_min")

    def __init__(self, base: frozenset = frozenset(), plus: _PDict = _EMPTY, minus: _PDict = _EMPTY):
        if len(plus) + len(minus) > 32 + len(base) // 4:
            base, plus, minus = (base - frozenset(minus)) | frozenset(plus), _EMPTY, _EMPTY
        self._base, self._plus, self._minus = base, plus, minus
        self._members = base if not plus and not minus else None
        self._min = None

    def __len__(self) -> int:
        return len(self._base) - len(self._minus) + len(self._plus)

    def __contains__(self, x) -> bool:
        return x in self._plus or (x in self._base and x not in self._minus)

    def with_(self, x) -> "_Bag":
        if x in self._minus:
            new = _Bag(self._base, self._plus, self._minus.remove(x))
        elif x in self._base or x in self._plus:
            return self
        else:
            new = _Bag(self._base, self._plus.set(x, True), self._minus)
        if self._min is not None:  # carried forward: a large bag's minimum is not recomputed
            new._min = min(self._min, x)
        return new

    def without(self, x) -> "_Bag":
        if x in self._plus:
            new = _Bag(self._base, self._plus.remove(x), self._minus)
        elif x in self._base and x not in self._minus:
            new = _Bag(self._base, self._plus, self._minus.set(x, True))
        else:
            raise KeyError(x)
        if self._min is not None and self._min != x:
            new._min = self._min
        return new

    def members(self) -> frozenset:
        if self._members is None:
            self._members = (self._base - frozenset(self._minus)) | frozenset(self._plus)
        return self._members

    def smallest(self):
        if self._min is None:
            self._min = min(self.members())
        return self._min

    def __reduce__(self):
        return (_Bag, (self.members(),))


_NO_BAG = _Bag()


@dataclass(frozen=True, slots=True)
class _Item:
    """The index's view of one signature."""

    prepared: Prepared
    result_key: Type
    shape: tuple[Type, ...]  # the parameters' forms, in order
    arity: int
    generic_result: bool  # the result is a bare type variable or Any


@functools.lru_cache(maxsize=1 << 16)
def _item(sig: Signature) -> _Item:
    """Memoised: signatures are immutable and libraries repeat them."""
    prep = prepare(sig, CANDIDATE_PREFIX)
    return _Item(prep, type_key(sig.result), _forms(prep.types, prep.result, "c"), sig.arity,
                 not isinstance(sig.result, TCon))


@dataclass(frozen=True, slots=True)
class _ResultGroup:
    """The shapes of one (result key, arity), and per form the shapes having it."""

    shapes: _Bag
    by_form: _PDict  # form -> _Bag of shapes


def _bump(table: _PDict, key, delta: int) -> _PDict:
    n = table.get(key, 0) + delta
    return table.set(key, n) if n else table.remove(key)


def _put(table: _PDict, key, inner_key, delta: int) -> _PDict:
    """``table[key]`` is a counting map; adds ``delta`` to its ``inner_key`` (dropping zeros)."""
    inner = _bump(table.get(key, _EMPTY), inner_key, delta)
    return table.set(key, inner) if inner else table.remove(key)


_MEMO_LIMIT = 20_000
_FED_LIMIT = 256  # fed-shape sets are large: keep few


class SignatureIndex:
    """An immutable map from names to signatures with fast, exact, ranked lookup (see module doc).

    Forms and result keys are interned as small ints per index (``_ids``/``_terms``, never freed), so
    the hot paths hash ints and tuples of ints rather than type terms."""

    __slots__ = ("_items", "_ids", "_terms", "_cells", "_shape_rks", "_shape_names", "_by_form", "_groups",
                 "_form_heads", "_rk_heads", "_rk_arities", "costs", "_memo", "_fed")
    _STATE = ("_items", "_ids", "_terms", "_cells", "_shape_rks", "_shape_names", "_by_form", "_groups",
              "_form_heads", "_rk_heads", "_rk_arities")

    def __init__(self, costs: MatchCosts = DEFAULT_COSTS):
        self._items: _PDict = _EMPTY  # name -> (_Item, shape, result key id); a shape is a tuple of form ids
        self._ids: _PDict = _EMPTY  # form or result key -> id
        self._terms: _PDict = _EMPTY  # id -> form or result key
        self._cells: _PDict = _EMPTY  # (shape, result key id) -> _Bag of names
        self._shape_rks: _PDict = _EMPTY  # shape -> _Bag of result key ids
        self._shape_names: _PDict = _EMPTY  # shape -> _Bag of names (any result)
        self._by_form: _PDict = _EMPTY  # (form id, arity) -> _Bag of shapes
        self._groups: _PDict = _EMPTY  # (result key id, arity) -> _ResultGroup
        self._form_heads: _PDict = _EMPTY  # outline -> form id -> number of shapes having it
        self._rk_heads: _PDict = _EMPTY  # outline -> result key id -> number of arities
        self._rk_arities: _PDict = _EMPTY  # result key id -> arity -> True
        self.costs = costs
        self._memo: dict = {}
        self._fed: dict = {}

    def _replace(self, **fields) -> "SignatureIndex":
        new = SignatureIndex(self.costs)
        for name in self._STATE:
            setattr(new, name, fields.get(name, getattr(self, name)))
        return new

    def __getstate__(self) -> dict:  # the memo tables are caches: not pickled
        return {name: getattr(self, name) for name in (*self._STATE, "costs")}

    def __setstate__(self, state: dict) -> None:
        for name in (*self._STATE, "costs"):
            setattr(self, name, state[name])
        self._memo, self._fed = {}, {}

    # -- construction ---------------------------------------------------------------------------
    @classmethod
    def build(cls, items: Mapping[str, Signature] | Iterable[tuple[str, Signature]],
              costs: MatchCosts = DEFAULT_COSTS) -> "SignatureIndex":
        """Bulk-loads ``(name, signature)`` pairs (a mapping or an iterable); names must be unique."""
        pairs_iter = items.items() if isinstance(items, Mapping) else items
        ids: dict[Type, int] = {}
        entries: dict[str, tuple] = {}
        cells: dict[tuple, set[str]] = {}
        for name, sig in pairs_iter:
            _check_name(name)
            if name in entries:
                raise ValueError(f"SignatureIndex.build: duplicate name {name!r}")
            e = _item(sig)
            shape = tuple(ids.setdefault(f, len(ids)) for f in e.shape)
            rk = ids.setdefault(e.result_key, len(ids))
            entries[name] = (e, shape, rk)
            cells.setdefault((shape, rk), set()).add(name)
        terms = {i: t for t, i in ids.items()}
        shape_rks: dict[tuple, set[int]] = {}
        by_form: dict[tuple, set[tuple]] = {}
        group_shapes: dict[tuple, set[tuple]] = {}
        group_forms: dict[tuple, dict[int, set[tuple]]] = {}
        for shape, rk in cells:
            m = len(shape)
            if shape not in shape_rks:
                shape_rks[shape] = set()
                for f in set(shape):
                    by_form.setdefault((f, m), set()).add(shape)
            shape_rks[shape].add(rk)
            group_shapes.setdefault((rk, m), set()).add(shape)
            inner = group_forms.setdefault((rk, m), {})
            for f in set(shape):
                inner.setdefault(f, set()).add(shape)
        form_heads: dict[str, dict[int, int]] = {}
        for shape in shape_rks:
            for f in set(shape):
                d = form_heads.setdefault(_outline(terms[f]), {})
                d[f] = d.get(f, 0) + 1
        rk_heads: dict[str, dict[int, int]] = {}
        rk_arities: dict[int, dict[int, bool]] = {}
        for rk, m in group_shapes:
            d = rk_heads.setdefault(_outline(terms[rk]), {})
            d[rk] = d.get(rk, 0) + 1
            rk_arities.setdefault(rk, {})[m] = True
        index = cls(costs)
        index._items = _PDict.from_dict(entries)
        index._ids, index._terms = _PDict.from_dict(ids), _PDict.from_dict(terms)
        index._cells = _PDict.from_dict({k: _Bag(frozenset(v)) for k, v in cells.items()})
        index._shape_rks = _PDict.from_dict({k: _Bag(frozenset(v)) for k, v in shape_rks.items()})
        shape_names: dict[tuple, set[str]] = {}
        for (shape, _), names in cells.items():
            shape_names.setdefault(shape, set()).update(names)
        index._shape_names = _PDict.from_dict({k: _Bag(frozenset(v)) for k, v in shape_names.items()})
        index._by_form = _PDict.from_dict({k: _Bag(frozenset(v)) for k, v in by_form.items()})
        index._groups = _PDict.from_dict({g: _ResultGroup(_Bag(frozenset(ss)),
                                              _PDict.from_dict({f: _Bag(frozenset(v)) for f, v in group_forms[g].items()}))
                              for g, ss in group_shapes.items()})
        index._form_heads = _PDict.from_dict({h: _PDict.from_dict(d) for h, d in form_heads.items()})
        index._rk_heads = _PDict.from_dict({h: _PDict.from_dict(d) for h, d in rk_heads.items()})
        index._rk_arities = _PDict.from_dict({rk: _PDict.from_dict(d) for rk, d in rk_arities.items()})
        return index

    def add(self, name: str, sig: Signature) -> "SignatureIndex":
        """A new index that also holds ``name`` (replacing its old signature, if any). O(arity)
        persistent-map updates: nothing is copied whole."""
        _check_name(name)
        base = self.remove(name) if name in self._items else self
        e = _item(sig)
        ids, terms = base._ids, base._terms
        interned = []
        for t in (*e.shape, e.result_key):
            i = ids.get(t)
            if i is None:
                i = len(ids)
                ids, terms = ids.set(t, i), terms.set(i, t)
            interned.append(i)
        shape, rk, m = tuple(interned[:-1]), interned[-1], e.arity
        fields = {"_items": base._items.set(name, (e, shape, rk)), "_ids": ids, "_terms": terms}
        cell = base._cells.get((shape, rk))
        fields["_cells"] = base._cells.set((shape, rk), (cell or _NO_BAG).with_(name))
        fields["_shape_names"] = base._shape_names.set(shape, base._shape_names.get(shape, _NO_BAG).with_(name))
        if cell is None:  # a new cell: the shape and result-key tables learn of it
            old_rks = base._shape_rks.get(shape)
            fields["_shape_rks"] = base._shape_rks.set(shape, (old_rks or _NO_BAG).with_(rk))
            forms = set(shape)
            if old_rks is None:  # a new shape
                by_form, form_heads = base._by_form, base._form_heads
                for f in forms:
                    by_form = by_form.set((f, m), by_form.get((f, m), _NO_BAG).with_(shape))
                    form_heads = _put(form_heads, _outline(terms[f]), f, 1)
                fields["_by_form"], fields["_form_heads"] = by_form, form_heads
            group = base._groups.get((rk, m))
            if group is None:
                group = _ResultGroup(_NO_BAG, _EMPTY)
                fields["_rk_heads"] = _put(base._rk_heads, _outline(e.result_key), rk, 1)
                fields["_rk_arities"] = base._rk_arities.set(rk, base._rk_arities.get(rk, _EMPTY).set(m, True))
            inner = group.by_form
            for f in forms:
                inner = inner.set(f, inner.get(f, _NO_BAG).with_(shape))
            fields["_groups"] = base._groups.set((rk, m), _ResultGroup(group.shapes.with_(shape), inner))
        return base._replace(**fields)

    def remove(self, name: str) -> "SignatureIndex":
        """A new index without ``name``; ``KeyError`` when it is absent."""
        found = self._items.get(name)
        if found is None:
            raise KeyError(f"SignatureIndex.remove: no signature named {name!r}")
        e, shape, rk = found
        m = e.arity
        fields = {"_items": self._items.remove(name)}
        names = self._shape_names[shape].without(name)
        fields["_shape_names"] = self._shape_names.set(shape, names) if len(names) else self._shape_names.remove(shape)
        cell = self._cells[(shape, rk)].without(name)
        if len(cell):
            fields["_cells"] = self._cells.set((shape, rk), cell)
            return self._replace(**fields)
        fields["_cells"] = self._cells.remove((shape, rk))
        forms = set(shape)
        group = self._groups[(rk, m)]
        shapes = group.shapes.without(shape)
        if len(shapes):
            inner = group.by_form
            for f in forms:
                rest = inner[f].without(shape)
                inner = inner.set(f, rest) if len(rest) else inner.remove(f)
            fields["_groups"] = self._groups.set((rk, m), _ResultGroup(shapes, inner))
        else:
            fields["_groups"] = self._groups.remove((rk, m))
            fields["_rk_heads"] = _put(self._rk_heads, _outline(e.result_key), rk, -1)
            arities = self._rk_arities[rk].remove(m)
            fields["_rk_arities"] = self._rk_arities.set(rk, arities) if arities else self._rk_arities.remove(rk)
        rks = self._shape_rks[shape].without(rk)
        if len(rks):
            fields["_shape_rks"] = self._shape_rks.set(shape, rks)
        else:  # the shape is gone
            fields["_shape_rks"] = self._shape_rks.remove(shape)
            by_form, form_heads = self._by_form, self._form_heads
            for f in forms:
                rest = by_form[(f, m)].without(shape)
                by_form = by_form.set((f, m), rest) if len(rest) else by_form.remove((f, m))
                form_heads = _put(form_heads, _outline(self._terms[f]), f, -1)
            fields["_by_form"], fields["_form_heads"] = by_form, form_heads
        return self._replace(**fields)

    # -- reading --------------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._items))

    def signature(self, name: str) -> Signature:
        return self._items[name][0].prepared.sig

    def items(self) -> tuple[tuple[str, Signature], ...]:
        items = self._items
        return tuple((n, items[n][0].prepared.sig) for n in sorted(items))

    def __repr__(self) -> str:
        return f"SignatureIndex({len(self)} signatures)"

    # -- per-query tables (memoised per index value) --------------------------------------------
    def _memoised(self, key, compute):
        found = self._memo.get(key)
        if found is None:
            found = self._memo[key] = compute()
        return found

    def _result_bounds(self, result: Type) -> dict[int, float]:
        """Compatible result key (id) -> lower bound on the cost of the result's fit: the key-level
        coercions or, checked against the query's own result (its type variables included), those
        plus the query variables that must become concrete. The result is checked first, from an
        empty substitution, so these bindings happen in the real match too."""
        def compute():
            key = type_key(result)
            bare = not isinstance(result, TCon)
            fit_result = _solver_fit if free_vars(result) else _ground_fit
            found = {}
            result_may_accept = _result_outline_filter(result)
            for outline, rks in self._result_keys_by_outline():
                if not result_may_accept(outline):
                    continue
                for rid in rks:
                    # a bare-variable (or Any) result binds a constructor key whole: one
                    # representative per outline head kind gives the same fit
                    rk = (_CON_EXACT if outline[0] != _WILD else ANY) if bare else self._terms[rid]
                    fit = _ground_fit(key, rk)  # keys have no type variables
                    if fit is None:
                        continue
                    cost = self.costs.coercion * fit[0]
                    exact = fit_result(result, rk)
                    if exact is not None:
                        cost = max(cost, self.costs.coercion * exact[0] + self.costs.more_specific * exact[1])
                    found[rid] = cost
            return found
        return self._memoised(("result-bound", result), compute)

    def _arities(self, result: Type) -> dict[int, tuple[int, ...]]:
        """Arity -> the compatible result keys having signatures of that arity."""
        def compute():
            by_arity: dict[int, list[Type]] = {}
            arities = self._arities_by_result_key()
            for rk in self._result_bounds(result):
                for m in arities[rk]:
                    by_arity.setdefault(m, []).append(rk)
            return {m: tuple(rks) for m, rks in by_arity.items()}
        return self._memoised(("arities", result), compute)

    def _savings(self, arg: Type, exact: bool) -> dict[int, float]:
        """Form id -> what feeding a parameter of that form from ``arg`` saves at best (``extra +
        missing`` minus the pair's lower-bound price); only forms that save something."""
        def compute():
            c = self.costs
            worth = c.extra + c.missing

            arg_ground = not free_vars(arg)

            def saving_of(form: Type, form_ground: bool = False) -> float:
                if arg_ground and form_ground:
                    counts = _ground_pair_counts(form, arg)
                else:
                    counts = _pair_lb(form, arg, exact)
                if counts is None:
                    return 0.0
                return worth - (c.coercion * counts[0] + c.more_general * counts[1] + c.more_specific * counts[2])

            bare = not isinstance(arg, TCon)
            may_accept_arg = _outline_filter(arg)
            heads = _expected_heads(type_key(arg))
            by_head = self._outlines_by_head()
            found = {}
            for outline, forms in itertools.chain.from_iterable(
                    by_head.values() if heads is None else (by_head.get(h, ()) for h in heads)):
                if not may_accept_arg(outline):
                    continue
                if bare and outline[0] != _WILD:
                    saving = saving_of(_CON_EXACT if outline[2] else _CON_RELAXED)
                    if saving > 0:
                        found.update(dict.fromkeys((f for f, _, _ in forms), saving))
                    continue
                for f, form, form_ground in forms:
                    saving = saving_of(form, form_ground)
                    if saving > 0:
                        found[f] = saving
            return found
        return self._memoised(("savings", arg, exact), compute)

    # Plain snapshots of small persistent tables, once per index value: iterating a _PDict walks its
    # 64-slot levels, which cost more than the work per entry when lookups iterate thousands of them.
    def _outlines_by_head(self) -> dict[str, list[tuple[tuple, tuple[tuple[int, Type, bool], ...]]]]:
        """Form outline head -> (outline, its forms as (id, form, whether it has no type variable))."""
        def compute():
            terms = self._terms
            out: dict[str, list] = {}
            for outline, forms in self._form_heads.items():
                out.setdefault(outline[0], []).append(
                    (outline, tuple((f, terms[f], not free_vars(terms[f])) for f in forms)))
            return out
        return self._memoised("outlines-by-head", compute)

    def _result_keys_by_outline(self) -> tuple[tuple[tuple, tuple[int, ...]], ...]:
        """(outline, result key ids of that outline) for every result key outline."""
        return self._memoised("result-keys-by-outline",
                              lambda: tuple((outline, tuple(rks)) for outline, rks in self._rk_heads.items()))

    def _group_forms(self, rk: int, m: int) -> dict[int, _Bag]:
        """Form id -> the shapes having it, among those of result key ``rk`` and arity ``m``."""
        return self._memoised(("group-forms", rk, m), lambda: dict(self._groups[(rk, m)].by_form.items()))

    def _arities_by_result_key(self) -> dict[int, tuple[int, ...]]:
        return self._memoised("arities-by-result-key",
                              lambda: {rk: tuple(ms) for rk, ms in self._rk_arities.items()})

    def _fed_levels(self, arg: Type, exact: bool, savings: dict, m: int) -> tuple[tuple[float, frozenset], ...]:
        """Per saving level of ``arg`` (highest first): the shapes of arity ``m`` (any result) that it
        can feed saving at least that much."""
        key = (arg, exact, m)
        found = self._fed.get(key)
        if found is None:
            if len(self._fed) > _FED_LIMIT:  # drop the older half (insertion order), keep recent ones
                for stale in list(self._fed)[: _FED_LIMIT // 2]:
                    del self._fed[stale]
            by_form = self._by_form
            by_value: dict[float, list] = {}
            for f, saving in savings.items():
                bag = by_form.get((f, m))
                if bag is not None:
                    by_value.setdefault(saving, []).append(bag)
            found = self._fed[key] = _levels(by_value)
        return found

    # -- lookup ---------------------------------------------------------------------------------
    def lookup(self, query: Signature, limit: int | None = 10, *,
               max_cost: float | None = None) -> tuple[tuple[str, Match], ...]:
        """The best ``limit`` matches (all with ``limit=None``), sorted by cost then name; only those
        with cost <= ``max_cost`` when given. Same answer as :func:`linear_lookup`."""
        return self.lookup_with_stats(query, limit, max_cost=max_cost)[0]

    def lookup_with_stats(self, query: Signature, limit: int | None = 10, *,
                          max_cost: float | None = None) -> tuple[tuple[tuple[str, Match], ...], dict]:
        """:meth:`lookup` plus counters: signatures given a bound, refinements, full matches run."""
        if limit is not None and limit < 1:
            raise ValueError(f"lookup: limit must be >= 1 or None, got {limit}")
        if not isinstance(query, Signature):
            raise TypeError(f"lookup: expected a Signature, got {type(query).__name__}")
        if len(self._memo) > _MEMO_LIMIT:  # a long-lived index must not grow with distinct queries
            self._memo.clear()
        return _Lookup(self, prepare(query, QUERY_PREFIX), limit, max_cost).run()


def _levels(by_value: dict[float, list]) -> tuple[tuple[float, frozenset], ...]:
    """Cumulative unions of posting lists (``_Bag``s) per distinct saving, highest first."""
    out = []
    acc: set = set()
    for value in sorted(by_value, reverse=True):
        for bag in by_value[value]:
            acc |= bag.members()
        out.append((value, frozenset(acc)))
    return tuple(out)


def _by_value(savings: dict, inner: dict) -> dict[float, list]:
    """The posting lists of ``inner`` (form -> _Bag) for the forms in ``savings``, by saving."""
    by_value: dict[float, list] = {}
    if len(savings) < len(inner):
        for form, saving in savings.items():
            bag = inner.get(form)
            if bag is not None:
                by_value.setdefault(saving, []).append(bag)
    else:
        for form, bag in inner.items():
            saving = savings.get(form)
            if saving is not None:
                by_value.setdefault(saving, []).append(bag)
    return by_value


_THRESHOLDS = 4  # saving levels counted per shape when tiers are formed
_DFS_PAIRS = 16  # above this many saving pairs the exact assignment is skipped (the bound stays valid)


def _best_assignment(rows: list[list[tuple[int, float]]], reorder: float) -> float:
    """The largest ``sum(savings) - reorder * moved`` over assignments of arguments (rows, in query
    order) to distinct parameters, ``moved`` counted as in the match (assigned minus the longest run
    that keeps order). A depth-first search, pruned by the best savings still possible."""
    n = len(rows)
    rows = [sorted(row, key=lambda js: -js[1]) for row in rows]  # good assignments first: earlier pruning
    best_rest = [0.0] * (n + 1)
    for i in range(n - 1, -1, -1):
        best_rest[i] = best_rest[i + 1] + max((s for _, s in rows[i]), default=0.0)
    best = 0.0
    seq: list[int] = []

    def go(i: int, used: int, acc: float) -> None:
        nonlocal best
        if acc + best_rest[i] <= best:
            return
        if i == n:
            value = acc - reorder * _moves(seq) if seq else acc
            if value > best:
                best = value
            return
        for j, s in rows[i]:
            if not used >> j & 1:
                seq.append(j)
                go(i + 1, used | 1 << j, acc + s)
                seq.pop()
        go(i + 1, used, acc)

    go(0, 0, 0.0)
    return best


@dataclass(frozen=True, slots=True)
class _Refined:
    """A candidate after its result check (:meth:`_Lookup.refine`)."""

    result_cost: float
    argument_key: tuple  # (parameter types, the result check's bindings of their variables, resolved)


class _Lookup:
    """One lookup: a best-first search over lazily opened arities, tiers, cells and candidates."""

    def __init__(self, index: SignatureIndex, q: Prepared, limit: int | None, max_cost: float | None):
        self.index, self.q, self.limit, self.max_cost = index, q, limit, max_cost
        self.costs = c = index.costs
        self.n = len(q.types)
        self.worth = c.extra + c.missing  # what using one argument saves at most
        self.result_bounds = index._result_bounds(q.result)
        self.any_rk = index._ids.get(ANY, -1)
        self.generic = 0.0 if isinstance(q.result, TVar) or q.result is ANY else c.more_general
        forms = _forms(q.types, q.result, "q")
        self.args = [(f, _is_exact(f)) for f in forms]
        self.savings = [index._savings(f, exact) for f, exact in self.args]
        self.all_forms = set().union(*self.savings)  # forms some argument can feed
        self.heap: list[tuple] = []
        self.seq = itertools.count()
        self.shape_memo: dict[tuple, tuple] = {}
        self.query_arg_vars = frozenset().union(*map(free_vars, q.types))
        self.argument_parts: dict[tuple, float] = {}  # argument key -> argument part (see refine)
        self.bounded = 0
        self.refined = 0
        self.shapes = 0

    # Bounds and costs are both rounded to 9 decimals: a bound equal to a cost in exact arithmetic
    # compares equal, so ties are broken by name exactly as the linear scan breaks them.
    def push_unit(self, bound: float, unit: tuple) -> None:
        # units sort before candidates of the same bound (1 < 2), so they open in time
        heapq.heappush(self.heap, (round(bound, 9), 1, "", next(self.seq), unit))

    def push_cell(self, bound: float, shape: tuple, rk: int) -> None:
        # a cell sorts with its smallest name: it is opened just before that name could be
        cell = self.index._cells[(shape, rk)]
        heapq.heappush(self.heap, (round(bound, 9), 2, cell.smallest(), next(self.seq), ("cell", cell)))

    def push_candidate(self, name: str, bound: float) -> None:
        self.bounded += 1
        heapq.heappush(self.heap, (round(bound, 9), 2, name, next(self.seq), None))

    def push_refined(self, name: str, bound: float, refined: _Refined) -> None:
        heapq.heappush(self.heap, (round(bound, 9), 2, name, next(self.seq), refined))

    def run(self) -> tuple[tuple[tuple[str, Match], ...], dict]:
        c, n = self.costs, self.n
        for m, rks in self.index._arities(self.q.result).items():
            best_rb = min(self.result_part(rk) for rk in rks)
            self.push_unit(c.extra * max(0, n - m) + c.missing * max(0, m - n) + best_rb, ("arity", m, rks))

        best: list[tuple[float, str, Scored]] = []
        matched = 0
        items = self.index._items
        limit, max_cost = self.limit, self.max_cost
        while self.heap:
            bound, kind, name, _, payload = heapq.heappop(self.heap)
            if max_cost is not None and bound > max_cost:
                break
            full = limit is not None and len(best) >= limit
            if kind == 1:
                if full and bound > best[-1][0]:
                    break
                self.open(payload)
                continue
            if full and (bound, name) > best[-1][:2]:
                break
            if type(payload) is tuple:  # a shape or a cell
                if payload[0] == "shape":
                    self.open_shape(payload[1])
                else:
                    for member in payload[1].members():
                        self.push_candidate(member, bound)
                continue
            e, shape, _ = items[name]
            if payload is None:  # refine: exact result cost plus a bound on the argument part
                refined = self.refine(e.prepared)
                self.refined += 1
                if refined is None:
                    continue
            else:  # refined before; the argument part may have been learned since
                refined = payload
            tighter = round(self.argument_bound(refined, shape) + refined.result_cost, 9)
            if tighter > bound:
                self.push_refined(name, tighter, refined)
                continue
            matched += 1
            scored = score_prepared(self.q, e.prepared, c)
            if scored is not None:
                self.argument_parts.setdefault(refined.argument_key, round(scored.cost - refined.result_cost, 9))
            if scored is None or (max_cost is not None and scored.cost > max_cost):
                continue
            bisect.insort(best, (scored.cost, name, scored), key=lambda x: x[:2])
            if limit is not None and len(best) > limit:
                best.pop()
        stats = {"bounded_candidates": self.bounded, "result_checks": self.refined, "full_matches": matched,
                 "result_keys": len(self.result_bounds), "shapes_bounded": self.shapes}
        found = tuple((name, explain(sc, self.q, items[name][0].prepared, c)) for _, name, sc in best)
        return found, stats

    def open(self, unit: tuple) -> None:
        kind = unit[0]
        if kind == "arity":
            self.open_arity(unit[1], unit[2])
        elif kind == "coarse":
            self.open_coarse(*unit[1:])
        elif kind == "tier":
            self.open_tier(*unit[1:])
        else:
            self.open_zero(*unit[1:])

    def result_part(self, rk: int) -> float:
        """The part of a bound that stands for the result's cost (refined later to the exact cost)."""
        rb = self.result_bounds[rk]
        return rb + self.generic if rk == self.any_rk else rb

    def base(self, m: int) -> float:
        return self.costs.extra * self.n + self.costs.missing * m

    def open_arity(self, m: int, rks: tuple[int, ...]) -> None:
        """Finds, per query argument, the shapes of arity ``m`` it can feed at each saving level, and
        queues one coarse tier per (h, h0): shapes fed by exactly ``h`` arguments, ``h0`` of them for
        free, bounded with ``h0`` free savings plus the best other savings any argument offers for
        the rest of ``min(h, m)``; plus the unit of the shapes no argument feeds."""
        index = self.index
        per_arg = []
        allowed = None  # the shapes with a result that fits, when the shared posting lists are used
        if m:
            groups = [index._groups[(rk, m)] for rk in rks]
            if 4 < len(groups) <= 64:
                allowed = frozenset().union(*(g.shapes.members() for g in groups))
            for (f, exact), savings in zip(self.args, self.savings):
                if not savings:
                    continue
                if len(groups) > 4:
                    levels = index._fed_levels(f, exact, savings, m)
                else:
                    by_value: dict[float, list] = {}
                    for rk in rks:
                        for value, bags in _by_value(savings, index._group_forms(rk, m)).items():
                            by_value.setdefault(value, []).extend(bags)
                    levels = _levels(by_value)
                if levels:
                    per_arg.append(levels)
        # at_least[j] / free_at_least[j]: the shapes fed by j or more arguments / fed for free by j
        # or more arguments (set algebra, no loop over shapes)
        worth = self.worth
        at_least: list[set] = [set()]
        free_at_least: list[set] = [set()]
        partial = []  # per argument, the best saving short of free
        for levels in per_arg:
            for table, fed in ((at_least, levels[-1][1]), (free_at_least, levels[0][1] if levels[0][0] == worth
                                                           else frozenset())):
                if allowed is not None:
                    fed = fed & allowed
                table.append(set())
                for j in range(len(table) - 1, 1, -1):
                    table[j] |= table[j - 1] & fed
                table[1] |= fed
            partial.append(next((v for v, _ in levels if v < worth), 0.0))
        partial.sort(reverse=True)
        best_rb = min(self.result_part(rk) for rk in rks)
        base = self.base(m) + best_rb
        context = {"rks": rks, "per_arg": per_arg, "at_least": at_least, "free_at_least": free_at_least}
        for h in range(1, len(at_least)):
            if not at_least[h]:
                continue
            k = min(h, m)
            for h0 in range(0, h + 1):
                k0 = min(h0, k)
                self.push_unit(base - worth * k0 - sum(partial[:k - k0]), ("coarse", m, h, h0, context))
        self.push_unit(base, ("zero", m, rks, at_least[1] if len(at_least) > 1 else set()))

    def open_coarse(self, m: int, h: int, h0: int, context: dict) -> None:
        """The shapes fed by exactly ``h`` arguments, ``h0`` of them for free. Splits this coarse
        tier into tiers of one *profile* each: the best result part, ``k =
        min(h, g, m)`` (``g``: the parameters some argument can feed) and, for the few highest saving
        levels, how many arguments can feed the shape saving at least that much. Of the ``k``
        arguments an assignment can use, at most ``c_1`` save the top level, ``c_2 - c_1`` the
        second, and so on; the rest save no more than the next level below the counted ones."""
        if "thresholds" not in context:
            self.profile_context(m, context)
        thresholds, below = context["thresholds"], context["below"]
        shape_rb, best_rb = context["shape_rb"], context["best_rb"]
        at_least, free = context["at_least"], context["free_at_least"]
        members_set = at_least[h] - at_least[h + 1] if h + 1 < len(at_least) else set(at_least[h])
        if h0:
            members_set &= free[h0]
        if h0 + 1 < len(free):
            members_set -= free[h0 + 1]
        if not members_set:
            return
        if shape_rb is not None:
            members_set &= shape_rb.keys()
        shapes = members_set
        getters = []
        for sets in context["sets_at"]:  # per level: the arguments that feed a shape saving that much
            c: Counter = Counter()
            for fed in sets:
                c.update(fed & members_set)
            getters.append(c.get)
        k_all = min(h, m)
        # a fed shape has at least one parameter some argument can feed, so g only matters above 1
        forms = self.all_forms if k_all > 1 else None
        tiers: dict[tuple, list[tuple]] = {}
        for shape in shapes:
            rb = best_rb if shape_rb is None else shape_rb[shape]
            k = k_all
            if forms is not None:
                g = 0
                for f in shape:
                    if f in forms:
                        g += 1
                if g < k:
                    k = g
            profile = (rb, k, *[get(shape, 0) for get in getters])
            tiers.setdefault(profile, []).append(shape)
        base = self.base(m)
        for profile, members in tiers.items():
            left = profile[1]
            saving, before = 0.0, 0
            for theta, at_least in zip(thresholds, profile[2:]):
                take = min(left, at_least - before)
                saving += take * theta
                left -= take
                before = at_least
            saving += left * below
            bound = round(base + profile[0] - saving, 9)
            self.push_unit(bound, ("tier", m, members, bound))

    def profile_context(self, m: int, context: dict) -> None:
        """What :meth:`open_coarse` needs for arity ``m``, computed once per lookup and arity."""
        index, per_arg, rks = self.index, context["per_arg"], context["rks"]
        values = sorted({v for levels in per_arg for v, _ in levels}, reverse=True)
        thresholds = values[:_THRESHOLDS]
        context["thresholds"] = thresholds
        context["below"] = values[_THRESHOLDS] if len(values) > _THRESHOLDS else 0.0
        sets_at = []
        for theta in thresholds:  # per argument, the shapes it feeds saving at least theta
            sets = []
            for levels in per_arg:
                fed = None
                for v, shapes in levels:
                    if v < theta:
                        break
                    fed = shapes
                if fed is not None:
                    sets.append(fed)
            sets_at.append(sets)
        context["sets_at"] = sets_at
        context["best_rb"] = min(self.result_part(rk) for rk in rks)
        shape_rb = None
        if len(rks) <= 64:  # the best result part per shape (and no shape whose results do not fit)
            shape_rb = {}
            for rk in sorted(rks, key=self.result_part, reverse=True):  # the best part is written last
                shape_rb.update(dict.fromkeys(index._groups[(rk, m)].shapes.members(), self.result_part(rk)))
        context["shape_rb"] = shape_rb

    def shape_matrix(self, shape: tuple) -> tuple[float, list, float | None]:
        """A cheap lower bound on the argument part of the cost for ``shape`` (module doc, step 3),
        the saving rows it came from, and the exact-assignment bound once computed."""
        found = self.shape_memo.get(shape)
        if found is not None:
            return found
        self.shapes += 1
        rows = []
        row_best = []
        col_best = [0.0] * len(shape)
        for savings in self.savings:
            row = [(j, savings[f]) for j, f in enumerate(shape) if f in savings]
            rows.append(row)
            if row:
                top = 0.0
                for j, s in row:
                    if s > top:
                        top = s
                    if s > col_best[j]:
                        col_best[j] = s
                row_best.append(top)
        col = [s for s in col_best if s > 0]
        k = min(len(row_best), len(col))
        if k < len(row_best):
            row_best.sort(reverse=True)
        if k < len(col):
            col.sort(reverse=True)
        saving = min(sum(row_best[:k]), sum(col[:k]))
        found = self.shape_memo[shape] = (self.base(len(shape)) - saving, rows, None)
        return found

    def refine(self, candidate: Prepared) -> _Refined | None:
        """Runs the result check that every match starts with: ``None`` when the result does not fit,
        else its exact cost and the candidate's argument key.

        Everything a match does after the result check (pair prices, assignment, joint check,
        reordering, missing and extra) reads only the two parameter lists and the result check's
        bindings of their variables. So candidates with the same parameter types and the same such
        bindings (resolved) pay the same argument part: once one of them is fully matched, the
        others' refined bound is their exact cost, and each is fully matched only if it enters the
        answer. The pair-price bound is loosest where this helps most: shared type variables, whose
        bindings the relaxed prices leave free (``(T, T)`` queries, generic tools such as
        ``(T, T) -> T``). Bindings of variables only the results have are left out of the key, so
        that candidates differing only in their results share it."""
        solver = _result_solver(self.q, candidate)
        if solver is None:
            return None
        subst, bindings = solver.s, ()
        if subst:
            read = self.query_arg_vars.union(*map(free_vars, candidate.types))
            bindings = tuple(sorted((v, apply_subst(TVar(v), subst)) for v in subst if v in read))
        return _Refined(_notes_cost(solver.notes, True, self.costs), (candidate.types, bindings))

    def argument_bound(self, refined: _Refined, shape: tuple) -> float:
        """The argument part of a candidate's refined bound: exact once learned for its argument key
        (see :meth:`refine`), else the shape's best assignment over pair prices."""
        learned = self.argument_parts.get(refined.argument_key)
        return self.shape_exact(shape) if learned is None else learned

    def shape_exact(self, shape: tuple) -> float:
        """The argument part of the bound from the best assignment over pair prices, order included."""
        cheap, rows, exact = self.shape_matrix(shape)
        if exact is None:
            pairs = sum(len(r) for r in rows)
            exact = cheap
            if pairs and pairs <= _DFS_PAIRS and len(shape) <= 30:
                exact = max(cheap, self.base(len(shape)) - _best_assignment(rows, self.costs.reorder))
            self.shape_memo[shape] = (cheap, rows, exact)
        return exact

    def open_tier(self, m: int, shapes: list[tuple], bound: float) -> None:
        """Queues a tier's shapes at the tier's bound, each ordered by its smallest name: a shape's
        own bound (step 3) and its cells are only made when it reaches the top of the queue."""
        shape_names = self.index._shape_names
        for shape in shapes:
            heapq.heappush(self.heap, (bound, 2, shape_names[shape].smallest(), next(self.seq), ("shape", shape)))

    def open_shape(self, shape: tuple) -> None:
        shape_bound = self.shape_matrix(shape)[0]
        result_bounds = self.result_bounds
        for rk in self.index._shape_rks[shape].members():
            if rk in result_bounds:
                self.push_cell(shape_bound + self.result_part(rk), shape, rk)

    def open_zero(self, m: int, rks: tuple[int, ...], fed: set) -> None:
        """Queues the cells of arity ``m`` that no query argument can feed."""
        groups = self.index._groups
        base = self.base(m)
        for rk in rks:
            bound = base + self.result_part(rk)
            for shape in groups[(rk, m)].shapes.members() - fed:
                self.push_cell(bound, shape, rk)


def _check_name(name: object) -> None:
    if not isinstance(name, str) or not name:
        raise ValueError(f"a signature name must be a non-empty str, got {name!r}")


def linear_lookup(query: Signature, signatures: Mapping[str, Signature] | Iterable[tuple[str, Signature]],
                  limit: int | None = 10, *, max_cost: float | None = None,
                  costs: MatchCosts = DEFAULT_COSTS) -> tuple[tuple[str, Match], ...]:
    """The reference answer and the benchmark's peer: every signature scored by :func:`match`'s cost
    function, sorted by cost then name; explanations are written for the returned ones only."""
    items = signatures.items() if isinstance(signatures, Mapping) else signatures
    q = prepare(query, QUERY_PREFIX)
    found = []
    for name, sig in items:
        c = prepare(sig, CANDIDATE_PREFIX)
        scored = score_prepared(q, c, costs)
        if scored is not None and (max_cost is None or scored.cost <= max_cost):
            found.append((scored.cost, name, scored, c))
    found.sort(key=lambda x: x[:2])
    if limit is not None:
        found = found[:limit]
    return tuple((name, explain(scored, q, c, costs)) for _, name, scored, c in found)

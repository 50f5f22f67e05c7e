"""A signature index: finds the best matches for a query without scanning the library.

Sherlodoc-style inverted lists over *type keys*. The key of a type is its outline to depth 2 with
every type variable, ``Any`` and deeper subterm replaced by ``Any`` (``dict[str, list[T]]`` ->
``dict[str, list[Any]]``). Signatures are grouped by (result key, arity); each group keeps its
members and, per parameter key, the members having a parameter with that key. A second list maps
(parameter key, arity) to signatures whatever their result, for queries whose result fits every
key (a type variable).

A lookup is *exact*: it returns what a linear scan (:func:`linear_lookup`) returns, sorted by
``(cost, name)``. Keys are sound — replacing subterms by ``Any`` only makes
:func:`~cocoda_jax.types.unify.accepts` more permissive — so if a query argument can feed a
parameter, or a result can serve the query, their keys fit too. The steps:

1. the result keys the query's result accepts (only keys whose head constructor can fit are tried,
   e.g. ``float`` accepts the heads ``float``, ``int``, ``bool`` and ``Any``), each with a lower
   bound on the result's cost (coercions the keys already need; query variables forced concrete);
2. per arity ``m`` and query argument ``i``, the set of signatures that ``i`` may feed, united from
   the posting lists per cost level (coercions needed by the keys); counting them per signature
   gives ``h``, the number of query arguments it can use at best;
3. a lower bound on a signature's cost: ``extra * n + missing * m + result bound`` minus, for each
   of the ``k = min(h, m)`` cheapest usable arguments, ``extra + missing - its key cost``;
4. candidates are taken in (bound, name) order — arities, then tiers of equal ``h``, are only
   opened when their best possible bound can still compete; a candidate's bound is first refined
   with the exact cost of its result (one ``accepts``; the result is checked first, from an empty
   substitution, in the full match too), then the full match runs; the search stops once the next
   bound exceeds the ``limit``-th best (cost, name) found.

The work per lookup is set operations on the touched posting lists plus a full match on the few
candidates whose bound can still enter the top ``limit``; the signatures themselves are never
scanned (``lookup_with_stats`` reports the counts; ``launch/bench_signature_index.py`` measures).

The index is a value: :meth:`SignatureIndex.add` and :meth:`SignatureIndex.remove` return a new
index and leave the old one intact (copy-on-write of the touched lists, plus a shallow copy of the
name table); :meth:`SignatureIndex.build` bulk-loads.
"""

from __future__ import annotations

import bisect
import functools
import heapq
import itertools
from collections import Counter
from dataclasses import dataclass
from typing import Iterable, Iterator, Mapping

from cocoda_jax.types.match import (
    CANDIDATE_PREFIX, DEFAULT_COSTS, QUERY_PREFIX, Match, MatchCosts, Prepared, Scored, explain, prepare,
    result_cost, score_prepared,
)
from cocoda_jax.types.terms import ANY, VARIADIC_TUPLE, Signature, TCon, TVar, Type, subterms
from cocoda_jax.types.unify import _Solver

KEY_DEPTH = 2
_WILD = "*"  # the head of a key that is Any


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


@functools.lru_cache(maxsize=1 << 17)
def _fit(expected: Type, actual: Type) -> tuple[int, int] | None:
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
    once = Counter(t.name for t in subterms(expected) if isinstance(t, TVar))
    specific = sum(1 for note in solver.notes if note[0] == "bind" and note[1].startswith(QUERY_PREFIX)
                   and once[note[1]] == 1 and isinstance(note[2], TCon))
    return coercions, specific


@dataclass(frozen=True, slots=True)
class _Entry:
    prepared: Prepared
    result_key: Type
    param_keys: frozenset[Type]
    arity: int
    generic_result: bool  # the result is a bare type variable or Any


@functools.lru_cache(maxsize=1 << 16)
def _entry(sig: Signature) -> _Entry:
    """The index's view of one signature (immutable, so memoised: libraries repeat signatures)."""
    prep = prepare(sig, CANDIDATE_PREFIX)
    return _Entry(prep, type_key(sig.result), frozenset(type_key(t) for t in sig.param_types), sig.arity,
                  not isinstance(sig.result, TCon))


@dataclass(frozen=True, slots=True)
class _Group:
    """The signatures of one (result key, arity); ``by_param`` is never mutated once built."""

    members: frozenset[str]
    by_param: Mapping[Type, frozenset[str]]


def _by_head(keys: Iterable[Type]) -> dict[str, tuple[Type, ...]]:
    groups: dict[str, list[Type]] = {}
    for k in keys:
        groups.setdefault(_head(k), []).append(k)
    return {h: tuple(ks) for h, ks in groups.items()}


def _with(d: Mapping, key, name: str) -> frozenset[str]:
    return d.get(key, frozenset()) | {name}


_MEMO_LIMIT = 20_000


class SignatureIndex:
    """An immutable map from names to signatures with fast, exact, ranked lookup (see module doc)."""

    __slots__ = ("_entries", "_groups", "_by_param", "costs", "_derived", "_memo")

    def __init__(self, costs: MatchCosts = DEFAULT_COSTS):
        self._entries: dict[str, _Entry] = {}
        self._groups: dict[tuple[Type, int], _Group] = {}  # (result key, arity) -> group
        self._by_param: dict[tuple[Type, int], frozenset[str]] = {}  # (param key, arity) -> names
        self.costs = costs
        self._derived: tuple | None = None
        self._memo: dict = {}

    # -- construction ---------------------------------------------------------------------------
    @classmethod
    def build(cls, items: Mapping[str, Signature] | Iterable[tuple[str, Signature]],
              costs: MatchCosts = DEFAULT_COSTS) -> "SignatureIndex":
        """Bulk-loads ``(name, signature)`` pairs (a mapping or an iterable); names must be unique."""
        pairs_iter = items.items() if isinstance(items, Mapping) else items
        entries: dict[str, _Entry] = {}
        members: dict[tuple[Type, int], set[str]] = {}
        group_params: dict[tuple[Type, int], dict[Type, set[str]]] = {}
        by_param: dict[tuple[Type, int], set[str]] = {}
        for name, sig in pairs_iter:
            _check_name(name)
            if name in entries:
                raise ValueError(f"SignatureIndex.build: duplicate name {name!r}")
            e = _entry(sig)
            entries[name] = e
            g = (e.result_key, e.arity)
            members.setdefault(g, set()).add(name)
            inner = group_params.setdefault(g, {})
            for pk in e.param_keys:
                inner.setdefault(pk, set()).add(name)
                by_param.setdefault((pk, e.arity), set()).add(name)
        index = cls(costs)
        index._entries = entries
        index._groups = {g: _Group(frozenset(ms), {pk: frozenset(v) for pk, v in group_params[g].items()})
                         for g, ms in members.items()}
        index._by_param = {k: frozenset(v) for k, v in by_param.items()}
        return index

    def _copy(self) -> "SignatureIndex":
        new = SignatureIndex(self.costs)
        new._entries, new._groups, new._by_param = dict(self._entries), dict(self._groups), dict(self._by_param)
        return new

    def add(self, name: str, sig: Signature) -> "SignatureIndex":
        """A new index that also holds ``name`` (replacing its old signature, if any)."""
        _check_name(name)
        new = self.remove(name) if name in self._entries else self._copy()
        e = _entry(sig)
        new._entries[name] = e
        g = (e.result_key, e.arity)
        old = new._groups.get(g, _Group(frozenset(), {}))
        inner = dict(old.by_param)
        for pk in e.param_keys:
            inner[pk] = _with(inner, pk, name)
            new._by_param[(pk, e.arity)] = _with(new._by_param, (pk, e.arity), name)
        new._groups[g] = _Group(old.members | {name}, inner)
        return new

    def remove(self, name: str) -> "SignatureIndex":
        """A new index without ``name``; ``KeyError`` when it is absent."""
        if name not in self._entries:
            raise KeyError(f"SignatureIndex.remove: no signature named {name!r}")
        new = self._copy()
        e = new._entries.pop(name)
        g = (e.result_key, e.arity)
        old = new._groups[g]
        inner = dict(old.by_param)
        for pk in e.param_keys:
            for table, key in ((inner, pk), (new._by_param, (pk, e.arity))):
                rest = table[key] - {name}
                if rest:
                    table[key] = rest
                else:
                    del table[key]
        rest = old.members - {name}
        if rest:
            new._groups[g] = _Group(rest, inner)
        else:
            del new._groups[g]
        return new

    # -- reading --------------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._entries))

    def signature(self, name: str) -> Signature:
        return self._entries[name].prepared.sig

    def items(self) -> tuple[tuple[str, Signature], ...]:
        return tuple((n, self._entries[n].prepared.sig) for n in sorted(self._entries))

    def __repr__(self) -> str:
        return f"SignatureIndex({len(self)} signatures)"

    # -- key compatibility (memoised per index value) -------------------------------------------
    def _keys(self) -> tuple[dict, dict, dict[Type, tuple[int, ...]]]:
        """Result keys and parameter keys grouped by head, and the arities of each result key."""
        if self._derived is None:
            arities: dict[Type, list[int]] = {}
            for rk, m in self._groups:
                arities.setdefault(rk, []).append(m)
            pkeys = {pk for pk, _ in self._by_param}
            self._derived = (_by_head(arities), _by_head(pkeys), {rk: tuple(sorted(ms)) for rk, ms in arities.items()})
        return self._derived

    def _compatible(self, role: str, key: Type) -> dict[Type, float]:
        """Keys of ``role`` ("result" or "param") that fit the query key, each with a lower bound on
        the cost of fitting: the coercions the keys already need (keys only drop detail, so the real
        types need at least as many)."""
        memo_key = (role, key)
        found = self._memo.get(memo_key)
        if found is None:
            rheads, pheads, _ = self._keys()
            groups, heads = (rheads, _actual_heads(key)) if role == "result" else (pheads, _expected_heads(key))
            found = {}
            for h, ks in groups.items():
                if heads is not None and h not in heads:
                    continue
                for k in ks:
                    fit = _fit(key, k) if role == "result" else _fit(k, key)
                    if fit is not None:
                        found[k] = self.costs.coercion * fit[0]
            self._memo[memo_key] = found
        return found

    def _result_bounds(self, result: Type) -> dict[Type, float]:
        """Compatible result key -> lower bound on the cost of the result's fit: the key-level
        coercions or, checked against the query's own result (its type variables included), those
        plus the query variables that must become concrete. The result is checked first, from an
        empty substitution, so these bindings happen in the real match too."""
        memo_key = ("result-bound", result)
        found = self._memo.get(memo_key)
        if found is None:
            found = {}
            for rk, key_cost in self._compatible("result", type_key(result)).items():
                fit = _fit(result, rk)
                if fit is not None:
                    key_cost = max(key_cost, self.costs.coercion * fit[0] + self.costs.more_specific * fit[1])
                found[rk] = key_cost
            self._memo[memo_key] = found
        return found

    def _param_levels(self, arg: Type) -> tuple[tuple[float, frozenset[Type]], ...]:
        """Compatible parameter keys of a query argument, grouped by key cost, cheapest first."""
        memo_key = ("levels", type_key(arg))
        found = self._memo.get(memo_key)
        if found is None:
            levels: dict[float, list[Type]] = {}
            for pk, c in self._compatible("param", memo_key[1]).items():
                levels.setdefault(c, []).append(pk)
            found = tuple((c, frozenset(levels[c])) for c in sorted(levels))
            self._memo[memo_key] = found
        return found

    # -- lookup ---------------------------------------------------------------------------------
    def lookup(self, query: Signature, limit: int | None = 10, *,
               max_cost: float | None = None) -> tuple[tuple[str, Match], ...]:
        """The best ``limit`` matches (all with ``limit=None``), sorted by cost then name; only those
        with cost <= ``max_cost`` when given. Same answer as :func:`linear_lookup`."""
        return self.lookup_with_stats(query, limit, max_cost=max_cost)[0]

    def lookup_with_stats(self, query: Signature, limit: int | None = 10, *,
                          max_cost: float | None = None) -> tuple[tuple[tuple[str, Match], ...], dict]:
        """:meth:`lookup` plus counters: signatures given a bound, result checks, full matches run."""
        if limit is not None and limit < 1:
            raise ValueError(f"lookup: limit must be >= 1 or None, got {limit}")
        if not isinstance(query, Signature):
            raise TypeError(f"lookup: expected a Signature, got {type(query).__name__}")
        if len(self._memo) > _MEMO_LIMIT:  # a long-lived index must not grow with distinct queries
            self._memo.clear()
        return _Lookup(self, prepare(query, QUERY_PREFIX), limit, max_cost).run()


class _Lookup:
    """One lookup: a best-first search over lazily opened arities, tiers and candidates."""

    def __init__(self, index: SignatureIndex, q: Prepared, limit: int | None, max_cost: float | None):
        self.index, self.q, self.limit, self.max_cost = index, q, limit, max_cost
        self.costs = c = index.costs
        self.n = len(q.types)
        self.worth = c.extra + c.missing  # what using one argument saves
        self.result_bounds = index._result_bounds(q.result)
        self.generic = 0.0 if isinstance(q.result, TVar) or q.result is ANY else c.more_general
        self.levels = [index._param_levels(t) for t in q.types]
        self.every_result = len(self.result_bounds) == len(index._keys()[2])
        self.heap: list[tuple] = []
        self.seq = itertools.count()
        self.bounded = 0
        self.refined = 0

    # Bounds and costs are both rounded to 9 decimals: a bound equal to a cost in exact arithmetic
    # compares equal, so ties are broken by name exactly as the linear scan breaks them.
    def push_unit(self, bound: float, unit: tuple) -> None:
        # units sort before candidates of the same bound (1 < 2), so they open in time
        heapq.heappush(self.heap, (round(bound, 9), 1, next(self.seq), unit))

    def push_candidate(self, name: str, bound: float) -> None:
        self.bounded += 1
        heapq.heappush(self.heap, (round(bound, 9), 2, name, False))

    def run(self) -> tuple[tuple[tuple[str, Match], ...], dict]:
        index, c, n = self.index, self.costs, self.n
        rarities = index._keys()[2]
        by_arity: dict[int, list[Type]] = {}
        for rk in self.result_bounds:
            for m in rarities[rk]:
                by_arity.setdefault(m, []).append(rk)
        for m, rks in by_arity.items():
            best_rb = min(self.result_bounds[rk] for rk in rks)
            self.push_unit(c.extra * max(0, n - m) + c.missing * max(0, m - n) + best_rb, ("arity", m, rks))

        best: list[tuple[float, str, Scored]] = []
        matched = 0
        entries = index._entries
        limit, max_cost = self.limit, self.max_cost
        while self.heap:
            item = heapq.heappop(self.heap)
            bound = item[0]
            if max_cost is not None and bound > max_cost:
                break
            full = limit is not None and len(best) >= limit
            if item[1] == 1:
                if full and bound > best[-1][0]:
                    break
                self.open(item[3])
                continue
            name = item[2]
            if full and (bound, name) > best[-1][:2]:
                break
            e = entries[name]
            if not item[3]:  # refine: the result's cost is exact and cheap to get (one check)
                exact = result_cost(self.q, e.prepared, c)
                self.refined += 1
                if exact is None:
                    continue
                refined = round(bound - self.result_part(e) + exact, 9)
                if refined > bound:
                    heapq.heappush(self.heap, (refined, 2, name, True))
                    continue
            matched += 1
            scored = score_prepared(self.q, e.prepared, c)
            if scored is None or (max_cost is not None and scored.cost > max_cost):
                continue
            bisect.insort(best, (scored.cost, name, scored), key=lambda x: x[:2])
            if limit is not None and len(best) > limit:
                best.pop()
        stats = {"bounded_candidates": self.bounded, "result_checks": self.refined, "full_matches": matched,
                 "result_keys": len(self.result_bounds)}
        found = tuple((name, explain(sc, self.q, entries[name].prepared, c)) for _, name, sc in best)
        return found, stats

    def open(self, unit: tuple) -> None:
        kind = unit[0]
        if kind == "arity":
            self.open_arity(unit[1], unit[2])
        elif kind == "tier":
            self.open_tier(*unit[1:])
        else:
            self.open_zero(*unit[1:])

    def open_arity(self, m: int, rks: list[Type]) -> None:
        """Counts, for each signature of arity ``m``, the query arguments that may feed it, and
        queues one tier per count."""
        index, c, n = self.index, self.costs, self.n
        groups = [index._groups[(rk, m)] for rk in rks]
        arg_levels: list[list[tuple[float, set[str]]]] = []
        counts: Counter = Counter()
        for levels in self.levels:
            seen: set[str] = set()
            fed_levels = []
            for cost, pkeys in levels:
                fed: set[str] = set()
                if self.every_result:
                    for pk in pkeys:
                        names = index._by_param.get((pk, m))
                        if names:
                            fed |= names
                else:
                    for g in groups:
                        inner = g.by_param
                        if len(pkeys) < len(inner):
                            for pk in pkeys:
                                names = inner.get(pk)
                                if names:
                                    fed |= names
                        else:
                            for pk, names in inner.items():
                                if pk in pkeys:
                                    fed |= names
                fed -= seen
                if fed:
                    seen |= fed
                    fed_levels.append((cost, fed))
                    counts.update(fed)
            arg_levels.append(fed_levels)
        tiers: dict[int, list[str]] = {}
        for name, h in counts.items():
            tiers.setdefault(h, []).append(name)
        best_rb = min(self.result_bounds[rk] for rk in rks)
        base = c.extra * n + c.missing * m + best_rb
        for h, names in tiers.items():
            self.push_unit(base - self.worth * min(h, m), ("tier", m, h, names, arg_levels))
        self.push_unit(base, ("zero", m, rks, counts))

    def result_part(self, e: _Entry) -> float:
        """The part of a bound that stands for the result's cost (refined later to the exact cost)."""
        rb = self.result_bounds[e.result_key]
        return rb + self.generic if e.generic_result else rb

    def base_bound(self, e: _Entry) -> float:
        c = self.costs
        return c.extra * self.n + c.missing * e.arity + self.result_part(e)

    def open_tier(self, m: int, h: int, names: list[str], arg_levels) -> None:
        """Bounds each signature fed by exactly ``h`` query arguments."""
        entries, worth = self.index._entries, self.worth
        k = min(h, m)
        paid_levels = [[(cost, fed) for cost, fed in levels if cost > 0] for levels in arg_levels]
        any_paid = any(paid_levels)
        for name in names:
            bound = self.base_bound(entries[name]) - worth * k
            if any_paid:
                paid = []
                for levels in paid_levels:
                    for cost, fed in levels:
                        if name in fed:
                            paid.append(cost)
                            break
                # at best the k cheapest arguments are used (zero-cost ones first), and only
                # those that save something
                free = h - len(paid)
                if free < k:
                    paid.sort()
                    bound += sum(min(0.0, cost - worth) for cost in paid[: k - free]) + worth * (k - free)
            self.push_candidate(name, bound)

    def open_zero(self, m: int, rks: list[Type], counts: Counter) -> None:
        """Bounds the signatures of arity ``m`` that no query argument can feed."""
        groups = self.index._groups
        entries = self.index._entries
        for rk in rks:
            for name in groups[(rk, m)].members:
                if name not in counts:
                    self.push_candidate(name, self.base_bound(entries[name]))


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

"""The immutable library DAG and INSERTTOOL.

A :class:`LibrarySnapshot` is a value: :meth:`~LibrarySnapshot.insert` and
:meth:`~LibrarySnapshot.remove` return a new snapshot and leave the old one untouched (a rejected
insert raises, so the caller still holds the unchanged snapshot). All per-node state lives in
``pyrsistent`` maps, so a new snapshot shares almost all of its structure with its parent and one
snapshot per co-evolution round costs O(log n) per change, not a copy of the library.

Decisions (the CoCoDA paper, §A.2/§A.4 of the paper digest):

* Edges come from the code (:mod:`~cocoda_jax.library.analysis`): the free, non-builtin names a tool
  calls, in execution order, with multiplicity counted per call site. A *composite* is a tool that
  calls at least one library tool; every other tool is a *primitive*.
* depth and flat size are stored per node when it is inserted: its children are already present and
  can neither change nor disappear (removal with dependents is refused), so
  ``d(v) = 1 + max d(u)``, ``flat(v) = sum flat(u)`` (with multiplicity) need one step, not a walk.
  ``Phi(v) = flat(v) - 1``.
* The depth bound is a property of the snapshot, set by ``LibrarySnapshot.empty(max_depth=...)``
  and stored in the JSON, so a loaded library keeps enforcing the bound it was built under.
* Removal of a tool that has dependents is refused (:class:`RemoveRefused`): inlining it into its
  dependents would silently change their code, ids and flat sizes.
* ``duplicate_behaviour``: an existing tool with the same signature up to parameter names (and
  type-variable names) that gives the same outputs on the union of both tools' examples, each tool
  run on the other's inputs positionally. With no examples on either side nothing is known about
  behaviour, so no such duplicate is declared.
* Topological order is by (depth, name): primitives first, every tool after all its children, ties
  by name; the sandbox receives the sources in exactly this order.

INSERTTOOL runs its checks cheapest first and reports the first failure: malformed record (also
code or conditions that the sandbox's static guard refuses), duplicate code, name clash, cycle (a tool calling itself: a new tool can only call tools already
present, so that is the only cycle an insert can close), unknown dependency, depth bound, static
call types, then the sandboxed example and spec checks, then duplicate behaviour.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from pyrsistent import PMap, pmap, pset

from cocoda_jax.library import checks, serialize
from cocoda_jax.library.analysis import CodeFacts
from cocoda_jax.library.errors import InsertRejected, LibraryFormatError, Reason, RemoveRefused, UnknownTool
from cocoda_jax.library.graph import reachable
from cocoda_jax.library.tool import Tool
from cocoda_jax.types import (
    Signature, SignatureIndex, TCon, TVar, Type,
)

DEFAULT_MAX_DEPTH = 8


def shape_key(sig: Signature) -> str:
    """The signature without parameter names, type variables renamed by first appearance: two
    tools with the same key are interchangeable by type."""
    names: dict[str, str] = {}

    def canon(t: Type) -> str:
        if isinstance(t, TVar):
            return names.setdefault(t.name, f"T{len(names)}")
        if isinstance(t, TCon):
            return t.name + ("[" + ", ".join(canon(a) for a in t.args) + "]" if t.args else "")
        return str(t)

    return "(" + ", ".join(canon(p.type) for p in sig.params) + ") -> " + canon(sig.result)


class LibrarySnapshot:
    """An immutable, well-formed tool DAG (see the module docstring for the rules it keeps)."""

    __slots__ = ("_max_depth", "_tools", "_children", "_parents", "_depth", "_flat", "_ids", "_shapes",
                 "_index", "_topo")

    def __init__(self, *, _max_depth: int, _tools: PMap, _children: PMap, _parents: PMap, _depth: PMap,
                 _flat: PMap, _ids: PMap, _shapes: PMap, _index: SignatureIndex):
        """Private: build snapshots with :meth:`empty`, :meth:`insert` or :meth:`from_json`."""
        for slot, value in (("_max_depth", _max_depth), ("_tools", _tools), ("_children", _children),
                            ("_parents", _parents), ("_depth", _depth), ("_flat", _flat), ("_ids", _ids),
                            ("_shapes", _shapes), ("_index", _index), ("_topo", None)):
            object.__setattr__(self, slot, value)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("LibrarySnapshot is immutable; insert/remove return a new snapshot")

    __delattr__ = __setattr__

    def __reduce__(self):
        """Pickles through the keyword constructor (the default slot protocol would call __setattr__)."""
        state = {slot: getattr(self, slot) for slot in self.__slots__ if slot != "_topo"}
        return (_restore, (state,))

    def __copy__(self) -> "LibrarySnapshot":
        return self  # immutable: a copy is the same value

    def __deepcopy__(self, memo: dict) -> "LibrarySnapshot":
        return self

    # -- construction ----------------------------------------------------------------------------
    @classmethod
    def empty(cls, max_depth: int = DEFAULT_MAX_DEPTH) -> "LibrarySnapshot":
        """An empty library whose composites may be at most ``max_depth`` levels deep."""
        if isinstance(max_depth, bool) or not isinstance(max_depth, int) or max_depth < 0:
            raise ValueError(f"max_depth must be an int >= 0, got {max_depth!r}")
        return cls(_max_depth=max_depth, _tools=pmap(), _children=pmap(), _parents=pmap(), _depth=pmap(),
                   _flat=pmap(), _ids=pmap(), _shapes=pmap(), _index=SignatureIndex())

    def insert(self, tool: Tool, runner: Any = None, *, timeout_s: float | None = None) -> "LibrarySnapshot":
        """INSERTTOOL: the snapshot with ``tool`` added, or :class:`InsertRejected` with its reason.

        ``runner`` executes the example, spec and duplicate-behaviour check programs (protocol in
        :mod:`~cocoda_jax.library.checks`); ``None`` means the process-wide
        :func:`cocoda_jax.execution.default_sandbox`, started only if a check needs to run.
        ``timeout_s`` is the wall-clock limit per check program (``None``: the runner's default).
        """
        return self._insert(tool, runner=runner, timeout_s=timeout_s, run_checks=True)

    def _insert(self, tool: Tool, *, runner: Any, timeout_s: float | None, run_checks: bool,
                update_index: bool = True, facts: CodeFacts | None = None) -> "LibrarySnapshot":
        """INSERTTOOL's body. A bulk load passes ``update_index=False`` and rebuilds the signature
        index once at the end (:meth:`_with_rebuilt_index`), and passes the ``facts`` it already
        derived (re-deriving them here would parse every source twice)."""
        if not isinstance(tool, Tool):
            raise TypeError(f"insert expects a Tool, got {type(tool).__name__}")
        facts = checks.validated_facts(tool) if facts is None else facts
        checks.check_sandbox_rules(tool)
        calls, depth = checks.static_checks(tool, facts, self._tools, self._ids, self._depth, self._max_depth)
        if run_checks:
            self._behaviour_checks(tool, runner, timeout_s)
        flat = sum(self._flat[c] for c in calls) if calls else 1
        return self._with(tool, calls, depth, flat, update_index)

    @classmethod
    def _bulk(cls, max_depth: int, tools: Mapping[str, Tool], children: Mapping[str, tuple[str, ...]],
              depth: Mapping[str, int], flat: Mapping[str, int]) -> "LibrarySnapshot":
        """A snapshot built in one pass from facts the caller has already checked (a bulk load):
        plain dicts first, each persistent map made once, the signature index built in bulk. One
        :meth:`_with` per tool would cost a dozen persistent-map updates a tool."""
        parents: dict[str, set[str]] = {name: set() for name in tools}
        shapes: dict[str, set[str]] = {}
        for name, tool in tools.items():
            for child in children[name]:
                parents[child].add(name)
            shapes.setdefault(shape_key(tool.signature), set()).add(name)
        index = SignatureIndex.build((name, tool.signature) for name, tool in tools.items())
        return cls(_max_depth=max_depth, _tools=pmap(tools), _children=pmap(children),
                   _parents=pmap({n: pset(ps) for n, ps in parents.items()}), _depth=pmap(depth), _flat=pmap(flat),
                   _ids=pmap({tool.id: name for name, tool in tools.items()}),
                   _shapes=pmap({k: pset(v) for k, v in shapes.items()}), _index=index)

    def _with_rebuilt_index(self) -> "LibrarySnapshot":
        """The same snapshot with its signature index built in bulk from the tool records."""
        state = {slot: getattr(self, slot) for slot in self.__slots__ if slot != "_topo"}
        state["_index"] = SignatureIndex.build((name, tool.signature) for name, tool in self._tools.items())
        return LibrarySnapshot(**state)

    def _behaviour_checks(self, tool: Tool, runner: Any, timeout_s: float | None) -> None:
        """Examples and conditions, then duplicate behaviour, through ``runner``.

        Duplicate behaviour is decided in two rounds so that its cost follows the likely duplicates,
        not the number of tools of the same signature: first the new tool runs on every candidate's
        example inputs (in the same batch as its own examples; equal programs run once), then only
        the candidates that agreed with it run on the new tool's examples.
        """
        library = None

        def run(programs: list[str]) -> list[Any]:
            nonlocal runner, library
            if runner is None:
                from cocoda_jax.execution import default_sandbox  # lazy: the sandbox starts on first need
                runner = default_sandbox()
            if library is None:
                library = self.sources() + (tool.source,)
            unique = list(dict.fromkeys(programs))
            results = list(runner.run_many(unique, library, timeout_s))
            if len(results) != len(unique):
                raise RuntimeError(f"runner returned {len(results)} results for {len(unique)} programs")
            by_program = dict(zip(unique, results))
            return [by_program[p] for p in programs]

        own = [checks.example_program(tool, args) for args, _ in tool.examples]
        candidates = [self._tools[n] for n in sorted(self._shapes.get(shape_key(tool.signature), ()))]
        first = {other.name: checks.replay(tool, other) for other in candidates}
        batch = own + [r.program for runs in first.values() for r in runs]
        results = run(batch) if batch else []
        for index in range(len(own)):
            rejection = checks.judge_example(tool, index, results[index])
            if rejection is not None:
                raise rejection
        offset, agreeing = len(own), []
        for other in candidates:
            runs = first[other.name]
            if checks.same_outputs(runs, results[offset:offset + len(runs)]) and (runs or tool.examples):
                agreeing.append(other)
            offset += len(runs)
        second = {other.name: checks.replay(other, tool) for other in agreeing}
        batch = [r.program for runs in second.values() for r in runs]
        results = run(batch) if batch else []
        offset = 0
        for other in agreeing:
            runs = second[other.name]
            if checks.same_outputs(runs, results[offset:offset + len(runs)]):
                total = len(runs) + len(first[other.name])
                raise InsertRejected(Reason.DUPLICATE_BEHAVIOUR, tool.name,
                                     f"it has the signature of {other.name!r} ({other.signature}) and the same "
                                     f"outputs on all {total} examples of both tools")
            offset += len(runs)

    def _with(self, tool: Tool, calls: tuple[str, ...], depth: int, flat: int,
              update_index: bool = True) -> "LibrarySnapshot":
        name = tool.name
        parents = self._parents.set(name, pset())
        for child in set(calls):
            parents = parents.set(child, parents[child].add(name))
        key = shape_key(tool.signature)
        return LibrarySnapshot(
            _max_depth=self._max_depth, _tools=self._tools.set(name, tool),
            _children=self._children.set(name, calls), _parents=parents,
            _depth=self._depth.set(name, depth), _flat=self._flat.set(name, flat),
            _ids=self._ids.set(tool.id, name), _shapes=self._shapes.set(key, self._shapes.get(key, pset()).add(name)),
            _index=self._index.add(name, tool.signature) if update_index else self._index)

    def remove(self, name: str) -> "LibrarySnapshot":
        """The snapshot without ``name``; refused (:class:`RemoveRefused`, reason ``has_dependents``)
        while other tools call it."""
        tool = self.tool(name)
        dependents = self._parents[name]
        if dependents:
            raise RemoveRefused("has_dependents", name, tuple(sorted(dependents)))
        parents = self._parents.remove(name)
        for child in set(self._children[name]):
            parents = parents.set(child, parents[child].remove(name))
        key = shape_key(tool.signature)
        same_shape = self._shapes[key].remove(name)
        return LibrarySnapshot(
            _max_depth=self._max_depth, _tools=self._tools.remove(name), _children=self._children.remove(name),
            _parents=parents, _depth=self._depth.remove(name), _flat=self._flat.remove(name),
            _ids=self._ids.remove(tool.id),
            _shapes=self._shapes.set(key, same_shape) if same_shape else self._shapes.remove(key),
            _index=self._index.remove(name))

    # -- queries -------------------------------------------------------------------------------
    @property
    def max_depth(self) -> int:
        return self._max_depth

    @property
    def signature_index(self) -> SignatureIndex:
        """The type index over every tool's signature (kept in step with inserts and removals)."""
        return self._index

    def __len__(self) -> int:
        return len(self._tools)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self) -> Iterator[str]:
        return iter(self.topological_order())

    def _require(self, name: str) -> None:
        if name not in self._tools:
            raise UnknownTool(name)

    def tool(self, name: str) -> Tool:
        self._require(name)
        return self._tools[name]

    def names(self) -> tuple[str, ...]:
        """All tool names, sorted."""
        return tuple(sorted(self._tools))

    def depth(self, name: str) -> int:
        self._require(name)
        return self._depth[name]

    def flat(self, name: str) -> int:
        self._require(name)
        return self._flat[name]

    def phi(self, name: str) -> int:
        """Saved-call count ``flat - 1``: the reward credit for calling ``name`` (0 for primitives)."""
        return self.flat(name) - 1

    def is_composite(self, name: str) -> bool:
        return bool(self.children(name))

    def children(self, name: str) -> tuple[str, ...]:
        """The library tools ``name`` calls, in execution order, with multiplicity."""
        self._require(name)
        return self._children[name]

    def parents(self, name: str) -> frozenset[str]:
        """The tools that call ``name`` directly."""
        self._require(name)
        return frozenset(self._parents[name])

    dependents = parents

    def ancestors(self, name: str) -> frozenset[str]:
        """Every tool that calls ``name`` directly or indirectly."""
        self._require(name)
        return reachable(name, self._parents)

    def descendants(self, name: str) -> frozenset[str]:
        """Every tool that ``name`` calls directly or indirectly."""
        self._require(name)
        return reachable(name, self._children)

    def topological_order(self) -> tuple[str, ...]:
        """Names by (depth, name): each tool after all the tools it calls."""
        if self._topo is None:
            object.__setattr__(self, "_topo", tuple(sorted(self._tools, key=lambda n: (self._depth[n], n))))
        return self._topo

    def sources(self) -> tuple[str, ...]:
        """Tool sources in topological order: what the sandbox defines, in this order."""
        return tuple(self._tools[n].source for n in self.topological_order())

    # -- conversions -----------------------------------------------------------------------------
    def to_json(self) -> str:
        """Stable JSON text (the same snapshot always gives the same text; see :mod:`.serialize`)."""
        return serialize.snapshot_to_json(self)

    @classmethod
    def from_json(cls, text: str | bytes, runner: Any = None, verify_examples: bool = False,
                  *, timeout_s: float | None = None, rederive: bool = False) -> "LibrarySnapshot":
        """Parses and re-checks a library; :class:`LibraryFormatError` names the first problem.

        Every tool's structure is checked (:func:`.serialize.read_library`); a tool whose digest does
        not vouch for it (or every tool, with ``rederive``) is rebuilt from its source and re-inserted
        through INSERTTOOL's static checks (ids, edges from code, known dependencies, acyclicity, depth
        bound, call types, duplicates); with ``verify_examples`` every tool is, and its examples, specs
        and duplicate behaviour are re-run through ``runner`` too. Tools may appear in any order; a
        cycle is reported as a path.
        """
        with serialize.collector_paused():
            loaded = serialize.read_library(text, rederive=rederive or verify_examples)
            if not verify_examples:
                tools, children, depth, flat = serialize.statically_checked(loaded)
                return cls._bulk(loaded.max_depth, tools, children, depth, flat)
            snap = cls.empty(max_depth=loaded.max_depth)  # one INSERTTOOL at a time, sandbox checks included
            for name in loaded.order:
                entry = loaded.entries[name]
                try:
                    snap = snap._insert(entry.tool, runner=runner, timeout_s=timeout_s, run_checks=True,
                                        update_index=False, facts=entry.facts)
                except InsertRejected as err:
                    raise LibraryFormatError(entry.where, f"{err.reason}: {err.detail}") from None
                serialize.check_stored_facts(loaded, name)
            return snap._with_rebuilt_index()

    def to_networkx(self):
        """A ``networkx.DiGraph`` of the library (see :func:`.draw.to_networkx`)."""
        from cocoda_jax.library.draw import to_networkx
        return to_networkx(self)

    # -- value semantics ---------------------------------------------------------------------------
    def __eq__(self, other: object) -> bool:
        if not isinstance(other, LibrarySnapshot):
            return NotImplemented
        return self._max_depth == other._max_depth and self._tools == other._tools

    def __hash__(self) -> int:
        return hash((self._max_depth, self._tools))

    def __repr__(self) -> str:
        return f"<LibrarySnapshot {len(self)} tools, max_depth={self._max_depth}>"


def _restore(state: dict) -> LibrarySnapshot:
    return LibrarySnapshot(**state)

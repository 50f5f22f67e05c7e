"""The teacher-abstractor M_T: successful trajectories in, candidate composite tools out.

The default is symbolic, in the manner of Stitch and DreamCoder: every connected dataflow subgraph
of tool calls with one output and at most ``max_inputs`` external inputs is put in a canonical form
(its :class:`Pattern`: post-order from the output, arguments left to right, parameters numbered by
first use), so the same computation written in another order or with other variable names is one
pattern. Patterns that recur in at least ``min_tasks`` distinct tasks are scored by compression::

    compression = sum over non-overlapping uses (size - 1)  -  body_cost * size  -  tool_cost

(top-level calls saved in the corpus, minus what the new tool's body and card cost). Selection is
greedy like Stitch's: the best pattern is taken, its uses are consumed, and the others are re-scored
on what is left, so a round proposes a motif once rather than each of its fragments. Ties are broken
by size, then name, then the pattern itself: the result is a pure function of its inputs.

Each candidate carries the four record layers, derived from its children: L1 the parameter types
of the positions each input feeds and the output tool's result type; L2 a description composed from
the children's descriptions and the arguments' roles; L3 the children's pre-conditions and the output
tool's post-conditions with their parameters substituted by the composite's expressions, plus an
observed sign fact; L4 worked examples from the observed uses. Children may be composites already
in the library, so depth grows round by round.

Any proposer (e.g. a teacher LM behind an HTTP endpoint) plugs in through the :class:`Abstractor`
protocol; its proposals pass the same validation (:mod:`cocoda_jax.coevolve.validate`).
"""

from __future__ import annotations

import ast
import builtins
import dataclasses
import hashlib
import keyword
import re
from collections import defaultdict
from collections.abc import Callable, Collection, Iterator, Sequence
from typing import Any, Protocol, runtime_checkable

from cocoda_jax.errors import CocodaError
from cocoda_jax.coevolve.traces import Ref, Replacement, Trace, apply_replacements, as_trace, value_of
from cocoda_jax.library import Tool, analyse
from cocoda_jax.types import FLOAT, INT, TCon, Type, free_vars

# An argument of a pattern node: ("n", i) the i-th node of the pattern, ("p", j) parameter j,
# ("l", (arg, ...)) a list display of such arguments.
PArg = tuple


@dataclasses.dataclass(frozen=True)
class AbstractorConfig:
    """Knobs of the symbolic abstractor (validated on construction)."""

    min_tasks: int = 2           # distinct tasks a pattern must occur in
    max_inputs: int = 3          # external inputs of a composite
    min_nodes: int = 2
    max_nodes: int = 6           # calls in a composite's body
    max_candidates: int = 8      # proposals per round
    tool_cost: float = 1.0       # per new tool (its card in the prompt, its node in the DAG)
    body_cost: float = 1.0       # per call in the body
    min_compression: float = 0.0  # proposals must compress strictly more than this
    n_examples: int = 3          # L4 examples per proposal
    sign_post: bool = True       # add 'result >= 0' when every observed result is >= 0
    max_condition_chars: int = 240

    def __post_init__(self) -> None:
        if self.min_tasks < 1 or self.max_inputs < 0 or self.max_candidates < 0 or self.n_examples < 0:
            raise ValueError(f"invalid abstractor config: {self}")
        if not 2 <= self.min_nodes <= self.max_nodes:
            raise ValueError(f"need 2 <= min_nodes <= max_nodes, got {self.min_nodes}, {self.max_nodes}")


@dataclasses.dataclass(frozen=True)
class Pattern:
    """A canonical composite body: ``nodes[i] = (tool, args)``; the last node is the output."""

    nodes: tuple[tuple[str, tuple[PArg, ...]], ...]
    n_params: int

    @property
    def size(self) -> int:
        return len(self.nodes)

    @property
    def tools(self) -> tuple[str, ...]:
        return tuple(t for t, _ in self.nodes)

    def digest(self) -> str:
        return hashlib.sha256(repr((self.nodes, self.n_params)).encode()).hexdigest()[:8]

    def rewrite(self, trace: Trace, tool: str, order: Sequence[int] | None = None) -> tuple[Trace, int]:
        """``trace`` with every non-overlapping use replaced by one call of ``tool`` (:func:`rewrite`)."""
        return rewrite(trace, self, tool, order)


@dataclasses.dataclass(frozen=True)
class Use:
    """One occurrence of a pattern: in trace ``trace`` the calls ``nodes`` (in the pattern's order)
    with ``bindings[j]`` the reference passed as parameter ``j``."""

    trace: int
    task_id: str
    nodes: tuple[int, ...]
    bindings: tuple[Ref, ...]

    @property
    def sink(self) -> int:
        return self.nodes[-1]

    def replacement(self, tool: str, order: Sequence[int] | None = None) -> Replacement:
        """The one call replacing this use; ``order[k]`` is the pattern parameter passed as the
        tool's ``k``-th argument (``None``: the pattern's own order)."""
        args = self.bindings if order is None else tuple(self.bindings[j] for j in order)
        return Replacement(frozenset(self.nodes), self.sink, tool, args)


@dataclasses.dataclass(frozen=True)
class Score:
    uses: int
    tasks: int
    saved_calls: int
    size: int
    compression: float


@dataclasses.dataclass(frozen=True)
class Candidate:
    """A proposed composite: the tool record's fields plus where it came from and what it saves.

    ``flat`` counts the primitive leaves of the body (``Phi = flat - 1``); ``score.saved_calls``
    counts top-level calls saved in the mined corpus (``size - 1`` per use).
    """

    name: str
    source: str
    description: str
    pre: tuple[str, ...]
    post: tuple[str, ...]
    examples: tuple[tuple[dict, Any], ...]
    complexity: str
    pattern: Pattern
    children: tuple[str, ...]
    depth: int
    flat: int
    score: Score
    uses: tuple[Use, ...] = ()
    observed: tuple[tuple[dict, Any], ...] = ()   # every observed use as (args, output)
    proposer: str = "symbolic"
    arg_order: tuple[int, ...] | None = None      # tool parameter k <- pattern parameter arg_order[k]

    @property
    def phi(self) -> int:
        return self.flat - 1

    def tool(self) -> Tool:
        """The :class:`Tool` record (raises :class:`~cocoda_jax.library.MalformedTool` if broken)."""
        return Tool.from_source(self.source, self.description, pre=self.pre, post=self.post,
                                examples=self.examples, complexity=self.complexity)


@runtime_checkable
class Abstractor(Protocol):
    """Anything that proposes composites from a round's successful trajectories."""

    def propose(self, trajectories: Sequence[Any], snapshot: Any) -> list[Candidate]: ...


@dataclasses.dataclass(frozen=True)
class SymbolicAbstractor:
    """The default teacher: compression-scored dataflow motifs (see the module docstring)."""

    config: AbstractorConfig = AbstractorConfig()
    exclude: frozenset = frozenset()   # patterns not to propose again (e.g. rejected last round)

    def propose(self, trajectories: Sequence[Any], snapshot: Any) -> list[Candidate]:
        return propose(trajectories, snapshot, self.config, exclude=self.exclude)


@dataclasses.dataclass(frozen=True)
class CombinedAbstractor:
    """Several proposers as one (``coevolve.proposers = "both"``: the symbolic miner, then the
    teacher LM). Candidates keep their proposers' order; a later one with a name or a pattern an
    earlier one already has is dropped, and so is any pattern in ``exclude`` (refused in an earlier
    round), whoever proposed it: a teacher has no memory of the rounds."""

    parts: tuple[Any, ...]
    exclude: frozenset = frozenset()

    def propose(self, trajectories: Sequence[Any], snapshot: Any) -> list[Candidate]:
        out: list[Candidate] = []
        names: set[str] = set()
        patterns = set(self.exclude)
        for part in self.parts:
            for cand in part.propose(trajectories, snapshot):
                if cand.name in names or cand.pattern in patterns:
                    continue
                names.add(cand.name)
                patterns.add(cand.pattern)
                out.append(cand)
        return out


# ------------------------------------------------------------------------------------------------
# Enumeration and canonical form
# ------------------------------------------------------------------------------------------------


def _rooted_sets(trace: Trace, sink: int, max_nodes: int) -> Iterator[frozenset[int]]:
    """Every set of calls that contains ``sink`` and is closed upwards towards it: grown from
    ``{sink}`` by adding producers of members (so every member feeds the sink inside the set)."""
    seen: set[frozenset[int]] = set()
    stack = [frozenset({sink})]
    while stack:
        s = stack.pop()
        if s in seen:
            continue
        seen.add(s)
        yield s
        if len(s) < max_nodes:
            for m in s:
                for p in trace.producers(m):
                    if p not in s:
                        stack.append(s | {p})


def param_binder(local: Callable[[int], int | None]) -> tuple[Callable[[Ref], PArg], list[Ref]]:
    """The argument canonicaliser of a pattern and the bindings it fills as it goes.

    A node reference that ``local`` maps to a pattern position becomes ``("n", position)``; a list
    display is canonicalised element by element; any other reference becomes a parameter, equal
    references (by :meth:`Ref.key`) sharing one, numbered by first use. ``bindings[j]`` is the
    external reference bound to parameter ``j``."""
    params: dict[tuple, int] = {}
    bindings: list[Ref] = []

    def arg(ref: Ref) -> PArg:
        if ref.kind == "node":
            position = local(ref.value)
            if position is not None:
                return ("n", position)
        if ref.kind == "list":
            return ("l", tuple(arg(r) for r in ref.value))
        key = ref.key()
        if key not in params:
            params[key] = len(bindings)
            bindings.append(ref)
        return ("p", params[key])

    return arg, bindings


def canonical(trace: Trace, nodes: frozenset[int], sink: int) -> tuple[Pattern, tuple[int, ...], tuple[Ref, ...]]:
    """The pattern of the subgraph ``nodes`` with output ``sink``, the calls in pattern order, and
    the external reference bound to each parameter."""
    order: list[int] = []
    position: dict[int, int] = {}

    def local(i: int) -> int | None:
        if i not in nodes:
            return None
        visit(i)
        return position[i]

    arg, bindings = param_binder(local)
    pnodes: list[tuple[str, tuple[PArg, ...]]] = []

    def visit(i: int) -> None:
        if i in position:
            return
        call = trace.calls[i]
        args = tuple(arg(a) for a in call.args)
        position[i] = len(order)
        order.append(i)
        pnodes.append((call.tool, args))

    visit(sink)
    return Pattern(tuple(pnodes), len(bindings)), tuple(order), tuple(bindings)


def occurrences(trace: Trace, trace_index: int, config: AbstractorConfig,
                sizes: frozenset[int] | None = None) -> Iterator[tuple[Pattern, Use]]:
    """Every valid subgraph of ``trace``: one output (no other member is read outside it or is the
    answer), at most ``max_inputs`` external inputs, ``min_nodes..max_nodes`` calls."""
    consumers = trace.consumers()
    answer = trace.answer_node()
    for sink in range(len(trace.calls)):
        for s in _rooted_sets(trace, sink, config.max_nodes):
            if len(s) < config.min_nodes or (sizes is not None and len(s) not in sizes):
                continue
            if any(m == answer or not set(consumers[m]) <= s for m in s if m != sink):
                continue
            pattern, order, bindings = canonical(trace, s, sink)
            if pattern.n_params > config.max_inputs:
                continue
            yield pattern, Use(trace_index, trace.task_id, order, bindings)


def select_uses(uses: Sequence[Use], consumed: dict[int, set[int]] | None = None) -> list[Use]:
    """Non-overlapping uses, greedily by (trace, output position, calls), skipping consumed calls."""
    taken: dict[int, set[int]] = defaultdict(set)
    if consumed:
        for k, v in consumed.items():
            taken[k] |= v
    out = []
    for u in sorted(uses, key=lambda u: (u.trace, u.sink, u.nodes)):
        if taken[u.trace].isdisjoint(u.nodes):
            taken[u.trace].update(u.nodes)
            out.append(u)
    return out


def find_uses(trace: Trace, pattern: Pattern, trace_index: int = 0, config: AbstractorConfig | None = None) -> list[Use]:
    """The non-overlapping uses of ``pattern`` in ``trace`` (what rewriting replaces)."""
    cfg = dataclasses.replace(config or AbstractorConfig(), min_nodes=max(2, pattern.size),
                              max_nodes=max(2, pattern.size), max_inputs=pattern.n_params)
    found = [u for p, u in occurrences(trace, trace_index, cfg) if p == pattern]
    return select_uses(found)


def rewrite(trace: Trace, pattern: Pattern, tool: str, order: Sequence[int] | None = None) -> tuple[Trace, int]:
    """``trace`` with every (non-overlapping) use of ``pattern`` replaced by one call of ``tool``
    (``order``: see :meth:`Use.replacement`)."""
    uses = find_uses(trace, pattern)
    return apply_replacements(trace, [u.replacement(tool, order) for u in uses]), len(uses)


def score(uses: Sequence[Use], size: int, config: AbstractorConfig) -> Score:
    saved = len(uses) * (size - 1)
    return Score(len(uses), len({u.task_id for u in uses}), saved, size,
                 saved - config.body_cost * size - config.tool_cost)


# ------------------------------------------------------------------------------------------------
# Proposals
# ------------------------------------------------------------------------------------------------


def mine(traces: Sequence[Trace], config: AbstractorConfig) -> dict[Pattern, list[Use]]:
    """Every pattern with all its occurrences (overlapping ones included), in first-seen order."""
    found: dict[Pattern, list[Use]] = {}
    for i, t in enumerate(traces):
        for pattern, use in occurrences(t, i, config):
            found.setdefault(pattern, []).append(use)
    return found


def propose(trajectories: Sequence[Any], snapshot: Any, config: AbstractorConfig = AbstractorConfig(), *,
            exclude: Collection[Pattern] = (), mine_patterns: Any = None) -> list[Candidate]:
    """Candidates from ``trajectories`` (answered :class:`~cocoda_jax.rl.trajectory.Trajectory`
    records or :class:`Trace` values) against ``snapshot``, best first (module docstring).
    ``exclude``: patterns never to propose (a caller's memory of earlier rejections);
    ``mine_patterns(traces, config)``: what counts as a pattern (default :func:`mine`, dataflow
    subgraphs; :mod:`~cocoda_jax.coevolve.sequences` mines runs of stateful calls)."""
    traces = [as_trace(t, snapshot) for t in trajectories if isinstance(t, Trace) or t.answered]
    found = (mine_patterns or mine)(traces, config)
    existing_ids = {snapshot.tool(n).id for n in snapshot.names()}
    bounds = []
    for pattern, uses in found.items():
        if any(t not in snapshot for t in pattern.tools) or _has_type_vars(pattern, snapshot):
            continue
        s = score(select_uses(uses), pattern.size, config)
        if s.tasks >= config.min_tasks and s.compression > config.min_compression:
            bounds.append((s.compression, pattern))
    bounds.sort(key=lambda b: -b[0])
    consumed: dict[int, set[int]] = defaultdict(set)
    taken_names = set(snapshot.names())
    out: list[Candidate] = []
    skipped: set[Pattern] = set(exclude)
    while len(out) < config.max_candidates:
        best = None   # (rank, pattern, uses, score); rank: compression, then size, name, pattern
        for bound, pattern in bounds:
            if best is not None and bound < best[3].compression:
                break  # a pattern's score only falls as uses are consumed: the bound is an upper bound
            if pattern in skipped:
                continue
            uses = select_uses(found[pattern], consumed)
            s = score(uses, pattern.size, config)
            if s.tasks < config.min_tasks or s.compression <= config.min_compression:
                continue
            rank = (-s.compression, -pattern.size, _sort_name(pattern), repr(pattern.nodes))
            if best is None or rank < best[0]:
                best = (rank, pattern, uses, s)
        if best is None:
            break
        _, pattern, uses, s = best
        cand = build_candidate(pattern, uses, s, traces, snapshot, config, taken_names)
        if analyse(cand.source).code_id in existing_ids:
            skipped.add(pattern)  # the library already has this very body
            continue
        taken_names.add(cand.name)
        out.append(cand)
        for u in uses:
            consumed[u.trace].update(u.nodes)
    return out


def _has_type_vars(pattern: Pattern, snapshot: Any) -> bool:
    return any(free_vars(p.type) or free_vars(snapshot.tool(t).signature.result)
               for t in set(pattern.tools) for p in snapshot.tool(t).signature.params)


def _sort_name(pattern: Pattern) -> str:
    return "_".join(pattern.tools)


_RESERVED = frozenset(dir(builtins)) | frozenset(keyword.kwlist) | {"result", "answer"}


def composite_name(pattern: Pattern, taken: set[str]) -> str:
    """A readable, deterministic name: the children in order (long ones shortened with a digest)."""
    base = "_".join(pattern.tools)
    if len(base) > 48:
        base = f"{pattern.tools[0]}_to_{pattern.tools[-1]}_{pattern.digest()}"
    name = base
    k = 2
    while name in taken or name in _RESERVED:
        name = f"{base}_{k}"
        k += 1
    return name


def _join_types(types: Sequence[Type]) -> Type:
    seen = list(dict.fromkeys(types))
    if len(seen) == 1:
        return seen[0]
    if all(t in (INT, FLOAT) for t in seen):
        return FLOAT
    return seen[0]


def _feeds(pattern: Pattern) -> list[list[tuple[int, int, int | None]]]:
    """Per parameter, the positions it feeds: (node, argument index, list item index or None)."""
    out: list[list[tuple[int, int, int | None]]] = [[] for _ in range(pattern.n_params)]
    for i, (_, args) in enumerate(pattern.nodes):
        for k, a in enumerate(args):
            if a[0] == "p":
                out[a[1]].append((i, k, None))
            elif a[0] == "l":
                for m, item in enumerate(a[1]):
                    if item[0] == "p":
                        out[item[1]].append((i, k, m))
    return out


def _position_type(snapshot: Any, tool: str, k: int, item: int | None) -> Type:
    t = snapshot.tool(tool).signature.params[k].type
    if item is not None and isinstance(t, TCon) and t.name == "list" and t.args:
        return t.args[0]
    return t


def _first_sentence(text: str) -> str:
    text = " ".join(text.split())
    return re.split(r"(?<=[.!?])\s", text, maxsplit=1)[0] if text else ""


def build_candidate(pattern: Pattern, uses: Sequence[Use], s: Score, traces: Sequence[Trace], snapshot: Any,
                    config: AbstractorConfig, taken: set[str]) -> Candidate:
    """The candidate's code and its four layers (module docstring), from the children's records."""
    name = composite_name(pattern, taken)
    feeds = _feeds(pattern)
    # Parameter names: the child's parameter name at the first position fed, made unique.
    pnames: list[str] = []
    avoid = set(snapshot.names()) | {name} | _RESERVED
    for j, positions in enumerate(feeds):
        i, k, item = positions[0]
        base = snapshot.tool(pattern.nodes[i][0]).param_names[k]
        cand, n = base, 2
        while cand in pnames or cand in avoid or re.fullmatch(r"v\d+", cand):
            cand, n = f"{base}{n}", n + 1
        pnames.append(cand)
    ptypes = [_join_types([_position_type(snapshot, pattern.nodes[i][0], k, item) for i, k, item in positions])
              for positions in feeds]
    sink_tool = snapshot.tool(pattern.nodes[-1][0])
    locals_ = [f"v{i}" for i in range(pattern.size)]

    def text(a: PArg, inline: bool = False) -> str:
        if a[0] == "p":
            return pnames[a[1]]
        if a[0] == "l":
            return "[" + ", ".join(text(x, inline) for x in a[1]) + "]"
        return expr(a[1]) if inline else locals_[a[1]]

    def expr(i: int) -> str:
        tool, args = pattern.nodes[i]
        return f"{tool}({', '.join(text(a, inline=True) for a in args)})"

    header = f"def {name}({', '.join(f'{n}: {t}' for n, t in zip(pnames, ptypes))}) -> {sink_tool.signature.result}:"
    body = [f"    {locals_[i]} = {tool}({', '.join(text(a) for a in args)})"
            for i, (tool, args) in enumerate(pattern.nodes[:-1])]
    tool, args = pattern.nodes[-1]
    body.append(f"    return {tool}({', '.join(text(a) for a in args)})")
    source = "\n".join([header, *body]) + "\n"

    # L3: children's pre-conditions everywhere, the output's post-conditions; substituted.
    pre: list[str] = []
    for i, (tool, args) in enumerate(pattern.nodes):
        rec = snapshot.tool(tool)
        mapping = {p: text(a, inline=True) for p, a in zip(rec.param_names, args)}
        for cond in rec.pre:
            sub = _substitute(cond, mapping, config.max_condition_chars)
            if sub and sub not in pre:
                pre.append(sub)
    post: list[str] = []
    mapping = {p: text(a, inline=True) for p, a in zip(sink_tool.param_names, pattern.nodes[-1][1])}
    for cond in sink_tool.post:
        sub = _substitute(cond, mapping, config.max_condition_chars)
        if sub and sub not in post and not _fragile_equality(sub):
            post.append(sub)

    # L4 and the observed ranges: every use, inputs -> output.
    observed: list[tuple[dict, Any]] = []
    seen_obs: set[str] = set()
    for u in uses:
        t = traces[u.trace]
        example = ({n: value_of(t, b) for n, b in zip(pnames, u.bindings)}, t.values[u.sink])
        key = repr(example)
        if key not in seen_obs:
            seen_obs.add(key)
            observed.append(example)
    outputs = [o for _, o in observed]
    numeric = [o for o in outputs if isinstance(o, (int, float)) and not isinstance(o, bool)]
    if config.sign_post and numeric and len(numeric) == len(outputs) and min(numeric) >= 0 \
            and "result >= 0" not in post:
        post.append("result >= 0")
    ranges = []
    for n in pnames:
        vals = [a[n] for a, _ in observed if isinstance(a[n], (int, float)) and not isinstance(a[n], bool)]
        if vals:
            ranges.append(f"{n} in [{min(vals):g}, {max(vals):g}]")
    if numeric:
        ranges.append(f"result in [{min(numeric):g}, {max(numeric):g}]")
    flat = sum(snapshot.flat(t) for t in pattern.tools)
    depth = 1 + max(snapshot.depth(t) for t in pattern.tools)
    complexity = (f"O(1): {pattern.size} tool calls, {flat} primitive calls; observed over {len(observed)} "
                  f"distinct uses: " + ", ".join(ranges))

    # L2: the steps, each with its child's first sentence; the arguments with their roles.
    roles = []
    for j, positions in enumerate(feeds):
        where = " and the ".join(f"{snapshot.tool(pattern.nodes[i][0]).param_names[k]} of step {i + 1} "
                          f"({pattern.nodes[i][0]})" for i, k, _ in positions)
        roles.append(f"{pnames[j]} is the {where}")
    steps = [f"({i + 1}) {tool}: {_first_sentence(snapshot.tool(tool).description)}"
             for i, (tool, _) in enumerate(pattern.nodes)]
    description = (f"Composite of {pattern.size} calls: {' then '.join(pattern.tools)}; returns the result of "
                   f"step {pattern.size}. " + "; ".join(roles) + ". Steps: " + " ".join(steps))
    return Candidate(name=name, source=source, description=description, pre=tuple(pre), post=tuple(post),
                     examples=tuple(observed[:config.n_examples]), complexity=complexity, pattern=pattern,
                     children=pattern.tools, depth=depth, flat=flat, score=s, uses=tuple(uses),
                     observed=tuple(observed))


def _fragile_equality(cond: str) -> bool:
    """An ``==`` that is not ``result == expression``: after substitution it compares two different
    float computations (``(a - b) + b == a``), which rounding breaks; the definitional form holds
    exactly because the body computes that very expression."""
    for node in ast.walk(ast.parse(cond, mode="eval")):
        if isinstance(node, ast.Compare) and any(isinstance(op, ast.Eq) for op in node.ops):
            sides = [node.left, *node.comparators]
            if not (len(sides) == 2 and any(isinstance(x, ast.Name) and x.id == "result" for x in sides)):
                return True
    return False


# ------------------------------------------------------------------------------------------------
# Proposals from other proposers (a teacher LM): code in, pattern and evidence out
# ------------------------------------------------------------------------------------------------


class NotStraightLine(CocodaError, ValueError):
    """A composite body the rewriter cannot match: not straight-line calls over its parameters."""


def pattern_from_source(source: str, snapshot: Any) -> tuple[Pattern, tuple[int, ...]]:
    """The pattern of a straight-line composite (``v = tool(args)`` lines, nested calls allowed,
    ``return tool(args)`` or ``return v``) and, per tool parameter, its pattern parameter index.

    Raises :class:`NotStraightLine` for anything else: literals in the body (a trace's literals are
    parameters, so the body would never match), control flow, unused locals or parameters.
    """
    from cocoda_jax.library.analysis import parse_function

    fn = parse_function(source)
    params = [a.arg for a in fn.args.args]
    calls: list[Any] = []
    local: dict[str, int] = {}

    def ref(node: ast.expr) -> Ref:
        if isinstance(node, ast.Name):
            if node.id in local:
                return Ref("node", local[node.id])
            if node.id in params:
                return Ref("var", node.id)
            raise NotStraightLine(f"{node.id!r} is neither a parameter nor an earlier local")
        if isinstance(node, ast.List):
            return Ref("list", tuple(ref(e) for e in node.elts))
        if isinstance(node, ast.Call):
            return Ref("node", call(node))
        raise NotStraightLine(f"unsupported argument {ast.unparse(node)!r}")

    def call(node: ast.Call) -> int:
        if not isinstance(node.func, ast.Name) or node.func.id not in snapshot or node.keywords:
            raise NotStraightLine(f"{ast.unparse(node)!r} is not a positional call of a library tool")
        from cocoda_jax.coevolve.traces import Call
        args = tuple(ref(a) for a in node.args)
        calls.append(Call(f"v{len(calls)}", node.func.id, args))
        return len(calls) - 1

    body = [b for b in fn.body if not (isinstance(b, ast.Expr) and isinstance(b.value, ast.Constant))]
    for stmt in body[:-1]:
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)
                and isinstance(stmt.value, ast.Call)):
            raise NotStraightLine(f"line {stmt.lineno} is not 'name = tool(args)'")
        local[stmt.targets[0].id] = call(stmt.value)
    last = body[-1] if body else None
    if not isinstance(last, ast.Return) or last.value is None:
        raise NotStraightLine("the body must end with 'return tool(args)' or 'return name'")
    sink = ref(last.value)
    if sink.kind != "node":
        raise NotStraightLine("the body must return a call's value")
    trace = Trace("<source>", (), tuple(calls), (None,) * len(calls), sink)
    pattern, order, bindings = canonical(trace, frozenset(range(len(calls))), sink.value)
    if len(order) != len(calls):
        raise NotStraightLine("some call's value is never used")
    index = {b.value: j for j, b in enumerate(bindings)}
    if set(index) != set(params):
        raise NotStraightLine(f"unused parameter(s) {sorted(set(params) - set(index))}")
    return pattern, tuple(index[p] for p in params)


def candidate_from_tool(tool: Tool, trajectories: Sequence[Any], snapshot: Any, config: AbstractorConfig = AbstractorConfig(),
                        proposer: str = "teacher") -> Candidate:
    """Evidence for a composite written by someone else: its uses in ``trajectories`` (rewriting
    targets), every observed use as an example, its compression score. The record's own layers are
    kept; validation then treats it exactly like a symbolic proposal."""
    pattern, order = pattern_from_source(tool.source, snapshot)
    traces = [as_trace(t, snapshot) for t in trajectories if isinstance(t, Trace) or t.answered]
    uses = [u for i, t in enumerate(traces) for u in find_uses(t, pattern, i, config)]
    observed: list[tuple[dict, Any]] = []
    for u in uses:
        t = traces[u.trace]
        example = ({p: value_of(t, u.bindings[j]) for p, j in zip(tool.param_names, order)}, t.values[u.sink])
        if example not in observed:
            observed.append(example)
    children = analyse(tool.source).calls
    return Candidate(name=tool.name, source=tool.source, description=tool.description, pre=tool.pre, post=tool.post,
                     examples=tool.examples, complexity=tool.complexity or "", pattern=pattern, children=children,
                     depth=1 + max(snapshot.depth(c) for c in children), flat=sum(snapshot.flat(c) for c in children),
                     score=score(uses, pattern.size, config), uses=tuple(uses), observed=tuple(observed),
                     proposer=proposer, arg_order=order)


class _Subst(ast.NodeTransformer):
    def __init__(self, mapping: dict[str, ast.expr]):
        self.mapping = mapping

    def visit_Name(self, node: ast.Name) -> ast.AST:
        return self.mapping.get(node.id, node)


def _substitute(cond: str, mapping: dict[str, str], max_chars: int) -> str | None:
    """``cond`` with the child's parameter names replaced by the composite's expressions; ``None``
    when that is unsafe (the condition binds names of its own) or too long to be worth a card."""
    tree = ast.parse(cond, mode="eval")
    if any(isinstance(n, (ast.Lambda, ast.comprehension, ast.NamedExpr)) for n in ast.walk(tree)):
        return None
    parsed = {k: ast.parse(v, mode="eval").body for k, v in mapping.items()}
    out = ast.unparse(_Subst(parsed).visit(tree))
    return out if len(out) <= max_chars else None


def fold_all(trace: Any, candidates: Sequence[Candidate]) -> Any:
    """``trace`` with every use of each candidate folded into one call of it, in the given order
    (the order the library accepted them: a later composite may call an earlier one)."""
    for c in candidates:
        trace, _ = c.pattern.rewrite(trace, c.name, c.arg_order)
    return trace


__all__ = [
    "Abstractor", "AbstractorConfig", "Candidate", "CombinedAbstractor", "NotStraightLine", "Pattern", "Score", "SymbolicAbstractor", "Use",
    "build_candidate", "candidate_from_tool", "canonical", "fold_all", "pattern_from_source", "composite_name", "find_uses", "mine", "occurrences", "param_binder", "propose", "rewrite",
    "score", "select_uses",
]

"""The planner's action format: one restricted Python assignment per step, checked before it runs.

A step is one line of the form ``x0 = percent_of(n0, n2)``: a single assignment to a fresh, plain
name whose right side calls one library tool with arguments that are bound names, literals
(numbers, strings, ``True``/``False``/``None``) or flat lists of those, positionally or by keyword.
The episode ends with ``answer = xK`` (a bound name; ``answer = tool(...)`` is a call step that
also ends it). Why so narrow: every step is one tool call whose arguments are visible in the text,
so the tool-call trace, the types and the reward's call count are read off the action itself, and
the planner composes instead of computing digits.

:func:`check_step` is the pure static checker: it parses the text and judges it against a
:class:`~cocoda_jax.library.LibrarySnapshot` and the types of the names bound so far, returning a
:class:`StepCheck` whose ``kind`` is ``"ok"`` or one of :data:`STATIC_ERRORS`. Only a step that
passes is executed (:func:`execute_step`, in the real :class:`~cocoda_jax.execution.Sandbox`), and
the observation the planner reads next is :func:`render_observation` of the outcome.

Where the episode offers it (``check_step(..., search=True)``), a step may instead be a search,
``search("words")`` or ``search("(str, str) -> dict", "words")``: a bare call with string literals
that asks the retrieval cascade for cards (:func:`render_search` is its observation). It calls no
tool and binds nothing; elsewhere it is ``malformed``, as any bare expression.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import keyword
import math
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

from cocoda_jax.types import ANY, Type, accepts, apply_subst, free_vars, list_of
from cocoda_jax.types import join_types, type_of_value

ANSWER = "answer"
#: The planner-issued retrieval step: ``search("words")`` or ``search("(str, str) -> dict", "words")``.
SEARCH = "search"
#: Text put before every observation line, so the planner (and the loss mask) can tell them apart.
OBSERVATION_PREFIX = "-> "
#: Longest observation text (values are truncated with "...").
MAX_OBSERVATION_CHARS = 120

#: Why a step was refused before running. ``malformed``: does not parse, is not exactly one
#: statement, or is not ``name = tool(args)`` / ``answer = name`` with plain arguments;
#: ``bad_target``: assigns to an input, a tool name, a bound name or a reserved name;
#: ``unknown_tool``: calls a name the library does not hold; ``bad_arguments``: too many or too few
#: arguments, an unknown or repeated keyword; ``unbound_name``: an argument names nothing bound yet;
#: ``ill_typed``: an argument's type does not fit the tool's L1 signature.
STATIC_ERRORS = ("malformed", "bad_target", "unknown_tool", "bad_arguments", "unbound_name", "ill_typed")
#: Why a checked step failed when it ran (the sandbox's :data:`~cocoda_jax.execution.ERROR_KINDS`).
RUNTIME_ERRORS = ("timeout", "memory", "syntax", "forbidden", "runtime", "no_answer", "worker_died", "output_limit")


# ------------------------------------------------------------------------------------------------
# Splitting generated text
# ------------------------------------------------------------------------------------------------


def split_steps(text: str) -> tuple[str, ...]:
    """The steps in generated text: one per non-blank line, stripped, in order.

    Lines are the unit because the sampler stops a turn at a newline and the observation follows it;
    code fences and observation lines the model may have echoed are dropped (never a step).
    """
    steps = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("```") or line.startswith(OBSERVATION_PREFIX.strip()):
            continue
        steps.append(line)
    return tuple(steps)


def first_step(text: str) -> str:
    """The step a turn's generated text stands for: its first step, or ``""`` (malformed) if none."""
    steps = split_steps(text)
    return steps[0] if steps else ""


# ------------------------------------------------------------------------------------------------
# The parsed step and the verdict
# ------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Arg:
    """One argument as written: a bound ``name``, a ``literal`` value, or a list of either.

    ``kind`` is ``"name"``, ``"literal"`` or ``"list"`` (``items`` then holds the elements);
    ``keyword`` is the parameter name when passed by keyword."""

    kind: str
    text: str
    value: Any = None
    items: tuple["Arg", ...] = ()
    keyword: str | None = None


@dataclasses.dataclass(frozen=True)
class Step:
    """A step that has the allowed shape: ``target = tool(args)`` or ``answer = source``."""

    target: str
    tool: str | None               # None for ``answer = name`` and for a search
    args: tuple[Arg, ...] = ()
    source: str | None = None      # the name copied by ``answer = name``
    query: str | None = None       # a search's words (target "" and tool None)
    signature: str | None = None   # a search's stated L1 signature, when it gave one

    @property
    def is_answer(self) -> bool:
        return self.target == ANSWER

    @property
    def is_search(self) -> bool:
        """A search step asks the retrieval cascade for cards: it binds nothing and calls no tool."""
        return self.query is not None

    @property
    def names_used(self) -> tuple[str, ...]:
        used = [self.source] if self.source else []
        for a in self.args:
            used += [a.text] if a.kind == "name" else [i.text for i in a.items if i.kind == "name"]
        return tuple(dict.fromkeys(used))


@dataclasses.dataclass(frozen=True)
class StepCheck:
    """The static verdict on one step: ``kind`` is ``"ok"`` or one of :data:`STATIC_ERRORS`.

    ``step`` is the parsed step when it had the allowed shape; ``result_type`` the type the target
    gets (the tool's result under the substitution the arguments fixed) when ``ok``."""

    kind: str
    message: str = ""
    step: Step | None = None
    result_type: Type | None = None

    @property
    def ok(self) -> bool:
        return self.kind == "ok"

    @property
    def is_answer(self) -> bool:
        return self.step is not None and self.step.is_answer

    @property
    def is_search(self) -> bool:
        return self.step is not None and self.step.is_search


def _fail(kind: str, message: str, step: Step | None = None) -> StepCheck:
    return StepCheck(kind=kind, message=message, step=step)


# ------------------------------------------------------------------------------------------------
# Types of values
# ------------------------------------------------------------------------------------------------


def input_types(inputs: Mapping[str, Any] | Sequence[tuple[str, Any]]) -> dict[str, Type]:
    """The checker's starting environment for a task's inputs (``(("n0", 3), ...)`` or a dict)."""
    items = inputs.items() if isinstance(inputs, Mapping) else inputs
    return {name: type_of_value(value) for name, value in items}


# ------------------------------------------------------------------------------------------------
# Parsing
# ------------------------------------------------------------------------------------------------


def _literal(node: ast.AST) -> tuple[bool, Any]:
    if isinstance(node, ast.Constant) and (node.value is None or isinstance(node.value, (bool, int, float, str))):
        if isinstance(node.value, float) and not math.isfinite(node.value):
            return False, None
        return True, node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)) \
            and isinstance(node.operand, ast.Constant) and type(node.operand.value) in (int, float):
        v = node.operand.value
        return True, -v if isinstance(node.op, ast.USub) else v
    return False, None


def _constant_display(node: ast.AST) -> tuple[bool, Any]:
    """A dict display, or a list display with a list inside, written with literals alone (no
    names): one literal value (BFCL's tools take such arguments, e.g. ``tags=['a']`` inside a dict)."""
    if not isinstance(node, (ast.Dict, ast.List)):
        return False, None
    if isinstance(node, ast.List) and not any(isinstance(e, (ast.List, ast.Dict)) for e in node.elts):
        return False, None  # a flat list stays a "list" argument (its items may be names)

    def ok(n: ast.AST) -> bool:
        if isinstance(n, ast.Dict):
            return all(k is not None and isinstance(k, ast.Constant) and isinstance(k.value, str) for k in n.keys) \
                and all(ok(v) for v in n.values)
        if isinstance(n, ast.List):
            return all(ok(e) for e in n.elts)
        return _literal(n)[0]

    if not ok(node):
        return False, None
    return True, ast.literal_eval(node)


def _arg(node: ast.AST, source: str, keyword_name: str | None, nested: bool) -> Arg | str:
    """An :class:`Arg`, or the reason (str) the node is not a plain argument."""
    text = ast.get_source_segment(source, node) or ast.unparse(node)
    is_lit, value = _literal(node)
    if not is_lit and not nested:
        is_lit, value = _constant_display(node)
    if is_lit:
        return Arg("literal", text, value, keyword=keyword_name)
    if isinstance(node, ast.Name):
        return Arg("name", node.id, keyword=keyword_name)
    if isinstance(node, ast.List) and not nested:
        items = []
        for elt in node.elts:
            item = _arg(elt, source, None, nested=True)
            if isinstance(item, str):
                return item
            items.append(item)
        return Arg("list", text, items=tuple(items), keyword=keyword_name)
    what = "a nested list" if isinstance(node, ast.List) else f"a {type(node).__name__} expression"
    return f"{what} as an argument; arguments must be names, literals, flat lists of those or constant displays"


def _search_step(call: ast.Call) -> Step | StepCheck:
    """``search("words")`` or ``search("signature", "words")``: string literals only, so the query
    is read off the text as written (no names, no keywords); a signature that does not parse is
    refused here, before anything is retrieved."""
    usage = 'write search("words") or search("(type, ...) -> type", "words") with string literals'
    if call.keywords or not 1 <= len(call.args) <= 2 or not all(
            isinstance(a, ast.Constant) and isinstance(a.value, str) for a in call.args):
        return _fail("malformed", f"search: {usage}")
    texts = [" ".join(a.value.split()) for a in call.args]
    if not texts[-1]:
        return _fail("malformed", "search: the query words are empty")
    signature = None
    if len(texts) == 2:
        from cocoda_jax.types import TypeSyntaxError, parse_signature
        try:
            signature = str(parse_signature(texts[0]))
        except TypeSyntaxError as err:
            return _fail("malformed", f"search: the signature {texts[0]!r} does not parse ({err})")
    return Step(target="", tool=None, query=texts[-1], signature=signature)


def parse_step(text: str, search: bool = False) -> Step | StepCheck:
    """The step's shape, or a failed :class:`StepCheck` (``malformed``) saying what is wrong.
    ``search``: the episode offers the search step (:func:`_search_step`); without it a search is
    malformed like any other bare expression."""
    if not isinstance(text, str) or not text.strip():
        return _fail("malformed", "empty step")
    source = text.strip()
    if "\n" in source:
        return _fail("malformed", "a step is one line")
    try:
        with warnings.catch_warnings():  # a model's text such as "x = 1abc" must not warn on the console
            warnings.simplefilter("ignore", SyntaxWarning)
            tree = ast.parse(source)
    except SyntaxError as err:
        return _fail("malformed", f"does not parse: {err.msg}")
    if len(tree.body) != 1:
        return _fail("malformed", f"{len(tree.body)} statements; a step is exactly one assignment")
    stmt = tree.body[0]
    if search and isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) \
            and isinstance(stmt.value.func, ast.Name) and stmt.value.func.id == SEARCH:
        return _search_step(stmt.value)
    if search and isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Call) \
            and isinstance(stmt.value.func, ast.Name) and stmt.value.func.id == SEARCH:
        return _fail("malformed", "search is a step of its own: write search(...) without a target")
    if not isinstance(stmt, ast.Assign) or len(stmt.targets) != 1 or not isinstance(stmt.targets[0], ast.Name):
        return _fail("malformed", "a step must be one assignment 'name = tool(args)' or 'answer = name'")
    target = stmt.targets[0].id
    value = stmt.value
    if isinstance(value, ast.Name):
        if target != ANSWER:
            return _fail("malformed", f"'{target} = {value.id}' copies a name; only 'answer = name' may")
        return Step(target=ANSWER, tool=None, source=value.id)
    if not isinstance(value, ast.Call) or not isinstance(value.func, ast.Name):
        return _fail("malformed", "the right side must call a library tool by name (or, for answer, be a name)")
    args: list[Arg] = []
    for node in value.args:
        if isinstance(node, ast.Starred):
            return _fail("malformed", "'*' arguments are not allowed")
        arg = _arg(node, source, None, nested=False)
        if isinstance(arg, str):
            return _fail("malformed", arg)
        args.append(arg)
    for kw in value.keywords:
        if kw.arg is None:
            return _fail("malformed", "'**' arguments are not allowed")
        arg = _arg(kw.value, source, kw.arg, nested=False)
        if isinstance(arg, str):
            return _fail("malformed", arg)
        args.append(arg)
    return Step(target=target, tool=value.func.id, args=tuple(args))


# ------------------------------------------------------------------------------------------------
# Checking
# ------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _Params:
    names: tuple[str, ...]
    required: tuple[str, ...]
    positional_only: int
    varargs: bool


@functools.lru_cache(maxsize=4096)
def _params(source: str) -> _Params:
    """The tool's calling convention from its code (the L1 signature has no defaults)."""
    fn = next(node for node in ast.parse(source).body if isinstance(node, ast.FunctionDef))
    a = fn.args
    positional = [p.arg for p in (*a.posonlyargs, *a.args)]
    required = positional[:len(positional) - len(a.defaults)]
    required += [p.arg for p, d in zip(a.kwonlyargs, a.kw_defaults) if d is None]
    names = tuple(positional + [p.arg for p in a.kwonlyargs])
    return _Params(names, tuple(required), len(a.posonlyargs), a.vararg is not None)


def _arg_type(arg: Arg, env: Mapping[str, Type]) -> Type:
    if arg.kind == "name":
        return env[arg.text]
    if arg.kind == "literal":
        return type_of_value(arg.value)
    return list_of(join_types(_arg_type(i, env) for i in arg.items))


def _ground(t: Type) -> Type:
    """Leftover type variables become ``Any``: a later step cannot bind them consistently anyway."""
    names = free_vars(t)
    return apply_subst(t, {n: ANY for n in names}) if names else t


def check_step(text: str, snapshot: Any, env: Mapping[str, Type], search: bool = False) -> StepCheck:
    """Judges one step against ``snapshot`` given ``env`` (name -> type of every bound name: the
    inputs and earlier targets). Pure: nothing runs; the first problem found is reported.
    ``search``: the search step is offered (a well-formed search is ``ok`` with no result type).

    Order: shape, target, tool, unbound names, arity and keywords, then argument types (each
    argument with :func:`cocoda_jax.types.accepts`, one substitution across all of them).
    """
    parsed = parse_step(text, search)
    if isinstance(parsed, StepCheck):
        return parsed
    step = parsed
    if step.is_search:
        return StepCheck("ok", "", step, None)
    target = step.target
    if target.startswith("_") or keyword.iskeyword(target):
        return _fail("bad_target", f"{target!r} is not an allowed variable name", step)
    if target != ANSWER:
        if target in snapshot:
            return _fail("bad_target", f"{target!r} is a tool name", step)
        if target in env:
            return _fail("bad_target", f"{target!r} is already bound; use a fresh name", step)
    if step.tool is None:  # answer = name
        if step.source not in env:
            return _fail("unbound_name", f"{step.source!r} is not bound", step)
        return StepCheck("ok", "", step, env[step.source])
    if step.tool not in snapshot:
        return _fail("unknown_tool", f"{step.tool!r} is not a library tool", step)
    for name in step.names_used:
        if name not in env:
            hint = " (a tool is called, never passed)" if name in snapshot else ""
            return _fail("unbound_name", f"{name!r} is not bound{hint}", step)
    tool = snapshot.tool(step.tool)
    params = _params(tool.source)
    sig = tool.signature
    positional = [a for a in step.args if a.keyword is None]
    keywords = [a for a in step.args if a.keyword is not None]
    if len(positional) > len(params.names) and not params.varargs:
        return _fail("bad_arguments", f"{step.tool} takes {len(params.names)} argument(s), got {len(positional)}", step)
    slots: dict[str, Arg] = dict(zip(params.names, positional))
    for arg in keywords:
        if arg.keyword not in params.names:
            return _fail("bad_arguments", f"{step.tool} has no parameter {arg.keyword!r}", step)
        if params.names.index(arg.keyword) < params.positional_only:
            return _fail("bad_arguments", f"{step.tool}: {arg.keyword!r} is positional-only", step)
        if arg.keyword in slots:
            return _fail("bad_arguments", f"{step.tool} got {arg.keyword!r} twice", step)
        slots[arg.keyword] = arg
    missing = [n for n in params.required if n not in slots]
    if missing:
        return _fail("bad_arguments", f"{step.tool} is missing argument(s) {', '.join(missing)}", step)
    subst: dict = {}
    by_name = {p.name: p.type for p in sig.params}
    for name, arg in slots.items():
        expected = by_name.get(name, ANY)
        actual = _arg_type(arg, env)
        new = accepts(expected, actual, subst)
        if new is None:
            shown = apply_subst(expected, subst)
            return _fail("ill_typed", f"{step.tool}: parameter {name} expects {shown}, got {arg.text}: {actual}", step)
        subst = new
    return StepCheck("ok", "", step, _ground(apply_subst(sig.result, subst)))


def bind(env: Mapping[str, Type], check: StepCheck) -> dict[str, Type]:
    """The environment after an ``ok`` step (a new dict; ``env`` is left alone)."""
    if not check.ok:
        raise ValueError(f"only an ok step binds a name, this one is {check.kind}: {check.message}")
    if check.is_search:
        raise ValueError("a search step binds no name")
    out = dict(env)
    out[check.step.target] = check.result_type
    return out


# ------------------------------------------------------------------------------------------------
# Running a step and the observation
# ------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class StepOutcome:
    """What running one checked step gave: the bound ``value`` or a typed ``error`` kind (one of
    :data:`RUNTIME_ERRORS`) with ``message``; ``calls`` are the tools the step called at top level;
    ``environment_calls`` the ``(kind, method, kwargs)`` calls it made on a stateful environment."""

    ok: bool
    value: Any = None
    error: str | None = None
    message: str = ""
    calls: tuple[str, ...] = ()
    environment_calls: tuple[tuple[str, str, dict], ...] = ()


def step_program(check: StepCheck, text: str) -> str:
    """The program the sandbox runs for an ``ok`` step: the step, then ``answer`` bound to its
    target (a run must bind ``answer``; that is how the value comes back)."""
    if not check.ok:
        raise ValueError(f"step {text!r} did not pass the checker ({check.kind}); it must not run")
    line = text.strip()
    return line + "\n" if check.step.is_answer else f"{line}\n{ANSWER} = {check.step.target}\n"


def outcome_from_result(result: Any) -> StepOutcome:
    """A sandbox :class:`~cocoda_jax.execution.RunResult` as a :class:`StepOutcome`."""
    env_calls = tuple(getattr(result, "environment_calls", ()))
    if result.ok:
        return StepOutcome(ok=True, value=result.value, calls=tuple(result.calls), environment_calls=env_calls)
    return StepOutcome(ok=False, error=result.error.kind, message=result.error.message, calls=tuple(result.calls),
                       environment_calls=env_calls)


def execute_steps(texts: Sequence[str], checks: Sequence[StepCheck], bindings: Sequence[Mapping[str, Any]],
                  snapshot: Any, sandbox: Any, timeout_s: float | None = None,
                  environments: Sequence[Any] | None = None) -> list[StepOutcome]:
    """Runs several checked steps in one sandbox batch (one per rollout of a group), each with the
    values bound so far in its own rollout passed as ``inputs`` and, for a stateful domain, the spec
    of its environment session (``environments``; see :mod:`cocoda_jax.execution.environment`)."""
    programs = [step_program(c, t) for t, c in zip(texts, checks, strict=True)]
    if len(bindings) != len(programs):
        raise ValueError(f"{len(bindings)} bindings for {len(programs)} steps")
    extra = {} if environments is None or all(e is None for e in environments) else {"environments": list(environments)}
    results = sandbox.run_many(programs, snapshot, timeout_s, inputs=[dict(b) for b in bindings], **extra)
    return [outcome_from_result(r) for r in results]


def execute_step(text: str, check: StepCheck, bindings: Mapping[str, Any], snapshot: Any, sandbox: Any,
                 timeout_s: float | None = None) -> StepOutcome:
    """Runs one checked step in the sandbox with the variables bound so far."""
    return execute_steps([text], [check], [bindings], snapshot, sandbox, timeout_s)[0]


def format_value(value: Any, max_chars: int = MAX_OBSERVATION_CHARS) -> str:
    """A value as the planner reads it: floats to 6 significant digits (``51.25``, ``14.2308``),
    whole floats without a fraction (``70``), containers element-wise, long text cut with "..."."""
    text = _fmt(value)
    return text if len(text) <= max_chars else text[:max_chars - 3] + "..."


def _fmt(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return repr(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            return repr(value)
        return f"{value:.6g}"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(_fmt(v) for v in value) + "]"
    if isinstance(value, tuple):
        return "(" + ", ".join(_fmt(v) for v in value) + ("," if len(value) == 1 else "") + ")"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_fmt(k)}: {_fmt(v)}" for k, v in value.items()) + "}"
    return repr(value)


#: Between two cards of a search's observation (it stays one line: one observation per step).
SEARCH_SEPARATOR = " | "


def render_search(cards: Sequence[str]) -> str:
    """A search's observation: the cards found, in the cascade's order, on one line; never cut
    (at most ``k`` cards, the same cards a prompt would show)."""
    if not cards:
        return OBSERVATION_PREFIX + "no tools found"
    return OBSERVATION_PREFIX + SEARCH_SEPARATOR.join(" ".join(c.split()) for c in cards)


def render_observation(check: StepCheck, outcome: StepOutcome | None = None,
                       max_chars: int = MAX_OBSERVATION_CHARS) -> str:
    """The observation line after a step: ``-> value``, or ``-> error[kind]: short message`` for a
    refused step (``outcome`` None) or a failed run. One line, at most about ``max_chars``
    characters (a domain whose observations carry text, e.g. BFCL's next user turn, raises it)."""
    if not check.ok:
        kind, message = check.kind, check.message
    elif outcome is None:
        raise ValueError("an ok step needs its outcome to be observed")
    elif outcome.ok:
        return OBSERVATION_PREFIX + format_value(outcome.value, max_chars)
    else:
        kind, message = outcome.error, outcome.message
    message = " ".join(str(message).split())
    text = f"{OBSERVATION_PREFIX}error[{kind}]: {message}"
    return text if len(text) <= max_chars else text[:max_chars - 3] + "..."


__all__ = [
    "ANSWER", "SEARCH", "SEARCH_SEPARATOR", "render_search", "Arg", "MAX_OBSERVATION_CHARS", "OBSERVATION_PREFIX", "RUNTIME_ERRORS", "STATIC_ERRORS", "Step",
    "StepCheck", "StepOutcome", "bind", "check_step", "execute_step", "execute_steps", "first_step",
    "format_value", "input_types", "outcome_from_result", "parse_step", "render_observation", "split_steps",
    "step_program", "type_of_value",
]

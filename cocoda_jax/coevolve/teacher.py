"""The optional teacher abstractor: a teacher LM behind an OpenAI-compatible endpoint proposes composites.

Same :class:`~cocoda_jax.coevolve.abstractor.Abstractor` protocol as the symbolic default, so the
round loop does not care which one runs. The teacher sees the successful programs and the cards of
the tools they call, and answers with composites as JSON (``name``, ``code``, ``description``,
``pre``, ``post``). Its reply is untrusted text: it is parsed defensively (code fences, prose around
the JSON, wrong shapes), each composite's code is only *parsed* here (:meth:`Tool.from_source` reads
the AST), never executed, and every proposal goes through
:func:`~cocoda_jax.coevolve.abstractor.candidate_from_tool` so it reaches the very same validation as
a symbolic one (rewrites and examples run in the sandbox only). Nothing the teacher says can crash a
round: every failure becomes a typed :class:`ProposalError`, counted in :attr:`TeacherAbstractor.error_counts`
and logged.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import logging
import re
import textwrap
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from cocoda_jax.coevolve.abstractor import AbstractorConfig, Candidate, NotStraightLine, candidate_from_tool
from cocoda_jax.coevolve.traces import Trace, TraceError, as_trace
from cocoda_jax.library import InsertRejected, Tool

log = logging.getLogger(__name__)

#: The kinds of :class:`ProposalError`, from the whole reply down to one proposal.
ERROR_KINDS = (
    "endpoint",            # the endpoint failed (HTTP error, timeout, no connection, not a completion)
    "no_json",             # the reply holds no JSON value at all
    "bad_json",            # it holds something JSON-like that does not parse
    "bad_shape",           # the JSON is not a list of proposals (nor {"composites": [...]})
    "missing_field",       # a proposal lacks a required field
    "bad_field",           # a field has the wrong type, or the name does not match the code
    "name_taken",          # the name is a library tool's, or an earlier proposal's in the same reply
    "malformed_tool",      # the code does not make a tool record (syntax, signature, spec)
    "not_straight_line",   # the body is not straight-line calls of library tools over its parameters
    "unexpected",          # anything else raised while building the candidate (a bug to report)
)

SYSTEM_PROMPT = """You refactor tool libraries. You are shown tools (with typed signatures) and \
straight-line programs that solved tasks with them. Propose new composite tools: functions that \
capture a sequence of tool calls recurring in several programs, so the programs get shorter.

Rules for each composite's code:
- one Python function with type annotations on every parameter and on the result;
- its body only assigns calls of the listed tools (positional arguments only) to local names and \
ends with `return <call>` or `return <name>`; no literals, no control flow, no imports, no other code;
- every parameter and every local is used.

Answer with a JSON list only, no prose, each item:
{"name": "...", "code": "def ...", "description": "one or two sentences", "pre": ["python boolean \
expression over the parameters", ...], "post": ["python boolean expression over the parameters and \
`result`", ...]}"""


@dataclasses.dataclass(frozen=True)
class ProposalError:
    """Why (part of) a teacher reply produced no candidate: ``kind`` (one of :data:`ERROR_KINDS`),
    ``index`` (the proposal's position in the reply, ``None`` for the whole reply), its ``name``
    when known, and the human ``detail``."""

    kind: str
    detail: str
    index: int | None = None
    name: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in ERROR_KINDS:
            raise ValueError(f"unknown proposal error kind {self.kind!r}")

    def to_record(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class TeacherConfig:
    """What the teacher is shown and how many proposals are kept (validated on construction)."""

    max_programs: int = 24        # distinct programs in the prompt
    max_candidates: int = 8       # proposals kept from one reply, in the teacher's order
    n_examples: int = 3           # L4 examples filled in from observed uses when the teacher gives none
    card_examples: int = 1        # worked examples per tool card in the prompt
    abstractor: AbstractorConfig = AbstractorConfig()   # for candidate_from_tool's use search and score

    def __post_init__(self) -> None:
        if self.max_programs < 1 or self.max_candidates < 0 or self.n_examples < 0 or self.card_examples < 0:
            raise ValueError(f"invalid teacher config: {self}")


@dataclasses.dataclass(frozen=True)
class TeacherProposals:
    """One call's outcome: the candidates, the typed errors, and the raw reply (for the run log)."""

    candidates: tuple[Candidate, ...]
    errors: tuple[ProposalError, ...]
    reply: str | None


# ------------------------------------------------------------------------------------------------
# The prompt
# ------------------------------------------------------------------------------------------------


def _distinct_programs(traces: Sequence[Trace], limit: int) -> list[Trace]:
    """The first ``limit`` traces with distinct programs (the same program twice teaches nothing)."""
    seen: set[str] = set()
    out = []
    for t in traces:
        text = t.program()
        if text not in seen:
            seen.add(text)
            out.append(t)
            if len(out) == limit:
                break
    return out


def build_messages(traces: Sequence[Trace], snapshot: Any,
                   config: TeacherConfig = TeacherConfig()) -> list[dict[str, str]]:
    """The chat messages: the rules, then the cards of the tools the shown programs call (in the
    library's topological order) and the programs with their input values."""
    from cocoda_jax.retrieval.tokens import render_card

    shown = _distinct_programs(traces, config.max_programs)
    used = {c.tool for t in shown for c in t.calls}
    names = [n for n in snapshot.topological_order() if n in used]
    cards = "\n\n".join(render_card(snapshot.tool(n), config.card_examples) for n in names)
    programs = []
    for k, t in enumerate(shown, 1):
        inputs = ", ".join(f"{n} = {v!r}" for n, v in t.inputs)
        programs.append(f"# program {k} (task {t.task_id}; inputs: {inputs})\n{t.program().rstrip()}")
    taken = ", ".join(snapshot.names())
    user = (f"Tools:\n\n{cards}\n\nSuccessful programs:\n\n" + "\n\n".join(programs)
            + f"\n\nNames already taken: {taken}.\nPropose at most {config.max_candidates} composites as a JSON list.")
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]


# ------------------------------------------------------------------------------------------------
# Parsing the reply
# ------------------------------------------------------------------------------------------------

_FENCE = re.compile(r"```[A-Za-z0-9_-]*[ \t]*\n(.*?)```", re.DOTALL)
REQUIRED = ("name", "code", "description")


def extract_json(text: str) -> tuple[Any, ProposalError | None]:
    """The first JSON value in ``text``: a fenced block's content first, else the whole text, else
    the value that starts at the first ``[``/``{`` (prose around it ignored). Never raises."""
    decoder = json.JSONDecoder()
    blocks = [m.group(1) for m in _FENCE.finditer(text)] + [text]
    first_error: str | None = None
    for block in blocks:
        stripped = block.strip()
        try:
            return json.loads(stripped), None
        except json.JSONDecodeError as err:
            first_error = first_error or f"{err.msg} at line {err.lineno} column {err.colno}"
        m = re.search(r"[\[{]", block)   # only the outermost value: never a fragment of a broken one
        if m is not None:
            try:
                return decoder.raw_decode(block, m.start())[0], None
            except json.JSONDecodeError:
                pass
    if not re.search(r"[\[{]", text):
        return None, ProposalError("no_json", "the reply holds no JSON list or object")
    return None, ProposalError("bad_json", f"no parsable JSON in the reply ({first_error})")


def _items(value: Any) -> tuple[list[Any], ProposalError | None]:
    if isinstance(value, list):
        return value, None
    if isinstance(value, dict):
        for key in ("composites", "tools", "proposals"):
            if isinstance(value.get(key), list):
                return value[key], None
        if "code" in value:
            return [value], None
    return [], ProposalError("bad_shape", f"expected a JSON list of proposals, got {type(value).__name__}")


def _conditions(item: Mapping[str, Any], key: str) -> tuple[str, ...]:
    value = item.get(key)
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,) if value.strip() else ()
    if isinstance(value, list) and all(isinstance(c, str) for c in value):
        return tuple(c for c in value if c.strip())
    raise TypeError(f"{key!r} must be a string or a list of strings")


def parse_reply(text: str) -> tuple[list[dict[str, Any]], list[ProposalError]]:
    """Well-formed proposal dicts (``name``, ``code``, ``description``, ``pre``, ``post`` as tuples)
    and one typed error per part that is not. Checks shapes only: the code is not looked at."""
    value, err = extract_json(text)
    if err is not None:
        return [], [err]
    items, err = _items(value)
    if err is not None:
        return [], [err]
    good: list[dict[str, Any]] = []
    errors: list[ProposalError] = []
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            errors.append(ProposalError("bad_shape", f"proposal is a {type(item).__name__}, not an object", i))
            continue
        name = item.get("name") if isinstance(item.get("name"), str) else None
        missing = [k for k in REQUIRED if k not in item]
        if missing:
            errors.append(ProposalError("missing_field", f"missing {', '.join(missing)}", i, name))
            continue
        wrong = [k for k in REQUIRED if not isinstance(item[k], str) or not item[k].strip()]
        if wrong:
            errors.append(ProposalError("bad_field", f"{', '.join(wrong)} must be non-empty strings", i, name))
            continue
        try:
            pre, post = _conditions(item, "pre"), _conditions(item, "post")
        except TypeError as e:
            errors.append(ProposalError("bad_field", str(e), i, name))
            continue
        good.append({"index": i, "name": item["name"].strip(), "code": _dedent_code(item["code"]),
                     "description": " ".join(item["description"].split()), "pre": pre, "post": post})
    return good, errors


def _dedent_code(code: str) -> str:
    inner = _FENCE.search(code)
    if inner:
        code = inner.group(1)
    return textwrap.dedent(code).strip("\n") + "\n"


# ------------------------------------------------------------------------------------------------
# Candidates
# ------------------------------------------------------------------------------------------------


def candidates_from_reply(text: str, traces: Sequence[Trace], snapshot: Any,
                          config: TeacherConfig = TeacherConfig()) -> tuple[list[Candidate], list[ProposalError]]:
    """Candidates built from a reply through :func:`candidate_from_tool` (the code is parsed, never
    run), and a typed error for each proposal that does not make one."""
    items, errors = parse_reply(text)
    out: list[Candidate] = []
    for item in items:
        if len(out) >= config.max_candidates:
            break
        i, name = item["index"], item["name"]
        if name in snapshot or any(c.name == name for c in out):
            # refused before any use: a body that shadows a library tool would change the very
            # programs it is checked against
            errors.append(ProposalError("name_taken", f"{name!r} is already taken", i, name))
            continue
        try:
            tool = Tool.from_source(item["code"], item["description"], pre=item["pre"], post=item["post"])
            if tool.name != name:
                detail = f"'name' is {name!r} but the code defines {tool.name!r}"
                errors.append(ProposalError("bad_field", detail, i, name))
                continue
            cand = candidate_from_tool(tool, traces, snapshot, config.abstractor, proposer="teacher")
        except InsertRejected as err:
            errors.append(ProposalError("malformed_tool", err.detail, i, name))
            continue
        except NotStraightLine as err:
            errors.append(ProposalError("not_straight_line", str(err), i, name))
            continue
        except Exception as err:  # noqa: BLE001 — a reply must never crash a round; logged and counted
            errors.append(ProposalError("unexpected", f"{type(err).__name__}: {err}", i, name))
            continue
        if not cand.examples and cand.observed:
            cand = dataclasses.replace(cand, examples=cand.observed[:config.n_examples])
        out.append(cand)
    return out, sorted(errors, key=lambda e: -1 if e.index is None else e.index)


class TeacherAbstractor:
    """Proposes composites by asking a teacher LM (see the module docstring).

    ``complete`` is anything mapping chat messages to the reply text, normally
    :meth:`third_party.teacher.ChatClient.complete`; its :class:`~third_party.teacher.TeacherError`
    failures become ``endpoint`` errors. :attr:`error_counts` counts errors by kind over the
    abstractor's life; :meth:`propose_with_report` gives one call's details.
    """

    def __init__(self, complete: Callable[[list[dict[str, str]]], str], config: TeacherConfig = TeacherConfig()):
        self.complete = complete
        self.config = config
        self.error_counts: collections.Counter[str] = collections.Counter()

    @classmethod
    def from_endpoint(cls, endpoint: Any, config: TeacherConfig = TeacherConfig(),
                      **client_kwargs: Any) -> "TeacherAbstractor":
        """Backed by :class:`third_party.teacher.ChatClient` on ``endpoint`` (a ``TeacherEndpointConfig``)."""
        from third_party.teacher import ChatClient

        return cls(ChatClient(endpoint, **client_kwargs).complete, config)

    def propose_with_report(self, trajectories: Sequence[Any], snapshot: Any) -> TeacherProposals:
        from third_party.teacher import TeacherError

        traces: list[Trace] = []
        for t in trajectories:
            if isinstance(t, Trace) or getattr(t, "answered", False):
                try:
                    traces.append(as_trace(t, snapshot))
                except TraceError as err:
                    log.warning("teacher: skipped a trajectory: %s", err)
        if not traces:
            return TeacherProposals((), (), None)
        messages = build_messages(traces, snapshot, self.config)
        try:
            reply = self.complete(messages)
        except TeacherError as err:
            errors = [ProposalError("endpoint", f"{type(err).__name__}: {err}")]
            self._count(errors)
            return TeacherProposals((), tuple(errors), None)
        cands, errors = candidates_from_reply(reply, traces, snapshot, self.config)
        self._count(errors)
        return TeacherProposals(tuple(cands), tuple(errors), reply)

    def propose(self, trajectories: Sequence[Any], snapshot: Any) -> list[Candidate]:
        return list(self.propose_with_report(trajectories, snapshot).candidates)

    def _count(self, errors: Sequence[ProposalError]) -> None:
        for e in errors:
            self.error_counts[e.kind] += 1
            where = "reply" if e.index is None else f"proposal {e.index}" + (f" ({e.name})" if e.name else "")
            log.warning("teacher %s: %s: %s", where, e.kind, e.detail)


__all__ = [
    "ERROR_KINDS", "ProposalError", "SYSTEM_PROMPT", "TeacherAbstractor", "TeacherConfig", "TeacherProposals",
    "build_messages", "candidates_from_reply", "extract_json", "parse_reply",
]

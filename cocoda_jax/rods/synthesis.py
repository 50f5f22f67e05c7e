"""Structure-preserving variants of boundary tasks, critiqued by rules, made beside training.

A variant of a seed task has the same skeleton (tool-call topology, dependency depth) and answer
type, with new numbers, entities and wording. It comes from the generator of the seed's domain
(:mod:`cocoda_jax.data.domain`, found by the task's type): :func:`propose` calls
``domain.propose_variant(seed_task, s, i)`` for draws ``i = 0, 1, ...`` over a stream whose seed
``s`` is derived from ``(run_seed, seed task, attempt, round)`` and keeps the first draw with the
seed's skeleton (for math, a draw on the seed's motif chain, whose skeleton can still vary, e.g. with
the number of compounding years) — so the content is a pure function of those and never of thread
timing. A domain without a generator (BFCL) gets no variants: its jobs are rejected as
``no_generator`` without a draw.

Critique (:func:`check_rules`) applies the rules of the issue and returns structured errors; a
failed candidate is repaired up to ``k_max`` times (for a generator domain a repair is a fresh draw
of numbers and wording for the same skeleton), and rejections are counted per error type.
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import math
import re
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from cocoda_jax import failpoints
from cocoda_jax.data import synthetic_math
from cocoda_jax.data.domain import domain_of
from cocoda_jax.rods.config import RodsConfig
from cocoda_jax.rods.tasks import call_graph, content_keys
from cocoda_jax.values import values_equal

#: Structured critique errors (the paper's repair loop is driven by such types).
ERROR_TYPES = (
    "no_generator",           # the seed's domain makes no variants (BFCL): nothing was drawn
    "sample_failed",          # no generator draw with the seed's skeleton within max_draws
    "exec_failed",            # the gold program failed in the sandbox
    "answer_mismatch",        # executing the gold program does not give the recorded answer
    "intermediate_mismatch",  # ... or not the recorded intermediate values (R_P depends on them)
    "skeleton_mismatch",      # call graph, depth or answer type differs from the seed's
    "names_tool",             # the question names a tool (identifier or call syntax)
    "names_parameter",        # the question names a parameter or a program variable
    "artefact",               # "Step 1:"-style scaffolding in the question
    "missing_number",         # an input number does not appear in the question
    "answer_in_question",     # the answer appears among the question's numbers
    "duplicate",              # same question or same program+inputs as a pool task
)


@dataclasses.dataclass(frozen=True)
class CritiqueError:
    kind: str
    detail: str

    def __post_init__(self) -> None:
        if self.kind not in ERROR_TYPES:
            raise ValueError(f"unknown critique error {self.kind!r}; expected one of {ERROR_TYPES}")


@dataclasses.dataclass(frozen=True)
class Job:
    """One synthesis request: variant number ``attempt`` of ``parent``, deduplicated against
    ``pool_keys`` (the pool's content keys when the job was made, so the result is reproducible)."""

    parent: Any
    attempt: int
    pool_keys: frozenset[str] = frozenset()

    @property
    def key(self) -> tuple[str, int]:
        return (self.parent.id, self.attempt)


@dataclasses.dataclass(frozen=True)
class Outcome:
    """What one job gave: the accepted ``task`` (or None) and the errors of every round tried."""

    parent_id: str
    attempt: int
    task: Any
    rounds: tuple[tuple[CritiqueError, ...], ...]

    @property
    def key(self) -> tuple[str, int]:
        return (self.parent_id, self.attempt)

    @property
    def accepted(self) -> bool:
        return self.task is not None

    @property
    def repairs(self) -> int:
        return max(len(self.rounds) - 1, 0)


def derived_seed(*parts: Any) -> int:
    """A stable 63-bit seed from its parts (the same on every platform and Python run)."""
    return int.from_bytes(hashlib.sha256("/".join(map(str, parts)).encode()).digest()[:8], "big") >> 1


def variant_id(parent_id: str, attempt: int, rnd: int, run_seed: int) -> str:
    return f"rods-{hashlib.sha256(f'{run_seed}/{parent_id}/{attempt}/{rnd}'.encode()).hexdigest()[:16]}"


def propose(parent: Any, attempt: int, rnd: int, *, run_seed: int, max_draws: int) -> Any:
    """The first draw of the parent's domain generator with ``parent``'s skeleton and answer type
    on the derived stream, with a fresh id; None when ``max_draws`` draws found none or the domain
    has no generator. Pure in its arguments.

    Math tasks draw on the parent's motif chain; table tasks from the table generator (the
    skeleton fixes the query family; schema, table, entities and wording are new).
    """
    draw = domain_of(parent).propose_variant
    if draw is None:
        return None
    stream = derived_seed("rods-variant", run_seed, parent.id, attempt, rnd)
    for i in range(max_draws):
        cand = draw(parent, stream, i)
        if (cand is not None and cand.skeleton == parent.skeleton and cand.answer_type == parent.answer_type
                and cand.question != parent.question):
            return dataclasses.replace(cand, id=variant_id(parent.id, attempt, rnd, run_seed))
    return None


def stated_numbers(task: Any) -> tuple[tuple[str, float], ...]:
    """The numbers the question must state, as the task's domain says: a math task's inputs; for
    the table domain (the input is a table) the numeric constants written in the gold program."""
    return tuple(domain_of(task).stated_numbers(task))


# -- the rules ----------------------------------------------------------------------------------------

_ARTEFACT = re.compile(r"\bstep\s*\d+\s*:|```|\banswer\s*=", re.IGNORECASE)
_PROGRAM_VAR = re.compile(r"\b[nx]\d+\b")


def check_rules(task: Any, parent: Any, run: Any, *, pool_keys: Iterable[str] = (),
                tool_names: Iterable[str] = (), param_names: Iterable[str] = ()) -> tuple[CritiqueError, ...]:
    """Every rule violated by ``task`` (a variant of ``parent``), given ``run``, the sandbox's
    :class:`RunResult` of its gold program on its inputs. Empty when the task is accepted.

    Tool names are flagged as identifiers containing ``_`` or in call syntax (``add(``): plain words
    such as "add" or "mean" are ordinary English. Parameter names are flagged in keyword form
    (``total=``) for the same reason; program variables (``n0``, ``x3``) always.
    """
    errors: list[CritiqueError] = []
    if not run.ok:
        errors.append(CritiqueError("exec_failed", str(run.error)))
    else:
        if not values_equal(run.value, task.answer, rel_tol=1e-9, abs_tol=1e-9):
            errors.append(CritiqueError("answer_mismatch", f"program gives {run.value!r}, task says {task.answer!r}"))
        produced = tuple(v for name, v in run.values if re.fullmatch(r"x\d+", name))
        gold = tuple(v for _, v in task.intermediates)
        if len(produced) != len(gold) or not all(values_equal(a, b) for a, b in zip(produced, gold)):
            errors.append(CritiqueError("intermediate_mismatch", f"program gives {produced!r}, task says {gold!r}"))
    try:
        mine, theirs = call_graph(task.program), call_graph(parent.program)
        if mine != theirs:
            errors.append(CritiqueError("skeleton_mismatch", f"call graph {mine.tools} vs seed {theirs.tools}"))
    except ValueError as exc:
        errors.append(CritiqueError("skeleton_mismatch", f"program is not straight-line calls: {exc}"))
    if task.answer_type != parent.answer_type:
        errors.append(CritiqueError("skeleton_mismatch", f"answer type {task.answer_type} vs seed {parent.answer_type}"))
    q = task.question
    for name in sorted(set(tool_names)):
        if ("_" in name and re.search(rf"\b{re.escape(name)}\b", q)) or re.search(rf"\b{re.escape(name)}\s*\(", q):
            errors.append(CritiqueError("names_tool", name))
    for name in sorted(set(param_names)):
        if re.search(rf"\b{re.escape(name)}\s*=", q):
            errors.append(CritiqueError("names_parameter", name))
    for m in sorted(set(_PROGRAM_VAR.findall(q))):
        errors.append(CritiqueError("names_parameter", m))
    if _ARTEFACT.search(q):
        errors.append(CritiqueError("artefact", _ARTEFACT.search(q).group(0)))
    numbers = synthetic_math.question_numbers(q)
    for name, value in stated_numbers(task):
        if not any(math.isclose(value, n, rel_tol=1e-9, abs_tol=1e-9) for n in numbers):
            errors.append(CritiqueError("missing_number", f"{name}={value!r}"))
    answer = task.answer
    if isinstance(answer, (int, float)) and not isinstance(answer, bool) and _leaks_number(float(answer), q):
        errors.append(CritiqueError("answer_in_question", f"{answer!r}"))
    elif isinstance(answer, str) and answer.strip() and re.search(rf"\b{re.escape(answer.strip())}\b", q, re.IGNORECASE):
        errors.append(CritiqueError("answer_in_question", f"{answer!r}"))
    keys = set(pool_keys)
    hit = [k for k in content_keys(task) if k in keys]
    if hit:
        errors.append(CritiqueError("duplicate", ",".join(hit)))
    return tuple(errors)


_DECIMAL = re.compile(r"(\d+)(?:\.(\d+))?")


def _leaks_number(answer: float, question: str) -> bool:
    """Whether a number written in ``question`` is the answer, exactly or rounded to the decimals
    it is written with (``10056.47`` gives away ``10056.4667``)."""
    for m in _DECIMAL.finditer(question):
        value = float(m.group(0))
        decimals = len(m.group(2) or "")
        if math.isclose(answer, value, rel_tol=1e-9, abs_tol=1e-9):
            return True
        if decimals and round(answer, decimals) == round(value, decimals):
            return True
    return False


def library_names(library: Any) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Tool names and parameter names of a LibrarySnapshot (what the question must not name)."""
    tools = tuple(library.names())
    params = sorted({p.name for t in tools for p in library.tool(t).signature.params})
    return tools, tuple(params)


# -- one job, synchronously ---------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Synthesizer:
    """Runs jobs: propose, execute the gold program in ``runner`` (a Sandbox), critique, repair.

    ``runner`` needs ``run_many(programs, library, inputs=...)``; a Sandbox serialises calls from
    several threads with its own lock.
    """

    runner: Any
    library: Any
    config: RodsConfig
    run_seed: int = 0

    def run(self, job: Job) -> Outcome:
        failpoints.hit("rods/synthesis")
        domain = domain_of(job.parent)
        if domain.propose_variant is None:  # nothing to draw, nothing to repair
            error = CritiqueError("no_generator", f"the {domain.name} domain makes no variants")
            return Outcome(job.parent.id, job.attempt, None, ((error,),))
        tools, params = library_names(self.library)
        rounds: list[tuple[CritiqueError, ...]] = []
        for rnd in range(self.config.k_max + 1):
            task = propose(job.parent, job.attempt, rnd, run_seed=self.run_seed, max_draws=self.config.max_draws)
            if task is None:
                rounds.append((CritiqueError("sample_failed", f"no draw with the seed's skeleton in {self.config.max_draws}"),))
                continue
            run = self.runner.run_many([task.program], self.library, inputs=[task.input_dict])[0]
            errors = check_rules(task, job.parent, run, pool_keys=job.pool_keys, tool_names=tools, param_names=params)
            rounds.append(errors)
            if not errors:
                return Outcome(job.parent.id, job.attempt, task, tuple(rounds))
        return Outcome(job.parent.id, job.attempt, None, tuple(rounds))


def rejection_counts(outcomes: Iterable[Outcome]) -> dict[str, int]:
    """How many rounds were rejected for each error type (a round counts once per type)."""
    counts = collections.Counter()
    for o in outcomes:
        for errors in o.rounds:
            counts.update({e.kind for e in errors})
    return {k: counts.get(k, 0) for k in ERROR_TYPES}


def acceptance_rate(outcomes: Sequence[Outcome]) -> float | None:
    return sum(o.accepted for o in outcomes) / len(outcomes) if outcomes else None


# -- beside training ----------------------------------------------------------------------------------


class BackgroundSynthesizer:
    """A daemon thread that runs jobs into a bounded candidate queue.

    :meth:`submit` never blocks: it takes jobs while pending + finished stays within ``capacity``
    and returns those it refused. :meth:`poll` returns finished outcomes without waiting. At an epoch
    boundary, :meth:`collect` waits for named jobs (they have had a whole epoch to run) so that what is
    injected does not depend on timing; outcomes are always returned in job-key order.
    """

    def __init__(self, synthesizer: Synthesizer | Callable[[Job], Outcome], capacity: int | None = None):
        self._run = synthesizer.run if isinstance(synthesizer, Synthesizer) else synthesizer
        cap = capacity if capacity is not None else (
            synthesizer.config.queue_capacity if isinstance(synthesizer, Synthesizer) else 256)
        if cap < 1:
            raise ValueError(f"capacity must be >= 1, got {cap}")
        self.capacity = cap
        self._cond = threading.Condition()
        self._pending: collections.deque[Job] = collections.deque()
        self._running: set[tuple[str, int]] = set()
        self._done: dict[tuple[str, int], Outcome] = {}
        self._failures: dict[tuple[str, int], BaseException] = {}
        self._closed = False
        self._thread = threading.Thread(target=self._loop, name="rods-synthesis", daemon=True)
        self._thread.start()

    def __enter__(self) -> "BackgroundSynthesizer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _size(self) -> int:
        return len(self._pending) + len(self._running) + len(self._done) + len(self._failures)

    def submit(self, jobs: Iterable[Job]) -> tuple[Job, ...]:
        """Queue ``jobs`` without blocking; returns the refused ones (queue full or duplicate key)."""
        refused = []
        with self._cond:
            if self._closed:
                raise RuntimeError("the background synthesizer is closed")
            known = {j.key for j in self._pending} | self._running | set(self._done) | set(self._failures)
            for job in jobs:
                if self._size() >= self.capacity or job.key in known:
                    refused.append(job)
                    continue
                self._pending.append(job)
                known.add(job.key)
            self._cond.notify_all()
        return tuple(refused)

    def pending(self) -> int:
        with self._cond:
            return len(self._pending) + len(self._running)

    def poll(self) -> tuple[Outcome, ...]:
        """Finished outcomes so far (removed from the queue), in key order; never waits."""
        with self._cond:
            self._raise_failures()
            out = tuple(self._done[k] for k in sorted(self._done))
            self._done.clear()
            return out

    def collect(self, keys: Iterable[tuple[str, int]], timeout_s: float | None = None) -> tuple[Outcome, ...]:
        """Waits until every job in ``keys`` is finished and returns their outcomes in key order.
        TimeoutError (nothing removed) when they are not all done within ``timeout_s``."""
        wanted = sorted(set(keys))
        with self._cond:
            ok = self._cond.wait_for(lambda: self._failures or all(k in self._done for k in wanted), timeout_s)
            self._raise_failures()
            if not ok:
                missing = [k for k in wanted if k not in self._done]
                raise TimeoutError(f"{len(missing)} synthesis jobs not finished, first {missing[:3]}")
            return tuple(self._done.pop(k) for k in wanted)

    def _raise_failures(self) -> None:
        if self._failures:
            key, exc = next(iter(self._failures.items()))
            raise RuntimeError(f"synthesis job {key} failed: {exc!r}") from exc

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._pending.clear()
            self._cond.notify_all()
        self._thread.join(timeout=30)

    def _loop(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._closed or self._pending)
                if self._closed:
                    return
                job = self._pending.popleft()
                self._running.add(job.key)
            try:
                outcome = self._run(job)
                failure = None
            except BaseException as exc:  # reported to the caller on its next poll/collect
                outcome, failure = None, exc
            with self._cond:
                self._running.discard(job.key)
                if failure is None:
                    self._done[job.key] = outcome
                else:
                    self._failures[job.key] = failure
                self._cond.notify_all()

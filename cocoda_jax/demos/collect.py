"""Stage 0: gold programs for a benchmark that has only answers (GSM8K, MATH).

For each training question, ``k`` programs in the planner's action format are asked of a model
behind an OpenAI-compatible endpoint: a large teacher (vLLM, SGLang), or the student itself served
by ``launch/serve.py`` (rejection sampling). Each reply is untrusted text: its action lines are
read off (:func:`parse_program`), played through the real episode loop (the static checker, the
sandbox, the observations, at most ``max_steps`` turns), and kept only when the benchmark's verifier
accepts the answer. The first verified sample of a task becomes its gold program
(:class:`~cocoda_jax.demos.store.DemoRecord`, with provenance); stages 1-3 then run unchanged.

Requests go out ``concurrency`` at a time (a thread pool; the client retries with backoff). A
failure of the endpoint itself (unreachable, HTTP error, a body that is not a chat completion),
once the client's retries are spent, stops the collection with :class:`DemoEndpointError`: what
was decided so far is on disk and the next call resumes. A reply that holds no usable program is
only a failed sample (counted by kind).
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import hashlib
import re
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from cocoda_jax.errors import CocodaError
from cocoda_jax.demos.store import DemoRecord, DemoStore
from cocoda_jax.rl import actions, trajectory

#: One request: chat messages and extra body fields (``seed``) -> the reply's text.
CompleteFn = Callable[[list[dict[str, str]], Mapping[str, Any]], str]

SYSTEM_PROMPT = """You solve word problems by writing a program of tool calls, one per line.
Each line is `x<k> = tool(arguments)`: a fresh name bound to ONE call of a listed tool. Arguments are \
the question's input names (n0, n1, ...), names bound on earlier lines, or plain numbers. No \
arithmetic operators, no nested calls, no other code. The last line is `answer = <name>`.
Example:
x0 = multiply(n0, n1)
x1 = subtract(x0, n2)
answer = x1
Answer with the program lines only."""

#: Why a sample gave no demonstration.
FAILURE_KINDS = ("no_program", "not_answered", "wrong_answer")


class DemoEndpointError(CocodaError, RuntimeError):
    """The endpoint failed after the client's retries (the message says how); records already
    decided are stored, so running the collection again resumes."""


@dataclasses.dataclass(frozen=True)
class CollectConfig:
    """``k`` samples a task; ``concurrency`` requests in flight; ``chunk`` tasks decided (and stored)
    together; ``max_steps`` turns an episode (the planner's own limit); ``seed`` makes each
    request's ``seed`` field (a served student then answers the same way again)."""

    k: int = 4
    concurrency: int = 8
    chunk: int = 64
    max_steps: int = 8
    seed: int = 0

    def __post_init__(self) -> None:
        if self.k < 1 or self.concurrency < 1 or self.chunk < 1 or self.max_steps < 1:
            raise ValueError(f"invalid stage-0 settings: {self}")


@dataclasses.dataclass(frozen=True)
class CollectSummary:
    """What one call did (the new tasks only) and what the store now holds."""

    asked_tasks: int
    requests: int
    solved: int
    failures: tuple[tuple[str, int], ...]
    seconds: float
    stored_tasks: int
    stored_solved: int

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["failures"] = dict(self.failures)
        return d


_FENCE = re.compile(r"^\s*```")
_STEP = re.compile(r"^\s*[A-Za-z_][A-Za-z0-9_]*\s*=(?!=)")


def parse_program(text: str) -> tuple[str, ...]:
    """The action lines of a reply: lines shaped ``name = ...`` (code fences, prose, echoed
    observations ``-> ...``, a ``Program:`` header and comments dropped), up to the first
    ``answer = ...`` line. Their content is judged later by the checker, not here."""
    steps = []
    for line in str(text).splitlines():
        if _FENCE.match(line) or line.strip().startswith(actions.OBSERVATION_PREFIX.strip()):
            continue
        line = line.split("#", 1)[0].rstrip()
        if not _STEP.match(line):
            continue
        steps.append(line.strip())
        if line.split("=", 1)[0].strip() == actions.ANSWER:
            break
    return tuple(steps)


def messages_for(task: Any, cards: Sequence[str]) -> list[dict[str, str]]:
    """The chat of one request: the format's rules, then the planner's own prompt for ``task``."""
    return [{"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": trajectory.render_prompt(task, cards)}]


def request_seed(seed: int, task_id: str, sample: int) -> int:
    """A stable 31-bit seed per (run seed, task, sample) (no Python ``hash``: it is salted)."""
    digest = hashlib.sha256(f"{seed}/{task_id}/{sample}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


def _ask(complete: CompleteFn, jobs: Sequence[tuple[Any, int]], cards: Callable[[Any], Sequence[str]],
         config: CollectConfig, endpoint_errors: tuple[type[BaseException], ...]) -> dict[tuple[str, int], str]:
    """Every (task, sample) of ``jobs`` asked, ``concurrency`` at a time; the first endpoint failure
    cancels what has not started and is raised as :class:`DemoEndpointError`."""
    def one(task: Any, sample: int) -> str:
        return complete(messages_for(task, cards(task)), {"seed": request_seed(config.seed, str(task.id), sample)})

    out: dict[tuple[str, int], str] = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=config.concurrency) as pool:
        futures = {pool.submit(one, task, s): (str(task.id), s) for task, s in jobs}
        try:
            for fut in concurrent.futures.as_completed(futures):
                out[futures[fut]] = fut.result()
        except endpoint_errors as e:
            for f in futures:
                f.cancel()
            raise DemoEndpointError(f"stage 0: the endpoint failed ({type(e).__name__}: {e}); "
                                    "the tasks decided before it are stored and a new run resumes") from e
    return out


def _decide(task: Any, replies: Sequence[str], episodes: Mapping[int, trajectory.Trajectory],
            provenance: Mapping[str, Any]) -> DemoRecord:
    """The task's record from its samples' replies and played episodes (``episodes`` has only the
    samples that held a program)."""
    failures: Counter[str] = Counter()
    for s in range(len(replies)):
        ep = episodes.get(s)
        if ep is None:
            failures["no_program"] += 1
        elif not ep.answered:
            failures["not_answered"] += 1
        elif not ep.correct:
            failures["wrong_answer"] += 1
        else:
            inter = tuple((n, v) for n, v in ep.values if n != actions.ANSWER)
            return DemoRecord(str(task.id), True, len(replies), ep.program, inter, ep.answer, s,
                              tuple(sorted(failures.items())), tuple(sorted(provenance.items())))
    return DemoRecord(str(task.id), False, len(replies), failures=tuple(sorted(failures.items())),
                      provenance=tuple(sorted(provenance.items())))


def collect(tasks: Sequence[Any], library: Any, sandbox: Any, complete: CompleteFn, store: DemoStore, *,
            verify: Callable[[Any, Any], float], config: CollectConfig = CollectConfig(),
            cards: Callable[[Any], Sequence[str]] | None = None, provenance: Mapping[str, Any] = (),
            endpoint_errors: tuple[type[BaseException], ...] = (), progress: Any = None) -> CollectSummary:
    """Decides every task of ``tasks`` not yet in ``store`` (see the module docstring).

    ``verify(answer, task)`` is the benchmark's R_res; ``cards(task)`` the tool cards its prompt
    shows (default: the whole library); ``provenance`` goes into every record (with the sample's
    seed and the time); ``endpoint_errors`` are the exception types that mean the endpoint itself
    failed; ``progress`` (a tqdm-like bar) is advanced once per decided task.
    """
    t0 = time.perf_counter()
    card_list = tuple(trajectory.tool_cards(library))
    cards = cards or (lambda task: card_list)
    pending = [t for t in tasks if str(t.id) not in store.records]
    requests, solved, failures = 0, 0, Counter()
    for start in range(0, len(pending), config.chunk):
        chunk = pending[start:start + config.chunk]
        jobs = [(t, s) for t in chunk for s in range(config.k)]
        replies = _ask(complete, jobs, cards, config, endpoint_errors)
        requests += len(jobs)
        programs = {(str(t.id), s): parse_program(replies[(str(t.id), s)]) for t, s in jobs}
        played = [(t, s) for t, s in jobs if programs[(str(t.id), s)]]
        scripts = [programs[(str(t.id), s)] for t, s in played]
        prompt_lens = [len(trajectory.render_prompt(t, cards(t))) for t, _ in played]

        def policy(contexts, rows):  # each row writes its reply's steps, one a turn (a ScriptedPolicy per row)
            out = []
            for context, row in zip(contexts, rows):
                turn = context[prompt_lens[row]:].count("\n") // 2
                out.append(scripts[row][turn] if turn < len(scripts[row]) else "")
            return out

        episodes = trajectory.run_episodes(policy, [t for t, _ in played], library, sandbox, config.max_steps,
                                           cards=cards, verify=verify, with_rows=True) if played else []
        by_task: dict[str, dict[int, trajectory.Trajectory]] = {}
        for (t, s), ep in zip(played, episodes):
            by_task.setdefault(str(t.id), {})[s] = ep
        records = []
        for t in chunk:
            prov = {**dict(provenance), "seed": config.seed, "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
            record = _decide(t, [replies[(str(t.id), s)] for s in range(config.k)], by_task.get(str(t.id), {}), prov)
            if record.solved:
                prov["request_seed"] = request_seed(config.seed, str(t.id), record.sample)
                record = dataclasses.replace(record, provenance=tuple(sorted(prov.items())))
            records.append(record)
            solved += record.solved
            failures.update(dict(record.failures))
        store.append(records)
        if progress is not None:
            progress.update(len(chunk))
    return CollectSummary(len(pending), requests, solved, tuple(sorted(failures.items())),
                          time.perf_counter() - t0, len(store.records),
                          sum(r.solved for r in store.records.values()))


def attach(tasks: Sequence[Any], records: Mapping[str, DemoRecord]) -> tuple[Any, ...]:
    """The tasks with a solved record, each given its record's program, intermediates and answer
    (``dataclasses.replace``: a task without a program must be a dataclass with those fields)."""
    out = []
    for t in tasks:
        r = records.get(str(t.id))
        if r is not None and r.solved:
            out.append(dataclasses.replace(t, program=r.program, intermediates=r.intermediates, answer=r.answer))
    return tuple(out)


def needs_demonstrations(tasks: Sequence[Any]) -> bool:
    """Whether some training task has no gold program (a benchmark with answers only)."""
    return any(not str(getattr(t, "program", "") or "").strip() for t in tasks)


__all__ = ["CollectConfig", "CollectSummary", "CompleteFn", "DemoEndpointError", "FAILURE_KINDS", "SYSTEM_PROMPT",
           "attach", "collect", "messages_for", "needs_demonstrations", "parse_program", "request_seed"]

"""BFCL v4 multi-turn as a co-evolution domain: real stateful tools, real tasks, BFCL's own verdict.

An episode is one BFCL conversation. The prompt shows the first user turn; the planner writes one
tool call per step in the project's action format (``x0 = cd(folder='document')``); each tool is a
BFCL function whose body reaches the real backend through the sandbox's environment
(:mod:`third_party.benchmarks.bfcl_environment`), with the task's ``initial_config`` as the state.
``tK = end_turn()`` closes a user turn, and its observation is the next user message, so the planner
sees a turn only after finishing the one before, as in BFCL; ``answer = end_turn()`` closes the last.

``R_res`` is BFCL's multi-turn verdict (:func:`third_party.benchmarks.bfcl_scoring.score_multi_turn`,
the package's own checker: backend state equal to the ground truth's after every turn, and the
ground truth's execution results found in the model's) on the backend calls the episode made, split
into turns at ``end_turn``. Calls made inside a composite count as the calls they are, so a
composite ``cd -> mkdir -> mv`` is judged by what it did.

Deviations from BFCL's protocol, on purpose and visible here: a step whose run fails is discarded
with its backend calls (BFCL would keep the calls that ran before the error); the library holds the
functions of every executable class, and a task's ``excluded_function`` is left out of its cards but
not out of the library the checker accepts; for ``miss_func`` the turn that reveals a held-back
function names it in its observation (``[new tools: ...]``).
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import importlib
import importlib.util
import inspect
import itertools
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from cocoda_jax.data.domain import DomainBase, DomainConfigError, DomainSplits, pairs, register_domain
from cocoda_jax.data.task import GoldProgramTask
from cocoda_jax.execution import EnvironmentPlugin
from third_party.benchmarks import bfcl as loader
from third_party.benchmarks import bfcl_environment as env

MULTI_TURN = ("multi_turn_base", "multi_turn_miss_func", "multi_turn_miss_param", "multi_turn_long_context")
#: Widest observation (characters): a user turn or a file listing must be read whole.
OBSERVATION_CHARS = 360
END_TURN_SOURCE = (
    "def end_turn() -> str:\n"
    "    \"\"\"Close the current user turn; returns the next user message ('' when the conversation is over).\"\"\"\n"
    f"    return environment_call({env.CONVERSATION!r}, {env.END_TURN!r})\n")


def plugin() -> EnvironmentPlugin:
    """The sandbox plugin that loads BFCL's backends in every worker (they import ``mpmath``)."""
    roots = []
    for package in ("bfcl_eval", "mpmath"):
        spec = importlib.util.find_spec(package)
        if spec is None or spec.origin is None:
            raise ModuleNotFoundError(f"{package} is not installed (pip install --no-deps bfcl-eval==2026.3.23)")
        roots.append(str(Path(spec.origin).parent.parent))
    return EnvironmentPlugin(env.__file__, tuple(dict.fromkeys(roots)))


# ------------------------------------------------------------------------------------------------
# Calls: ground-truth text <-> (class, method, kwargs) <-> BFCL call strings
# ------------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=None)
def _method_owner(classes: tuple[str, ...]) -> dict[str, str]:
    owner = {}
    for name in classes:
        cls = env.backend_class(name)
        for method, _ in inspect.getmembers(cls, inspect.isfunction):
            if not method.startswith("_"):
                owner.setdefault(method, name)
    return owner


def normalise_call(text: str, classes: Sequence[str]) -> tuple[str, str, dict[str, Any]]:
    """A ground-truth call string as ``(class, method, kwargs)``: positional arguments bound to
    their names through the backend method's own signature (the ground truth writes both forms)."""
    name, args, kwargs = loader.parse_call(text)
    owner = _method_owner(tuple(classes)).get(name)
    if owner is None:
        raise ValueError(f"{text!r}: no backend among {list(classes)} has a method {name!r}")
    method = getattr(env.backend_class(owner), name)
    bound = inspect.signature(method).bind(None, *args, **kwargs)  # None stands for self
    named = dict(bound.arguments)
    named.pop(next(iter(named)))
    return owner, name, named


def call_string(method: str, kwargs: dict[str, Any]) -> str:
    """The BFCL call string of one backend call (what the package's executor evaluates)."""
    return f"{method}(" + ", ".join(f"{k}={v!r}" for k, v in kwargs.items()) + ")"


def calls_by_turn(environment_calls: Iterable[Sequence[Any]], n_turns: int) -> list[list[str]]:
    """An episode's environment log split into BFCL's per-turn call lists at each ``end_turn``
    (turns never reached stay empty; calls after the last turn are dropped)."""
    turns: list[list[str]] = [[] for _ in range(n_turns)]
    turn = 0
    for kind, method, kwargs in environment_calls:
        if kind == env.CONVERSATION:
            turn += 1
        elif turn < n_turns:
            turns[turn].append(call_string(method, dict(kwargs)))
    return turns


@functools.lru_cache(maxsize=4096)
def _stub_parameters(source: str) -> tuple[tuple[str, str, Any], ...]:
    """``(python parameter, BFCL parameter, default or _REQUIRED)`` of an environment-bodied tool, in
    its order, read off its source (the body's ``environment_call`` keywords name BFCL's parameters)."""
    fn = next(n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef))
    params = [a.arg for a in fn.args.args]
    defaults = [ast.literal_eval(d) for d in fn.args.defaults]
    default_of = dict(zip(params[len(params) - len(defaults):], defaults))
    call = next(n for n in ast.walk(fn) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "environment_call")
    bfcl_of = {kw.value.id: kw.arg for kw in call.keywords if isinstance(kw.value, ast.Name)}
    return tuple((p, bfcl_of.get(p, p), default_of.get(p, _REQUIRED)) for p in params)


_REQUIRED = object()


def gold_step(text: str, classes: Sequence[str], snapshot: Any) -> str:
    """One ground-truth call as a positional call of its tool (the trace form: arguments in the
    tool's parameter order, a skipped optional parameter written as its default when a later one is
    given, trailing defaults left out)."""
    _, method, kwargs = normalise_call(text, classes)
    params = _stub_parameters(snapshot.tool(method).source)
    unknown = set(kwargs) - {b for _, b, _ in params}
    if unknown:
        raise ValueError(f"{text!r}: parameters {sorted(unknown)} are not in the tool {method!r}")
    last = max((i for i, (_, b, _) in enumerate(params) if b in kwargs), default=-1)
    args = []
    for _, bfcl_name, default in params[:last + 1]:
        if bfcl_name in kwargs:
            args.append(kwargs[bfcl_name])
        elif default is _REQUIRED:
            raise ValueError(f"{text!r}: the required parameter {bfcl_name!r} is missing")
        else:
            args.append(default)
    return f"{method}(" + ", ".join(repr(a) for a in args) + ")"


def gold_program(entry: Any, snapshot: Any) -> str:
    """The ground truth in the action format: one step per call, ``tK = end_turn()`` between turns,
    ``answer = end_turn()`` after the last."""
    lines, k = [], 0
    n = len(entry.ground_truth)
    for t, turn in enumerate(entry.ground_truth):
        for text in turn:
            lines.append(f"x{k} = {gold_step(text, entry.involved_classes, snapshot)}")
            k += 1
        lines.append("answer = end_turn()" if t == n - 1 else f"t{t} = end_turn()")
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------------
# Tasks
# ------------------------------------------------------------------------------------------------


def _user_turns(entry: Any) -> list[list[str]]:
    turns = [list(t) for t in entry.turns]
    for index, names in sorted((entry.missed_function or {}).items(), key=lambda kv: int(kv[0])):
        i = int(index)
        if 0 <= i < len(turns):
            turns[i] = turns[i] + [f"[new tools: {', '.join(names)}]"]
    return turns


@dataclasses.dataclass(frozen=True, eq=False)
class BfclTask(GoldProgramTask):
    """One BFCL multi-turn conversation as a task (see the module docstring).

    ``intermediates``: the value of every gold step (the last is the answer), recorded by playing the
    gold program through the sandbox (:func:`build_tasks`); ``answer`` is the last ``end_turn()``'s
    value (""). ``program`` calls positionally in each tool's parameter order (what a trace reads).
    """

    id: str
    category: str
    question: str
    program: str
    intermediates: tuple[tuple[str, Any], ...]
    answer: Any
    environment: dict = dataclasses.field(repr=False)
    entry: Any = dataclasses.field(repr=False)
    inputs: tuple = ()
    split: str = "test"
    answer_type: str = "str"
    observation_chars: int = OBSERVATION_CHARS

    def __hash__(self) -> int:
        return hash(self.id)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, BfclTask) and other.id == self.id and other.program == self.program

    @property
    def n_turns(self) -> int:
        return len(self.entry.ground_truth)

    def score_environment_calls(self, environment_calls: Iterable[Sequence[Any]]) -> float:
        """``R_res``: 1.0 when BFCL's multi-turn checker accepts the episode's calls, else 0.0."""
        from third_party.benchmarks.bfcl_scoring import score_multi_turn
        return 1.0 if score_multi_turn(self.entry, calls_by_turn(environment_calls, self.n_turns)).valid else 0.0

    def turns_passed(self, environment_calls: Iterable[Sequence[Any]]) -> int:
        """How many user turns, from the first, BFCL's checker accepts (a diagnostic finer than the
        all-or-nothing verdict: the checker judged on the conversation cut after each turn)."""
        from third_party.benchmarks.bfcl_scoring import score_multi_turn
        turns = calls_by_turn(environment_calls, self.n_turns)
        passed = 0
        for t in range(1, self.n_turns + 1):
            cut = dataclasses.replace(self.entry, ground_truth=self.entry.ground_truth[:t], turns=self.entry.turns[:t])
            if not score_multi_turn(cut, turns[:t]).valid:
                break
            passed = t
        return passed

    @property
    def excluded_tools(self) -> tuple[str, ...]:
        return tuple(self.entry.excluded_function or ())


def environment_spec(entry: Any) -> dict:
    """The environment part of every step's spec (the replayed calls are added per step)."""
    return {"config": entry.initial_config, "classes": list(entry.involved_classes),
            "long_context": "long_context" in entry.category, "turns": _user_turns(entry)}


def unplayed_task(entry: Any, snapshot: Any, split: str = "test") -> BfclTask:
    """A task from a loader entry, before its gold program has been played (no intermediates)."""
    turns = _user_turns(entry)
    return BfclTask(id=entry.id, category=entry.category, question="\n".join(turns[0]) if turns else "",
                    program=gold_program(entry, snapshot), intermediates=(), answer="", environment=environment_spec(entry),
                    entry=entry, split=split)


def build_tasks(entries: Sequence[Any], snapshot: Any, sandbox: Any, *, split: str = "test"
                ) -> tuple[tuple[BfclTask, ...], dict[str, str]]:
    """Tasks with their gold values recorded by playing each ground truth through the real loop
    (checker, sandbox, backends), and the entries left out with the reason: those whose ground truth
    BFCL's own checker does not accept when replayed here. One scenario does this in BFCL v4
    (``*_173``: the doc types ``close_ticket``'s ``ticket_id`` as integer, the ground truth passes
    ``'ticket_001'``, which the action checker refuses as ill-typed)."""
    from cocoda_jax.coevolve.validate import play_programs
    tasks = [unplayed_task(e, snapshot, split) for e in entries]
    played = play_programs(tasks, [t.program for t in tasks], snapshot, sandbox)
    out, dropped = [], {}
    for task, trajectory in zip(tasks, played):
        if trajectory.r_res != 1.0:
            dropped[task.id] = gold_failure(trajectory)
            continue
        out.append(dataclasses.replace(task, intermediates=tuple(trajectory.values), answer=trajectory.answer))
    return tuple(out), dropped


def gold_failure(trajectory: Any) -> str:
    """Why a replayed ground truth failed: its first refused or failed step, or the checker's verdict."""
    for s in trajectory.steps:
        if not s.ok:
            return f"{s.text} {s.observation}"
    return "BFCL's checker rejects the replayed calls"


# ------------------------------------------------------------------------------------------------
# The library and the domain
# ------------------------------------------------------------------------------------------------


def primitive_library(classes: Sequence[str] = tuple(env.BACKEND_MODULES)) -> Any:
    """The BFCL functions of ``classes`` as environment-bodied tools, plus ``end_turn``."""
    from third_party.benchmarks.bfcl_tools import multi_turn_library
    from cocoda_jax.library import Tool
    from cocoda_jax.library import LibrarySnapshot
    snapshot = LibrarySnapshot.empty()
    for tool in multi_turn_library(tuple(classes)).tools:
        snapshot = snapshot.insert(tool)
    end_turn = Tool.from_source(END_TURN_SOURCE, "Close the current user turn and read the next user message.")
    return snapshot.insert(end_turn)


@dataclasses.dataclass(frozen=True)
class BfclSplits:
    train: tuple[BfclTask, ...]
    val: tuple[BfclTask, ...]
    test: tuple[BfclTask, ...]
    library: Any
    dropped: dict = dataclasses.field(default_factory=dict)  # entry id -> why its gold does not replay


def build_domain(categories: Sequence[str], snapshot: Any, sandbox: Any, *, seed: int = 0,
                 n_train: int = 0, n_val: int = 0, n_test: int = 0) -> BfclSplits:
    """The multi-turn categories split by :func:`third_party.benchmarks.bfcl.split_multi_turn`
    (a scenario and its variants in the four categories stay in one split), capped at ``n_*``
    (0 = all), each task's gold played and checked."""
    unknown = [c for c in categories if c not in MULTI_TURN]
    if unknown:
        raise ValueError(f"categories {unknown} are not multi-turn categories {MULTI_TURN}")
    entries = [e for c in categories for e in loader.load_category(c)]
    train, val, test = loader.split_multi_turn(entries, seed=seed)

    def cap(xs, n):
        """The first ``n`` taken round-robin over the categories (every category is represented)."""
        by_category = [[e for e in xs if e.category == c] for c in categories]
        mixed = [e for group in itertools.zip_longest(*by_category) for e in group if e is not None]
        return tuple(mixed[:n]) if n else tuple(mixed)

    built = [build_tasks(cap(xs, n), snapshot, sandbox, split=name)
             for xs, n, name in ((train, n_train, "train"), (val, n_val, "validation"), (test, n_test, "test"))]
    dropped = {k: v for _, d in built for k, v in d.items()}
    return BfclSplits(built[0][0], built[1][0], built[2][0], snapshot, dropped)


def per_category(tasks: Sequence[BfclTask], r_res: Sequence[float]) -> dict[str, dict[str, float]]:
    """Accuracy per category as BFCL reports it (share of conversations its checker accepts)."""
    out: dict[str, list[float]] = {}
    for task, r in zip(tasks, r_res, strict=True):
        out.setdefault(task.category, []).append(float(r == 1.0))
    return {c: {"n": len(v), "accuracy": sum(v) / len(v)} for c, v in sorted(out.items())}


# ------------------------------------------------------------------------------------------------
# The domain (cocoda_jax.data.domain)
# ------------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=None)
def _entries_by_id(category: str) -> dict[str, Any]:
    return {e.id: e for e in loader.load_category(category)}


class BfclMultiTurn(DomainBase):
    """BFCL v4 multi-turn as a registered domain: the package's data split by scenario, every gold
    replayed through the sandbox and BFCL's checker (:func:`build_domain`); stateful (the sandbox
    loads :func:`plugin`, ``end_turn`` is a barrier no composite may contain), scored per category
    by BFCL's checker on the episode's environment calls (:meth:`BfclTask.score_environment_calls`,
    which the rollout consults before any ``verify``), and without a generator: RODS makes no
    variants of its tasks.

    Config keys (``config.domain``): ``categories`` (comma-separated multi-turn categories),
    ``seed``, ``n_train``, ``n_val``, ``n_test`` (0: all)."""

    name, kind, task_type = "bfcl_multi_turn", "bfcl", BfclTask
    barrier_tools = ("end_turn",)
    propose_variant = None

    @staticmethod
    def categories(task: BfclTask) -> str:
        return task.category

    def environment_plugin(self) -> EnvironmentPlugin:
        return plugin()

    def build(self, section: Any, sandbox: Any) -> DomainSplits:
        categories = tuple(c.strip() for c in str(section["categories"]).split(",") if c.strip())
        unknown = [c for c in categories if c not in MULTI_TURN]
        if not categories or unknown:
            raise DomainConfigError(f"config.domain.categories must name multi-turn categories of {MULTI_TURN}, "
                                    f"got {section['categories']!r}")
        library = primitive_library()
        splits = build_domain(categories, library, sandbox, seed=int(section["seed"]), n_train=int(section["n_train"]),
                              n_val=int(section["n_val"]), n_test=int(section["n_test"]))
        if splits.dropped:
            from absl import logging
            logging.warning("BFCL: %d entries left out, their ground truth does not replay: %s", len(splits.dropped),
                            splits.dropped)
        return DomainSplits(splits.train, splits.val, splits.test, library)

    def task_to_dict(self, task: BfclTask) -> dict:
        """The task without its loader entry (reloaded by id from the installed package's data)."""
        return {"id": task.id, "category": task.category, "split": task.split, "question": task.question,
                "program": task.program, "intermediates": task.intermediates, "answer": task.answer}

    def task_from_dict(self, d: Any) -> BfclTask:
        entry = _entries_by_id(str(d["category"])).get(d["id"])
        if entry is None:
            raise ValueError(f"BFCL {d['category']} has no entry {d['id']!r}")
        return BfclTask(id=entry.id, category=entry.category, question=str(d["question"]), program=str(d["program"]),
                        intermediates=pairs(d["intermediates"]), answer=d["answer"],
                        environment=environment_spec(entry), entry=entry, split=str(d["split"]))


register_domain("bfcl_multi_turn", BfclMultiTurn)


__all__ = [
    "BfclMultiTurn", "BfclSplits", "BfclTask", "END_TURN_SOURCE", "evaluate_gold", "gold_failure", "gold_step", "MULTI_TURN", "OBSERVATION_CHARS", "build_domain", "build_tasks",
    "call_string", "calls_by_turn", "environment_spec", "gold_program", "normalise_call", "per_category", "plugin",
    "primitive_library", "unplayed_task",
]


# ------------------------------------------------------------------------------------------------
# Scoring a policy by BFCL's rules (launch/evaluate_bfcl.py)
# ------------------------------------------------------------------------------------------------


def _summary(ids: Sequence[str], valid: Sequence[bool], why: dict[str, str]) -> dict[str, Any]:
    failed = {i: why.get(i, "") for i, v in zip(ids, valid) if not v}
    return {"n": len(valid), "accuracy": sum(valid) / len(valid) if valid else 0.0, "failed": failed}


def evaluate_gold(categories: Sequence[str], *, limit: int = 0, workers: int = 2) -> dict[str, Any]:
    """The ground truth replayed and scored by BFCL's rules, per category: single-turn categories as
    the decoded calls of the reference answer (:func:`bfcl_scoring.reference_output`) through the AST
    rules; multi-turn ones as the gold program played through the real loop (action checker, sandbox,
    backends) and judged by the package's checker on the backend calls it made."""
    from cocoda_jax.coevolve.validate import play_programs
    from cocoda_jax.execution import Sandbox
    from third_party.benchmarks.bfcl_scoring import ground_truth_defects, reference_output, score_single_turn

    for c in categories:
        loader.load_category(c)  # refuses unknown and unsupported categories before anything runs
    out: dict[str, Any] = {}
    for c in (c for c in categories if c not in MULTI_TURN):
        entries = loader.load_category(c)[:limit or None]
        why = {e.id: "; ".join(ground_truth_defects(e)) for e in entries}
        out[c] = _summary([e.id for e in entries], [score_single_turn(e, reference_output(e)).valid for e in entries],
                          why)
    multi = [c for c in categories if c in MULTI_TURN]
    if multi:
        snapshot = primitive_library()
        with Sandbox(workers=workers, timeout_s=20.0, environment=plugin()) as sandbox:
            for c in multi:
                tasks = [unplayed_task(e, snapshot) for e in loader.load_category(c)[:limit or None]]
                played = play_programs(tasks, [t.program for t in tasks], snapshot, sandbox)
                out[c] = _summary([t.id for t in tasks], [p.r_res == 1.0 for p in played],
                                  {t.id: gold_failure(p) for t, p in zip(tasks, played)})
    return {"per_category": out, "policy": "gold"}

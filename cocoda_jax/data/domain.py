"""One protocol for task domains, and the registry that finds them by name, by task type or by kind.

A domain is what the launchers and RODS need to know about a family of tasks; nothing outside the
domain's own module branches on its concrete task class::

    class MyDomain(DomainBase):
        name, kind, task_type = "my_domain", "my", MyTask
        def build(self, section, sandbox): ...               # DomainSplits from config.domain
        def propose_variant(self, parent, stream_seed, draw): ...  # or ``propose_variant = None``

    register_domain("my_domain", MyDomain)
    get_domain("my_domain").build(config.domain, sandbox)   # what runs.domains.build_domain does
    domain_of(task).task_to_dict(task)                      # what RODS persistence does

The embedded domains (:mod:`.synthetic_math`, :mod:`.tables`) register themselves when imported and
the registry imports them on its first query. A third-party domain (BFCL) registers itself when its
module is imported; this package never imports ``third_party``.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import threading
from collections.abc import Callable, Mapping
from typing import Any, Protocol, runtime_checkable

from cocoda_jax.errors import CocodaError, ConfigError
from cocoda_jax.data.verifiers import default_verify

#: The embedded domains and the modules of this package that define and register them.
BUILTIN_NAMES = ("synthetic_math", "tables")
BUILTIN_MODULES = ("cocoda_jax.data.synthetic_math", "cocoda_jax.data.tables")


class DomainConfigError(ConfigError):
    """A domain's config section is refused by the domain (the launcher reports it as a ConfigError)."""


class UnknownDomainError(CocodaError, LookupError):
    """No registered domain has that name, kind or task type; the message lists the registered ones."""


@dataclasses.dataclass(frozen=True)
class DomainSplits:
    """What :meth:`TaskDomain.build` returns: train, validation and test tasks and the primitive library.
    ``demonstrated``: the ids of the training tasks whose program the run may learn from (``None``:
    every one); the others have answers only (reinforcement learning's part). ``dev``: held-out tasks
    that no decision of the run reads (acceptance chooses on ``val``), for an unbiased progress curve."""

    train: tuple[Any, ...]
    val: tuple[Any, ...]
    test: tuple[Any, ...]
    library: Any
    demonstrated: frozenset[str] | None = None
    dev: tuple[Any, ...] = ()  # held-out tasks no decision reads: the report's measure of progress


@runtime_checkable
class TaskDomain(Protocol):
    """A task domain.

    ``name``: the config's ``domain.name``. ``kind``: the tag of its task records (``"kind"`` in
    RODS's JSON). ``task_type``: the class of its tasks (how a task finds its domain).
    ``categories``: task -> benchmark category, or ``None`` (one category). ``barrier_tools``: for a
    stateful domain the tools no composite may contain, ``None`` for a pure domain.
    ``propose_variant``: ``(parent, stream_seed, draw) -> task | None``, draw number ``draw`` of the
    domain's generator on the stream ``stream_seed`` for a RODS variant of ``parent`` (``None``: that
    draw gave nothing; RODS keeps a draw only with the parent's skeleton); the attribute itself is
    ``None`` when the domain has no generator, and RODS then makes no variant of its tasks. A
    generator's tasks are dataclasses with ``id``, ``question``, ``inputs``, ``program``, ``answer``,
    ``answer_type``, ``intermediates`` and ``skeleton``: RODS gives a variant its id and checks the rest.
    """

    name: str
    kind: str
    task_type: type
    categories: Callable[[Any], str] | None
    barrier_tools: tuple[str, ...] | None
    propose_variant: Callable[[Any, int, int], Any | None] | None

    def build(self, section: Any, sandbox: Any) -> DomainSplits:
        """The splits and primitive library from ``config.domain`` (DomainConfigError on a bad key)."""

    def environment_plugin(self) -> Any | None:
        """The sandbox's EnvironmentPlugin for a stateful domain, ``None`` for a pure one."""

    def verify(self, answer: Any, task: Any) -> float:
        """``R_res`` of an answered episode of a value-answer domain (the rollouts' ``verify=``)."""

    def score(self, task: Any, answer: Any, answered: bool, environment_calls: Any = ()) -> float:
        """``R_res`` of an episode as the rollout computes it (a stateful task by its environment calls)."""

    def task_to_dict(self, task: Any) -> dict:
        """A JSON-ready dict of ``task`` (without the key ``"kind"``, which RODS adds)."""

    def task_from_dict(self, d: Mapping[str, Any]) -> Any:
        """The inverse of :meth:`task_to_dict`; ValueError, TypeError or KeyError on a malformed record."""

    def stated_numbers(self, task: Any) -> tuple[tuple[str, float], ...]:
        """``(name, value)`` of every number the question must state (RODS's leak and missing-number rules)."""


class DomainBase:
    """Defaults for a :class:`TaskDomain`: a pure domain (no environment, one category, no barrier),
    no generator, answers checked by value (:func:`cocoda_jax.data.verifiers.default_verify`), tasks
    that are dataclasses serialised field by field, and the numeric constants of the gold program as
    the stated numbers."""

    name: str = ""
    kind: str = ""
    task_type: type = object
    categories: Callable[[Any], str] | None = None
    barrier_tools: tuple[str, ...] | None = None
    propose_variant: Callable[[Any, int, int], Any | None] | None = None

    def build(self, section: Any, sandbox: Any) -> DomainSplits:
        raise DomainConfigError(f"the domain {self.name!r} cannot build splits for a launcher")

    def environment_plugin(self) -> Any | None:
        return None

    def verify(self, answer: Any, task: Any) -> float:
        return default_verify(answer, task)

    def score(self, task: Any, answer: Any, answered: bool, environment_calls: Any = ()) -> float:
        score_calls = getattr(task, "score_environment_calls", None)
        if score_calls is not None:  # a stateful task is judged on what was done, not on a value
            return float(score_calls(tuple(environment_calls)))
        return float(self.verify(answer, task)) if answered else 0.0

    def task_to_dict(self, task: Any) -> dict:
        return dataclass_to_dict(task)

    def task_from_dict(self, d: Mapping[str, Any]) -> Any:
        return dataclass_from_dict(self.task_type, d)

    def stated_numbers(self, task: Any) -> tuple[tuple[str, float], ...]:
        return program_constants(task.program)


# -- helpers for domains ------------------------------------------------------------------------------


def is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def program_constants(program: str) -> tuple[tuple[str, float], ...]:
    """The numeric constants written in a program, named by their position (``const@line:col``)."""
    return tuple((f"const@{node.lineno}:{node.col_offset}", node.value) for node in ast.walk(ast.parse(program))
                 if isinstance(node, ast.Constant) and is_number(node.value))


def dataclass_to_dict(task: Any) -> dict:
    """Every field of a dataclass task (a JSON encoder turns its tuples into lists)."""
    return {f.name: getattr(task, f.name) for f in dataclasses.fields(task)}


def tuplify(v: Any) -> Any:
    """Lists back to tuples, recursively (what a JSON round trip did to a tuple)."""
    return tuple(tuplify(x) for x in v) if isinstance(v, list) else v


def pairs(v: Any) -> tuple[tuple[str, Any], ...]:
    """``((name, value), ...)`` from JSON's lists of pairs (values left as JSON gives them)."""
    return tuple((str(n), x) for n, x in v)


def dataclass_from_dict(cls: type, d: Mapping[str, Any], convert: Mapping[str, Callable[[Any], Any]] = {}) -> Any:
    """``cls`` from the fields of ``d`` (each passed through ``convert[field]`` when given); a
    ValueError names the fields ``d`` lacks (fields with defaults may be left out)."""
    fields = [f for f in dataclasses.fields(cls) if f.init]
    required = [f.name for f in fields
                if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    missing = [name for name in required if name not in d]
    if missing:
        raise ValueError(f"missing fields {missing}")
    values = {f.name: d[f.name] for f in fields if f.name in d}
    return cls(**{k: convert[k](v) if k in convert else v for k, v in values.items()})


# -- the registry -------------------------------------------------------------------------------------

_LOCK = threading.RLock()
_BY_NAME: dict[str, TaskDomain] = {}
_BY_KIND: dict[str, TaskDomain] = {}
_BY_TYPE: dict[type, TaskDomain] = {}
_builtins_loaded = False


def register_domain(name: str, cls: type) -> type:
    """Register the domain class ``cls`` (instantiated without arguments) under ``name``, its
    ``kind`` and its ``task_type``. Registering the same class again (a reloaded module) replaces it; another class
    under a taken name, kind or task type is a ValueError (:func:`unregister_domain` first).
    Returns ``cls``."""
    domain = cls()
    if getattr(domain, "name", None) != name:
        raise ValueError(f"{cls.__name__}.name is {getattr(domain, 'name', None)!r}, registered as {name!r}")
    if not isinstance(domain, TaskDomain) or not (isinstance(domain.kind, str) and domain.kind):
        raise ValueError(f"{cls.__name__} is not a TaskDomain (every member of the protocol and a kind)")
    if not isinstance(domain.task_type, type) or domain.task_type is object:
        raise ValueError(f"{cls.__name__}.task_type must be the class of its tasks, got {domain.task_type!r}")
    with _LOCK:
        existing = _BY_NAME.get(name)
        if existing is not None and _same_class(type(existing), cls):  # registered again, or its module reloaded
            unregister_domain(name)
        for what, table, key in (("name", _BY_NAME, name), ("kind", _BY_KIND, domain.kind),
                                 ("task type", _BY_TYPE, domain.task_type)):
            if key in table:
                other = table[key]
                raise ValueError(f"the {what} of domain {name!r} is taken by {type(other).__name__} ({other.name!r})")
        _BY_NAME[name], _BY_KIND[domain.kind], _BY_TYPE[domain.task_type] = domain, domain, domain
    return cls


def _same_class(a: type, b: type) -> bool:
    return a is b or (a.__module__, a.__qualname__) == (b.__module__, b.__qualname__)


def unregister_domain(name: str) -> None:
    """Remove a registered domain (a test's toy domain); unknown names are ignored."""
    with _LOCK:
        domain = _BY_NAME.pop(name, None)
        if domain is not None:
            _BY_KIND.pop(domain.kind, None)
            _BY_TYPE.pop(domain.task_type, None)


def _load_builtins() -> None:
    global _builtins_loaded
    if not _builtins_loaded:
        for module in BUILTIN_MODULES:
            importlib.import_module(module)
        _builtins_loaded = True


def domain_names() -> tuple[str, ...]:
    """The registered domain names, sorted."""
    _load_builtins()
    with _LOCK:
        return tuple(sorted(_BY_NAME))


def get_domain(name: str) -> TaskDomain:
    """The registered domain ``name``; UnknownDomainError listing the registered ones otherwise."""
    _load_builtins()
    with _LOCK:
        if name in _BY_NAME:
            return _BY_NAME[name]
    raise UnknownDomainError(f"no domain {name!r} is registered; registered: {list(domain_names())}")


def domain_of_kind(kind: Any) -> TaskDomain:
    """The domain whose task records carry ``"kind": kind``."""
    _load_builtins()
    with _LOCK:
        if isinstance(kind, str) and kind in _BY_KIND:
            return _BY_KIND[kind]
        known = sorted(_BY_KIND)
    raise UnknownDomainError(f"no domain has task records of kind {kind!r}; registered kinds: {known}")


def domain_of(task: Any) -> TaskDomain:
    """The domain of ``task``, found by its class (or the nearest registered base class);
    TypeError when no domain owns it."""
    _load_builtins()
    with _LOCK:
        for cls in type(task).__mro__:
            if cls in _BY_TYPE:
                return _BY_TYPE[cls]
        known = sorted(t.__name__ for t in _BY_TYPE)
    raise TypeError(f"no registered domain owns tasks of type {type(task).__name__}; registered task types: {known}")


__all__ = [
    "BUILTIN_MODULES", "BUILTIN_NAMES", "DomainBase", "DomainConfigError", "DomainSplits", "TaskDomain", "UnknownDomainError",
    "dataclass_from_dict", "dataclass_to_dict", "domain_names", "domain_of", "domain_of_kind", "get_domain",
    "is_number", "pairs", "program_constants", "register_domain", "tuplify", "unregister_domain",
]

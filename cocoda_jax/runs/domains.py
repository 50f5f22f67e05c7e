"""The run's task domain: the registered domain a config names, built into train, validation,
dev and test tasks with its primitive library, and the sandbox its programs run in."""

from __future__ import annotations

import dataclasses
import importlib
from typing import Any

from cocoda_jax.data import domain as D
from cocoda_jax.errors import ConfigError
from cocoda_jax.execution import Sandbox
from cocoda_jax.rl.loop import Evaluation
from cocoda_jax.runs.settings import ConfigLike, RunSettings

#: Third-party domains, registered when their module is imported (on first use of their name).
THIRD_PARTY_DOMAINS = {"bfcl_multi_turn": "third_party.benchmarks.bfcl_domain",
                       "gsm8k": "third_party.benchmarks.word_problems", "math": "third_party.benchmarks.word_problems"}
#: The domains a config can name out of the box (more register themselves, see cocoda_jax.data.domain).
DOMAINS = (*D.BUILTIN_NAMES, *THIRD_PARTY_DOMAINS)


@dataclasses.dataclass(frozen=True)
class Domain:
    """Train tasks, held-out validation and test tasks, and the primitive library.

    ``categories``: a benchmark domain's task -> category function (``None``: one category), so
    reports give accuracy per category as the benchmark does. ``barrier_tools``: for a stateful
    domain (tools act on an environment), the tools no composite may contain (``None``: a pure
    domain, mined by dataflow). ``spec``: the registered :class:`cocoda_jax.data.domain.TaskDomain`
    it was built by (its verifier, RODS generator, task records)."""

    name: str
    train: tuple[Any, ...]
    val: tuple[Any, ...]
    test: tuple[Any, ...]
    library: Any
    categories: Any = None
    barrier_tools: tuple[str, ...] | None = None
    spec: Any = None
    demonstrated: frozenset[str] | None = None  # training task ids with a usable program (None: all)
    dev: tuple[Any, ...] = ()  # held-out tasks no decision reads (the report's progress measure)

    @property
    def demonstrations(self) -> tuple[Any, ...]:
        """The training tasks whose gold program stages 1-2 may read (the rest have answers only)."""
        if self.demonstrated is None:
            return self.train
        return tuple(t for t in self.train if str(t.id) in self.demonstrated)

    @property
    def answer_only(self) -> tuple[Any, ...]:
        """The training tasks the domain gives no program for (none when every task is demonstrated)."""
        if self.demonstrated is None:
            return ()
        return tuple(t for t in self.train if str(t.id) not in self.demonstrated)


def per_category(domain: Domain, tasks: Any, evaluation: Evaluation) -> dict[str, dict[str, float]] | None:
    """Accuracy per benchmark category of ``evaluation`` on ``tasks`` (None for a one-category domain),
    with the mean share of user turns passed for multi-turn tasks (:func:`turns_passed`)."""
    if domain.categories is None:
        return None
    outcomes = evaluation.outcomes()
    shares = turns_passed(tasks, evaluation) or {}
    groups: dict[str, list[int]] = {}
    turn_shares: dict[str, list[float]] = {}
    for t in tasks:
        c = str(domain.categories(t))
        groups.setdefault(c, []).append(int(outcomes[str(t.id)]))
        if str(t.id) in shares:
            turn_shares.setdefault(c, []).append(shares[str(t.id)])
    out = {c: {"n": len(v), "accuracy": sum(v) / len(v)} for c, v in sorted(groups.items())}
    for c, v in turn_shares.items():
        out[c]["turns_passed_share"] = sum(v) / len(v)
    return out


def turns_passed(tasks: Any, evaluation: Evaluation) -> dict[str, float] | None:
    """Each multi-turn task's share of user turns passed before the first failure (task id -> share;
    None when no task has turns): the graded measure beside all-or-nothing accuracy, which a small
    planner leaves at zero on long conversations, so two arms can still be compared task by task."""
    played = {tr.task_id: tr for tr in evaluation.trajectories}
    out = {str(t.id): t.turns_passed(played[str(t.id)].environment_calls) / t.n_turns
           for t in tasks if hasattr(t, "turns_passed")}
    return out or None


def domain_spec(name: str) -> D.TaskDomain:
    """The registered domain ``name`` (a third-party one imported first, a config's
    ``domain.module`` too); an unknown name is a :class:`ConfigError`."""
    if name in THIRD_PARTY_DOMAINS and name not in D.domain_names():
        try:
            importlib.import_module(THIRD_PARTY_DOMAINS[name])
        except ModuleNotFoundError as e:
            raise ConfigError(f"config.domain.name {name!r}: {e}") from e
    try:
        return D.get_domain(name)
    except D.UnknownDomainError:
        raise ConfigError(f"config.domain.name {name!r} is not a registered domain; registered: "
                          f"{sorted(set(D.domain_names()) | set(THIRD_PARTY_DOMAINS))}") from None


def _import_domain_module(settings: RunSettings) -> None:
    """``config.domain.module`` (optional): a module that registers the config's domain on import."""
    module = settings.domain.module
    if module:
        try:
            importlib.import_module(module)
        except ImportError as e:
            raise ConfigError(f"config.domain.module {module!r}: {e}") from e


def sandbox_for(config: ConfigLike) -> Sandbox:
    """The run's sandbox (not started): a stateful domain's workers load its environment plugin."""
    settings = RunSettings.of(config)
    _import_domain_module(settings)
    name = settings.domain.name
    spec = domain_spec(name)
    try:
        environment = spec.environment_plugin()
    except ModuleNotFoundError as e:
        raise ConfigError(f"config.domain.name {name!r}: {e}") from e
    return Sandbox(workers=settings.sandbox.workers, timeout_s=settings.sandbox.timeout_s, environment=environment)


def build_domain(config: ConfigLike, sandbox: Any) -> Domain:
    """The registered domain named by ``config.domain.name``, built from the ``config.domain``
    section and ``sandbox`` (each domain's class lists its keys: ``synthetic_math.SyntheticMath``,
    ``tables.Tables``, ``third_party.benchmarks.bfcl_domain.BfclMultiTurn``)."""
    settings = RunSettings.of(config)
    _import_domain_module(settings)
    return _build(domain_spec(settings.domain.name), settings, sandbox)


def build_bfcl_domain(config: ConfigLike, sandbox: Any) -> Domain:
    """BFCL v4 multi-turn conversations (:class:`third_party.benchmarks.bfcl_domain.BfclMultiTurn`)."""
    return _build(domain_spec("bfcl_multi_turn"), RunSettings.of(config), sandbox)


def _build(spec: D.TaskDomain, settings: RunSettings, sandbox: Any) -> Domain:
    try:
        splits = spec.build(settings.domain.as_config(), sandbox)
    except D.DomainConfigError as e:
        raise ConfigError(str(e)) from e
    return Domain(settings.domain.name, tuple(splits.train), tuple(splits.val), tuple(splits.test), splits.library,
                  categories=spec.categories, barrier_tools=spec.barrier_tools, spec=spec,
                  demonstrated=splits.demonstrated, dev=tuple(splits.dev))

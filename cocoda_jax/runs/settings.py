"""The run's config, parsed once at the edge: :meth:`RunSettings.parse` turns the ml_collections
ConfigDict of ``configs/*.py`` into frozen, validated dataclasses, one per section, and the launchers'
jobs read typed fields from it (``settings.grpo.group_size``) instead of casting raw config values.

Every section rejects unknown keys and reports a wrong type or an out-of-range value as the project's
one :class:`~cocoda_jax.models.config.ConfigError`, naming the key
(``config.grpo.group_size must be an int >= 2, got 1``). Sections that had a typed dataclass before
keep it: ``rollout`` (:class:`~cocoda_jax.rl.loop.RolloutConfig`), ``retrieval``
(:class:`~cocoda_jax.rl.prompts.RetrievalConfig`), ``reward`` (:class:`~cocoda_jax.rl.rewards.RewardConfig`),
``rods.thresholds`` (:class:`~cocoda_jax.rods.config.RodsConfig`), ``coevolve.abstractor``
(:class:`~cocoda_jax.coevolve.abstractor.AbstractorConfig`) and ``coevolve.acceptance``
(:class:`~cocoda_jax.coevolve.acceptance.AcceptanceConfig`).

No key gets a default the configs do not give, except the ones the jobs always treated as optional:
the ``distributed``, ``warm``, ``coevolve``, ``rods`` and ``report`` sections (``launch.train`` needs
none of the last four; ``launch.coevolve`` requires them), ``domain.module`` (``""``), ``grpo.advantage``
and ``grpo.loss`` (``"grpo"``), ``rods.signal`` (``"reward"``), ``rods.selection``
(``"priority"``), ``model.remat`` (``False``), ``coevolve.mine_in_rounds`` (``True``),
``coevolve.direct_answer`` (``False``), ``coevolve.proposers`` (``"symbolic"``)
and ``coevolve.teacher`` (:class:`TeacherSettings`' defaults, used only by a teacher run).

``domain`` is the one open section: apart from ``name`` and ``module`` its keys are the registered
domain's own (``cocoda_jax.data.domain``: each domain class lists and checks them when it builds its
splits), kept here as they are; ``seed``, ``n_train``, ``n_val`` and ``n_test``, which every shipped
domain reads, are checked to be ints >= 0 when present.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from typing import Any

import ml_collections

from cocoda_jax.coevolve.abstractor import AbstractorConfig
from cocoda_jax.coevolve.acceptance import AcceptanceConfig
from cocoda_jax.errors import ConfigError
from cocoda_jax.rl.grpo import AGGREGATIONS
from cocoda_jax.rl.loop import RolloutConfig
from cocoda_jax.rl.prompts import RetrievalConfig
from cocoda_jax.rl.rewards import RewardConfig
from cocoda_jax.rods.config import RodsConfig
from cocoda_jax.rods.curriculum import SELECTIONS
from cocoda_jax.rods.tracker import SIGNALS


# ------------------------------------------------------------------------------------------------
# One section
# ------------------------------------------------------------------------------------------------


def _plain(value: Any) -> dict[str, Any]:
    """A section's keys as a plain dict (nested sections as dicts too)."""
    return dict(value.to_dict() if hasattr(value, "to_dict") else value)


def section(config: Any, name: str, cls: type, *, where: str = "config", **extra: Any) -> Any:
    """``cls(**config[name], **extra)`` with unknown, missing or invalid keys reported as
    :class:`ConfigError` (``where``: the dotted path of ``config`` in the messages). A class's
    ``SUBSECTIONS`` (key -> dataclass) are parsed the same way first."""
    if name not in config:
        raise ConfigError(f"{where} lacks the section {name!r}")
    path = f"{where}.{name}"
    raw = config[name]
    if not hasattr(raw, "keys"):
        raise ConfigError(f"{path} must be a section of keys, got {raw!r}")
    values = _plain(raw)
    fields = [f for f in dataclasses.fields(cls) if f.init]
    known = {f.name for f in fields}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ConfigError(f"{path} has unknown key(s) {unknown}; known: {sorted(known)}")
    for key, sub in getattr(cls, "SUBSECTIONS", {}).items():
        if key in values:
            values[key] = section(values, key, sub, where=path)
    missing = sorted(f.name for f in fields if f.name not in values and f.name not in extra
                     and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING)
    if missing:
        raise ConfigError(f"{path} lacks key(s) {missing}")
    try:
        return cls(**values, **extra)
    except ConfigError:
        raise
    except (TypeError, ValueError) as e:
        raise ConfigError(f"{path}: {e}") from e


def _is_int(v: Any) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def _is_number(v: Any) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(v)


class _Section:
    """Checks for a frozen section dataclass: each normalises its field in place (an int stays an
    int, a number becomes a float) or raises a ConfigError naming ``config.<SECTION>.<key>``."""

    SECTION = ""

    def _key(self, name: str) -> str:
        return f"config.{self.SECTION}.{name}"

    def _put(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)

    def _int(self, name: str, low: int | None = None, *, also: tuple[int, ...] = ()) -> None:
        v = getattr(self, name)
        if not (_is_int(v) and (low is None or v >= low or v in also)):
            bound = "" if low is None else f" >= {low}"
            alt = "".join(f" or {a}" for a in also)
            raise ConfigError(f"{self._key(name)} must be an int{bound}{alt}, got {v!r}")
        self._put(name, int(v))

    def _number(self, name: str, *, above: float | None = None, at_least: float | None = None,
                below: float | None = None, optional: bool = False) -> None:
        v = getattr(self, name)
        if v is None and optional:
            return
        ok = _is_number(v) and (above is None or v > above) and (at_least is None or v >= at_least) \
            and (below is None or v < below)
        if not ok:
            bounds = [f"> {above}" if above is not None else "", f">= {at_least}" if at_least is not None else "",
                      f"< {below}" if below is not None else ""]
            bound = " and ".join(b for b in bounds if b)
            raise ConfigError(f"{self._key(name)} must be a finite number{' ' + bound if bound else ''}"
                              f"{' or None' if optional else ''}, got {v!r}")
        self._put(name, float(v))

    def _bool(self, name: str) -> None:
        v = getattr(self, name)
        if not isinstance(v, bool):
            raise ConfigError(f"{self._key(name)} must be a bool, got {v!r}")

    def _str(self, name: str, *, choices: tuple[str, ...] | None = None, nonempty: bool = False) -> None:
        v = getattr(self, name)
        if not isinstance(v, str) or (nonempty and not v) or (choices is not None and v not in choices):
            what = f"one of {choices}" if choices is not None else "a non-empty string" if nonempty else "a string"
            raise ConfigError(f"{self._key(name)} must be {what}, got {v!r}")


# ------------------------------------------------------------------------------------------------
# The sections
# ------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class DomainSettings(_Section):
    """``config.domain``: the registered domain's ``name``, the ``module`` to import first (``""``:
    none) and the domain's own keys (``options``, in config order; the domain checks them)."""

    SECTION = "domain"
    COMMON_COUNTS = ("seed", "n_train", "n_val", "n_test")

    name: str
    module: str = ""
    options: tuple[tuple[str, Any], ...] = ()

    def __post_init__(self) -> None:
        self._str("name", nonempty=True)
        self._str("module")
        for key, v in self.options:
            if key in ("name", "module"):
                raise ConfigError(f"config.domain.{key} is a field of its own, not an option")
            if key in self.COMMON_COUNTS and not (_is_int(v) and v >= 0):
                raise ConfigError(f"config.domain.{key} must be an int >= 0, got {v!r}")

    @classmethod
    def parse(cls, config: Any) -> DomainSettings:
        if "domain" not in config:
            raise ConfigError("config lacks the section 'domain'")
        raw = config["domain"]
        if not hasattr(raw, "keys"):
            raise ConfigError(f"config.domain must be a section of keys, got {raw!r}")
        values = _plain(raw)
        if "name" not in values:
            raise ConfigError("config.domain lacks key(s) ['name']")
        name = values.pop("name")
        module = values.pop("module", "")
        return cls(name, module, tuple(values.items()))

    def get(self, key: str, default: Any = None) -> Any:
        """A domain-specific key (``default`` when the config lacks it)."""
        return dict(self.options).get(key, default)

    def as_config(self) -> ml_collections.ConfigDict:
        """The section as the domain's ``build`` reads it (a fresh copy: ``section["n_train"]``,
        ``section.get(...)`` and attribute access all work)."""
        return ml_collections.ConfigDict({"name": self.name, "module": self.module, **dict(self.options)})


@dataclasses.dataclass(frozen=True)
class ModelSettings(_Section):
    """``config.model``: a preset of cocoda_jax.models.config, the BPE vocabulary of ``tiny``, a
    local HF checkpoint directory (``""``: none), ``remat``: rematerialise each layer in the train
    steps (less memory, one more forward of compute; off in the CPU miniature), and ``logits_chunk``:
    compute the head's logits that many positions at a time in the train steps and scorers (0: the
    whole sequence at once; the full-vocabulary logits of a real-scale micro-batch are tens of GB), and
    ``scan_layers``: the decoder layers (their weights are stored stacked) as one ``lax.scan`` in the
    train steps, the rollouts' sampler and evaluation (one compiled layer body whatever the depth; with
    ``remat``, one layer input kept per layer); off, the layers are unrolled (faster per token for the
    CPU planner's few layers)."""

    SECTION = "model"

    preset: str
    vocab_size: int
    hf_checkpoint: str
    remat: bool = False
    logits_chunk: int = 0
    scan_layers: bool = False

    def __post_init__(self) -> None:
        self._str("preset", nonempty=True)
        self._int("vocab_size", 1)
        self._str("hf_checkpoint")
        self._bool("remat")
        self._int("logits_chunk", 0)
        self._bool("scan_layers")


@dataclasses.dataclass(frozen=True)
class MeshSettings(_Section):
    """``config.mesh``: the (data, fsdp, tensor) axes; ``data = -1`` takes the devices the others leave."""

    SECTION = "mesh"

    data: int
    fsdp: int
    tensor: int

    def __post_init__(self) -> None:
        self._int("data", 1, also=(-1,))
        self._int("fsdp", 1)
        self._int("tensor", 1)


@dataclasses.dataclass(frozen=True)
class DistributedSettings(_Section):
    """``config.distributed``: the multi-host start (``jax.distributed.initialize``)."""

    SECTION = "distributed"

    initialize: bool
    coordinator_address: str
    num_processes: int
    process_id: int

    def __post_init__(self) -> None:
        self._bool("initialize")
        self._str("coordinator_address")
        self._int("num_processes", 1)
        self._int("process_id", 0)
        if self.process_id >= self.num_processes:
            raise ConfigError(f"config.distributed.process_id must be < num_processes={self.num_processes}, "
                              f"got {self.process_id}")


@dataclasses.dataclass(frozen=True)
class SftSettings(_Section):
    """``config.sft``: stage 2 (and ``launch.train``'s SFT)."""

    SECTION = "sft"

    steps: int
    batch_size: int
    learning_rate: float
    warmup_steps: int
    micro_batches: int
    n_demos: int
    #: > 0: a step's demonstrations are packed several to a row of this many tokens (the stage-2 SFT,
    #: every refresh and launch.train's SFT; the same loss in fewer token slots:
    #: cocoda_jax.rl.loop.sft_batch); 0: one a row, right-padded
    pack_length: int = 0

    def __post_init__(self) -> None:
        self._int("steps", 0)
        self._int("batch_size", 1)
        self._number("learning_rate", above=0)
        self._int("warmup_steps", 0)
        self._int("micro_batches", 1)
        self._int("n_demos", 1)
        self._int("pack_length", 0)


@dataclasses.dataclass(frozen=True)
class GrpoSettings(_Section):
    """``config.grpo``: the learner's GRPO loss (``epsilon`` ... ``loss``, see
    :class:`cocoda_jax.rl.grpo.GRPOConfig`; ``advantage`` and ``loss`` are checked against the
    registered variants when the learner is built, since a domain module may register more) and the
    iteration budget of both jobs."""

    SECTION = "grpo"

    iterations: int
    iterations_per_round: int
    tasks_per_iteration: int
    group_size: int
    learning_rate: float
    epsilon: float
    epsilon_high: float | None
    beta: float
    aggregation: str
    normalize_std: bool
    micro_batches: int
    mask_uniform_groups: bool
    ppo_epochs: int
    eval_every: int
    advantage: str = "grpo"
    loss: str = "grpo"
    # the learning rate over the run's GRPO steps: "constant", or a linear warmup of warmup_steps then
    # "cosine" decay to a tenth at the last step (iterations x ppo_epochs)
    schedule: str = "constant"
    warmup_steps: int = 0
    # dynamic sampling: while fewer than min_informative_groups of an iteration's groups carry signal
    # (a non-zero advantage), up to max_refills more draws from the task source (0: off)
    min_informative_groups: int = 0
    max_refills: int = 0

    def __post_init__(self) -> None:
        self._int("iterations", 0)
        self._int("min_informative_groups", 0)
        self._int("max_refills", 0)
        self._str("schedule", choices=("constant", "cosine"))
        self._int("warmup_steps", 0)
        self._int("iterations_per_round", 1)
        self._int("tasks_per_iteration", 1)
        self._int("group_size", 2)
        self._number("learning_rate", above=0)
        self._number("epsilon", above=0, below=1)
        self._number("epsilon_high", above=0, optional=True)
        self._number("beta", at_least=0)
        self._str("aggregation", choices=AGGREGATIONS)
        self._bool("normalize_std")
        self._int("micro_batches", 1)
        self._bool("mask_uniform_groups")
        self._int("ppo_epochs", 1)
        self._int("eval_every", 1)
        self._str("advantage", nonempty=True)
        self._str("loss", nonempty=True)


@dataclasses.dataclass(frozen=True)
class WarmSettings(_Section):
    """``config.warm``: stage 1's abstraction rounds over the gold demonstrations."""

    SECTION = "warm"

    rounds: int

    def __post_init__(self) -> None:
        self._int("rounds", 0)


PROPOSERS = ("symbolic", "teacher", "both")


class _EndpointSection(_Section):
    """What a section naming an OpenAI-compatible endpoint shares (``coevolve.teacher``, ``demos``):
    the checks of its ``base_url``, ``model``, ``api_key_env``, ``timeout_s``, ``max_retries``,
    ``temperature`` and ``max_tokens`` fields, and the client config they make
    (:class:`third_party.teacher.TeacherEndpointConfig`, imported only when a run asks an endpoint)."""

    def _check_endpoint(self) -> None:
        self._str("base_url", nonempty=True)
        self._str("model", nonempty=True)
        self._str("api_key_env")
        self._number("timeout_s", above=0)
        self._int("max_retries", 0)
        self._number("temperature", at_least=0)
        self._int("max_tokens", 1)
        try:
            self.endpoint()
        except ValueError as e:
            raise ConfigError(f"config.{self.SECTION}: {e}") from None

    def endpoint(self) -> Any:
        from third_party.teacher import TeacherEndpointConfig

        return TeacherEndpointConfig(base_url=self.base_url, model=self.model, api_key_env=self.api_key_env or None,
                                     timeout_s=self.timeout_s, max_retries=self.max_retries,
                                     temperature=self.temperature, max_tokens=self.max_tokens)


@dataclasses.dataclass(frozen=True)
class TeacherSettings(_EndpointSection):
    """``config.coevolve.teacher``: the teacher LM behind an OpenAI-compatible endpoint that proposes
    composites when ``coevolve.proposers`` is ``"teacher"`` or ``"both"`` (endpoint fields:
    :class:`third_party.teacher.TeacherEndpointConfig`; prompt fields:
    :class:`~cocoda_jax.coevolve.teacher.TeacherConfig`). ``api_key_env`` names the environment
    variable with the key (``""``: send none), so no key is ever stored in a config or checkpoint."""

    SECTION = "coevolve.teacher"

    base_url: str = "http://127.0.0.1:8000"
    model: str = "teacher"
    api_key_env: str = "OPENAI_API_KEY"
    timeout_s: float = 120.0
    max_retries: int = 3
    temperature: float = 0.0
    max_tokens: int = 2048
    max_programs: int = 24
    max_candidates: int = 8

    def __post_init__(self) -> None:
        self._check_endpoint()
        self._int("max_programs", 1)
        self._int("max_candidates", 0)


DEMO_SOURCES = ("teacher", "student")


@dataclasses.dataclass(frozen=True)
class DemosSettings(_EndpointSection):
    """``config.demos``: stage 0, for a domain whose training tasks carry answers but no programs
    (GSM8K, MATH; :mod:`cocoda_jax.demos`). ``k`` programs a question are asked of the model behind
    ``base_url`` (OpenAI-compatible), ``concurrency`` requests at a time, and the verified ones kept
    in ``path`` (``""``: ``WORKDIR/demos/demonstrations.jsonl``). ``source`` says who answers, for the
    records' provenance: ``"teacher"`` (a large model) or ``"student"`` (the student itself, served by
    ``launch/serve.py``: rejection sampling). ``collect=False``: use only what ``path`` already holds
    (e.g. a file from ``launch/collect_demos.py``); never ask."""

    SECTION = "demos"

    source: str = "teacher"
    path: str = ""
    collect: bool = True
    k: int = 4
    concurrency: int = 8
    chunk: int = 64
    base_url: str = "http://127.0.0.1:8000"
    model: str = "teacher"
    api_key_env: str = "OPENAI_API_KEY"
    timeout_s: float = 120.0
    max_retries: int = 3
    temperature: float = 0.7
    max_tokens: int = 512

    def __post_init__(self) -> None:
        self._str("source", choices=DEMO_SOURCES)
        self._str("path")
        self._bool("collect")
        for key in ("k", "concurrency", "chunk"):
            self._int(key, 1)
        self._check_endpoint()


@dataclasses.dataclass(frozen=True)
class CoevolveSettings(_Section):
    """``config.coevolve``: stage 3's rounds, the mining threshold ``rho``, the frozen-library
    baseline, the SFT refresh, and the abstractor and acceptance sections."""

    SECTION = "coevolve"
    SUBSECTIONS = {"abstractor": AbstractorConfig, "acceptance": AcceptanceConfig, "teacher": TeacherSettings}

    rounds: int
    rho: float
    frozen_library: bool
    refresh_sft_steps: int
    refresh_demos: int
    refresh_learning_rate: float
    abstractor: AbstractorConfig
    acceptance: AcceptanceConfig
    mine_in_rounds: bool = True  # False: the library stops growing after the warm stage (the -CTD ablation)
    # True: the direct-answer baseline (cocoda_jax/data/direct_answer.py): the library is state_answer
    # alone and the demonstrations state the gold answer in one step; needs frozen_library
    direct_answer: bool = False
    # who proposes composites (warm stage and rounds): the symbolic miner, the teacher LM, or both
    # (``coevolve.abstractor`` already names the symbolic miner's own settings)
    proposers: str = "symbolic"
    teacher: TeacherSettings = TeacherSettings()
    # the last GRPO iterations of each round: with the round's new composites in the prompts (their
    # probation, after the refresh), or with the incumbent library when nothing new was inserted
    probation_iterations: int = 0
    # a round's successes on tasks without a stored demonstration join the stored demonstrations (and
    # the refresh): what the planner solved from reward alone is demonstrated from then on
    keep_successes: bool = False
    # copies of each demonstration the refresh counts as new (a round's new composites' uses, tasks
    # solved from reward alone) it may train on, within half of ``refresh_demos``: one success per
    # undemonstrated structure is a handful of rows among thousands unless it is repeated
    refresh_repeats: int = 1
    # best-of-N search each round: ``explore_samples`` rollouts of the GRPO-trained planner on each of
    # ``explore_tasks`` drawn answer-only training tasks that have no stored demonstration yet; the correct
    # ones join the round's successes (mining and ``keep_successes``). GRPO's G rollouts of a task the
    # planner never solves teach nothing; a first success, kept, is a demonstration (0: off)
    explore_tasks: int = 0
    explore_samples: int = 16
    # 0: the rounds' randomness (GRPO's sampling, RODS's draw and synthesis, the refresh's batches) comes
    # from ``seed``; r > 0: from a seed derived from (seed, r), so the rounds are an independent replicate
    # after the same stages 1-2: what two runs of one method differ by (the study's null arm)
    replicate: int = 0

    def __post_init__(self) -> None:
        self._int("rounds", 0)
        self._int("replicate", 0)
        self._bool("keep_successes")
        self._int("refresh_repeats", 1)
        self._int("explore_tasks", 0)
        self._int("explore_samples", 1)
        self._int("probation_iterations", 0)
        self._bool("mine_in_rounds")
        self._str("proposers", choices=PROPOSERS)
        self._number("rho", at_least=0)
        self._bool("frozen_library")
        self._bool("direct_answer")
        if self.direct_answer and not self.frozen_library:
            raise ConfigError("config.coevolve.direct_answer needs config.coevolve.frozen_library=True "
                              "(the direct baseline has no tools to grow)")
        self._int("refresh_sft_steps", 0)
        self._int("refresh_demos", 0)
        self._number("refresh_learning_rate", above=0)
        for name, cls in self.SUBSECTIONS.items():
            if not isinstance(getattr(self, name), cls):
                raise ConfigError(f"config.coevolve.{name} must be a section parsed as {cls.__name__}, "
                                  f"got {getattr(self, name)!r}")


#: ``config.rods.seed_pool``: the training tasks RODS's seeds come from (:class:`RodsSettings`)
SEED_POOLS = ("train", "answer_only")


@dataclasses.dataclass(frozen=True)
class RodsSettings(_Section):
    """``config.rods``: the curriculum switch, the seed tasks, the background synthesis, what the
    tracker reads (``signal``) and the thresholds. The seeds are ``n_seeds`` training tasks from
    index ``seed_start`` on: at 0 they are the first ones, which SFT trained on when they are
    demonstrated; past the demonstrations (``domain.n_train`` above what ``sft.n_demos`` takes) GRPO
    draws instances SFT never saw. ``seed_pool``: the training tasks the seeds are taken from, all of them
    (``"train"``) or only those the domain gives no program for (``"answer_only"``: GRPO practises where no
    demonstration shows the way, as on a benchmark with answers for every task and programs for few).
    ``admit_explored``: the rounds' search feeds the live pool (nothing to admit without the search, and
    nowhere to admit it without the curriculum: a static draw's seeds are fixed)."""

    SECTION = "rods"
    SUBSECTIONS = {"thresholds": RodsConfig}

    enabled: bool
    n_seeds: int
    background: bool
    thresholds: RodsConfig
    signal: str = "reward"
    selection: str = "priority"  # "uniform": the rods_random ablation (cocoda_jax.rods.curriculum.SELECTIONS)
    seed_start: int = 0
    seed_pool: str = "train"
    # the answer-only tasks the rounds' search (``coevolve.explore_tasks``) solved now and then (at least
    # once, not every time) join the live pool, drawn at the variant weight and made synthesis parents
    # at the round's end: GRPO then practises the structures the search just found (False: the pool
    # never hears of the search, as before this key existed)
    admit_explored: bool = False

    def __post_init__(self) -> None:
        self._bool("enabled")
        self._bool("admit_explored")
        self._int("n_seeds", 1)
        self._int("seed_start", 0)
        self._str("seed_pool", choices=SEED_POOLS)
        self._bool("background")
        if not isinstance(self.thresholds, RodsConfig):
            raise ConfigError(f"config.rods.thresholds must be a section parsed as RodsConfig, got {self.thresholds!r}")
        self._str("signal", choices=SIGNALS)
        self._str("selection", choices=SELECTIONS)

    @property
    def curriculum(self) -> RodsConfig | None:
        """The curriculum's thresholds, ``None`` when RODS is off (a static task pool)."""
        return self.thresholds if self.enabled else None


@dataclasses.dataclass(frozen=True)
class SandboxSettings(_Section):
    """``config.sandbox``: worker processes and the wall-clock limit of one program."""

    SECTION = "sandbox"

    workers: int
    timeout_s: float

    def __post_init__(self) -> None:
        self._int("workers", 1)
        self._number("timeout_s", above=0)


@dataclasses.dataclass(frozen=True)
class CheckpointSettings(_Section):
    """``config.checkpoint``: Orbax steps kept and the checkpoint cadence."""

    SECTION = "checkpoint"

    keep: int
    every_sft_steps: int
    every_iterations: int

    def __post_init__(self) -> None:
        self._int("keep", 1)
        self._int("every_sft_steps", 1)
        self._int("every_iterations", 1)


@dataclasses.dataclass(frozen=True)
class ReportSettings(_Section):
    """``config.report``: the retrieval-cost measurement of the round records."""

    SECTION = "report"

    retrieval_queries: int
    retrieval_k: int

    def __post_init__(self) -> None:
        self._int("retrieval_queries", 0)
        self._int("retrieval_k", 1)


# ------------------------------------------------------------------------------------------------
# The run
# ------------------------------------------------------------------------------------------------


#: Sections every run needs, parsed by these classes (``domain`` and ``seed`` are parsed apart).
_REQUIRED = {"model": ModelSettings, "mesh": MeshSettings, "rollout": RolloutConfig,
             "retrieval": RetrievalConfig, "reward": RewardConfig, "sft": SftSettings, "grpo": GrpoSettings,
             "sandbox": SandboxSettings, "checkpoint": CheckpointSettings}
#: Sections a run may lack (``None``): the multi-host start, and what only the co-evolution job reads.
_OPTIONAL = {"distributed": DistributedSettings, "warm": WarmSettings, "coevolve": CoevolveSettings,
             "rods": RodsSettings, "report": ReportSettings, "demos": DemosSettings}
TOP_LEVEL = ("seed", "domain", *_REQUIRED, *_OPTIONAL)


@dataclasses.dataclass(frozen=True)
class RunSettings:
    """The whole run config, typed and checked (see the module docstring). Build it with
    :meth:`parse`; it is frozen and compares by value."""

    seed: int
    domain: DomainSettings
    model: ModelSettings
    mesh: MeshSettings
    rollout: RolloutConfig
    retrieval: RetrievalConfig
    reward: RewardConfig
    sft: SftSettings
    grpo: GrpoSettings
    sandbox: SandboxSettings
    checkpoint: CheckpointSettings
    distributed: DistributedSettings | None = None
    warm: WarmSettings | None = None
    coevolve: CoevolveSettings | None = None
    rods: RodsSettings | None = None
    report: ReportSettings | None = None
    demos: DemosSettings | None = None

    def __post_init__(self) -> None:
        if not (_is_int(self.seed) and self.seed >= 0):
            raise ConfigError(f"config.seed must be an int >= 0, got {self.seed!r}")
        object.__setattr__(self, "seed", int(self.seed))

    @classmethod
    def parse(cls, config: Any) -> RunSettings:
        """Every section of ``config`` (a ConfigDict or a plain mapping, e.g. a checkpoint's saved
        config) parsed once; unknown sections or keys, missing ones and bad values are a
        :class:`ConfigError` naming the key."""
        if not hasattr(config, "keys"):
            raise ConfigError(f"a run config must be a ConfigDict or a mapping, got {type(config).__name__}")
        values = _plain(config)
        unknown = sorted(set(values) - set(TOP_LEVEL))
        if unknown:
            raise ConfigError(f"config has unknown section(s) {unknown}; known: {sorted(TOP_LEVEL)}")
        if "seed" not in values:
            raise ConfigError("config lacks the key 'seed'")
        parsed: dict[str, Any] = {name: section(values, name, kind) for name, kind in _REQUIRED.items()}
        parsed.update({name: section(values, name, kind) for name, kind in _OPTIONAL.items() if name in values})
        return cls(seed=values["seed"], domain=DomainSettings.parse(values), **parsed)

    @classmethod
    def of(cls, config: Any) -> RunSettings:
        """``config`` itself when already parsed, else :meth:`parse` of it (the builders take either)."""
        return config if isinstance(config, RunSettings) else cls.parse(config)

    def required(self, name: str) -> Any:
        """The optional section ``name``, a ConfigError when the config lacks it."""
        value = getattr(self, name)
        if value is None:
            raise ConfigError(f"config lacks the section {name!r}")
        return value


def _section_defaults(cls: type) -> dict[str, Any]:
    """The fields of a section dataclass that have a default, with it (nested sections as dicts)."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        sub = getattr(cls, "SUBSECTIONS", {}).get(f.name)
        if sub is not None:
            out[f.name] = _section_defaults(sub)
        elif f.default is not dataclasses.MISSING:
            out[f.name] = f.default
        elif f.default_factory is not dataclasses.MISSING:
            out[f.name] = f.default_factory()
    return out


#: Sections whose presence is itself a choice (``demos``: run stage 0), so no default config holds them.
SWITCHES = ("demos",)


def default_config() -> ml_collections.ConfigDict:
    """Every section's keys with the defaults their dataclasses declare (the one home of a
    default). A config file starts from this and sets what has no default and what it changes,
    through :func:`override`, so no value is written in two places."""
    sections = {**_REQUIRED, **{k: v for k, v in _OPTIONAL.items() if k not in SWITCHES}}
    return ml_collections.ConfigDict({name: _section_defaults(cls) for name, cls in sections.items()})


def override(config: ml_collections.ConfigDict, name: str, **values: Any) -> ml_collections.ConfigDict:
    """Sets ``config.<name>.<key> = value`` for each of ``values``; a value equal to the one it
    replaces (the dataclass default, or an earlier config's) is a :class:`ConfigError`: a config
    repeating a default would become a second home of it. A nested section's keys are given as a
    dict and set one by one under the same rule. Returns ``config``."""
    _override(config, name, values, "config")
    return config


def _override(config: Any, name: str, values: dict[str, Any], where: str) -> None:
    if name not in config or config[name] is None:
        config[name] = ml_collections.ConfigDict()
    node, path = config[name], f"{where}.{name}"
    for key, value in values.items():
        if isinstance(value, dict):
            _override(node, key, value, path)
            continue
        if key in node and node[key] == value and isinstance(node[key], bool) == isinstance(value, bool):
            raise ConfigError(f"{path}.{key} = {value!r} repeats the value it already has; a config "
                              "sets only what has no default or what it changes")
        node[key] = value


#: What the builders take: a run's ConfigDict (parsed on the way in) or its parsed RunSettings.
ConfigLike = Any


def exit_on_config_error(main: Any) -> Any:
    """``main`` for ``absl.app.run``: a refused config, or stage 0's endpoint failing, ends the job
    with its message (exit status 1), not a traceback."""
    from cocoda_jax.demos import DemoEndpointError

    def wrapped(argv):
        try:
            return main(argv)
        except ConfigError as e:
            raise SystemExit(f"config error: {e}") from None
        except DemoEndpointError as e:
            raise SystemExit(str(e)) from None
    return wrapped


def require(config: ml_collections.ConfigDict, *keys: str) -> None:
    missing = [k for k in keys if k not in config]
    if missing:
        raise ConfigError(f"config lacks {missing}")


__all__ = [
    "ConfigError", "ConfigLike", "default_config", "exit_on_config_error", "override", "require", "CheckpointSettings", "CoevolveSettings", "DemosSettings", "DistributedSettings", "DomainSettings", "GrpoSettings",
    "MeshSettings", "ModelSettings", "ReportSettings", "RodsSettings", "RunSettings", "SandboxSettings",
    "SftSettings", "TOP_LEVEL", "WarmSettings", "section",
]

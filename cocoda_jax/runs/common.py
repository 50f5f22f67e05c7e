"""What every launcher builds the same way: the domain's tasks, the tokenizer, the planner and its
learners on one mesh, typed config errors, and the run's checkpoint (params, optimizer, reference,
progress and payloads in one Orbax step).

A run directory holds::

    tokenizer/        the BPE trained on the domain's demonstrations (kept: a resume reuses it)
    checkpoints/      Orbax steps (checkpoint.py): the train state and JSON payloads
    metrics.jsonl, tb/  scalars per optimizer step (report.MetricsWriter, resume-exact)
"""

from __future__ import annotations

import copy
import dataclasses
import importlib
import json
import os
import re
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import ml_collections

from cocoda_jax import checkpoint as ckpt
from cocoda_jax.data import domain as D
from cocoda_jax.execution import Sandbox
from cocoda_jax.models.config import TOKENIZER_VOCAB_PRESETS
from cocoda_jax.errors import ConfigError
from cocoda_jax.models import create_model, get_preset, load_tokenizer, make_mesh, train_and_save
from cocoda_jax.report.coevolution import write_text_atomic
from cocoda_jax.rl import grpo as G
from cocoda_jax.rl import rewards as R
from cocoda_jax.rl.learner import Learner, LearnerConfig, TrainState
from cocoda_jax.rl.loop import Evaluation, RolloutConfig
from cocoda_jax.rl.prompts import PromptCards, RetrievalConfig
from cocoda_jax.rl.rollout import Tokenizer
from cocoda_jax.rl.update import OptimConfig
from cocoda_jax.runs import hosts
from cocoda_jax.runs.settings import RunSettings, section  # section: re-exported (the one section parser)

#: What the builders below take: a run's ConfigDict (parsed on the way in) or its parsed RunSettings.
ConfigLike = Any

#: Third-party domains, registered when their module is imported (on first use of their name).
THIRD_PARTY_DOMAINS = {"bfcl_multi_turn": "third_party.benchmarks.bfcl_domain",
                       "gsm8k": "third_party.benchmarks.word_problems", "math": "third_party.benchmarks.word_problems"}
#: The domains a config can name out of the box (more register themselves, see cocoda_jax.data.domain).
DOMAINS = (*D.BUILTIN_NAMES, *THIRD_PARTY_DOMAINS)


def local_workdir(workdir: str | os.PathLike) -> Path:
    """``workdir`` as a local path; a URL (``gs://``, ``s3://``) is a :class:`ConfigError`, raised before
    anything is written: the jobs write with local file operations, and ``Path`` would quietly turn
    ``gs://bucket/run`` into a local directory ``gs:/bucket/run``. (Use a mounted bucket path.)"""
    text = os.fspath(workdir)
    if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", text):
        raise ConfigError(f"--workdir {text!r} is a URL: remote work directories are not supported yet (the job "
                          "writes with local file operations); give a local or mounted path")
    return Path(text)


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


# ------------------------------------------------------------------------------------------------
# Domain and tokenizer
# ------------------------------------------------------------------------------------------------


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


def per_category(domain: Domain, tasks: Any, evaluation: Evaluation) -> dict[str, dict[str, float]] | None:
    """Accuracy per benchmark category of ``evaluation`` on ``tasks`` (None for a one-category domain)."""
    if domain.categories is None:
        return None
    outcomes = evaluation.outcomes()
    played = {tr.task_id: tr for tr in evaluation.trajectories}
    groups: dict[str, list[int]] = {}
    turn_shares: dict[str, list[float]] = {}
    for t in tasks:
        c = str(domain.categories(t))
        groups.setdefault(c, []).append(int(outcomes[str(t.id)]))
        if hasattr(t, "turns_passed"):  # multi-turn: the share of user turns passed before the first failure
            turn_shares.setdefault(c, []).append(t.turns_passed(played[str(t.id)].environment_calls) / t.n_turns)
    out = {c: {"n": len(v), "accuracy": sum(v) / len(v)} for c, v in sorted(groups.items())}
    for c, v in turn_shares.items():
        out[c]["turns_passed_share"] = sum(v) / len(v)
    return out


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


def tokenizer_for(workdir: Path, texts: Any, vocab_size: int, hf_checkpoint: str = "") -> Tokenizer:
    """The run's tokenizer: the checkpoint's own when the planner is a local HF model; else the
    BPE of ``workdir/tokenizer`` when present (a resumed run must not retrain it), else trained on
    ``texts`` and saved there first (by the primary process; the others wait and read it)."""
    if hf_checkpoint:
        return Tokenizer(load_tokenizer(hf_checkpoint))
    path = Path(workdir) / "tokenizer"
    if hosts.is_primary() and not path.is_dir():
        tmp = path.with_name("tokenizer.tmp")
        train_and_save(list(texts), tmp, vocab_size)
        os.replace(tmp, path)
    hosts.sync("tokenizer")
    return Tokenizer(load_tokenizer(path))


# ------------------------------------------------------------------------------------------------
# Planner, mesh, learners
# ------------------------------------------------------------------------------------------------


def mesh_of(config: ConfigLike) -> jax.sharding.Mesh | None:
    """The run's one mesh (data, fsdp, tensor); ``data = -1`` takes the devices the other axes
    leave. ``None`` on a single device without an explicit mesh (no sharding machinery at all)."""
    m = RunSettings.of(config).mesh
    fsdp, tensor = m.fsdp, m.tensor
    data = m.data if m.data > 0 else jax.device_count() // (fsdp * tensor)
    if min(data, fsdp, tensor) < 1 or data * fsdp * tensor > jax.device_count():
        raise ConfigError(f"config.mesh (data={m.data}, fsdp={fsdp}, tensor={tensor}) needs more than the "
                          f"{jax.device_count()} devices here")
    if data * fsdp * tensor == 1 and jax.device_count() == 1:
        return None
    try:
        return make_mesh(data, fsdp, tensor)
    except ValueError as e:
        raise ConfigError(f"config.mesh: {e}") from e


def maybe_initialize_distributed(config: ConfigLike) -> None:
    """Multi-host start: ``jax.distributed.initialize`` with the config's coordinator, process count
    and id (all from flags on a pod); a no-op unless ``config.distributed.initialize``, and once per
    process (``--with_baseline``/``--compare_rods`` run the job several times in one process, and a
    second ``initialize`` raises)."""
    d = RunSettings.of(config).distributed
    if d is None or not d.initialize or jax.distributed.is_initialized():
        return
    kwargs = {}
    if d.coordinator_address:
        kwargs = dict(coordinator_address=d.coordinator_address, num_processes=d.num_processes,
                      process_id=d.process_id)
    jax.distributed.initialize(**kwargs)


def build_planner(config: ConfigLike, vocab_size: int, mesh: Any):
    """The planner: a local HF checkpoint (``model.hf_checkpoint``, loaded straight into its mesh
    shardings) or a preset initialised from the seed (``tiny`` takes the tokenizer's vocabulary)."""
    settings = RunSettings.of(config)
    model = settings.model
    if model.hf_checkpoint:
        from cocoda_jax.models import load_hf_checkpoint
        path = Path(model.hf_checkpoint)
        if not path.is_dir():
            raise ConfigError(f"config.model.hf_checkpoint {str(path)!r} is not a local directory")
        return load_hf_checkpoint(path, mesh=mesh)
    try:
        cfg = get_preset(model.preset)
    except Exception as e:
        raise ConfigError(f"config.model.preset: {e}") from e
    if model.preset in TOKENIZER_VOCAB_PRESETS:
        cfg = dataclasses.replace(cfg, vocab_size=vocab_size)
    elif cfg.vocab_size < vocab_size:
        raise ConfigError(f"the tokenizer has {vocab_size} ids, more than the model's {cfg.vocab_size}")
    return create_model(cfg, seed=settings.seed, mesh=mesh)


def sft_learner_config(config: ConfigLike) -> LearnerConfig:
    s = RunSettings.of(config).sft
    optim = OptimConfig(learning_rate=s.learning_rate, schedule="cosine", warmup_steps=min(s.warmup_steps, s.steps),
                        total_steps=max(s.steps, 1), end_fraction=0.1, clip_norm=1.0)
    model = RunSettings.of(config).model
    return LearnerConfig(optim=optim, num_micro_batches=s.micro_batches, remat=model.remat,
                         logits_chunk=model.logits_chunk, scan_layers=model.scan_layers)


def sft_learner(model: Any, config: ConfigLike, mesh: Any) -> Learner:
    return Learner(model, sft_learner_config(config), mesh)


def refresh_learner(model: Any, config: ConfigLike, mesh: Any) -> Learner:
    """The short SFT refresh of a co-evolution round: a constant, small learning rate (a fresh Adam
    on a few hundred demonstrations at the SFT peak rate would undo the GRPO policy)."""
    settings = RunSettings.of(config)
    optim = OptimConfig(learning_rate=settings.required("coevolve").refresh_learning_rate, schedule="constant",
                        clip_norm=1.0)
    return Learner(model, LearnerConfig(optim=optim, num_micro_batches=settings.sft.micro_batches,
                                        remat=settings.model.remat, logits_chunk=settings.model.logits_chunk,
                                        scan_layers=settings.model.scan_layers), mesh)


def grpo_learner_config(config: ConfigLike) -> LearnerConfig:
    settings = RunSettings.of(config)
    g = settings.grpo
    total = max(g.iterations * g.ppo_epochs, 1)
    optim = OptimConfig(learning_rate=g.learning_rate, schedule=g.schedule, warmup_steps=min(g.warmup_steps, total),
                        total_steps=total, end_fraction=0.1, clip_norm=1.0)
    try:
        grpo = G.GRPOConfig(epsilon=g.epsilon, epsilon_high=g.epsilon_high, beta=g.beta, aggregation=g.aggregation,
                            normalize_std=g.normalize_std, max_tokens=settings.rollout.max_len,
                            advantage=g.advantage, loss=g.loss)
    except ValueError as e:
        raise ConfigError(f"config.grpo: {e}") from e
    return LearnerConfig(optim=optim, grpo=grpo, num_micro_batches=g.micro_batches, remat=settings.model.remat,
                         logits_chunk=settings.model.logits_chunk, scan_layers=settings.model.scan_layers)


def grpo_learner(model: Any, config: ConfigLike, mesh: Any) -> Learner:
    return Learner(model, grpo_learner_config(config), mesh)


def _one_section(config: ConfigLike, name: str, cls: type) -> Any:
    """The section ``name`` alone: a RunSettings' own, or parsed from the ConfigDict."""
    return getattr(config, name) if isinstance(config, RunSettings) else section(config, name, cls)


def rollout_config(config: ConfigLike) -> RolloutConfig:
    return _one_section(config, "rollout", RolloutConfig)


def retrieval_config(config: ConfigLike) -> RetrievalConfig:
    return _one_section(config, "retrieval", RetrievalConfig)


def prompt_cards(snapshot: Any, rcfg: RetrievalConfig, programs: Any, questions: dict[str, str]) -> PromptCards:
    """The run's candidate sets over ``snapshot``: the cascade's L2 usage evidence comes from the
    stored ``(task id, program)`` demonstrations (training questions only)."""
    from cocoda_jax.retrieval.usage import UsageIndex
    usage = UsageIndex.from_programs(programs, questions) if rcfg.mode == "cascade" and rcfg.usage_weight > 0 else None
    return PromptCards(snapshot, rcfg, usage)


def retrieval_summary(cards: PromptCards, tasks: Any, evaluation: Evaluation, tokenizer: Tokenizer,
                      rc: RolloutConfig) -> dict[str, Any]:
    """report.json's ``retrieval`` section on ``tasks`` (the split ``evaluation`` played): the share
    whose gold tools are all in ``C_q(L)`` (the gold program's, or the same program refactored to
    call the library's composites), the mean share of gold tools found, prompt tokens per episode
    and the episodes whose prompt left no room for a step within ``max_len``. Tasks without a gold
    program (a benchmark's test questions) have no gold tools: they are left out of the recall
    (``None`` when no task has one)."""
    from cocoda_jax.coevolve.validate import gold_tool_sets
    found, share = [], []
    for t in (t for t in tasks if str(getattr(t, "program", "") or "").strip()):
        chosen = set(cards.tools(t))
        sets = gold_tool_sets(t, cards.snapshot)
        found.append(any(g <= chosen for g in sets))
        share.append(max(len(g & chosen) / max(len(g), 1) for g in sets))
    prompt_tokens = [len(tokenizer.encode(tr.prompt)) for tr in evaluation.trajectories]
    n = max(len(prompt_tokens), 1)
    return {"mode": cards.config.mode, "k": cards.config.k, "card_style": cards.config.card_style,
            "library_size": len(cards.snapshot), "tasks": len(found),
            "all_gold_found": sum(found) / len(found) if found else None,
            "gold_recall": sum(share) / len(share) if share else None,
            "prompt_tokens_per_episode": sum(prompt_tokens) / n,
            "overflow_episodes": sum(p + rc.max_new_tokens > rc.max_len for p in prompt_tokens)}


def reward_config(config: ConfigLike) -> R.RewardConfig:
    return _one_section(config, "reward", R.RewardConfig)


# ------------------------------------------------------------------------------------------------
# Checkpoints
# ------------------------------------------------------------------------------------------------


def frozen_copy(params: Any) -> Any:
    """A copy of ``params`` (same shardings) that outlives the donated train state: the KL reference."""
    return jax.tree.map(jnp.copy, params)


def train_tree(state: TrainState, ref_params: Any = None) -> dict[str, Any]:
    """The arrays a checkpoint holds: the learner's state and, with a KL term, the frozen reference."""
    tree = {"params": state.params, "opt_state": state.opt_state, "step": state.step}
    if ref_params is not None:
        tree["ref_params"] = ref_params
    return tree


def save_checkpoint(workdir: Path, step: int, state: TrainState, payloads: dict[str, Any], config: Any,
                    ref_params: Any = None, keep: int = 3) -> None:
    ckpt.save(Path(workdir) / "checkpoints", step, train_tree(state, ref_params), payloads,
              config.to_dict() if hasattr(config, "to_dict") else config, keep=keep)


def latest_checkpoint(workdir: Path) -> ckpt.Restored | None:
    """The newest checkpoint's payloads (no arrays read yet), or ``None`` for a fresh run."""
    directory = Path(workdir) / "checkpoints"
    if not directory.is_dir() or ckpt.latest_step(directory) is None:
        return None
    return ckpt.restore(directory)


def config_diff(saved: Any, current: Any, prefix: str = "") -> list[str]:
    """The keys whose values differ between two configs (dotted paths, ``saved -> current``)."""
    saved = ckpt.to_jsonable(saved, "config") if prefix == "" else saved
    current = ckpt.to_jsonable(current, "config") if prefix == "" else current
    if isinstance(saved, dict) and isinstance(current, dict):
        out = []
        for key in sorted(set(saved) | set(current)):
            out += config_diff(saved.get(key, "<absent>"), current.get(key, "<absent>"), f"{prefix}{key}.")
        return out
    return [] if saved == current else [f"{prefix[:-1]}: {saved!r} -> {current!r}"]


RUN_CONFIG = "config.json"
#: Sections that say how this process joins the run, not what the run is: each process of a
#: multi-host run has its own ``distributed.process_id``, and a restart may get another coordinator.
NOT_RUN_IDENTITY = ("distributed",)


#: Keys added to the configs after runs were saved without them, with the value that runs the code
#: exactly as before: a saved config that lacks one is the same run as a current one holding that value.
ADDED_KEYS = {"rollout.host_shards": 1}


def with_added_keys(saved: Any) -> Any:
    """A saved config (as JSON) with each of the :data:`ADDED_KEYS` it lacks set to its old
    behaviour's value (in a section it has); the rest as it was."""
    saved = copy.deepcopy(ckpt.to_jsonable(saved, "config"))
    for dotted, value in ADDED_KEYS.items():
        *path, key = dotted.split(".")
        node = saved
        for name in path:
            node = node.get(name) if isinstance(node, dict) else None
        if isinstance(node, dict):
            node.setdefault(key, value)
    return saved


def run_identity_changes(saved: Any, current: Any) -> list[str]:
    """:func:`config_diff` of a saved config (:func:`with_added_keys`) and the current one, without the
    :data:`NOT_RUN_IDENTITY` sections: what makes two configs two different runs."""
    return [c for c in config_diff(with_added_keys(saved), current)
            if c.split(".", 1)[0].split(":", 1)[0] not in NOT_RUN_IDENTITY]


def claim_workdir(workdir: Path, config: Any, latest: ckpt.Restored | None, allow_change: bool = False) -> int | None:
    """Marks ``workdir`` as this config's run and returns the metrics writer's ``resume_step``.

    A work directory belongs to one run: the config is compared with the one the run was saved
    with (the newest checkpoint's, else ``config.json``, which a run writes before anything else),
    and a difference is a ConfigError naming every changed key, unless ``allow_change`` (then this
    config claims the directory). The :data:`NOT_RUN_IDENTITY` sections are not compared (each process
    of a multi-host run has its own ``process_id``). Returns the checkpoint's step when resuming; ``-1`` when the same
    run died before its first checkpoint (its partial logs are dropped, it starts over); ``None``
    for a fresh directory."""
    path = Path(workdir) / RUN_CONFIG
    current = ckpt.to_jsonable(config.to_dict() if hasattr(config, "to_dict") else config, "config")
    claimed = path.exists()
    saved = latest.config if latest is not None else json.loads(path.read_text()) if claimed else None
    if saved is not None and not allow_change:
        changed = run_identity_changes(saved, current)
        if changed:
            raise ConfigError(f"{workdir} holds a run with another config; resuming it with this one would mix "
                              "two runs. Changed: " + "; ".join(changed) + ". Use a fresh --workdir, or pass "
                              "--allow_config_change to resume anyway")
    if (not claimed or allow_change) and hosts.is_primary():
        write_text_atomic(path, json.dumps(current, sort_keys=True, indent=2) + "\n")
    if latest is not None:
        return latest.step
    return -1 if claimed else None


def restore_state(workdir: Path, learner: Learner, step: int, with_ref: bool) -> tuple[TrainState, Any]:
    """The train state (and reference params) of checkpoint ``step``, restored into ``learner``'s
    own structure and shardings (so the jitted steps take it without recompiling). The target is
    the learner's abstract state: no fresh state is allocated only to be overwritten (at scale, a
    second copy of the params and Adam's moments)."""
    shapes = learner.abstract_state()
    target = ckpt.abstract_state(train_tree(shapes, shapes.params if with_ref else None))
    restored = ckpt.restore(Path(workdir) / "checkpoints", target, step, decoders={}).state
    state = TrainState(params=restored["params"], opt_state=restored["opt_state"], step=restored["step"])
    return state, restored.get("ref_params")


__all__ = [
    "ConfigError", "ConfigLike", "DOMAINS", "Domain", "RUN_CONFIG", "RunSettings", "build_bfcl_domain", "build_domain",
    "build_planner", "claim_workdir", "config_diff", "domain_spec", "exit_on_config_error",
    "frozen_copy", "grpo_learner", "latest_checkpoint", "maybe_initialize_distributed", "mesh_of", "per_category",
    "prompt_cards", "refresh_learner", "require", "restore_state", "retrieval_config", "retrieval_summary",
    "reward_config", "rollout_config", "run_identity_changes", "sandbox_for", "save_checkpoint", "section",
    "sft_learner", "tokenizer_for", "train_tree",
]

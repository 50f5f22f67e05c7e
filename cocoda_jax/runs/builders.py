"""What every launcher builds the same way from a config: the tokenizer, the planner and its
learners on one mesh, the sections the rollouts read, and the prompt cards over a library."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

import jax

from cocoda_jax import storage
from cocoda_jax.errors import ConfigError
from cocoda_jax.models import create_model, get_preset, load_tokenizer, make_mesh, train_and_save
from cocoda_jax.models.config import TOKENIZER_VOCAB_PRESETS
from cocoda_jax.rl import grpo as G
from cocoda_jax.rl import rewards as R
from cocoda_jax.rl.learner import Learner, LearnerConfig
from cocoda_jax.rl.loop import Evaluation, RolloutConfig
from cocoda_jax.rl.prompts import PromptCards, RetrievalConfig
from cocoda_jax.rl.rollout import Tokenizer
from cocoda_jax.rl.update import OptimConfig
from cocoda_jax.runs import hosts
from cocoda_jax.runs.settings import ConfigLike, RunSettings, section


def tokenizer_for(workdir: str | os.PathLike, texts: Any, vocab_size: int, hf_checkpoint: str = "") -> Tokenizer:
    """The run's tokenizer: the checkpoint's own when the planner is a local HF model; else the
    BPE of ``workdir/tokenizer`` when present (a resumed run must not retrain it), else trained on
    ``texts`` and saved there first (by the primary process; the others wait and read it)."""
    if hf_checkpoint:
        return Tokenizer(load_tokenizer(hf_checkpoint))
    path = storage.path_of(workdir) / "tokenizer"
    if hosts.is_primary() and not storage.published(path):
        with storage.staged_dir(path) as tmp:  # the tokenizers library saves and loads local files
            train_and_save(list(texts), tmp, vocab_size)
    hosts.sync("tokenizer")
    with storage.local_copy(path) as local:
        return Tokenizer(load_tokenizer(local))


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
                            advantage=g.advantage, loss=g.loss, temperature=settings.rollout.temperature)
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
    out = {"mode": cards.config.mode, "k": cards.config.k, "card_style": cards.config.card_style,
           "library_size": len(cards.snapshot), "tasks": len(found),
           "all_gold_found": sum(found) / len(found) if found else None,
           "gold_recall": sum(share) / len(share) if share else None,
           "prompt_tokens_per_episode": sum(prompt_tokens) / n,
           "overflow_episodes": sum(p + rc.max_new_tokens > rc.max_len for p in prompt_tokens)}
    if cards.config.cards != "question":  # the cards a search brings are context too: count them
        out.update(search_summary(evaluation.trajectories, tokenizer.encode), cards=cards.config.cards)
    return out


def search_summary(trajectories: Any, encode: Any) -> dict[str, float]:
    """Searches per episode, the tokens of their actions and cards per episode (each segment
    encoded on its own, as a rollout's sequence grows), and the share of episodes that searched."""
    n = max(len(trajectories), 1)
    tokens = sum(len(encode(s.text + "\n")) + len(encode(s.observation + "\n"))
                 for tr in trajectories for s in tr.steps if s.is_search)
    return {"searches_per_episode": sum(tr.searches for tr in trajectories) / n,
            "search_tokens_per_episode": tokens / n,
            "episodes_with_search": sum(tr.searches > 0 for tr in trajectories) / n}


def reward_config(config: ConfigLike) -> R.RewardConfig:
    return _one_section(config, "reward", R.RewardConfig)

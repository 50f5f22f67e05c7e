"""Where a run lives: its work directory, claimed by one config, and its checkpoints.

A run directory holds::

    config.json       the config that claimed the directory (a resume under another one is refused)
    tokenizer/        the BPE trained on the domain's demonstrations (kept: a resume reuses it)
    checkpoints/      Orbax steps (checkpoint.py): the train state and JSON payloads
    metrics.jsonl, tb/  scalars per optimizer step (report.MetricsWriter, resume-exact)

The directory is a local path or a bucket URL (``gs://bucket/run``): :func:`run_path`, and every file
goes through :mod:`cocoda_jax.storage` (docs/resume.md, "Remote work directories").
"""

from __future__ import annotations

import copy
import json
import os
from typing import Any

import jax
import jax.numpy as jnp

from etils import epath

from cocoda_jax import checkpoint as ckpt
from cocoda_jax import storage
from cocoda_jax.errors import ConfigError
from cocoda_jax.rl.learner import Learner, TrainState
from cocoda_jax.runs import hosts, numerics
from cocoda_jax.runs.settings import default_config


def run_path(workdir: str | os.PathLike) -> epath.Path:
    """``workdir`` as an ``epath.Path``: a local path or a URL ``epath`` writes to (``gs://``,
    ``s3://``, ``az://``); another scheme is a :class:`ConfigError`, raised before anything is
    written (``pathlib.Path`` would quietly turn ``gs://bucket/run`` into a local ``gs:/bucket/run``)."""
    try:
        return storage.path_of(workdir)
    except ConfigError as e:
        raise ConfigError(f"--workdir: {e}") from None


def local_workdir(workdir: str | os.PathLike) -> epath.Path:
    """:func:`run_path` for a job that only writes locally (the study, stage 0's collection): a URL
    is a :class:`ConfigError`, raised before anything is written."""
    if storage.is_remote(workdir):
        raise ConfigError(f"--workdir {os.fspath(workdir)!r} is a URL: this job writes local files only; "
                          "give a local or mounted path")
    return storage.path_of(workdir)


def frozen_copy(params: Any) -> Any:
    """A copy of ``params`` (same shardings) that outlives the donated train state: the KL reference."""
    return jax.tree.map(jnp.copy, params)


def train_tree(state: TrainState, ref_params: Any = None) -> dict[str, Any]:
    """The arrays a checkpoint holds: the learner's state and, with a KL term, the frozen reference."""
    tree = {"params": state.params, "opt_state": state.opt_state, "step": state.step}
    if ref_params is not None:
        tree["ref_params"] = ref_params
    return tree


def save_checkpoint(workdir: epath.Path, step: int, state: TrainState, payloads: dict[str, Any], config: Any,
                    ref_params: Any = None, keep: int = 3) -> None:
    ckpt.save(storage.path_of(workdir) / "checkpoints", step, train_tree(state, ref_params), payloads,
              config.to_dict() if hasattr(config, "to_dict") else config, keep=keep)


def latest_checkpoint(workdir: epath.Path) -> ckpt.Restored | None:
    """The newest checkpoint's payloads (no arrays read yet), or ``None`` for a fresh run."""
    directory = storage.path_of(workdir) / "checkpoints"
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
#: The numerics the run started under (:func:`cocoda_jax.runs.numerics.status`), checked on resume.
RUN_NUMERICS = "numerics.json"
#: Sections that say how this process joins the run, not what the run is: each process of a
#: multi-host run has its own ``distributed.process_id``, and a restart may get another coordinator.
NOT_RUN_IDENTITY = ("distributed",)


#: Keys added to the configs after runs were saved without them, with the value that runs the code
#: exactly as before: a saved config that lacks one is the same run as a current one holding that value.
ADDED_KEYS = {"rollout.host_shards": 1}


def with_added_keys(saved: Any) -> Any:
    """A saved config (as JSON) as the current code reads it: each of the :data:`ADDED_KEYS` it lacks
    set to its old behaviour's value, then :func:`with_declared_defaults`; the rest as it was."""
    saved = copy.deepcopy(ckpt.to_jsonable(saved, "config"))
    for dotted, value in ADDED_KEYS.items():
        *path, key = dotted.split(".")
        node = saved
        for name in path:
            node = node.get(name) if isinstance(node, dict) else None
        if isinstance(node, dict):
            node.setdefault(key, value)
    return with_declared_defaults(saved)


def with_declared_defaults(config: Any) -> Any:
    """A config (as JSON) with every key it lacks, in a section it has, set to the section's declared
    default: what parsing it gives, so a config that writes a default and one that leaves it out
    compare equal."""
    config = copy.deepcopy(ckpt.to_jsonable(config, "config"))
    if isinstance(config, dict):
        defaults = ckpt.to_jsonable(default_config().to_dict(), "config")
        for name, section in config.items():
            if isinstance(section, dict) and isinstance(defaults.get(name), dict):
                _fill(section, defaults[name])
    return config


def _fill(node: dict, defaults: dict) -> None:
    for key, value in defaults.items():
        if key not in node:
            node[key] = copy.deepcopy(value)
        elif isinstance(node[key], dict) and isinstance(value, dict):
            _fill(node[key], value)


def run_identity_changes(saved: Any, current: Any) -> list[str]:
    """:func:`config_diff` of a saved config (:func:`with_added_keys`) and the current one, without the
    :data:`NOT_RUN_IDENTITY` sections: what makes two configs two different runs."""
    return [c for c in config_diff(with_added_keys(saved), with_declared_defaults(current))
            if c.split(".", 1)[0].split(":", 1)[0] not in NOT_RUN_IDENTITY]


def claim_workdir(workdir: epath.Path, config: Any, latest: ckpt.Restored | None, allow_change: bool = False) -> int | None:
    """Marks ``workdir`` as this config's run and returns the metrics writer's ``resume_step``.

    A work directory belongs to one run: the config is compared with the one the run was saved
    with (the newest checkpoint's, else ``config.json``, which a run writes before anything else),
    and a difference is a ConfigError naming every changed key, unless ``allow_change`` (then this
    config claims the directory). So are the numerics it started under (:data:`RUN_NUMERICS`: the
    portable setting and the jax/jaxlib/numpy versions). The :data:`NOT_RUN_IDENTITY` sections are not compared (each process
    of a multi-host run has its own ``process_id``). Returns the checkpoint's step when resuming; ``-1`` when the same
    run died before its first checkpoint (its partial logs are dropped, it starts over); ``None``
    for a fresh directory."""
    path = storage.path_of(workdir) / RUN_CONFIG
    current = ckpt.to_jsonable(config.to_dict() if hasattr(config, "to_dict") else config, "config")
    claimed = path.exists()
    saved = latest.config if latest is not None else json.loads(path.read_text()) if claimed else None
    if saved is not None and not allow_change:
        changed = run_identity_changes(saved, current)
        if changed:
            raise ConfigError(f"{workdir} holds a run with another config; resuming it with this one would mix "
                              "two runs. Changed: " + "; ".join(changed) + ". Use a fresh --workdir, or pass "
                              "--allow_config_change to resume anyway")
    numerics_path = storage.path_of(workdir) / RUN_NUMERICS
    now = numerics.status()
    if saved is not None and not allow_change and numerics_path.exists():
        changed = numerics.resume_differences(json.loads(numerics_path.read_text()), now)
        if changed:
            raise ConfigError(f"{workdir} holds a run started under other numerics; resuming it here would not "
                              "continue its float path (docs/scale.md, replay). Changed: " + "; ".join(changed)
                              + ". Run under the same setting and versions, or pass --allow_config_change")
    if (not claimed or allow_change) and hosts.is_primary():
        storage.write_atomic(path, json.dumps(current, sort_keys=True, indent=2) + "\n")
        storage.write_atomic(numerics_path, json.dumps(now, sort_keys=True, indent=2) + "\n")
    if latest is not None:
        return latest.step
    return -1 if claimed else None


def restore_state(workdir: epath.Path, learner: Learner, step: int, with_ref: bool) -> tuple[TrainState, Any]:
    """The train state (and reference params) of checkpoint ``step``, restored into ``learner``'s
    own structure and shardings (so the jitted steps take it without recompiling). The target is
    the learner's abstract state: no fresh state is allocated only to be overwritten (at scale, a
    second copy of the params and Adam's moments)."""
    shapes = learner.abstract_state()
    target = ckpt.abstract_state(train_tree(shapes, shapes.params if with_ref else None))
    restored = ckpt.restore(storage.path_of(workdir) / "checkpoints", target, step, decoders={}).state
    state = TrainState(params=restored["params"], opt_state=restored["opt_state"], step=restored["step"])
    return state, restored.get("ref_params")

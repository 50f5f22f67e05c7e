"""What the server serves: a planner and its tokenizer, from an HF directory or a run's workdir.

Both paths go through the project's own loaders, nothing is re-read by hand:

* an HF directory (``config.json`` + safetensors + tokenizer files): ``load_hf_checkpoint`` and
  ``load_tokenizer``;
* a run's workdir (``checkpoints/`` + ``tokenizer/``, as ``launch.coevolve`` / ``launch.train``
  write it): the run's saved config rebuilds the planner (``runs.builders.build_planner``, so a
  ``tiny`` planner takes the run tokenizer's vocabulary and an HF-based run its checkpoint's
  shape), ``runs.builders.tokenizer_for`` gives the run's tokenizer, and ``checkpoint.restore`` with
  ``partial=True`` reads the newest step's ``params`` only (the optimizer state and the KL
  reference stay on disk: serving needs neither, and Adam's moments are twice the weights).

Nothing is written into the directory (a workdir without ``tokenizer/`` is refused rather than
given a freshly trained one). The model is placed on the default device (no mesh).
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cocoda_jax.errors import ConfigError
from cocoda_jax.serving import chat
from cocoda_jax.serving.errors import ModelLoadError


class TextCodec:
    """The HF tokenizer behind one lock: handler threads encode while the engine thread decodes,
    and a fast tokenizer is not safe to call from several threads at once."""

    def __init__(self, hf_tokenizer: Any):
        self.hf = hf_tokenizer
        self._lock = threading.Lock()

    def encode(self, text: str) -> list[int]:
        """Ids of ``text``; special tokens written in it (a chat template's) map to their ids, and
        no BOS/EOS is added (a template writes its own)."""
        with self._lock:
            return [int(i) for i in self.hf.encode(text, add_special_tokens=False)]

    def decode(self, ids: Sequence[int]) -> str:
        with self._lock:
            return self.hf.decode(list(ids), skip_special_tokens=False, clean_up_tokenization_spaces=False)

    def render(self, messages: Sequence[chat.ChatMessage], chat_format: str) -> str:
        with self._lock:
            return chat.render(messages, chat_format, self.hf)

    def __len__(self) -> int:
        return len(self.hf)


@dataclasses.dataclass(frozen=True)
class ServedModel:
    """A loaded planner ready for a :class:`~cocoda_jax.models.Sampler`."""

    model_id: str                   # the one id of ``GET /v1/models``
    model: Any                      # models.Transformer
    codec: TextCodec
    chat_format: str                # one of chat.CHAT_FORMATS
    source: str                     # "hf" | "run"
    path: str
    stop_token_ids: tuple[int, ...]  # ids that end a completion ("stop"): the tokenizer's / config's EOS
    pad_id: int
    step: int | None = None         # the run's checkpoint step (source "run")


def detect_source(path: str | Path) -> str:
    """``"run"`` for a workdir (a ``checkpoints/`` folder), ``"hf"`` for a model directory
    (``config.json`` and safetensors weights), else :class:`ModelLoadError`. A workdir also has a
    ``config.json`` (the run's config), so it is recognised first."""
    path = Path(path)
    if not path.is_dir():
        raise ModelLoadError(f"{path}: no such directory")
    if (path / "checkpoints").is_dir():
        return "run"
    from cocoda_jax.models.hf_checkpoint import CONFIG_NAME, INDEX_NAME, SINGLE_NAME
    if (path / CONFIG_NAME).is_file() and ((path / SINGLE_NAME).is_file() or (path / INDEX_NAME).is_file()):
        return "hf"
    raise ModelLoadError(f"{path}: neither a run's workdir (checkpoints/ + tokenizer/) nor an HF model directory "
                         f"({CONFIG_NAME} + {SINGLE_NAME} or {INDEX_NAME}, and the tokenizer files)")


def load_served_model(path: str | Path, *, chat_format: str = "auto", model_id: str | None = None) -> ServedModel:
    """The planner and tokenizer of ``path`` (see the module doc); ``model_id`` defaults to the
    directory's name, ``chat_format`` to the one :func:`chat.choose_format` picks."""
    path = Path(path)
    source = detect_source(path)
    model, hf_tokenizer, step = _load_run(path) if source == "run" else _load_hf(path)
    if len(hf_tokenizer) > model.cfg.vocab_size:
        raise ModelLoadError(f"{path}: the tokenizer has {len(hf_tokenizer)} ids, more than the model's "
                             f"{model.cfg.vocab_size}")
    try:
        fmt = chat.choose_format(chat_format, from_run=source == "run", hf_tokenizer=hf_tokenizer)
    except ValueError as e:
        raise ModelLoadError(f"{path}: {e}") from None
    stops = {getattr(hf_tokenizer, "eos_token_id", None), model.cfg.eos_token_id}
    pad = getattr(hf_tokenizer, "pad_token_id", None)
    return ServedModel(model_id=model_id or path.resolve().name, model=model, codec=TextCodec(hf_tokenizer),
                       chat_format=fmt, source=source, path=str(path),
                       stop_token_ids=tuple(sorted(int(s) for s in stops if s is not None)),
                       pad_id=int(pad) if pad is not None else 0, step=step)


def _load_hf(path: Path):
    from cocoda_jax.models import HFCheckpointError, TokenizerError, load_hf_checkpoint, load_tokenizer
    try:
        model = load_hf_checkpoint(path)
    except (HFCheckpointError, ConfigError) as e:
        raise ModelLoadError(f"{path}: {e}") from e
    try:
        tokenizer = load_tokenizer(path)
    except (TokenizerError, OSError, ValueError) as e:
        raise ModelLoadError(f"{path}: no usable tokenizer next to the weights: {e}") from e
    return model, tokenizer, None


def _load_run(path: Path):
    from flax import nnx

    from cocoda_jax import checkpoint as ckpt
    from cocoda_jax.runs import builders
    from cocoda_jax.runs.settings import RunSettings

    directory = path / "checkpoints"
    try:
        head = ckpt.restore(directory, decoders={})  # config and payloads only
        settings = RunSettings.parse(head.config)
    except (ckpt.CheckpointError, ConfigError) as e:
        raise ModelLoadError(f"{path}: {e}") from e
    if not settings.model.hf_checkpoint and not (path / "tokenizer").is_dir():
        raise ModelLoadError(f"{path}: the run has no tokenizer/ folder (serving never trains one)")
    tokenizer = builders.tokenizer_for(path, (), settings.model.vocab_size, settings.model.hf_checkpoint).hf
    try:
        graphdef, params = nnx.split(_abstract_planner(settings, len(tokenizer)))
    except ConfigError as e:
        raise ModelLoadError(f"{path}: {e}") from e
    target = ckpt.abstract_state({"params": params})
    try:
        restored = ckpt.restore(directory, target, head.step, decoders={}, partial=True)
    except ckpt.CheckpointError as e:
        raise ModelLoadError(f"{path}: {e}") from e
    return nnx.merge(graphdef, restored.state["params"]), tokenizer, head.step


def _abstract_planner(settings, vocab_size: int):
    """The run's planner as shapes only, to restore into: ``build_planner`` traced by
    ``nnx.eval_shape`` (a preset's random init is never run); for an HF-based run the checkpoint's
    config (``build_planner`` would read every weight, only for the restore to replace them)."""
    from flax import nnx

    from cocoda_jax.models.hf_checkpoint import load_config
    from cocoda_jax.models.transformer import abstract_model
    from cocoda_jax.runs import builders

    if settings.model.hf_checkpoint:
        path = Path(settings.model.hf_checkpoint)
        if not path.is_dir():
            raise ConfigError(f"config.model.hf_checkpoint {str(path)!r} is not a local directory")
        return abstract_model(load_config(path))
    return nnx.eval_shape(lambda: builders.build_planner(settings, vocab_size, None))


__all__ = ["ServedModel", "TextCodec", "detect_source", "load_served_model"]

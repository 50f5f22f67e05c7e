"""Serving the planner over an OpenAI-compatible HTTP API (``launch/serve.py``; docs/serve.md).

``loading`` (an HF directory or a run's workdir -> :class:`ServedModel`), ``chat`` (messages -> the
prompt text), ``engine`` (concurrent requests batched into ``Sampler.generate`` calls),
``openai_server`` (the HTTP endpoints), ``errors`` (typed, each one OpenAI error object).
"""

from cocoda_jax.serving.chat import CHAT_FORMATS, ChatMessage, choose_format, parse_messages, render
from cocoda_jax.serving.engine import BatchingEngine, Choice, EngineStats, GenerationRequest
from cocoda_jax.serving.errors import (EngineStoppedError, GenerationFailedError, ModelLoadError, ModelNotFoundError,
                                       PromptTooLongError, RequestError, ServingError)
from cocoda_jax.serving.loading import ServedModel, TextCodec, detect_source, load_served_model
from cocoda_jax.serving.openai_server import HOST, OpenAIServer, default_cache_size

__all__ = [
    "BatchingEngine", "CHAT_FORMATS", "ChatMessage", "Choice", "EngineStats", "EngineStoppedError",
    "GenerationFailedError", "GenerationRequest", "HOST", "ModelLoadError", "ModelNotFoundError", "OpenAIServer",
    "PromptTooLongError", "RequestError", "ServedModel", "ServingError", "TextCodec", "choose_format",
    "default_cache_size", "detect_source", "load_served_model", "parse_messages", "render",
]

"""The serving errors, typed so each maps to one HTTP status and one OpenAI error object.

A bad request never stops the server: the handler turns a :class:`RequestError` into
``{"error": {"message", "type", "param", "code"}}`` with its ``status`` and keeps serving.
"""

from __future__ import annotations

from typing import Any

from cocoda_jax.errors import CocodaError


class ServingError(CocodaError):
    """Base of every error of :mod:`cocoda_jax.serving`."""


class ModelLoadError(ServingError, ValueError):
    """The directory handed to the server is neither an HF model directory nor a run's workdir,
    or lacks a part (weights, tokenizer) the server needs."""


class RequestError(ServingError, ValueError):
    """A request the server refuses; ``status``/``type``/``param``/``code`` are what the client
    sees (the OpenAI error object), so the official client raises its typed error for it."""

    status = 400
    type = "invalid_request_error"

    def __init__(self, message: str, *, param: str | None = None, code: str | None = None):
        super().__init__(message)
        self.message = message
        self.param = param
        self.code = code

    def to_openai(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}


class ModelNotFoundError(RequestError):
    """The request names a model this server does not serve (404, as OpenAI answers)."""

    status = 404

    def __init__(self, message: str, *, param: str | None = "model"):
        super().__init__(message, param=param, code="model_not_found")


class UnknownRouteError(RequestError):
    """No endpoint at this path (404)."""

    status = 404

    def __init__(self, message: str):
        super().__init__(message, code="unknown_url")


class MethodNotAllowedError(RequestError):
    """The path exists but not for this HTTP method (405)."""

    status = 405

    def __init__(self, message: str):
        super().__init__(message, code="method_not_allowed")


class PromptTooLongError(RequestError):
    """The prompt (padded to the sampler's bucket) plus ``max_tokens`` does not fit the KV cache."""

    def __init__(self, message: str, *, param: str | None = "messages"):
        super().__init__(message, param=param, code="context_length_exceeded")


class EngineStoppedError(ServingError):
    """The batching engine is shut down (or shutting down) and takes no new work (503)."""


class GenerationFailedError(ServingError):
    """The sampler raised on a batch; every request of that batch gets this (500)."""


__all__ = ["EngineStoppedError", "GenerationFailedError", "MethodNotAllowedError", "ModelLoadError",
           "ModelNotFoundError", "PromptTooLongError", "RequestError", "ServingError", "UnknownRouteError"]

"""A minimal client for an OpenAI-compatible ``/v1/chat/completions`` endpoint (stdlib only).

Why stdlib: the teacher is optional, so it must not add a dependency; one POST with JSON in and
JSON out is all the abstractor needs. Transient failures (timeouts, refused connections, HTTP 429
and 5xx) are retried with exponential backoff; anything else fails at once with a typed error that
names the URL and what went wrong. The API key is read from the environment variable named in the
config at call time, so it never sits in a config file or a checkpoint.
"""

from __future__ import annotations

import dataclasses
import http.client
import json
import os
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from cocoda_jax.errors import CocodaError

RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})


class TeacherError(CocodaError):
    """Base of every error the teacher client raises on purpose."""


class TeacherHTTPError(TeacherError):
    """The endpoint answered with an HTTP error status (``status``; ``body`` is its first 500 chars)."""

    def __init__(self, url: str, status: int, body: str, attempts: int):
        self.url, self.status, self.body, self.attempts = url, status, body, attempts
        super().__init__(f"{url}: HTTP {status} after {attempts} attempt(s): {body[:200]}")


class TeacherTimeout(TeacherError):
    """No complete answer within ``timeout_s`` on every attempt."""

    def __init__(self, url: str, timeout_s: float, attempts: int):
        self.url, self.timeout_s, self.attempts = url, timeout_s, attempts
        super().__init__(f"{url}: no answer within {timeout_s:g} s after {attempts} attempt(s)")


class TeacherConnectionError(TeacherError):
    """The endpoint could not be reached (refused, unknown host, reset) on every attempt."""

    def __init__(self, url: str, reason: str, attempts: int):
        self.url, self.reason, self.attempts = url, reason, attempts
        super().__init__(f"{url}: cannot connect after {attempts} attempt(s): {reason}")


class TeacherResponseError(TeacherError):
    """The endpoint answered 200 but not with a chat completion (``detail`` says what is missing)."""

    def __init__(self, url: str, detail: str):
        self.url, self.detail = url, detail
        super().__init__(f"{url}: not a chat completion: {detail}")


@dataclasses.dataclass(frozen=True)
class TeacherEndpointConfig:
    """Where the teacher lives and how patiently to ask it (validated on construction).

    ``api_key_env`` names the environment variable holding the key; when it is ``None`` or unset no
    ``Authorization`` header is sent (local servers such as vLLM need none). The wait before retry
    ``k`` (0-based) is ``min(backoff_s * 2**k, backoff_max_s)``.
    """

    base_url: str = "http://127.0.0.1:8000"
    model: str = "teacher"
    api_key_env: str | None = "OPENAI_API_KEY"
    timeout_s: float = 120.0
    max_retries: int = 3
    backoff_s: float = 1.0
    backoff_max_s: float = 30.0
    temperature: float = 0.0
    max_tokens: int = 2048
    use_env_proxy: bool = False   # False: connect directly, ignoring http(s)_proxy variables

    def __post_init__(self) -> None:
        parts = urllib.parse.urlsplit(self.base_url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(f"teacher base_url must be an http(s) URL with a host, got {self.base_url!r}")
        if not self.model:
            raise ValueError("teacher model must be a non-empty string")
        if self.timeout_s <= 0 or self.max_retries < 0 or self.backoff_s < 0 or self.backoff_max_s < 0:
            raise ValueError(f"invalid teacher endpoint config: {self}")
        if self.max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {self.max_tokens}")

    @property
    def url(self) -> str:
        """The completions URL; a base that already ends in ``/v1`` is not given a second one."""
        base = self.base_url.rstrip("/")
        return base + ("/chat/completions" if base.endswith("/v1") else "/v1/chat/completions")

    def backoff(self, retry: int) -> float:
        return min(self.backoff_s * (2 ** retry), self.backoff_max_s)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Redirects are not followed: the request goes only to the configured host (a 3xx is an error)."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):  # noqa: D102
        return None


class ChatClient:
    """``complete(messages) -> str``: the first choice's message content (see the module docstring).

    ``sleep`` is injectable so tests can check the backoff without waiting for it.
    """

    def __init__(self, config: TeacherEndpointConfig, *, sleep: Callable[[float], None] = time.sleep):
        self.config = config
        self._sleep = sleep
        handlers: list[Any] = [_NoRedirect()]
        if not config.use_env_proxy:
            handlers.append(urllib.request.ProxyHandler({}))
        self._opener = urllib.request.build_opener(*handlers)

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        key = os.environ.get(self.config.api_key_env) if self.config.api_key_env else None
        if key:
            headers["Authorization"] = f"Bearer {key}"
        return headers

    def request_body(self, messages: Sequence[Mapping[str, str]],
                     extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The JSON body; ``extra`` adds fields (``seed``, ``n``) but cannot replace the config's."""
        for i, m in enumerate(messages):
            if not (isinstance(m, Mapping) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)):
                raise ValueError(f"message {i} must be a mapping with str 'role' and 'content', got {m!r}")
        body = {"model": self.config.model, "messages": [dict(m) for m in messages],
                "temperature": self.config.temperature, "max_tokens": self.config.max_tokens}
        clash = sorted(set(extra or {}) & set(body))
        if clash:
            raise ValueError(f"extra body fields {clash} would replace the endpoint config's")
        return {**body, **dict(extra or {})}

    def _post_once(self, data: bytes) -> bytes:
        req = urllib.request.Request(self.config.url, data=data, headers=self._headers(), method="POST")
        with self._opener.open(req, timeout=self.config.timeout_s) as resp:
            return resp.read()

    def complete(self, messages: Sequence[Mapping[str, str]], extra: Mapping[str, Any] | None = None) -> str:
        """POSTs ``messages`` (and the ``extra`` body fields) and returns the reply text; retries
        transient failures."""
        url = self.config.url
        data = json.dumps(self.request_body(messages, extra)).encode("utf-8")
        attempts = self.config.max_retries + 1
        last: TeacherError | None = None
        for attempt in range(attempts):
            if attempt:
                self._sleep(self.config.backoff(attempt - 1))
            try:
                raw = self._post_once(data)
            except urllib.error.HTTPError as err:
                try:
                    body = err.read().decode("utf-8", "replace")[:500] if err.fp is not None else ""
                finally:
                    err.close()
                last = TeacherHTTPError(url, err.code, body, attempt + 1)
                if err.code not in RETRY_STATUS:
                    raise last from None
                continue
            except (TimeoutError, socket.timeout):
                last = TeacherTimeout(url, self.config.timeout_s, attempt + 1)
                continue
            except urllib.error.URLError as err:
                if isinstance(err.reason, (TimeoutError, socket.timeout)):
                    last = TeacherTimeout(url, self.config.timeout_s, attempt + 1)
                else:
                    last = TeacherConnectionError(url, str(err.reason), attempt + 1)
                continue
            except (ConnectionError, http.client.HTTPException) as err:
                last = TeacherConnectionError(url, f"{type(err).__name__}: {err}", attempt + 1)
                continue
            return parse_completion(url, raw)
        assert last is not None
        raise last


def parse_completion(url: str, raw: bytes) -> str:
    """The first choice's ``message.content`` of a chat-completion response body."""
    try:
        body = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise TeacherResponseError(url, f"the body is not JSON ({err})") from None
    if not isinstance(body, dict):
        raise TeacherResponseError(url, f"the body is a {type(body).__name__}, not an object")
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise TeacherResponseError(url, "no 'choices' list with an object in it")
    message = choices[0].get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, str):
        raise TeacherResponseError(url, "choices[0].message.content is not a string")
    return content


__all__ = [
    "ChatClient", "RETRY_STATUS", "TeacherConnectionError", "TeacherEndpointConfig", "TeacherError",
    "TeacherHTTPError", "TeacherResponseError", "TeacherTimeout", "parse_completion",
]

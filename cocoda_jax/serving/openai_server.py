"""An OpenAI-compatible HTTP server over the planner's KV-cache sampler (standard library only).

Endpoints (bound to 127.0.0.1, never another interface):

* ``GET /v1/models`` — the one served model; ``GET /v1/models/{id}`` — it, or 404;
* ``POST /v1/chat/completions`` — fields ``model``, ``messages``, ``max_tokens`` /
  ``max_completion_tokens``, ``temperature`` (0: greedy), ``top_p``, ``n``, ``stop``, ``seed``;
  the answer has ``id``, ``object: "chat.completion"``, ``created``, ``model``, ``choices`` (``index``,
  ``message {role, content}``, ``finish_reason`` ``"stop"`` | ``"length"``) and ``usage``;
* ``GET /stats`` — not OpenAI's: the batching engine's counters (requests, batches, rows), which
  the benchmark reads to report batch sizes.

Refused with a 400 rather than silently ignored, because the answer would not be what the client
asked for: ``stream: true`` (the sampler's decode loop is one jitted ``while_loop``: tokens exist only
when it ends, so there is nothing to stream honestly), ``tools`` / ``functions`` and ``logprobs``.
Other OpenAI fields (``user``, penalties, ...) are accepted and have no effect.

Every error is the OpenAI error object ``{"error": {"message", "type", "param", "code"}}`` with its
status (400 bad request, 404 unknown model or path, 405 wrong method, 500 a failed batch, 503
shutting down); the official client raises ``BadRequestError`` / ``NotFoundError`` / ... for them,
and the server keeps serving.

How ``messages`` become tokens: :mod:`cocoda_jax.serving.chat`; how requests are batched and
seeded: :mod:`cocoda_jax.serving.engine`.
"""

from __future__ import annotations

import json
import logging
import math
import socket
import threading
import time
import uuid
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from cocoda_jax.models.sampler import Sampler
from cocoda_jax.serving import chat
from cocoda_jax.serving.engine import BatchingEngine, Choice, GenerationRequest
from cocoda_jax.serving.errors import (EngineStoppedError, GenerationFailedError, MethodNotAllowedError,
                                       ModelNotFoundError, RequestError, UnknownRouteError)
from cocoda_jax.serving.loading import ServedModel

HOST = "127.0.0.1"
#: The largest request body read (bytes); a chat prompt for these models is far smaller.
MAX_BODY_BYTES = 8 * 1024 * 1024
#: The most stop strings OpenAI accepts.
MAX_STOP_STRINGS = 4
#: The sampler's smallest prompt bucket (its default ``min_bucket``).
MIN_PROMPT_BUCKET = 8
#: The KV cache when none is given: the model's context, at most this many slots.
DEFAULT_CACHE_CAP = 2048

log = logging.getLogger(__name__)


def default_cache_size(max_seq_len: int) -> int:
    return min(int(max_seq_len), DEFAULT_CACHE_CAP)


# ------------------------------------------------------------------------------- request parsing
def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: Any) -> bool:
    return (isinstance(v, (int, float)) and not isinstance(v, bool)) and math.isfinite(v)


def _optional(body: dict, name: str, check, what: str, default=None):
    value = body.get(name)
    if value is None:
        return default
    if not check(value):
        raise RequestError(f"'{name}' must be {what}, got {value!r}", param=name, code="invalid_value")
    return value


def parse_stop(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    stops = [value] if isinstance(value, str) else value
    if not isinstance(stops, list) or not all(isinstance(s, str) and s for s in stops):
        raise RequestError("'stop' must be a non-empty string or an array of non-empty strings", param="stop",
                           code="invalid_value")
    if len(stops) > MAX_STOP_STRINGS:
        raise RequestError(f"'stop' takes at most {MAX_STOP_STRINGS} strings, got {len(stops)}", param="stop",
                           code="invalid_value")
    return tuple(stops)


def parse_body(raw: bytes) -> dict:
    try:
        body = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise RequestError(f"the request body is not valid JSON: {e}", code="invalid_json") from None
    if not isinstance(body, dict):
        raise RequestError("the request body must be a JSON object", code="invalid_json")
    return body


def check_supported(body: dict) -> None:
    """The fields whose effect this server cannot give (see the module doc) are refused."""
    if body.get("stream"):
        raise RequestError("stream=true is not supported: the sampler decodes a batch in one jitted loop, so tokens "
                           "only exist when it ends; send stream=false", param="stream", code="unsupported_value")
    for name in ("tools", "functions"):
        if body.get(name):
            raise RequestError(f"'{name}' is not supported by this server", param=name, code="unsupported_value")
    if body.get("logprobs"):
        raise RequestError("'logprobs' is not supported by this server", param="logprobs", code="unsupported_value")


# ------------------------------------------------------------------------------- responses
def chat_completion(model_id: str, choices: list[Choice], prompt_tokens: int, *, created: int,
                    completion_id: str) -> dict:
    """The ``chat.completion`` object; ``completion_tokens`` sums every choice's generated tokens."""
    completion_tokens = sum(len(c.tokens) for c in choices)
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": created,
        "model": model_id,
        "choices": [{"index": i, "message": {"role": "assistant", "content": c.text}, "logprobs": None,
                     "finish_reason": c.finish_reason} for i, c in enumerate(choices)],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                  "total_tokens": prompt_tokens + completion_tokens},
    }


def _error(status: int, message: str, type_: str, code: str | None = None) -> tuple[int, dict]:
    return status, {"error": {"message": message, "type": type_, "param": None, "code": code}}


# ------------------------------------------------------------------------------- the server
class OpenAIServer:
    """The served model behind HTTP: a :class:`BatchingEngine` and a ``ThreadingHTTPServer``.

    Binds ``127.0.0.1:port`` on construction (``port=0``: a free one, see :attr:`port`);
    :meth:`start` starts the engine and the HTTP thread; :meth:`shutdown` stops taking connections,
    finishes the queued requests and closes the socket. A context manager does both."""

    def __init__(self, served: ServedModel, *, port: int = 0, cache_size: int = 0, max_batch: int = 32,
                 batch_wait_ms: float = 5.0, seed: int = 0, default_max_tokens: int = 256):
        if default_max_tokens < 1:
            raise ValueError(f"default_max_tokens must be >= 1, got {default_max_tokens}")
        self.served = served
        self.default_max_tokens = int(default_max_tokens)
        cache = int(cache_size) or default_cache_size(served.model.cfg.max_seq_len)
        if cache < 2 * MIN_PROMPT_BUCKET:
            raise ValueError(f"cache_size must be >= {2 * MIN_PROMPT_BUCKET} (a prompt bucket and its tokens), "
                             f"got {cache}")
        self.sampler = Sampler(served.model, cache_size=cache, pad_id=served.pad_id, min_bucket=MIN_PROMPT_BUCKET,
                               tokenizer=served.codec.decode)
        self.engine = BatchingEngine(self.sampler, served.codec.decode, stop_token_ids=served.stop_token_ids,
                                     max_batch=max_batch, batch_wait_ms=batch_wait_ms, seed=seed)
        self.created = int(time.time())
        self._httpd = _HTTPServer((HOST, int(port)), _Handler)
        self._httpd.app = self
        self._thread: threading.Thread | None = None
        self._closed = False

    @property
    def port(self) -> int:
        return self._httpd.server_address[1]

    @property
    def url(self) -> str:
        """The base URL an OpenAI client takes (``.../v1``)."""
        return f"http://{HOST}:{self.port}/v1"

    def start(self) -> "OpenAIServer":
        self.engine.start()
        if self._thread is None:
            self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.1},
                                            name="openai-http", daemon=True)
            self._thread.start()
        return self

    @property
    def closing(self) -> bool:
        return self._closed

    def shutdown(self, timeout: float = 10.0) -> None:
        """No new connections; the queued requests answered (each with ``Connection: close``);
        idle keep-alive connections closed; the socket closed. Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread.join()
        self.engine.stop()
        self._httpd.close_idle_connections(timeout)
        self._httpd.server_close()

    def __enter__(self) -> "OpenAIServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.shutdown()

    # --------------------------------------------------------------- endpoints (status, JSON)
    def model_card(self) -> dict:
        return {"id": self.served.model_id, "object": "model", "created": self.created, "owned_by": "cocoda_jax"}

    def list_models(self) -> dict:
        return {"object": "list", "data": [self.model_card()]}

    def get_model(self, model_id: str) -> dict:
        if model_id != self.served.model_id:
            raise ModelNotFoundError(f"The model '{model_id}' does not exist; this server serves "
                                     f"'{self.served.model_id}'")
        return self.model_card()

    def request_of(self, body: dict) -> tuple[GenerationRequest, int]:
        """The engine request of a parsed ``/v1/chat/completions`` body and its prompt length
        (every check that needs no model run happens here)."""
        check_supported(body)
        model = body.get("model")
        if model is None:
            raise RequestError("'model' is a required property", param="model", code="missing_required_parameter")
        if model != self.served.model_id:
            self.get_model(str(model))
        messages = chat.parse_messages(body.get("messages"))
        prompt = tuple(self.served.codec.encode(self.served.codec.render(messages, self.served.chat_format)))
        limit_name = "max_completion_tokens" if body.get("max_completion_tokens") is not None else "max_tokens"
        max_tokens = _optional(body, limit_name, lambda v: _is_int(v) and v >= 1, "an integer >= 1")
        if max_tokens is None:
            room = self.engine.room(len(prompt))
            max_tokens = min(self.default_max_tokens, room) if room > 0 else 1  # too long: check_fits says so
        temperature = _optional(body, "temperature", lambda v: _is_number(v) and 0 <= v <= 2, "a number in [0, 2]",
                                1.0)
        top_p = _optional(body, "top_p", lambda v: _is_number(v) and 0 <= v <= 1, "a number in [0, 1]", 1.0)
        n = _optional(body, "n", lambda v: _is_int(v) and v >= 1, "an integer >= 1", 1)
        seed = _optional(body, "seed", lambda v: _is_int(v) and -2**63 <= v < 2**63, "a 64-bit integer")
        request = GenerationRequest(prompt=prompt, max_tokens=max_tokens, temperature=float(temperature),
                                    top_p=float(top_p), n=n, stop=parse_stop(body.get("stop")), seed=seed)
        asked = body.get(limit_name) is not None and self.engine.room(len(prompt)) >= 1
        self.engine.check_fits(len(prompt), max_tokens, param=limit_name if asked else "messages")
        return request, len(prompt)

    def chat_completions(self, raw: bytes) -> dict:
        request, prompt_tokens = self.request_of(parse_body(raw))
        choices = self.engine.submit(request).result()
        return chat_completion(self.served.model_id, choices, prompt_tokens, created=int(time.time()),
                               completion_id=f"chatcmpl-{uuid.uuid4().hex}")

    def stats(self) -> dict:
        return {"model": self.served.model_id, "cache_size": self.sampler.cache_size,
                "max_batch": self.engine.max_batch, **self.engine.stats().as_dict()}

    def dispatch(self, method: str, path: str, raw: bytes) -> tuple[int, dict]:
        """One HTTP request to (status, JSON body); never raises."""
        path = path.split("?", 1)[0].rstrip("/") or "/"
        try:
            if path == "/v1/chat/completions":
                if method != "POST":
                    raise MethodNotAllowedError(f"{method} {path}: use POST")
                return 200, self.chat_completions(raw)
            if path == "/v1/models" or path.startswith("/v1/models/") or path == "/stats":
                if method != "GET":
                    raise MethodNotAllowedError(f"{method} {path}: use GET")
                if path == "/v1/models":
                    return 200, self.list_models()
                if path == "/stats":
                    return 200, self.stats()
                return 200, self.get_model(path[len("/v1/models/"):])
            raise UnknownRouteError(f"Unknown request URL: {method} {path}")
        except RequestError as e:
            return e.status, e.to_openai()
        except EngineStoppedError as e:
            return _error(503, str(e), "server_error", "shutting_down")
        except GenerationFailedError as e:
            log.error("%s", e)
            return _error(500, str(e), "server_error")
        except Exception as e:  # noqa: BLE001 - a bug in one request must not take the server down
            log.exception("unexpected error on %s %s", method, path)
            return _error(500, f"internal error: {type(e).__name__}: {e}", "server_error")


class _HTTPServer(ThreadingHTTPServer):
    """Tracks its open connections, so shutdown can end the keep-alive ones (their handler threads
    would otherwise wait for a next request that never comes, and answer it after shutdown)."""

    daemon_threads = True
    allow_reuse_address = True
    app: OpenAIServer

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._open: set[_Handler] = set()
        self._open_lock = threading.Lock()

    def opened(self, handler: "_Handler") -> None:
        with self._open_lock:
            self._open.add(handler)

    def closed(self, handler: "_Handler") -> None:
        with self._open_lock:
            self._open.discard(handler)

    def close_idle_connections(self, timeout: float) -> None:
        """Shuts the sockets of connections waiting for a request (busy ones close after answering),
        then waits up to ``timeout`` seconds for every handler to finish."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._open_lock:
                handlers = list(self._open)
            if not handlers:
                return
            for h in handlers:
                if not h.busy:
                    try:
                        h.connection.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass
            time.sleep(0.01)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: the OpenAI client reuses its connections
    # TCP_NODELAY: the body, written after the headers, would otherwise wait (Nagle) for the
    # client's delayed ACK of the headers: ~40 ms per answer, measured
    disable_nagle_algorithm = True
    server_version = "cocoda-serve/0.1"
    server: _HTTPServer
    busy = False  # between reading a request line and sending its answer

    def setup(self) -> None:
        super().setup()
        self.server.opened(self)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.closed(self)

    def parse_request(self) -> bool:
        self.busy = True
        return super().parse_request()

    def handle_one_request(self) -> None:
        try:
            super().handle_one_request()
        finally:
            self.busy = False

    def do_GET(self) -> None:  # noqa: N802 - the http.server naming
        self._answer(*self.server.app.dispatch("GET", self.path, b""))

    def do_POST(self) -> None:  # noqa: N802
        raw = self._body()
        if raw is not None:
            self._answer(*self.server.app.dispatch(self.command, self.path, raw))

    do_PUT = do_PATCH = do_DELETE = do_POST  # answered 405/404 in the OpenAI error shape, not http.server's HTML

    def _body(self) -> bytes | None:
        length = self.headers.get("Content-Length")
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked" or length is None:
            self.close_connection = True  # the body's end is unknown: the connection cannot be reused
            self._answer(400, RequestError("send the body with a Content-Length header",
                                           code="length_required").to_openai())
            return None
        try:
            n = int(length)
        except ValueError:
            n = -1
        if not 0 <= n <= MAX_BODY_BYTES:
            self.close_connection = True
            self._answer(400, RequestError(f"Content-Length must be between 0 and {MAX_BODY_BYTES} bytes",
                                           code="invalid_request").to_openai())
            return None
        return self.rfile.read(n)

    def _answer(self, status: int, body: dict) -> None:
        data = json.dumps(body).encode()
        if self.server.app.closing:
            self.close_connection = True
        try:
            self.send_response(status, HTTPStatus(status).phrase)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            if self.close_connection:
                self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):  # the client left before its answer
            self.close_connection = True
            log.debug("client %s left before its answer", self.address_string())

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        log.debug("%s - %s", self.address_string(), format % args)


__all__ = ["DEFAULT_CACHE_CAP", "HOST", "MAX_BODY_BYTES", "OpenAIServer", "chat_completion", "check_supported",
           "default_cache_size", "parse_body", "parse_stop"]

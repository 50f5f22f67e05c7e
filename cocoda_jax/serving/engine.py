"""The batching engine: concurrent requests share one ``Sampler.generate`` call per batch.

One background thread owns the sampler (every JAX call happens there). Requests queue up; the
thread takes the oldest, waits until its group holds ``max_batch`` rows or the oldest has waited
``batch_wait_ms``, and runs that group as one batch. Prompts of different lengths share a batch (the
sampler left-pads them to one bucket).

Why groups: ``SamplingParams`` (temperature, top-p, greedy, stop tokens and strings, the decode
length) are one value per ``generate`` call, so only requests with equal params can share a batch.
Requests are grouped by their params, not forced into separate per-request calls: all greedy
requests of one ``max_tokens`` bucket batch together whatever their temperature/top-p fields say.
Other groups wait for the next batch, oldest request first, so no group starves.

Why buckets (compilations): the decode loop compiles once per (rows, buffer size, max_new_tokens)
and the prefill once per (rows, prompt bucket, buffer size); the sampler's buffer is the prompt
bucket plus the decode budget rounded up to its ``grow_step``, so it adds few shapes. So ``max_tokens`` is rounded up to a power of two
(at least :data:`MIN_DECODE_BUCKET`, at most what the cache leaves) and the tokens past a request's
own ``max_tokens`` are dropped (``finish_reason`` ``"length"``); the rows are padded with one-token
filler rows up to a power of two (at most ``max_batch``). A handful of shapes then serve any traffic.

``n`` > 1: the prompt is repeated ``n`` times in the batch.

Randomness (sampled requests; greedy ones ignore the key): the sampler takes one key per batch.
Without ``seed`` the key is ``fold_in(key(server_seed), number of the batch's oldest request)``, the
number counting requests in arrival order: the outputs are a function of the order and of how the
requests were batched. A request with ``seed`` runs in a batch of its own rows with ``key(seed)``,
so the same seed, prompt and params give the same choices whatever else the server is doing.
"""

from __future__ import annotations

import collections
import dataclasses
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future

import jax

from cocoda_jax.models.sampler import Sampler, SamplingParams, bucket_size
from cocoda_jax.serving.errors import EngineStoppedError, GenerationFailedError, PromptTooLongError, RequestError

#: The smallest decode length compiled: shorter ``max_tokens`` share it.
MIN_DECODE_BUCKET = 16


@dataclasses.dataclass(frozen=True)
class GenerationRequest:
    """One chat completion's work: the prompt ids and the OpenAI sampling fields (already checked)."""

    prompt: tuple[int, ...]
    max_tokens: int
    temperature: float = 1.0
    top_p: float = 1.0
    n: int = 1
    stop: tuple[str, ...] = ()
    seed: int | None = None

    @property
    def greedy(self) -> bool:
        """Temperature 0 (OpenAI's "deterministic") and top-p 0 (the limit of nucleus sampling) both
        mean argmax."""
        return self.temperature == 0 or self.top_p == 0


@dataclasses.dataclass(frozen=True)
class Choice:
    """One generated continuation: ``tokens`` every id the model produced for this request (a stop
    token included: what ``completion_tokens`` counts); ``text`` what the client reads (stop token
    and stop string removed); ``finish_reason`` ``"stop"`` or ``"length"``."""

    tokens: tuple[int, ...]
    text: str
    finish_reason: str


def decode_budget(max_tokens: int, prompt_len: int, cache_size: int, min_bucket: int) -> int:
    """The ``max_new_tokens`` the batch is decoded with: ``max_tokens`` rounded up to a power of two
    (>= MIN_DECODE_BUCKET), capped by the room the prompt's bucket leaves in the cache."""
    room = cache_size - bucket_size(prompt_len, min_bucket)
    return max(min(bucket_size(max_tokens, MIN_DECODE_BUCKET), room), max_tokens)


def sampling_params(request: GenerationRequest, budget: int, stop_token_ids: Sequence[int]) -> SamplingParams:
    """The sampler's params of ``request`` (equal for requests that may share a batch)."""
    stops = tuple(sorted(set(request.stop)))
    if request.greedy:
        return SamplingParams(max_new_tokens=budget, greedy=True, stop_tokens=tuple(stop_token_ids),
                              stop_strings=stops)
    return SamplingParams(max_new_tokens=budget, temperature=float(request.temperature), top_p=float(request.top_p),
                          stop_tokens=tuple(stop_token_ids), stop_strings=stops)


def finish_choice(tokens: Sequence[int], stop_reason: str, request: GenerationRequest,
                  decode: Callable[[Sequence[int]], str]) -> Choice:
    """One sampler row as the client's choice: cut to ``max_tokens`` ("length"), or ended by a stop
    token or string within it ("stop"; the stop token and the text from the stop string on are not
    part of ``text``)."""
    tokens = tuple(int(t) for t in tokens)
    if len(tokens) > request.max_tokens:
        return Choice(tokens[:request.max_tokens], decode(tokens[:request.max_tokens]), "length")
    if stop_reason == "stop_token":
        return Choice(tokens, decode(tokens[:-1]), "stop")
    text = decode(tokens)
    if stop_reason == "stop_string":
        cut = min((i for i in (text.find(s) for s in request.stop) if i >= 0), default=len(text))
        return Choice(tokens, text[:cut], "stop")
    return Choice(tokens, text, "length")


@dataclasses.dataclass
class _Pending:
    number: int
    request: GenerationRequest
    params: SamplingParams
    group: tuple
    arrival: float
    future: Future


@dataclasses.dataclass(frozen=True)
class EngineStats:
    """Counters since the start: ``rows`` real rows (n per request), ``padded_rows`` filler rows."""

    requests: int
    batches: int
    rows: int
    padded_rows: int
    failed_batches: int

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


class BatchingEngine:
    """Runs :class:`GenerationRequest`\\ s through ``sampler`` in batches (see the module doc).

    ``submit`` checks that the request fits the cache (:class:`PromptTooLongError` otherwise) and
    returns a ``Future`` of its list of :class:`Choice`. ``stop`` finishes what is queued, then
    ends the thread; later submissions raise :class:`EngineStoppedError`."""

    def __init__(self, sampler: Sampler, decode: Callable[[Sequence[int]], str], *, stop_token_ids: Sequence[int],
                 max_batch: int = 32, batch_wait_ms: float = 5.0, seed: int = 0):
        if max_batch < 1:
            raise ValueError(f"max_batch must be >= 1, got {max_batch}")
        if batch_wait_ms < 0:
            raise ValueError(f"batch_wait_ms must be >= 0, got {batch_wait_ms}")
        self.sampler = sampler
        self.decode = decode
        self.stop_token_ids = tuple(int(i) for i in stop_token_ids)
        self.max_batch = int(max_batch)
        self.batch_wait_s = float(batch_wait_ms) / 1000.0
        self.seed = int(seed)
        self._base_key = jax.random.key(self.seed)
        self._cond = threading.Condition()
        self._queue: collections.deque[_Pending] = collections.deque()
        self._count = 0
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._stats = dict(requests=0, batches=0, rows=0, padded_rows=0, failed_batches=0)

    # ------------------------------------------------------------------ capacity
    @property
    def cache_size(self) -> int:
        return self.sampler.cache_size

    def room(self, prompt_len: int) -> int:
        """The most tokens a prompt of ``prompt_len`` ids can be given (<= 0: it does not fit)."""
        return self.cache_size - bucket_size(prompt_len, self.sampler.min_bucket)

    def check_fits(self, prompt_len: int, max_tokens: int, *, param: str = "messages") -> None:
        if prompt_len < 1:
            raise RequestError("the prompt has no tokens", param="messages", code="invalid_value")
        padded = bucket_size(prompt_len, self.sampler.min_bucket)
        if padded + max_tokens > self.cache_size:
            raise PromptTooLongError(
                f"This model's context is {self.cache_size} tokens; the prompt has {prompt_len} tokens "
                f"(padded to {padded}) and max_tokens asks for {max_tokens} more", param=param)

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> "BatchingEngine":
        with self._cond:
            if self._thread is not None:
                return self
            self._thread = threading.Thread(target=self._loop, name="batching-engine", daemon=True)
            self._thread.start()
        return self

    def stop(self, timeout: float | None = None) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout)

    def stats(self) -> EngineStats:
        with self._cond:
            return EngineStats(**self._stats)

    # ------------------------------------------------------------------ work
    def submit(self, request: GenerationRequest) -> Future:
        if not 1 <= request.n <= self.max_batch:
            raise RequestError(f"n must be between 1 and {self.max_batch} (the server's batch), got {request.n}",
                               param="n", code="invalid_value")
        self.check_fits(len(request.prompt), request.max_tokens)
        budget = decode_budget(request.max_tokens, len(request.prompt), self.cache_size, self.sampler.min_bucket)
        params = sampling_params(request, budget, self.stop_token_ids)
        future: Future = Future()
        with self._cond:
            if self._stopping or self._thread is None:
                raise EngineStoppedError("the server is not running")
            number = self._count
            self._count += 1
            isolated = request.seed is not None and not request.greedy
            group = ("seeded", number) if isolated else ("shared", params)
            self._queue.append(_Pending(number, request, params, group, time.monotonic(), future))
            self._stats["requests"] += 1
            self._cond.notify_all()
        return future

    def generate(self, request: GenerationRequest, timeout: float | None = None) -> list[Choice]:
        """``submit`` and wait (for in-process callers and tests)."""
        return self.submit(request).result(timeout)

    def warm_up(self, prompt_len: int, max_tokens: int) -> int:
        """Compiles the shapes a prompt of ``prompt_len`` ids and ``max_tokens`` uses at every row
        count the engine pads to, before any request pays for it; returns the number of calls.
        Call before ``start`` (the sampler is not thread-safe)."""
        if self._thread is not None:
            raise RuntimeError("warm_up must run before start")
        self.check_fits(prompt_len, max_tokens)
        budget = decode_budget(max_tokens, prompt_len, self.cache_size, self.sampler.min_bucket)
        params = SamplingParams(max_new_tokens=budget, greedy=True, stop_tokens=self.stop_token_ids)
        sizes = sorted({self._padded_rows(r) for r in range(1, self.max_batch + 1)})
        for rows in sizes:
            self.sampler.generate([[self.sampler.pad_id] * prompt_len] * rows, params, self._base_key)
        return len(sizes)

    def _padded_rows(self, rows: int) -> int:
        return max(rows, min(bucket_size(rows, 1), self.max_batch))

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._stopping:
                    self._cond.wait()
                if not self._queue:  # stopping, and everything queued is done
                    return
                while True:
                    head = self._queue[0]
                    rows = sum(p.request.n for p in self._queue if p.group == head.group)
                    left = head.arrival + self.batch_wait_s - time.monotonic()
                    if rows >= self.max_batch or left <= 0 or self._stopping:
                        break
                    self._cond.wait(left)
                batch, rows = [], 0
                for p in self._queue:
                    if p.group == head.group and rows + p.request.n <= self.max_batch:
                        batch.append(p)
                        rows += p.request.n
                for p in batch:
                    self._queue.remove(p)
            self._run(batch)

    def _run(self, batch: list[_Pending]) -> None:
        head = batch[0]
        prompts = [list(p.request.prompt) for p in batch for _ in range(p.request.n)]
        filler = self._padded_rows(len(prompts)) - len(prompts)
        prompts += [[self.sampler.pad_id]] * filler
        try:
            key = jax.random.key(head.request.seed) if head.group[0] == "seeded" \
                else jax.random.fold_in(self._base_key, head.number)
            result = self.sampler.generate(prompts, head.params, key)
            out, i = [], 0
            for p in batch:
                n = p.request.n
                out.append([finish_choice(result.tokens[i + j], result.stop_reasons[i + j], p.request, self.decode)
                            for j in range(n)])
                i += n
        except Exception as e:  # noqa: BLE001 - every waiter must hear about it, the engine goes on
            with self._cond:
                self._stats["failed_batches"] += 1
            error = GenerationFailedError(f"generation failed: {type(e).__name__}: {e}")
            error.__cause__ = e
            for p in batch:
                p.future.set_exception(error)
            return
        with self._cond:
            self._stats["batches"] += 1
            self._stats["rows"] += len(prompts) - filler
            self._stats["padded_rows"] += filler
        for p, choices in zip(batch, out):
            p.future.set_result(choices)


__all__ = ["BatchingEngine", "Choice", "EngineStats", "GenerationRequest", "MIN_DECODE_BUCKET", "decode_budget",
           "finish_choice", "sampling_params"]

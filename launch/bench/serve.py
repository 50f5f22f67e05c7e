"""Benchmark: the OpenAI-compatible server under 1, 8 and 32 concurrent clients (docs/serve.md).

A random ``tiny`` planner (the preset's layout, a BPE vocabulary trained here) is saved as an HF
directory in a temp folder and served by ``launch.serve`` in a subprocess (its own process, as in
use; the clients' threads do not compete with the server for the GIL). Each level runs ``c`` client
threads with the official ``openai`` client, each sending ``--bench_serve_requests_per_client``
chat completions back to back, after one untimed round; the server compiles every batch size's
shapes before it serves (``--serve_warmup_prompt_tokens``), and every prompt falls in that padding
bucket, so no level pays for a compilation.

The peer: the same greedy decode through ``Sampler.generate`` directly, in this process before the
server starts, at batch 1, 8 and 32: what the server's batching and HTTP cost is measured against
(``sampler_alone``; ``server_vs_sampler`` = the server's completion tokens/s over the sampler's at
the batch equal to the concurrency).

    python -m launch.bench.serve [--bench_serve_concurrency=1,8,32 --bench_serve_max_tokens=32]
        [--bench_serve_json_out=F]

Prints JSON: per level requests/s, completion tokens/s, latency p50/p95 and the server's batches
(mean rows per sampler call, from ``GET /stats``).
"""

from __future__ import annotations

import json
import os
import queue
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

from absl import app, flags
from launch.output import emit_json


def _define_flags():
    """Defined only when run as a program (tests import several launchers into one process)."""
    flags.DEFINE_list("bench_serve_concurrency", ["1", "8", "32"], "Concurrent clients per level.")
    flags.DEFINE_integer("bench_serve_requests_per_client", 8, "Requests each client sends per timed level.")
    flags.DEFINE_integer("bench_serve_max_tokens", 32, "max_tokens of every request.")
    flags.DEFINE_float("bench_serve_temperature", 0.0, "Temperature of every request (0: greedy).")
    flags.DEFINE_integer("bench_serve_prompt_bucket", 64, "Every prompt has (bucket/2, bucket] tokens.")
    flags.DEFINE_integer("bench_serve_max_batch", 32, "The server's --serve_max_batch.")
    flags.DEFINE_float("bench_serve_batch_wait_ms", 5.0, "The server's --serve_batch_wait_ms.")
    flags.DEFINE_integer("bench_serve_vocab_size", 1024, "BPE vocabulary of the tiny planner.")
    flags.DEFINE_integer("bench_serve_seed", 0, "Weights seed.")
    flags.DEFINE_integer("bench_serve_start_timeout_s", 900, "How long the server may take to load and warm up.")
    flags.DEFINE_string("bench_serve_json_out", None, "Also write the JSON here.")


F = flags.FLAGS
MODEL_ID = "tiny-bench"


def _corpus(n: int = 4000):
    """Word-problem-like texts with enough distinct made-up names for a full-size BPE vocabulary."""
    ops = ("add", "subtract", "multiply", "percent_of", "divide", "average", "ratio")
    syllables = ("ka", "lo", "mi", "ne", "ru", "ta", "vi", "zo", "pe", "su", "ga", "ho")
    for i in range(n):
        a, b, op = (i * 13) % 97, (i * 7) % 89, ops[i % len(ops)]
        name = "".join(syllables[(i // 12 ** k) % 12] for k in range(3)).capitalize()
        yield (f"Question: {name} sells {a} items on Monday and {b} items on Tuesday; what is the {op} of the "
               f"two days? Inputs: n0 = {a}, n1 = {b}\nProgram:\nx0 = {op}(n0, n1)\nanswer(x0)\n")


def build_model_dir(path: str, vocab_size: int, seed: int):
    """A random ``tiny`` planner and its BPE as an HF directory; returns the tokenizer and config."""
    from cocoda_jax.models import create_model, save_hf_checkpoint, train_bpe_tokenizer
    from cocoda_jax.models.config import tiny

    tok = train_bpe_tokenizer(_corpus(), vocab_size)
    cfg = tiny(len(tok))
    save_hf_checkpoint(create_model(cfg, seed=seed), path)
    tok.save_pretrained(path)
    return tok, cfg


def bench_prompts(tok, bucket: int, count: int = 64) -> list[str]:
    """User messages whose chat prompt has (bucket/2, bucket] tokens: one padding bucket."""
    out = []
    for i in range(10_000):
        words = " ".join(f"item{(i * 31 + j) % 50}" for j in range(i % 9))
        text = f"what is the sum of {i % 91} and {(i * 3) % 57}? {words}"
        rendered = tok.apply_chat_template([{"role": "user", "content": text}], tokenize=False,
                                           add_generation_prompt=True)
        n = len(tok.encode(rendered, add_special_tokens=False))  # as the server counts it
        if bucket // 2 < n <= bucket:
            out.append(text)
        if len(out) == count:
            return out
    raise RuntimeError(f"no {count} prompts of ({bucket // 2}, {bucket}] tokens")


def sampler_alone(model_dir: str, cfg, prompt_tokens: int, max_tokens: int, batches, repeats: int = 3) -> dict:
    """Greedy ``Sampler.generate`` tokens/s at each batch size (compiled first, best of ``repeats``)."""
    import jax

    from cocoda_jax.models import Sampler, SamplingParams, load_hf_checkpoint
    from cocoda_jax.serving.engine import decode_budget
    from cocoda_jax.serving.openai_server import default_cache_size

    cache = default_cache_size(cfg.max_seq_len)
    sampler = Sampler(load_hf_checkpoint(model_dir), cache_size=cache)
    budget = decode_budget(max_tokens, prompt_tokens, cache, sampler.min_bucket)
    params = SamplingParams(max_new_tokens=budget, greedy=True)
    out = {}
    for b in batches:
        rows = [[(7 * i + j) % cfg.vocab_size for j in range(prompt_tokens)] for i in range(b)]
        sampler.generate(rows, params, jax.random.key(0))
        best = float("inf")
        for _ in range(repeats):
            t0 = time.perf_counter()
            sampler.generate(rows, params, jax.random.key(0))
            best = min(best, time.perf_counter() - t0)
        out[str(b)] = {"completion_tokens_per_s": b * budget / best, "seconds_per_call": best,
                       "decode_steps": budget}
    return out


def start_server(model_dir: str, warmup_prompt_tokens: int, max_tokens: int, max_batch: int, batch_wait_ms: float,
                 timeout_s: float):
    """``launch.serve`` in a subprocess; returns (process, base URL) once it prints its URL."""
    cmd = [sys.executable, "-m", "launch.serve", f"--checkpoint={model_dir}", "--port=0",
           f"--serve_model_name={MODEL_ID}", f"--serve_max_batch={max_batch}",
           f"--serve_batch_wait_ms={batch_wait_ms}", f"--serve_warmup_prompt_tokens={warmup_prompt_tokens}",
           f"--serve_warmup_max_tokens={max_tokens}"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(x) for x in proc.stdout], daemon=True).start()
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=1.0)
        except queue.Empty:
            if proc.poll() is not None:
                raise RuntimeError(f"launch.serve exited with {proc.returncode} before serving")
            continue
        m = re.search(r"at (http://127\.0\.0\.1:\d+/v1)", line)
        if m:
            return proc, m.group(1)
    proc.kill()
    raise RuntimeError(f"launch.serve did not print its URL within {timeout_s} s")


def _stats(base_url: str) -> dict:
    with urllib.request.urlopen(base_url.rsplit("/v1", 1)[0] + "/stats", timeout=30) as r:
        return json.loads(r.read())


def run_level(base_url: str, prompts: list[str], concurrency: int, per_client: int, max_tokens: int,
              temperature: float) -> dict:
    import openai

    clients = [openai.OpenAI(base_url=base_url, api_key="unused", max_retries=0, timeout=600)
               for _ in range(concurrency)]

    def one(client, i):
        t0 = time.perf_counter()
        messages = [{"role": "user", "content": prompts[i % len(prompts)]}]
        r = client.chat.completions.create(model=MODEL_ID, messages=messages, max_tokens=max_tokens,
                                           temperature=temperature)
        return time.perf_counter() - t0, r.usage.completion_tokens

    def round_(count):
        results: list = [[] for _ in range(concurrency)]
        barrier = threading.Barrier(concurrency)

        def client_loop(k):
            barrier.wait()
            for j in range(count):
                results[k].append(one(clients[k], k * count + j))

        threads = [threading.Thread(target=client_loop, args=(k,)) for k in range(concurrency)]
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return time.perf_counter() - t0, [x for r in results for x in r]

    round_(1)  # untimed: connections opened, any shape the warm-up missed compiled
    before = _stats(base_url)
    wall, results = round_(per_client)
    after = _stats(base_url)
    latencies = sorted(t for t, _ in results)
    tokens = sum(n for _, n in results)
    batches = after["batches"] - before["batches"]
    rows = after["rows"] - before["rows"]
    return {
        "concurrency": concurrency, "requests": len(results), "wall_s": wall,
        "requests_per_s": len(results) / wall, "completion_tokens": tokens, "completion_tokens_per_s": tokens / wall,
        "latency_p50_ms": 1000 * statistics.median(latencies),
        "latency_p95_ms": 1000 * latencies[min(len(latencies) - 1, int(0.95 * len(latencies)))],
        "server_batches": batches, "mean_rows_per_batch": rows / max(batches, 1),
        "padded_rows": after["padded_rows"] - before["padded_rows"],
    }


def run(concurrency, per_client: int, max_tokens: int, temperature: float, prompt_bucket: int, max_batch: int,
        batch_wait_ms: float, vocab_size: int, seed: int, start_timeout_s: float = 900) -> dict:
    import jax

    levels = [int(c) for c in concurrency]
    with tempfile.TemporaryDirectory() as model_dir:
        tok, cfg = build_model_dir(model_dir, vocab_size, seed)
        prompts = bench_prompts(tok, prompt_bucket)
        alone = sampler_alone(model_dir, cfg, prompt_bucket, max_tokens, sorted(set(levels) | {1}))
        t0 = time.perf_counter()
        proc, url = start_server(model_dir, prompt_bucket, max_tokens, max_batch, batch_wait_ms, start_timeout_s)
        start_s = time.perf_counter() - t0
        try:
            results = [run_level(url, prompts, c, per_client, max_tokens, temperature) for c in levels]
        finally:
            proc.terminate()
            proc.wait(timeout=120)
    for r in results:
        peer = alone.get(str(r["concurrency"]))
        if peer:
            r["server_vs_sampler"] = r["completion_tokens_per_s"] / peer["completion_tokens_per_s"]
    return {
        "levels": results, "sampler_alone": alone,
        "settings": {"max_tokens": max_tokens, "temperature": temperature, "prompt_tokens": f"({prompt_bucket // 2}, "
                     f"{prompt_bucket}]", "requests_per_client": per_client, "max_batch": max_batch,
                     "batch_wait_ms": batch_wait_ms},
        "model": {"preset": "tiny", "vocab_size": cfg.vocab_size, "params": cfg.num_params()},
        "server_start_s": start_s, "backend": jax.default_backend(), "cpu_count": os.cpu_count(),
    }


def main(argv):
    del argv
    out = run(F.bench_serve_concurrency, F.bench_serve_requests_per_client, F.bench_serve_max_tokens,
              F.bench_serve_temperature, F.bench_serve_prompt_bucket, F.bench_serve_max_batch,
              F.bench_serve_batch_wait_ms, F.bench_serve_vocab_size, F.bench_serve_seed,
              F.bench_serve_start_timeout_s)
    emit_json(out, F.bench_serve_json_out)


if __name__ == "__main__":
    _define_flags()
    app.run(main)

"""Serve a planner over an OpenAI-compatible HTTP API on 127.0.0.1 (docs/serve.md).

    python -m launch.serve --checkpoint=DIR --port=8000 [--serve_max_batch=32 --serve_batch_wait_ms=5]

``DIR``: an HF model directory (config.json + safetensors + tokenizer files) or a run's workdir
(``launch.coevolve`` / ``launch.train``: its newest checkpoint's planner and its tokenizer).
``--port=0`` takes a free port. Prints one line, ``serving MODEL at http://127.0.0.1:PORT/v1``, when
ready; SIGINT/SIGTERM finish the queued requests and exit (printing the engine's counters as JSON).

Then any OpenAI client works::

    openai.OpenAI(base_url="http://127.0.0.1:8000/v1", api_key="unused").chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "..."}], max_tokens=32, temperature=0)
"""

from __future__ import annotations

import json
import signal
import threading

from absl import app, flags


def _define_flags():
    """Defined only when run as a program: ``--checkpoint`` is also launch/evaluate_bfcl.py's flag,
    and tests import several launchers into one process."""
    flags.DEFINE_string("checkpoint", None, "An HF model directory or a run's workdir (required).")
    flags.DEFINE_integer("port", 8000, "TCP port on 127.0.0.1 (0: a free port, printed when ready).")
    flags.DEFINE_string("serve_model_name", None, "The model id clients send (default: the directory's name).")
    flags.DEFINE_enum("serve_chat_template", "auto", ["auto", "planner", "tokenizer", "plain"],
                      "How messages become the prompt (auto: planner for a run, else the tokenizer's template, "
                      "else plain; docs/serve.md).")
    flags.DEFINE_integer("serve_cache_size", 0, "KV-cache slots per row: prompt bucket + max_tokens must fit "
                         "(0: the model's context, at most 2048).")
    flags.DEFINE_integer("serve_max_batch", 32, "Most rows (requests x n) in one sampler call.")
    flags.DEFINE_float("serve_batch_wait_ms", 5.0, "How long the oldest queued request waits for others to join it.")
    flags.DEFINE_integer("serve_default_max_tokens", 256, "max_tokens when a request gives none (capped by the cache).")
    flags.DEFINE_integer("serve_seed", 0, "The server's sampling seed (a request's `seed` overrides it).")
    flags.DEFINE_integer("serve_warmup_prompt_tokens", 0, "If > 0: compile, before serving, the shapes of a prompt "
                         "this long at every batch size (with --serve_warmup_max_tokens).")
    flags.DEFINE_integer("serve_warmup_max_tokens", 32, "max_tokens of the warm-up.")


F = flags.FLAGS


def main(argv) -> None:
    del argv
    if not F.checkpoint:
        raise app.UsageError("--checkpoint=DIR is required (an HF model directory or a run's workdir)")
    from cocoda_jax.serving import ModelLoadError, OpenAIServer, load_served_model

    try:
        served = load_served_model(F.checkpoint, chat_format=F.serve_chat_template, model_id=F.serve_model_name)
    except ModelLoadError as e:
        raise SystemExit(f"cannot serve: {e}") from None
    server = OpenAIServer(served, port=F.port, cache_size=F.serve_cache_size, max_batch=F.serve_max_batch,
                          batch_wait_ms=F.serve_batch_wait_ms, seed=F.serve_seed,
                          default_max_tokens=F.serve_default_max_tokens)
    if F.serve_warmup_prompt_tokens > 0:
        server.engine.warm_up(F.serve_warmup_prompt_tokens, F.serve_warmup_max_tokens)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    server.start()
    print(f"serving {served.model_id} ({served.source}, chat format {served.chat_format}, cache "
          f"{server.sampler.cache_size}) at {server.url}", flush=True)
    while not stop.wait(0.5):
        pass
    server.shutdown()
    print(json.dumps({"stopped": True, **server.stats()}), flush=True)


if __name__ == "__main__":
    _define_flags()
    app.run(main)

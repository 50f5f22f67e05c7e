"""Benchmark: the jitted KV-cache sampler vs transformers' PyTorch `generate()`.

The same tiny Qwen3 (the `tiny` preset's shape) with the same random weights in both:
the weights are built in PyTorch, saved as an HF directory and loaded here with
`load_hf_checkpoint`. Greedy decoding, same batch, prompt length and new tokens; both
peers are warmed up first and then timed in the same process run.

    python -m launch.bench.sampler [--batch=16 --prompt_len=64 --new_tokens=64] [--scan_layers] [--json_out=PATH]

Prints JSON: jax_tokens_per_s, torch_tokens_per_s, ratio (jax / torch), compile_s (first
JAX call minus a steady-state call), plus the settings and the fraction of greedy tokens
on which the two agree. Timed repetitions alternate between the peers (best of each), so
both see the same machine load.
"""

from __future__ import annotations

import tempfile
import time

from absl import app, flags
from cocoda_jax.runs import host_memory
from launch.output import emit_json


def _define_flags():
    """Defined only when run as a program, so importing `run` (tests) adds no global flags
    that could clash with other launchers' `--seed` / `--json_out`."""
    flags.DEFINE_integer("batch", 16, "rows per batch")
    flags.DEFINE_integer("prompt_len", 64, "prompt tokens per row")
    flags.DEFINE_integer("new_tokens", 64, "greedy tokens generated per row")
    flags.DEFINE_integer("vocab_size", 1024, "vocabulary of the tiny model")
    flags.DEFINE_integer("repeats", 5, "timed repetitions of each peer, interleaved (the best is reported)")
    flags.DEFINE_integer("seed", 0, "weights and prompts seed")
    flags.DEFINE_integer("torch_threads", 0, "torch intra-op threads (0: torch's default)")
    flags.DEFINE_bool("scan_layers", False, "the sampler's layers as one lax.scan (model.scan_layers)")
    flags.DEFINE_string("json_out", None, "also write the JSON here")


F = flags.FLAGS


def _best(fn, repeats):
    times = []
    out = None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return min(times), out


def run(batch: int, prompt_len: int, new_tokens: int, vocab_size: int, repeats: int, seed: int,
        torch_threads: int = 0, scan_layers: bool = False) -> dict:
    import jax
    import numpy as np
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    from cocoda_jax.models import get_preset, load_hf_checkpoint
    from cocoda_jax.models.sampler import Sampler, SamplingParams, bucket_size

    if torch_threads > 0:
        torch.set_num_threads(torch_threads)
    cfg = get_preset("tiny").replace(vocab_size=vocab_size)
    hf_cfg = Qwen3Config(**{k: v for k, v in cfg.to_hf_config().items()
                            if k not in ("architectures", "model_type", "dtype")})
    torch.manual_seed(seed)
    tmodel = Qwen3ForCausalLM(hf_cfg).eval()
    prompts = np.random.RandomState(seed).randint(0, vocab_size, (batch, prompt_len))

    with tempfile.TemporaryDirectory() as d:
        tmodel.save_pretrained(d)
        jmodel = load_hf_checkpoint(d)

    # --- JAX
    cache_size = bucket_size(prompt_len) + new_tokens
    sampler = Sampler(jmodel, cache_size=cache_size, scan_layers=scan_layers)
    params = SamplingParams(max_new_tokens=new_tokens, greedy=True)
    rows = prompts.tolist()
    key = jax.random.key(seed)
    t0 = time.perf_counter()
    sampler.generate(rows, params, key)
    first = time.perf_counter() - t0

    # --- PyTorch generate() with its KV cache
    ids = torch.as_tensor(prompts)
    gen_kw = dict(max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False, use_cache=True,
                  attention_mask=torch.ones_like(ids), pad_token_id=0)

    def torch_gen():
        with torch.no_grad():
            return tmodel.generate(ids, **gen_kw)

    torch_gen()  # warm-up
    # interleaved repetitions, so both peers see the same machine load; best of each
    jax_s = torch_s = float("inf")
    for _ in range(repeats):
        t, res = _best(lambda: sampler.generate(rows, params, key), 1)
        jax_s = min(jax_s, t)
        t, tout = _best(torch_gen, 1)
        torch_s = min(torch_s, t)
    jax_tokens = np.asarray(res.tokens)
    torch_tokens = tout[:, prompt_len:].numpy()

    n = batch * new_tokens
    return {
        "jax_tokens_per_s": n / jax_s,
        "torch_tokens_per_s": n / torch_s,
        "ratio": torch_s / jax_s,
        "compile_s": max(first - jax_s, 0.0),
        "greedy_token_agreement": float((jax_tokens == torch_tokens).mean()),
        "batch": batch, "prompt_len": prompt_len, "new_tokens": new_tokens,
        "params": cfg.num_params(), "backend": jax.default_backend(), "host_malloc": host_memory.status(),
        "torch_threads": torch.get_num_threads(), "scan_layers": bool(scan_layers),
    }


def main(argv):
    del argv
    out = run(F.batch, F.prompt_len, F.new_tokens, F.vocab_size, F.repeats, F.seed, F.torch_threads, F.scan_layers)
    emit_json(out, F.json_out)


if __name__ == "__main__":
    _define_flags()
    app.run(main)

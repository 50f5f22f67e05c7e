"""Smoke test of launch/bench_sampler at toy sizes: both peers run and agree on greedy tokens."""

import pytest

from launch.bench import sampler as bench_sampler


@pytest.mark.parametrize("scan_layers", [False, True])
def test_bench_sampler_runs_and_agrees(scan_layers):
    out = bench_sampler.run(batch=2, prompt_len=8, new_tokens=6, vocab_size=256, repeats=1, seed=0,
                            scan_layers=scan_layers)
    assert out["scan_layers"] is scan_layers
    assert set(out) >= {"jax_tokens_per_s", "torch_tokens_per_s", "ratio", "compile_s"}
    assert out["jax_tokens_per_s"] > 0 and out["torch_tokens_per_s"] > 0
    assert out["greedy_token_agreement"] == 1.0
    assert abs(out["ratio"] - out["jax_tokens_per_s"] / out["torch_tokens_per_s"]) < 1e-9

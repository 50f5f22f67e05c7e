"""launch/bench/depth.py measures what it says at tiny sizes: both modes, every depth, a compile
time and a step time each (no time is asserted)."""

from launch.bench import depth as bench_depth


def test_the_depth_bench_reports_both_modes_at_every_depth():
    out = bench_depth.run(["2"], rows=2, length=8, repeats=1, sampler_rows=2, sampler_prompt=4, sampler_new_tokens=3)
    for mode in ("unrolled", "scan"):
        assert [r["layers"] for r in out[mode]] == [2]
        assert all(r["compile_s"] > 0 and r["step_s"] > 0 for r in out[mode])
        assert out[f"{mode}_compile_ratio_deepest_vs_shallowest"] == 1.0
        sampled = out["sampler"][mode]
        assert [r["layers"] for r in sampled] == [2]
        assert all(r["first_call_s"] > r["steady_s"] > 0 for r in sampled)

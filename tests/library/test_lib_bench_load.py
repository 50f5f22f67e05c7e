"""launch/bench/library_load.py on a small library: the load round-trips and the profile names the loader."""

from launch.bench import library_load as bench


def test_bench_size_loads_and_round_trips():
    row = bench.bench_size(60)
    assert row["size"] == 60 and row["tools"] == 60 and row["round_trip_equal"] is True
    assert row["same_snapshot"] is True
    for path in ("rederive", "vouched"):
        assert row[path]["load_s"] >= 0 and row[path]["ms_per_tool"] >= 0


def test_profile_lists_the_loader():
    rows = bench.profile_load(30, top=40)
    assert rows == sorted(rows, key=lambda r: -r["cumulative_s"])
    assert any("read_library" in r["function"] for r in rows)

"""The arithmetic and the exchange of cocoda_jax/runs/shares.py on one process: the groups' split, the
gather (the identity on one process, a stand-in collective for P), the digests' comparison."""

import jax
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from cocoda_jax.errors import CocodaError
from cocoda_jax.runs import shares


@given(st.integers(0, 200), st.integers(1, 64))
def test_the_shares_partition_the_groups_in_order_and_differ_by_at_most_one(n_groups, count):
    parts = [shares.group_share(n_groups, p, count) for p in range(count)]
    assert parts[0].start == 0 and parts[-1].stop == n_groups
    assert all(a.stop == b.start for a, b in zip(parts, parts[1:]))  # contiguous, in process order
    sizes = [s.stop - s.start for s in parts]
    assert min(sizes) >= 0 and max(sizes) - min(sizes) <= 1 and sum(sizes) == n_groups


@given(st.integers(0, 50), st.integers(1, 8), st.integers(1, 9))
def test_row_shares_hold_whole_groups(n_groups, group_size, count):
    rows = [shares.row_share(n_groups * group_size, group_size, p, count) for p in range(count)]
    assert all(s.start % group_size == 0 and s.stop % group_size == 0 for s in rows)
    assert [r for s in rows for r in range(s.start, s.stop)] == list(range(n_groups * group_size))


def test_a_bad_share_is_refused():
    for args in ((4, 4, 4), (4, -1, 4), (4, 0, 0), (-1, 0, 1)):
        with pytest.raises(ValueError):
            shares.group_share(*args)
    with pytest.raises(ValueError, match="whole groups"):
        shares.row_share(7, 2, 0, 1)


def test_one_process_gathers_its_own_object_without_a_collective(monkeypatch):
    from jax.experimental import multihost_utils

    def no_collective(*_, **__):
        raise AssertionError("a collective ran on one process")

    monkeypatch.setattr(multihost_utils, "process_allgather", no_collective)
    obj = {"rows": [1, 2], "text": "x = f(y)"}
    assert jax.process_count() == 1 and shares.allgather_objects(obj) == [obj]
    assert shares.allgather_objects(obj)[0] is obj


def _play(rows):
    """A stand-in for sampling a share: per row, (trajectory, record, breakdown) of its index."""
    return [f"t{r}" for r in range(rows.start, rows.stop)], [(r,) for r in range(rows.start, rows.stop)], \
        [float(r) for r in range(rows.start, rows.stop)]


@pytest.mark.parametrize("n_groups,count", [(4, 4), (5, 2), (3, 4), (1, 3), (6, 1)])
def test_shares_gathered_are_the_whole_iteration_in_row_order(n_groups, count):
    group_size = 2
    n_rows = n_groups * group_size
    parts = [tuple(list(x) for x in _play(shares.row_share(n_rows, group_size, p, count))) for p in range(count)]
    played = []

    def play(rows):
        played.append(rows)
        return _play(rows)

    whole = _play(slice(0, n_rows))
    for p in range(count):
        out = shares.shared_rows(play, n_rows, group_size, process_index=p, process_count=count,
                                 gather=lambda mine, p=p: [mine if q == p else parts[q] for q in range(count)])
        assert tuple(out) == tuple(list(x) for x in whole)
    assert all(s.stop > s.start for s in played)  # an empty share plays nothing
    assert len(played) == min(count, n_groups)


def test_a_share_of_the_wrong_length_is_refused():
    with pytest.raises(ValueError, match="played 1 rows"):
        shares.shared_rows(lambda rows: (["t"], [()], [0.0]), 4, 2, process_index=0, process_count=1)


def test_digests_ignore_durations_and_nothing_else():
    base = {"round": 1, "library": "{}", "records": [{"val_accuracy": 0.5, "wall_s": 3.0, "stage_s": {"grpo": 1}}]}
    assert shares.round_digest(base) == shares.round_digest(
        {**base, "records": [{"val_accuracy": 0.5, "wall_s": 9.0, "stage_s": {"grpo": 7}}]})
    assert shares.round_digest(base) != shares.round_digest({**base, "records": [{"val_accuracy": 0.75}]})
    assert shares.round_digest(base) != shares.round_digest({**base, "library": '{"f": 1}'})


def test_agreeing_processes_pass_and_a_diverged_one_is_named():
    decided = {"library": "{}", "outcome": "accept"}
    digest = shares.round_digest(decided)
    assert shares.check_agreement("round 2", decided, gather=lambda d: [d, d, d]) == digest
    with pytest.raises(shares.DivergedProcessesError, match=r"round 2: processes \[2\]") as e:
        shares.check_agreement("round 2", decided, gather=lambda d: [d, d, "0" * 64, d])
    assert isinstance(e.value, CocodaError)
    assert shares.disagreeing(["a", "b", "a", "c"]) == [1, 3]


def test_the_counting_sandbox_counts_programs_and_passes_everything_on():
    class Box:
        name = "box"

        def run_many(self, programs, library=(), timeout_s=None, **kw):
            return [(p, library, timeout_s, kw) for p in programs]

        def run(self, program, library=(), timeout_s=None, **kw):
            return (program, library)

    counted = shares.CountingSandbox(Box())
    assert counted.run_many(iter(["a", "b"]), "lib", 3.0, inputs=[{}, {}]) == [
        ("a", "lib", 3.0, {"inputs": [{}, {}]}), ("b", "lib", 3.0, {"inputs": [{}, {}]})]
    assert counted.run("c", "lib") == ("c", "lib") and counted.name == "box" and counted.programs == 3


def test_local_params_on_one_process_are_the_params_themselves():
    params = {"w": jax.numpy.arange(6.0).reshape(2, 3), "n": np.int32(3)}
    local = shares.local_params(params)
    assert local["w"] is params["w"] and local["n"] is params["n"]

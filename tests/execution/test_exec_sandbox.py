"""The Sandbox API: results, ordering, batching, timeouts, worker replacement, determinism, caching."""

import decimal
import fractions
import os
import signal
import threading
import time

import pytest

from cocoda_jax.execution import ERROR_KINDS, ExecError, RunResult, Sandbox, SandboxError, default_sandbox


class FakeSnapshot:
    """Anything with ``.sources()`` is a library (the LibrarySnapshot protocol)."""

    def __init__(self, sources):
        self._sources = tuple(sources)

    def sources(self):
        return self._sources


def test_run_returns_answer_calls_values_and_stdout(sandbox, tools):
    r = sandbox.run("x0 = sum_sq(n0, 2)\nx1 = add(x0, 1)\nprint('x1 is', x1)\nanswer = x1",
                    FakeSnapshot(tools), inputs={"n0": 3})
    assert r.ok and r.error is None
    assert r.value == 14 and r.calls == ("sum_sq", "add")
    assert r.values == (("x0", 13), ("x1", 14), ("answer", 14))
    assert r.stdout == "x1 is 14\n" and r.elapsed_s > 0


def test_values_round_trip_through_the_codec(sandbox):
    r = sandbox.run("import fractions, decimal\nanswer = ((1, 2), {1: 'a'}, frozenset({3}), fractions.Fraction(1, 3), "
                    "decimal.Decimal('1.10'), float('inf'), None)")
    assert r.value == ((1, 2), {1: "a"}, frozenset({3}), fractions.Fraction(1, 3), decimal.Decimal("1.10"),
                       float("inf"), None)


def test_run_many_keeps_order_across_workers_and_failures(sandbox, tools):
    cases = []  # (program, expected value or error kind)
    for i in range(300):
        if i % 7 != 3:
            cases.append((f"answer = mul({i}, 2)", 2 * i))
        else:
            cases.append([(f"answer = add({i}, 0)", i), ("answer = (", "syntax"), ("import os", "forbidden"),
                          (f"answer = {i} / 0", "runtime"), ("x = 1", "no_answer")][i % 5])
    results = sandbox.run_many([program for program, _ in cases], tools)
    assert len(results) == 300
    for i, ((program, expected), r) in enumerate(zip(cases, results)):
        if isinstance(expected, int):
            assert r.ok and r.value == expected, (i, r)
        else:
            assert not r.ok and r.error.kind == expected, (i, r)
    assert sandbox.run_many([], tools) == []


def test_an_endless_loop_fails_alone_and_the_rest_of_its_batch_reruns(solo):
    programs = [f"answer = {i}" for i in range(40)]
    programs[12] = "while True:\n    pass"
    start = time.monotonic()
    results = solo.run_many(programs, (), timeout_s=1.5)
    assert time.monotonic() - start < 25
    assert results[12].error.kind == "timeout" and "wall-clock" in results[12].error.message
    assert all(r.ok and r.value == i for i, r in enumerate(results) if i != 12)
    assert solo.run("answer = 'still serving'").value == "still serving"


def test_two_loops_on_two_workers_do_not_block_the_others(sandbox):
    programs = ["while True:\n    pass" if i in (3, 30) else f"answer = {i} * 2" for i in range(60)]
    results = sandbox.run_many(programs, (), timeout_s=1.5)
    assert [i for i, r in enumerate(results) if not r.ok] == [3, 30]
    assert {r.error.kind for r in results if not r.ok} == {"timeout"}
    assert all(r.value == 2 * i for i, r in enumerate(results) if r.ok)


def test_cpu_time_limit_stops_a_loop_before_the_wall_clock():
    with Sandbox(workers=1, timeout_s=60, cpu_s=1, memory_mb=128) as sb:
        start = time.monotonic()
        r = sb.run("while True:\n    pass")
        assert r.error.kind == "timeout" and "CPU time" in r.error.message
        assert time.monotonic() - start < 30
        assert sb.run("answer = 1").value == 1


def test_a_run_whose_worker_keeps_dying_fails_and_the_worker_is_replaced(solo):
    """Kill whatever worker runs the program, repeatedly: it is retried once on a fresh worker, then
    reported as worker_died; the pool then serves normally."""
    first = solo.worker_pids()[0]
    stop = threading.Event()

    def killer():
        while not stop.wait(0.4):
            for pid in solo.worker_pids():
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass

    thread = threading.Thread(target=killer, daemon=True)
    thread.start()
    try:
        r = solo.run("while True:\n    pass", timeout_s=20)
    finally:
        stop.set()
        thread.join()
    assert r.error.kind == "worker_died", r.error
    assert "SIGKILL" in r.error.message and "retried once" in r.error.message
    assert solo.run("answer = 7").value == 7 and solo.worker_pids()[0] != first


def test_a_run_survives_one_death_of_its_worker(solo):
    pid = solo.worker_pids()[0]
    killer = threading.Timer(0.5, os.kill, (pid, signal.SIGKILL))
    killer.start()
    try:
        r = solo.run("n = 0\nfor i in range(3 * 10 ** 7):\n    n += 1\nanswer = n", timeout_s=25)
    finally:
        killer.cancel()
    assert r.ok and r.value == 3 * 10 ** 7


def test_a_worker_that_died_while_idle_is_replaced_silently(solo):
    pid = solo.worker_pids()[0]
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:  # wait until the kernel has really ended it
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().split(") ")[1].startswith("Z"):
                    break
        except FileNotFoundError:
            break
        time.sleep(0.01)
    assert solo.run("answer = 8").value == 8


def test_runs_are_deterministic_across_workers_and_sandboxes(sandbox):
    program = ("import random\nwords = {'alpha', 'beta', 'gamma', 'delta', 'eps'}\n"
               "answer = (list(words), random.random(), hash('abc'), sorted({3: 1, 1: 2}.items()))")
    first = sandbox.run_many([program] * 8)
    with Sandbox(workers=1, timeout_s=30) as other:
        second = other.run(program)
    assert all(r.ok for r in first)
    assert len({repr(r.value) for r in first} | {repr(second.value)}) == 1


def test_no_state_leaks_from_one_program_to_the_next(solo, tools):
    solo.run_many([
        "import random, decimal\nrandom.seed(123)\ndecimal.getcontext().traps[decimal.Inexact] = True\n"
        "add = None\nleak = 1\nanswer = 0"], tools)
    r = solo.run("import random, decimal\nanswer = (random.random(), str(decimal.Decimal(1) / decimal.Decimal(3)),"
                 " add(1, 2))", tools)
    fresh = solo.run("import random\nanswer = random.random()")
    assert r.ok, r
    assert r.value[0] == fresh.value and r.value[1].startswith("0.3333") and r.value[2] == 3
    assert solo.run("answer = leak").error.kind == "runtime"


def test_many_libraries_are_cached_evicted_and_resent(solo):
    libraries = [[f"def f(x):\n    return x + {k}\n"] for k in range(20)]
    for k, lib in enumerate(libraries):
        assert solo.run("answer = f(1)", lib).value == 1 + k
    assert solo.run("answer = f(1)", libraries[0]).value == 1  # evicted long ago: sent again
    assert solo.run("answer = f(1)", libraries[19]).value == 20  # still cached: not sent


def test_a_worker_missing_a_library_asks_for_it(solo):
    lib = ["def g(x):\n    return x * 3\n"]
    from cocoda_jax.execution.sandbox import library_key
    solo._slots[0].libs[library_key(lib)] = None  # the trainer wrongly believes the worker has it
    assert solo.run("answer = g(2)", lib).value == 6


def test_library_errors_fail_each_program_with_the_tool_named(sandbox):
    results = sandbox.run_many(["answer = 1", "answer = 2"], ["import socket\ndef net(x):\n    return x\n"])
    assert all(r.error.kind == "forbidden" and "tool 'net'" in r.error.message for r in results)
    r = sandbox.run("answer = 1", ["def f(x):\n    return (\n"])
    assert r.error.kind == "syntax" and "tool #0" in r.error.message


def test_bad_arguments_raise_typed_errors(sandbox):
    with pytest.raises(TypeError, match="not one string"):
        sandbox.run("answer = 1", "def f(x):\n    return x\n")
    with pytest.raises(TypeError, match="program 0"):
        sandbox.run_many([b"answer = 1"])
    with pytest.raises(TypeError, match="library source #1"):
        sandbox.run("answer = 1", ["def f(x):\n    return x\n", 3])
    with pytest.raises(ValueError, match="'__x' is not a usable variable name"):
        sandbox.run("answer = 1", inputs={"__x": 1})
    with pytest.raises(ValueError, match="cannot encode"):
        sandbox.run("answer = 1", inputs={"x": object()})
    with pytest.raises(ValueError, match="2 inputs for 1 programs"):
        sandbox.run_many(["answer = 1"], inputs=[{}, {}])
    with pytest.raises(ValueError, match="timeout_s"):
        sandbox.run("answer = 1", timeout_s=0)
    with pytest.raises(ValueError, match="workers"):
        Sandbox(workers=0)


def test_a_closed_sandbox_refuses_work():
    sb = Sandbox(workers=1)
    with sb:
        pids = sb.worker_pids()
        assert sb.run("answer = 1").ok
    with pytest.raises(SandboxError, match="closed"):
        sb.run("answer = 1")
    for pid in pids:
        assert not os.path.exists(f"/proc/{pid}") or open(f"/proc/{pid}/stat").read().split(") ")[1][0] in "ZX"


def test_default_sandbox_is_shared_and_serves(tools):
    sb = default_sandbox()
    assert sb is default_sandbox()
    assert sb.run("answer = square(4)", tools).value == 16


def test_throughput_sanity_many_small_programs(sandbox, tools):
    start = time.monotonic()
    results = sandbox.run_many([f"x = add({i}, 1)\nanswer = mul(x, 2)" for i in range(1000)], tools)
    elapsed = time.monotonic() - start
    assert [r.value for r in results] == [2 * (i + 1) for i in range(1000)]
    assert all(r.calls == ("add", "mul") for r in results)
    assert elapsed > 0  # the rate itself is measured by launch/bench/executor.py


def test_results_are_well_formed_records():
    assert RunResult.failure("timeout", "x").error == ExecError("timeout", "x")
    with pytest.raises(ValueError, match="unknown error kind"):
        ExecError("oops", "x")
    with pytest.raises(ValueError):
        RunResult(ok=True, error=ExecError("runtime", "x"))
    assert ERROR_KINDS == {"timeout", "memory", "syntax", "forbidden", "runtime", "no_answer", "worker_died",
                           "output_limit"}


def test_compiler_warnings_cannot_stall_a_worker(solo):
    # Each of these triggers a SyntaxWarning; were warnings written to the worker's stderr pipe, they
    # would fill it and block the worker.
    results = solo.run_many([f"answer = {i} is {i}" for i in range(1500)])
    assert all(r.ok and r.value is True for r in results)


def test_a_memory_error_retires_its_worker(solo):
    before = solo.worker_pids()
    r = solo.run("x = [0] * (10 ** 9)")
    assert r.error.kind == "memory"
    assert solo.run("answer = 1").value == 1
    assert solo.worker_pids() != before


def test_an_interrupted_call_leaves_no_stale_replies(solo):
    class Interrupted(Exception):
        pass

    def interrupt(_signum, _frame):
        raise Interrupted()

    previous = signal.signal(signal.SIGALRM, interrupt)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.5)
        with pytest.raises(Interrupted):
            solo.run_many(["n = 0\nfor i in range(10 ** 8):\n    n += 1\nanswer = 'stale'"] + ["answer = 'stale'"] * 5,
                          timeout_s=25)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert [r.value for r in solo.run_many(["answer = 'fresh'", "answer = 'fresh too'"])] == ["fresh", "fresh too"]

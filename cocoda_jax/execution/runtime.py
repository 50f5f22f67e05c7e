"""What runs inside a sandbox worker: the restricted environment and the execution of one program.

A :class:`Runtime` holds, for the life of a worker process,

* read-only copies of the allowed modules (public, non-module attributes only; see ``guard.py``),
* the restricted builtins: no ``open``/``eval``/``exec``/..., a ``getattr`` and ``hasattr`` that apply
  the checker's attribute rule to runtime text, a one-argument ``type``, an ``__import__`` that only
  hands out the module copies, and a ``print`` into a bounded buffer,
* checked and compiled tool code per library hash (an LRU, so repeated runs against one library are
  cheap) and compiled programs per source text.

Each program runs in a fresh namespace that holds the library's tools wrapped for tracing: a call is
recorded when no other tool call is active, so calls made inside tools are not top-level calls. The
program's top-level assignments are instrumented to record ``(name, value)`` as they happen. Shared
state that a program could change is reset before each run: ``random`` is seeded, ``decimal`` gets a
fresh context, and the tools themselves are defined anew (see :class:`_Library`), so a tool's
mutable default argument, a closure cell or a cache made by a decorator starts from scratch in
every program.

A worker may also hold a trusted **environment** (``worker.py`` loads it by file path; see
``environment.py``): stateful backends such as BFCL's file system that tools reach only through the
one builtin ``environment_call(kind, method, **kwargs)``. A run that carries an environment spec
gets a fresh session built from it (its state is the spec's initial state with the spec's earlier
calls replayed, so nothing survives from one run to the next); arguments and results cross the
boundary as copies through the value codec, so a program never holds a reference into a backend.

This module imports only the standard library and its two siblings: the worker loads all three by file
path (under the names ``cocoda_values`` and ``cocoda_guard``); the trainer may import it for tests.
"""

from __future__ import annotations

import ast
import builtins as _builtins
import collections
import decimal
import gc
import importlib
import json
import random
import time
import types
from typing import Any, NamedTuple

if __package__:
    from .. import values as _values
    from . import guard as _guard
else:  # loaded by file path inside a sandbox worker (see worker.py)
    import cocoda_guard as _guard  # type: ignore[no-redef]
    import cocoda_values as _values  # type: ignore[no-redef]

#: Name of the recorder the instrumentation calls; untrusted code cannot spell it (it starts with __).
_RECORD = "__record__"
_TOO_LARGE = {"__repr__": "<value too large to record>"}


class CpuLimitExceeded(BaseException):
    """Raised in the worker when the per-run CPU-time soft limit signals (SIGXCPU)."""


class SandboxViolation(Exception):
    """A runtime check refused an operation (reported as kind ``forbidden``)."""


class Limits(NamedTuple):
    max_stdout: int = 8192            # characters of printed output kept per run
    max_answer_chars: int = 1_000_000  # encoded size above which ``answer`` is an output_limit error
    max_value_chars: int = 2000       # encoded size above which an intermediate value is elided
    max_values: int = 200             # intermediate values kept per run
    max_calls: int = 10_000           # top-level tool calls kept per run


SAFE_BUILTIN_NAMES = (
    "abs", "all", "any", "ascii", "bin", "bool", "bytearray", "bytes", "callable", "chr", "complex",
    "dict", "divmod", "enumerate", "filter", "float", "format", "frozenset", "hash", "hex", "int",
    "isinstance", "issubclass", "iter", "len", "list", "map", "max", "min", "next", "object", "oct",
    "ord", "pow", "range", "repr", "reversed", "round", "set", "slice", "sorted", "str", "sum", "tuple",
    "zip", "Ellipsis", "NotImplemented",
    "ArithmeticError", "AssertionError", "AttributeError", "Exception", "FloatingPointError",
    "ImportError", "IndexError", "KeyError", "LookupError", "ModuleNotFoundError", "NameError",
    "NotImplementedError", "OverflowError", "RecursionError", "RuntimeError", "StopIteration",
    "TypeError", "UnboundLocalError", "UnicodeError", "ValueError", "ZeroDivisionError",
)


class _FrozenModule(types.ModuleType):
    """A module copy that refuses attribute changes: every program of a worker shares it."""

    def __setattr__(self, name: str, value: Any) -> None:
        raise SandboxViolation(f"module {self.__name__!r} is read-only in the sandbox")

    def __delattr__(self, name: str) -> None:
        raise SandboxViolation(f"module {self.__name__!r} is read-only in the sandbox")


def build_modules() -> dict[str, types.ModuleType]:
    """Read-only copies of the allowed modules: their public, non-module attributes minus the withheld."""
    proxies = {}
    for name in _guard.ALLOWED_MODULES:
        real = importlib.import_module(name)
        proxy = _FrozenModule(name)
        hidden = _guard.HIDDEN_ATTRIBUTES.get(name, frozenset())
        for attr in dir(real):
            if not _guard.attribute_allowed(attr) or attr in hidden:
                continue
            if name == "typing" and attr not in _guard.TYPING_NAMES:
                continue
            value = getattr(real, attr)
            if isinstance(value, types.ModuleType):
                continue
            types.ModuleType.__setattr__(proxy, attr, value)
        proxies[name] = proxy
    return proxies


def warm_up() -> None:
    """Triggers the standard library's lazy imports now, while the worker may still open files."""
    import datetime
    datetime.datetime.strptime("2000-01-02", "%Y-%m-%d")
    json.loads(json.dumps({"a": [1.5, "b"]}))
    "x".encode("utf-8").decode("utf-8")


class _Output:
    """Printed text, bounded: what does not fit is counted, not kept."""

    def __init__(self, limit: int):
        self.limit, self.parts, self.size, self.dropped = limit, [], 0, 0

    def write(self, text: str) -> None:
        room = self.limit - self.size
        if len(text) <= room:
            self.parts.append(text)
            self.size += len(text)
        else:
            if room > 0:
                self.parts.append(text[:room])
                self.size += room
            self.dropped += len(text) - max(room, 0)

    def text(self) -> str:
        out = "".join(self.parts)
        return out + f"\n[... {self.dropped} more characters of output truncated]" if self.dropped else out


class _Library:
    """A compiled library: the base namespace of programs (traced tools) and the code of each tool
    source, or the reason it failed.

    What is cached is code, not tool objects: :meth:`Runtime.run` executes the code into a fresh
    namespace for every program, and the traced tools of the base namespace call that run's
    definitions, so programs run in one worker cannot influence each other through tool state.

    Deep-copying each function's ``__defaults__``/``__kwdefaults__`` per run would be cheaper but
    incomplete: a tool source may only define functions and import at its top level (``guard.py``),
    yet its decorators and default expressions are arbitrary code run at definition time, and the
    state they make lives in more places than defaults: closure cells (a decorator tool that wraps
    another with a ``nonlocal`` counter), caches (``@functools.lru_cache`` handing one mutable result
    to every program), iterators and generators (``c=itertools.count()``; a generator cannot even be
    copied). Defining the tools again resets all of them, at the cost of one ``exec`` of the compiled
    code per run: about 2-4 us for the eight tools of ``launch/bench/executor.py``, against 40-60 us
    for the rest of a run inside the worker and about 0.6 ms for a sandbox round trip; that
    benchmark's throughput did not move beyond its run-to-run noise.
    """

    def __init__(self, namespace: dict | None, error: tuple[str, str] | None, cacheable: bool = True,
                 codes: tuple[tuple[str, Any], ...] = ()):
        self.namespace, self.error, self.cacheable, self.codes = namespace, error, cacheable, codes


def _fits(value: Any, limit: int) -> bool:
    """A cheap upper-bound walk: can ``value`` be encoded in about ``limit`` characters?

    Stops as soon as the budget is spent, so a huge or cyclic value costs O(limit), not O(size).
    """
    stack, total = [value], 0
    while stack:
        v = stack.pop()
        if v is None or isinstance(v, (bool, float)):
            total += 8
        elif isinstance(v, int):
            bits = v.bit_length()
            if bits > 14_000:  # beyond Python's 4300-digit int/str conversion limit
                return False
            total += bits // 3 + 2
        elif isinstance(v, str):
            total += len(v) + 2
        elif isinstance(v, (list, tuple, set, frozenset)):
            total += 2 + len(v)
            if total > limit:
                return False
            stack.extend(v)
        elif isinstance(v, dict):
            total += 2 + 2 * len(v)
            if total > limit:
                return False
            stack.extend(v.keys())
            stack.extend(v.values())
        else:
            total += 1000  # the codec keeps at most 1000 characters of an object's repr
        if total > limit:
            return False
    return True


def encode_bounded(value: Any, limit: int) -> Any | None:
    """The codec's encoding of ``value``, or ``None`` when it is too large or too deeply nested (the
    encoding of ``None`` itself is ``None`` too: callers tell the two apart by the value)."""
    if not _fits(value, limit):
        return None
    try:
        encoded = _values.encode(value)
    except (_values.UnencodableValue, RecursionError, ValueError):
        return None
    return encoded


def _assigned_names(stmt: ast.stmt) -> list[str]:
    if isinstance(stmt, ast.Assign):
        targets = stmt.targets
    elif isinstance(stmt, (ast.AugAssign, ast.AnnAssign)) and getattr(stmt, "value", None) is not None:
        targets = [stmt.target]
    else:
        return []
    names: list[str] = []
    stack = list(reversed(targets))
    while stack:
        t = stack.pop()
        if isinstance(t, ast.Name):
            if t.id not in names:
                names.append(t.id)
        elif isinstance(t, (ast.Tuple, ast.List)):
            stack.extend(reversed(t.elts))
        elif isinstance(t, ast.Starred):
            stack.append(t.value)
    return names


def instrument(tree: ast.Module) -> ast.Module:
    """After each top-level assignment, record the names it bound (``__record__('x', x)``).

    The new nodes get the assignment's position directly (cheaper than ``ast.fix_missing_locations``
    over the whole tree, which this runs for every program).
    """
    body: list[ast.stmt] = []
    for stmt in tree.body:
        body.append(stmt)
        for name in _assigned_names(stmt):
            where = {"lineno": stmt.lineno, "col_offset": stmt.col_offset,
                     "end_lineno": stmt.end_lineno, "end_col_offset": stmt.end_col_offset}
            call = ast.Call(ast.Name(_RECORD, ast.Load(), **where),
                            [ast.Constant(name, **where), ast.Name(name, ast.Load(), **where)], [], **where)
            body.append(ast.Expr(call, **where))
    tree.body = body
    return tree


def _location(exc: BaseException) -> str:
    """`` (line N)`` or `` (in tool NAME, line N)`` for the innermost frame of untrusted code."""
    where = ""
    tb = exc.__traceback__
    while tb is not None:
        filename = tb.tb_frame.f_code.co_filename
        if filename == "<program>":
            where = f" (line {tb.tb_lineno})"
        elif filename.startswith("<tool:"):
            where = f" (in tool {filename[6:-1]}, line {tb.tb_lineno})"
        tb = tb.tb_next
    return where


def describe(exc: BaseException, limit: int = 500) -> str:
    try:
        text = str(exc)
    except BaseException:  # a hostile __str__ must not break the worker
        text = "<unprintable>"
    text = text if len(text) <= limit else text[:limit] + "..."
    return f"{type(exc).__name__}: {text}{_location(exc)}" if text else f"{type(exc).__name__}{_location(exc)}"


def _syntax_message(exc: SyntaxError) -> str:
    return f"line {exc.lineno}, column {exc.offset}: {exc.msg}" if exc.lineno else str(exc.msg)


class Runtime:
    """The restricted environment of one worker process (see the module docstring)."""

    def __init__(self, limits: Limits = Limits(), library_cache: int = 16, code_cache: int = 512,
                 environment: Any = None):
        self.limits = limits
        self.environment = environment  # a trusted module with ``open(spec) -> session`` (or None)
        self._session: Any = None
        self._tools: dict[str, Any] = {}  # the current run's tool definitions (see _Library)
        self.modules = build_modules()
        self.builtins = self._make_builtins()
        self._library_cache = library_cache
        self._libraries: collections.OrderedDict[str, _Library] = collections.OrderedDict()
        self._code_cache = code_cache
        self._codes: collections.OrderedDict[str, Any] = collections.OrderedDict()
        self._decimal_template = decimal.Context()
        self.wants_retirement = False  # set after a memory error: a fresh process is the safe state
        self._reset()

    # --- the environment ---------------------------------------------------------------------------
    def _make_builtins(self) -> dict[str, Any]:
        safe = {name: vars(_builtins)[name] for name in SAFE_BUILTIN_NAMES}
        runtime = self

        def print(*args, sep=" ", end="\n", file=None, flush=False):  # noqa: A001 - the sandbox's print
            if file is not None:
                raise SandboxViolation("print(file=...) is not available in the sandbox")
            sep = " " if sep is None else sep
            end = "\n" if end is None else end
            if not isinstance(sep, str) or not isinstance(end, str):
                raise TypeError("print(): sep and end must be str")
            runtime._out.write(sep.join(str(a) for a in args) + end)

        def getattr(obj, name, *default):  # noqa: A001
            if not _guard.attribute_allowed(name):
                raise SandboxViolation(f"attribute {name!r} is not allowed")
            return _builtins.getattr(obj, name, *default)

        def hasattr(obj, name):  # noqa: A001
            if not _guard.attribute_allowed(name):
                raise SandboxViolation(f"attribute {name!r} is not allowed")
            return _builtins.hasattr(obj, name)

        def type(obj, *more):  # noqa: A001
            if more:
                raise SandboxViolation("type() with three arguments (creating a class) is not allowed")
            return _builtins.type(obj)

        def __import__(name, globals=None, locals=None, fromlist=(), level=0):  # noqa: A002
            if level or name not in runtime.modules:
                raise SandboxViolation(f"import of module {name!r} is not allowed")
            return runtime.modules[name]

        def environment_call(kind, method, **kwargs):
            """The only door from sandboxed code to the run's trusted environment session."""
            session = runtime._session
            if session is None:
                raise SandboxViolation("this run has no environment (environment_call is unavailable)")
            if not isinstance(kind, str) or not isinstance(method, str) or not _guard.attribute_allowed(method):
                raise SandboxViolation(f"environment method {kind!r}.{method!r} is not allowed")
            try:
                copied = {k: _values.decode(_values.encode(v, lossy=False)) for k, v in kwargs.items()}
            except Exception as exc:  # noqa: BLE001 - any value the codec refuses
                raise TypeError(f"environment_call arguments must be plain values: {exc}") from None
            result = session.call(kind, method, copied)
            return _values.decode(_values.encode(result))

        safe.update(print=print, getattr=getattr, hasattr=hasattr, type=type, __import__=__import__,
                    environment_call=environment_call)
        return safe

    def _reset(self) -> None:
        self._calls: list[str] = []
        self._depth = 0
        self._values: list[list[Any]] = []
        self._out = _Output(self.limits.max_stdout)

    def _record(self, name: str, value: Any) -> None:
        if len(self._values) < self.limits.max_values:
            encoded = encode_bounded(value, self.limits.max_value_chars)
            self._values.append([name, _TOO_LARGE if encoded is None and value is not None else encoded])

    def _traced(self, name: str, doc: str | None) -> Any:
        """The tool ``name`` as programs see it: traced, and calling the current run's definition."""
        runtime = self

        def tool(*args, **kwargs):
            if runtime._depth == 0 and len(runtime._calls) < runtime.limits.max_calls:
                runtime._calls.append(name)
            runtime._depth += 1
            try:
                return runtime._tools[name](*args, **kwargs)
            finally:
                runtime._depth -= 1

        tool.__name__ = tool.__qualname__ = name
        tool.__doc__ = doc
        return tool

    # --- libraries -----------------------------------------------------------------------------------
    def library(self, key: str, sources: list[str] | None) -> _Library | None:
        """The compiled library ``key``; built from ``sources`` when not cached (``None`` if neither)."""
        lib = self._libraries.get(key)
        if lib is not None:
            self._libraries.move_to_end(key)
            return lib
        if sources is None:
            return None
        lib = self._build_library(sources)
        if lib.cacheable:
            self._libraries[key] = lib
            while len(self._libraries) > self._library_cache:
                self._libraries.popitem(last=False)
        return lib

    def _build_library(self, sources: list[str]) -> _Library:
        """Checks and compiles each source, then defines the tools once to report their errors now."""
        codes: list[tuple[str, Any]] = []
        names: list[str] = []
        try:
            for i, source in enumerate(sources):
                label = f"tool #{i}"
                if not isinstance(source, str):
                    return _Library(None, ("syntax", f"{label} is not source text"))
                try:
                    tree = ast.parse(source, filename=f"<tool #{i}>")
                except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
                    msg = _syntax_message(exc) if isinstance(exc, SyntaxError) else describe(exc)
                    return _Library(None, ("syntax", f"{label}: {msg}"))
                defs = [s.name for s in tree.body if isinstance(s, ast.FunctionDef)]
                if defs:
                    label = f"tool {defs[0]!r}"
                violations = _guard.check_tree(tree, tool=True)
                if violations:
                    return _Library(None, ("forbidden", f"{label}: " + _join(violations)))
                codes.append((label, compile(tree, f"<tool:{defs[0] if defs else i}>", "exec")))
                names.extend(n for n in defs if n not in names)
            defined = self._define(codes)
        except CpuLimitExceeded:
            return _Library(None, ("timeout", "CPU time limit exceeded while defining the library"), cacheable=False)
        except MemoryError:
            self.wants_retirement = True
            return _Library(None, ("memory", "memory limit exceeded while defining the library"), cacheable=False)
        if isinstance(defined, tuple):
            return _Library(None, defined)
        base = {"__builtins__": self.builtins, "__name__": "__main__", _RECORD: self._record}
        for name in names:
            base[name] = self._traced(name, getattr(defined[name], "__doc__", None))
        defined.clear()  # break the cycles between the tools and their globals
        return _Library(base, None, codes=tuple(codes))

    def _define(self, codes: Any) -> dict | tuple[str, str]:
        """A fresh tool namespace: the library's code executed anew, or a ``(kind, message)`` failure.

        ``CpuLimitExceeded`` and ``MemoryError`` propagate."""
        tool_ns: dict[str, Any] = {"__builtins__": self.builtins, "__name__": "__tools__"}
        for label, code in codes:
            try:
                exec(code, tool_ns)
            except SandboxViolation as exc:
                return ("forbidden", f"{label}: {describe(exc)}")
            except (CpuLimitExceeded, MemoryError):
                raise
            except Exception as exc:
                return ("runtime", f"{label}: {describe(exc)}")
        return tool_ns

    # --- programs ------------------------------------------------------------------------------------
    def _compile(self, source: str) -> Any:
        """A code object, or a ``(kind, message)`` failure; both are cached per source text."""
        cached = self._codes.get(source)
        if cached is not None:
            self._codes.move_to_end(source)
            return cached
        try:
            tree = ast.parse(source, filename="<program>")
            violations = _guard.check_tree(tree)
            if violations:
                result: Any = ("forbidden", _join(violations))
            else:
                result = compile(instrument(tree), "<program>", "exec")
        except SyntaxError as exc:
            result = ("syntax", _syntax_message(exc))
        except (ValueError, RecursionError, MemoryError) as exc:  # null bytes, nesting too deep to parse
            result = ("syntax", describe(exc))
        self._codes[source] = result
        while len(self._codes) > self._code_cache:
            self._codes.popitem(last=False)
        return result

    def run(self, lib: _Library, source: str, inputs: dict[str, Any] | None = None, seed: int = 0,
            environment: dict | None = None) -> dict:
        """Runs one program; returns the reply (plain JSON-ready dict). Never raises.

        ``environment``: the spec of the run's environment session (or None); the reply's
        ``environment_calls`` lists the calls this run made on it (``[kind, method, kwargs]``)."""
        start = time.perf_counter()
        self._reset()
        ns: dict[str, Any] = {}
        error: tuple[str, str] | None = None
        encoded_answer = None
        try:
            random.seed(seed)
            decimal.setcontext(self._decimal_template.copy())
            code = self._compile(source) if lib.error is None else lib.error
            if environment is not None and not isinstance(code, tuple):
                code = self._open_session(environment) or code
            if not isinstance(code, tuple):  # this program's own tools (see _Library)
                defined = self._define(lib.codes)
                if isinstance(defined, tuple):
                    code = defined
                else:
                    self._tools = defined
            if isinstance(code, tuple):
                error = code
            else:
                ns = dict(lib.namespace)
                for name, value in (inputs or {}).items():
                    if not isinstance(name, str) or not name.isidentifier() or name.startswith("__"):
                        raise SandboxViolation(f"input name {name!r} is not allowed")
                    ns[name] = _values.decode(value)
                try:
                    exec(code, ns)
                except SandboxViolation as exc:
                    error = ("forbidden", describe(exc))
                except (CpuLimitExceeded, MemoryError):
                    raise
                except BaseException as exc:  # the program's own failure, whatever it raised
                    error = ("runtime", describe(exc))
                if error is None:
                    if "answer" not in ns:
                        error = ("no_answer", "the program finished without binding 'answer'")
                    else:
                        encoded_answer = encode_bounded(ns["answer"], self.limits.max_answer_chars)
                        if encoded_answer is None and ns["answer"] is not None:
                            error = ("output_limit", f"'answer' is larger than {self.limits.max_answer_chars} "
                                                     f"encoded characters or nested too deeply")
        except SandboxViolation as exc:
            error = ("forbidden", describe(exc))
        except CpuLimitExceeded:
            error = ("timeout", "CPU time limit exceeded")
        except MemoryError:
            error = ("memory", "memory limit exceeded (MemoryError)")
            self.wants_retirement = True
        finally:
            ns.clear()  # break the cycles between the program's (and the tools') functions and namespace
            self._tools.clear()
            self._tools = {}
        session, self._session = self._session, None
        environment_calls = ([[str(k), str(m), _values.encode(kw)] for k, m, kw in session.calls]
                             if session is not None else [])
        if error is not None and error[0] == "memory":
            self._values.clear()
            gc.collect()
        return {
            "ok": error is None,
            "value": encoded_answer,
            "error": None if error is None else [error[0], error[1]],
            "calls": self._calls,
            "values": self._values,
            "stdout": self._out.text(),
            "elapsed": time.perf_counter() - start,
            "environment_calls": environment_calls,
        }

    def _open_session(self, spec: Any) -> tuple[str, str] | None:
        """Builds this run's environment session; a ``(kind, message)`` failure if it cannot."""
        if self.environment is None:
            return ("forbidden", "the run asks for an environment, but this sandbox has none")
        try:
            self._session = self.environment.open(_values.decode(spec))
        except (CpuLimitExceeded, MemoryError):
            raise
        except Exception as exc:  # noqa: BLE001 - a bad spec or a replay that fails
            return ("runtime", f"the environment could not be prepared: {describe(exc)}")
        return None


def _join(violations: tuple[Any, ...], limit: int = 5) -> str:
    shown = "; ".join(str(v) for v in violations[:limit])
    return shown + (f" (and {len(violations) - limit} more)" if len(violations) > limit else "")


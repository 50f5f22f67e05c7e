"""BFCL v4's executable multi-turn backends as a sandbox environment (trusted code).

Loaded by file path inside each sandbox worker (see :mod:`cocoda_jax.execution.environment`); it
imports only the standard library and the ``bfcl_eval`` backend modules (their own imports: copy,
datetime, random, math, decimal, mpmath). A spec, one per step of an episode::

    {"config": initial_config, "classes": [class names], "long_context": bool,
     "turns": [[user message, ...], ...], "replay": [[kind, method, kwargs], ...]}

``open(spec)`` builds fresh backend instances the way BFCL's own executor does (``_load_scenario``
on a deep copy of the class's initial config, except for its stateless classes) and replays the
earlier calls, so the state a step sees is a pure function of its spec.

Besides the backends there is one pseudo-backend, ``Conversation``: ``end_turn()`` closes the current
user turn and returns the next turn's user message ("" when the conversation is over). Its calls go
into the log like any other, so the log splits into BFCL's per-turn call lists.
"""

import copy
import importlib

BACKEND_PACKAGE = "bfcl_eval.eval_checker.multi_turn_eval.func_source_code"
#: The executable classes and their modules (BFCL's CLASS_FILE_PATH_MAPPING for the multi-turn suite).
BACKEND_MODULES = {
    "GorillaFileSystem": "gorilla_file_system",
    "MathAPI": "math_api",
    "MessageAPI": "message_api",
    "TwitterAPI": "posting_api",
    "TicketAPI": "ticket_api",
    "TradingBot": "trading_bot",
    "TravelAPI": "travel_booking",
    "VehicleControlAPI": "vehicle_control",
}
#: Classes BFCL builds without a scenario (its STATELESS_CLASSES).
STATELESS = frozenset({"MathAPI"})
CONVERSATION = "Conversation"
END_TURN = "end_turn"

_classes = {}


def warm_up():
    """Imports every backend now (the worker cannot open files later)."""
    for name, module in BACKEND_MODULES.items():
        _classes[name] = getattr(importlib.import_module(f"{BACKEND_PACKAGE}.{module}"), name)


def backend_class(name):
    if not _classes:
        warm_up()
    if name not in _classes:
        raise KeyError(f"no BFCL backend class {name!r}; known: {sorted(_classes)}")
    return _classes[name]


class Session:
    """The backends of one episode at one step; ``calls`` are the calls made since ``open``."""

    def __init__(self, spec):
        self.turns = [list(t) for t in spec.get("turns", ())]
        self.turn = 0
        self.instances = {}
        long_context = bool(spec.get("long_context", False))
        config = spec.get("config") or {}
        for name in spec.get("classes", ()):
            instance = backend_class(name)()
            if name not in STATELESS:
                instance._load_scenario(copy.deepcopy(config.get(name, {})), long_context=long_context)
            self.instances[name] = instance
        self.calls = []
        for kind, method, kwargs in spec.get("replay", ()):
            self._dispatch(kind, method, dict(kwargs))

    def _dispatch(self, kind, method, kwargs):
        if kind == CONVERSATION:
            if method != END_TURN or kwargs:
                raise AttributeError(f"the conversation has only {END_TURN}()")
            self.turn += 1
            return "\n".join(self.turns[self.turn]) if self.turn < len(self.turns) else ""
        if kind not in self.instances:
            raise KeyError(f"backend {kind!r} is not part of this task (classes: {sorted(self.instances)})")
        if method.startswith("_"):
            raise AttributeError(f"{kind}.{method} is private")
        fn = getattr(self.instances[kind], method, None)
        if not callable(fn):
            raise AttributeError(f"{kind} has no method {method!r}")
        return fn(**kwargs)

    def call(self, kind, method, kwargs):
        result = self._dispatch(kind, method, kwargs)
        self.calls.append((kind, method, dict(kwargs)))
        return result


def open(spec):  # noqa: A001 - the plugin protocol's name
    return Session(spec)

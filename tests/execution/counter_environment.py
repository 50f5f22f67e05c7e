"""A tiny trusted environment for the sandbox tests: named counters and a list of notes.

Loaded by file path inside the workers (standard library only). A spec is
``{"start": {name: int}, "replay": [[kind, method, kwargs], ...]}``.
"""

import copy


class Counters:
    def __init__(self, start):
        self.values = dict(start)
        self.notes = []

    def add(self, name, amount=1):
        self.values[name] = self.values.get(name, 0) + amount
        return self.values[name]

    def get(self, name):
        return self.values.get(name, 0)

    def note(self, text):
        self.notes.append(text)
        return self.notes  # the live list: the sandbox must hand out a copy

    def _secret(self):
        return "private"


class Session:
    def __init__(self, spec):
        self.backend = Counters(copy.deepcopy(spec.get("start", {})))
        self.calls = []
        for kind, method, kwargs in spec.get("replay", ()):
            self._dispatch(kind, method, kwargs)

    def _dispatch(self, kind, method, kwargs):
        if kind != "Counters" or method.startswith("_") or not hasattr(Counters, method):
            raise AttributeError(f"no method {kind}.{method}")
        return getattr(self.backend, method)(**kwargs)

    def call(self, kind, method, kwargs):
        result = self._dispatch(kind, method, kwargs)
        self.calls.append((kind, method, dict(kwargs)))
        return result


def warm_up():
    pass


def open(spec):  # noqa: A001 - the plugin protocol's name
    return Session(spec)

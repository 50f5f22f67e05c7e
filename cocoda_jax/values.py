"""Safe, stable encoding of the plain values that tools take and return.

One codec for everything that crosses a trust or storage boundary: sandbox
replies (never pickle: unpickling a worker's bytes would run its code in the
trainer), library JSON (examples must round-trip byte for byte) and logs.

Plain JSON carries int, str, bool, None, finite float, list and dicts whose
keys are strings. Everything else is a one-key tagged object:
``{"__tuple__": [...]}``, ``{"__dict__": [[k, v], ...]}``, ``{"__float__": "nan"}``,
``{"__set__": [...]}``, ``{"__fraction__": "1/3"}``, ``{"__decimal__": "1.10"}``
and, for anything else, the lossy ``{"__repr__": "..."}``.

This module imports only the standard library: sandbox workers load it.
"""

from __future__ import annotations

import decimal
import fractions
import json
import math
from typing import Any

_TAGS = ("__tuple__", "__dict__", "__float__", "__set__", "__fraction__", "__decimal__", "__repr__")


class UnencodableValue(TypeError):
    """A value that has no faithful encoding (only raised when ``lossy=False``)."""


def encode(value: Any, *, lossy: bool = True, _depth: int = 0) -> Any:
    """Turns a value into a JSON-compatible structure (see the module docstring)."""
    if _depth > 100:
        raise UnencodableValue("value nested deeper than 100 levels")
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else {"__float__": repr(value)}
    nxt = _depth + 1
    if isinstance(value, list):
        return [encode(v, lossy=lossy, _depth=nxt) for v in value]
    if isinstance(value, tuple):
        return {"__tuple__": [encode(v, lossy=lossy, _depth=nxt) for v in value]}
    if isinstance(value, dict):
        plain = all(isinstance(k, str) for k in value) and not (len(value) == 1 and next(iter(value)) in _TAGS)
        if plain:
            return {k: encode(v, lossy=lossy, _depth=nxt) for k, v in value.items()}
        return {"__dict__": [[encode(k, lossy=lossy, _depth=nxt), encode(v, lossy=lossy, _depth=nxt)]
                             for k, v in value.items()]}
    if isinstance(value, (set, frozenset)):
        items = [encode(v, lossy=lossy, _depth=nxt) for v in value]
        return {"__set__": sorted(items, key=lambda x: json.dumps(x, sort_keys=True))}
    if isinstance(value, fractions.Fraction):
        return {"__fraction__": str(value)}
    if isinstance(value, decimal.Decimal):
        return {"__decimal__": str(value)}
    if not lossy:
        raise UnencodableValue(f"cannot encode a value of type {type(value).__name__}")
    try:
        text = repr(value)
    except Exception as exc:  # a hostile __repr__ must not break the codec
        text = f"<unrepresentable {type(value).__name__}: {type(exc).__name__}>"
    return {"__repr__": text[:1000]}


def decode(obj: Any) -> Any:
    """Inverse of :func:`encode` (``__repr__`` values come back as their text)."""
    if isinstance(obj, list):
        return [decode(v) for v in obj]
    if isinstance(obj, dict):
        if len(obj) == 1:
            (tag, payload), = obj.items()
            if tag == "__tuple__":
                return tuple(decode(v) for v in payload)
            if tag == "__dict__":
                return {_hashable(decode(k)): decode(v) for k, v in payload}
            if tag == "__float__":
                return float(payload)
            if tag == "__set__":
                return frozenset(_hashable(decode(v)) for v in payload)
            if tag == "__fraction__":
                return fractions.Fraction(payload)
            if tag == "__decimal__":
                return decimal.Decimal(payload)
            if tag == "__repr__":
                return payload
        return {k: decode(v) for k, v in obj.items()}
    return obj


def _hashable(value: Any) -> Any:
    return tuple(_hashable(v) for v in value) if isinstance(value, list) else value


def dumps(value: Any, *, lossy: bool = True) -> str:
    """Stable text: the same value always gives the same bytes."""
    return json.dumps(encode(value, lossy=lossy), sort_keys=True, separators=(",", ":"), ensure_ascii=True,
                      allow_nan=False)


def loads(text: str) -> Any:
    return decode(json.loads(text))


def values_equal(a: Any, b: Any, *, rel_tol: float = 1e-9, abs_tol: float = 1e-9) -> bool:
    """Equality for verifying results: numbers compare with a tolerance (int 3 equals float 3.0),
    containers element-wise with the same shape, everything else with ``==``."""
    num = (int, float, fractions.Fraction, decimal.Decimal)
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, num) and isinstance(b, num):
        fa, fb = float(a), float(b)
        if math.isnan(fa) or math.isnan(fb):
            return math.isnan(fa) and math.isnan(fb)
        return math.isclose(fa, fb, rel_tol=rel_tol, abs_tol=abs_tol)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return (isinstance(a, tuple) == isinstance(b, tuple) and len(a) == len(b)
                and all(values_equal(x, y, rel_tol=rel_tol, abs_tol=abs_tol) for x, y in zip(a, b)))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(values_equal(a[k], b[k], rel_tol=rel_tol, abs_tol=abs_tol) for k in a)
    try:
        return bool(a == b)
    except Exception:
        return False

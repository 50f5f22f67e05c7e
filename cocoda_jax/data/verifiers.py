r"""Answer verifiers of the paper's benchmarks and the RODS progress reward.

    from cocoda_jax.data.verifiers import extract_boxed, math_equal
    extract_boxed(r"so \boxed{\frac{1}{2}}.")        # '\\frac{1}{2}'
    math_equal(r"\dfrac12", "0.5")                   # True
    math_equal(r"2\frac{1}{2}", "2.5")               # True (a mixed number)

* GSM8K: :func:`gsm8k_gold` (the number after ``####``), :func:`last_number`, :func:`gsm8k_equal`.
* MATH: :func:`extract_boxed` (``\boxed`` and ``\fbox``, nested braces, the last box wins) and
  :func:`math_equal`: HF ``math-verify`` behind a thin adapter (below), with :func:`normalize_math`.
* WikiTableQuestions: :func:`wtq_match`, the normalised denotation match (numbers, dates, strings;
  lists unordered).
* FinQA: :func:`finqa_equal`, relative error below 1e-3 with percent handling.
* Embedded domains: :func:`answer_equal` (numbers with a tolerance, strings case-folded).
* RODS: :func:`progress_reward`, the fraction of gold intermediate values a trajectory produced.

MATH equivalence is ``math_verify.parse`` + ``math_verify.verify`` (mixed numbers, percent against
decimals, matrices, logarithms, intervals, sets, equations ``x = 3``, units in ``\text{}``). The
adapter keeps the project's own code only where the library is wrong on hand-labelled cases (the
tests name each one): ``°``, a final period and some unit words are normalised away first; two
multiple-choice letters or two words are compared as text; a ``\{...\}`` set never equals a
bracketed tuple; the symbol ``i`` is the imaginary unit.

Safety and time. The library is asked for LaTeX extraction only: its plain-expression extractor
ends in SymPy's ``parse_expr``, i.e. Python ``eval`` of text, while the LaTeX path builds SymPy
objects with an ANTLR parser and never evaluates text, so a prediction such as
``__import__('os').system(...)`` stays text. The library's own timeouts are ``signal.alarm`` based:
whole seconds, main thread only (a ``ValueError`` elsewhere), and they cancel any outer alarm. They
are switched off (``parsing_timeout=None``, ``timeout_seconds=None``) and replaced by
:class:`_Deadline`, which works in every thread: a timer thread schedules an exception in the
calling thread with ``PyThreadState_SetAsyncExc``, delivered at its next bytecode, exactly where a
signal handler would run; it is one-shot and cancelled on exit, so it never escapes. Unlike a
signal, it is not seen inside C code, and CPython's big-integer power loop, which does check for
signals, never reaches a bytecode: so the parsed expressions are bounded before the comparison
(:func:`_too_costly`: no exact number above ``_MAX_DIGITS`` digits, e.g. ``10^{10^{10}}`` or
``1000000!``), and answers above ``_MAX_ANSWER_CHARS`` characters are compared as text only. Calls
into the library are serialised by a lock (its ANTLR parser keeps shared caches).
"""

from __future__ import annotations

import ctypes
import logging
import math
import re
import threading
import unicodedata
from collections.abc import Iterable, Sequence
from typing import Any

# =================================================================================================
# GSM8K
# =================================================================================================

_NUM_RE = re.compile(r"-?\$?\s?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|-?\.\d+")


def _to_float(text: str) -> float | None:
    text = text.replace(",", "").replace("$", "").replace(" ", "").rstrip(".")
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def last_number(text: str) -> float | None:
    """The last number written in ``text`` (thousands separators and ``$`` allowed), or None."""
    if not isinstance(text, str):
        return None
    found = _NUM_RE.findall(text)
    return _to_float(found[-1]) if found else None


def gsm8k_gold(answer: str) -> float:
    """The gold number of a GSM8K answer field (the text after ``####``)."""
    if "####" not in answer:
        raise ValueError("a GSM8K answer must end with '#### <number>'")
    value = _to_float(answer.rsplit("####", 1)[1].strip())
    if value is None:
        raise ValueError(f"no number after '####' in {answer.rsplit('####', 1)[1].strip()!r}")
    return value


def gsm8k_equal(prediction: str | float | int, gold: str | float | int, *, tol: float = 1e-6) -> bool:
    """Numeric match of a GSM8K prediction and the gold answer.

    A string prediction gives its number after ``####`` if it has one, else its last number;
    ``gold`` may be a number or a full answer field.
    """
    if isinstance(gold, str):
        gold_v = gsm8k_gold(gold) if "####" in gold else _to_float(gold.strip())
    else:
        gold_v = float(gold)
    if isinstance(prediction, str):
        pred_v = (_to_float(prediction.rsplit("####", 1)[1].strip().split()[0]) if "####" in prediction
                  and prediction.rsplit("####", 1)[1].strip() else last_number(prediction))
    elif isinstance(prediction, bool) or prediction is None:
        return False
    else:
        pred_v = float(prediction)
    if gold_v is None or pred_v is None or not math.isfinite(pred_v):
        return False
    return abs(pred_v - gold_v) <= tol * max(1.0, abs(gold_v))


# =================================================================================================
# MATH: boxed answers
# =================================================================================================


def extract_boxed(text: str) -> str | None:
    r"""The content of the last ``\boxed{...}`` or ``\fbox{...}`` in ``text`` (nested braces kept), or
    ``None``. ``\boxed 5`` (no braces) gives the token after the space."""
    if not isinstance(text, str):
        return None
    starts = [m.start() for m in re.finditer(r"\\(?:boxed|fbox)(?![a-zA-Z])", text)]
    for start in reversed(starts):
        i = text.index("x", start) + 1 if text.startswith("\\fbox", start) else start + len("\\boxed")
        rest = text[i:]
        stripped = rest.lstrip()
        if stripped.startswith("{"):
            j = i + (len(rest) - len(stripped))
            depth, k = 0, j
            while k < len(text):
                ch = text[k]
                if ch == "\\":  # a backslash escapes the next character (\{ is a literal brace, \\ a line break)
                    k += 2
                    continue
                if ch == "{":
                    depth += 1
                elif ch == "}":
                    depth -= 1
                    if depth == 0:
                        return text[j + 1:k]
                k += 1
            continue  # unbalanced: try an earlier box
        if rest.startswith(" "):
            token = re.match(r"\s+([^\s$]+)", rest)
            if token:
                return token.group(1).rstrip(".")
    return None


# =================================================================================================
# MATH: equivalence (math-verify behind a thin adapter)
# =================================================================================================

# Trailing unit words that math-verify's own unit list lacks ("5 dollars", "4 people", "5 cm^2");
# "percent" is not here: the library reads it as a percent.
_UNITS = (
    "degrees", "degree", "cm", "centimeters", "centimetres", "meters", "metres", "m", "km", "kilometers",
    "mm", "inches", "inch", "in", "feet", "foot", "ft", "yards", "yard", "miles", "mile", "units", "unit",
    "square", "sq", "cubic", "dollars", "dollar", "cents", "cent", "hours", "hour", "minutes", "minute",
    "seconds", "second", "days", "day", "weeks", "week", "years", "year", "mph", "pounds", "pound", "lbs",
    "kg", "grams", "gram", "g", "liters", "litres", "liter", "ml", "people", "students", "ways", "points",
    "sq.", "per", "children", "girls", "boys", "apples", "marbles", "coins", "books",
)
_UNIT_TAIL = re.compile(r"^(.*?\d)\s+(?:(?:" + "|".join(re.escape(u) for u in sorted(_UNITS, key=len, reverse=True))
                        + r")\b\.?\s*(?:\^?\{?[23]\}?)?\s*)+$")
_TEXT_CMD = re.compile(r"\\(?:text|textbf|textit|mbox|mathrm|mathbf|mathit|operatorname)\s*\{([^{}]*)\}")
_CHOICE = re.compile(r"\(?\s*([A-Ea-e])\s*\)?")
_WORDS = re.compile(r"[A-Za-z]{2,}(?:\s+[A-Za-z]+)*")

_MAX_ANSWER_CHARS = 500   # longer answers are compared as text only
_MAX_DIGITS = 10_000      # bound on the digits of an exact number the comparison may have to build
_LOG10_2 = math.log10(2)
_LIBRARY_LOCK = threading.Lock()


def normalize_math(answer: str) -> str:
    r"""The text handed to math-verify: stripped, ``°`` written as ``^{\circ}``, one final period
    after a digit or letter dropped (``4.``), and trailing unit words that the library does not know
    removed after a number (``5 dollars``, ``4 people``, ``5 cm^2``). Everything else (LaTeX
    variants, ``\text{}`` units, percent, thousands separators, ``x =``) is the library's work."""
    s = str(answer).strip().replace("\n", " ")
    s = s.replace("°", "^{\\circ}")
    s = re.sub(r"(?<=[\w}])\.\s*$", "", s).strip()
    m = _UNIT_TAIL.match(s)
    return m.group(1) if m else s


def _plain_text(s: str) -> str:
    for _ in range(3):  # nested \text{\textbf{...}}
        s = _TEXT_CMD.sub(r"\1", s)
    return s.strip()


def _bracket_kind(s: str) -> str | None:
    t = s.replace("\\left", "").replace("\\right", "").replace(" ", "")
    if t.startswith("\\{") and t.endswith("\\}"):
        return "set"
    if t[:1] in ("(", "[") and t[-1:] in (")", "]") and "," in t:
        return "tuple"
    return None


def math_equal(pred: Any, gold: Any, *, timeout_s: float = 2.0) -> bool:
    r"""Whether a MATH prediction equals the gold answer (see the module docstring).

    Both are normalised (:func:`normalize_math`); equal texts match. Then the project's rules for
    what math-verify gets wrong: two multiple-choice letters (``(A)``, ``d)``, ``\text{\textbf{(E)}}``)
    match by letter, two words (``\text{Monday}``, ``odd``) by case-folded text (the library reads a
    word as a product of letters, so anagrams would match), and a ``\{...\}`` set never equals a
    bracketed tuple or interval. Everything else goes to math-verify (the gold side as its gold),
    with ``i`` read as the imaginary unit, within ``timeout_s`` for both parses and the comparison.
    """
    if pred is None or gold is None:
        return False
    p, g = normalize_math(str(pred)), normalize_math(str(gold))
    if not p or not g:
        return False
    if p == g:
        return True
    pt, gt = _plain_text(p), _plain_text(g)
    pc, gc = _CHOICE.fullmatch(pt), _CHOICE.fullmatch(gt)
    if pc and gc:
        return pc.group(1).upper() == gc.group(1).upper()
    if _WORDS.fullmatch(pt) and _WORDS.fullmatch(gt):
        return " ".join(pt.split()).casefold() == " ".join(gt.split()).casefold()
    if {_bracket_kind(p), _bracket_kind(g)} == {"set", "tuple"}:
        return False
    if len(p) > _MAX_ANSWER_CHARS or len(g) > _MAX_ANSWER_CHARS:
        return False
    return _library_equal(p, g, timeout_s)


def _library_equal(pred: str, gold: str, timeout_s: float) -> bool:
    """math-verify's verdict, or False when it does not finish within ``timeout_s``."""
    from math_verify import LatexExtractionConfig, parse, verify  # imported outside the deadline

    _quiet_library_logs()
    config = [LatexExtractionConfig()]  # LaTeX only: the plain-expression extractor uses parse_expr (eval)

    def parsed(text: str) -> list | None:
        found = parse("\\boxed{" + text + "}", extraction_config=config, parsing_timeout=None)
        if any(_too_costly(e) for e in found if not isinstance(e, str)):
            return None
        return [_imaginary_unit(e) for e in found]

    with _LIBRARY_LOCK:
        try:
            with _Deadline(timeout_s) as deadline:
                g, p = parsed(gold), parsed(pred)
                verdict = bool(g and p and verify(g, p, timeout_seconds=None))
        except _Timeout:
            return False
    return verdict and not deadline.fired  # fired but swallowed by a bare ``except``: still a timeout


def _imaginary_unit(e: Any) -> Any:
    """``e`` with the symbol ``i`` replaced by SymPy's imaginary unit (the library keeps a symbol)."""
    if isinstance(e, str):
        return e
    try:
        import sympy
        found = {s: sympy.I for s in e.free_symbols if getattr(s, "name", None) == "i"}
        return e.xreplace(found) if found else e
    except Exception:  # noqa: BLE001 - an object without free symbols: unchanged
        return e


def _too_costly(e: Any) -> bool:
    """Whether comparing ``e`` may build an exact number of more than :data:`_MAX_DIGITS` digits
    (``10^{10^{10}}``, ``1000000!``): such work runs in C, where :class:`_Deadline` cannot stop it."""
    try:
        return _digits(e) > _MAX_DIGITS
    except (RecursionError, OverflowError, TypeError, ValueError, AttributeError):
        return True


def _digits(e: Any) -> float:
    """An upper bound on the decimal digits of the exact numbers evaluating ``e`` builds."""
    import sympy

    if isinstance(e, sympy.MatrixBase):
        return max((_digits(x) for x in e), default=0.0)
    if not isinstance(e, sympy.Basic):
        return 0.0
    if e.is_Rational:
        return max(int(e.p).bit_length(), int(e.q).bit_length()) * _LOG10_2
    if e.is_Float:
        v = abs(float(e))
        return 1.0 if v == 0 else (abs(math.log10(v)) + 17 if math.isfinite(v) else math.inf)
    if e.is_Pow:
        return _magnitude(e.args[1]) * max(_digits(e.args[0]), 1.0)
    if isinstance(e, (sympy.factorial, sympy.factorial2, sympy.subfactorial, sympy.binomial)):
        n = _magnitude(e.args[0])
        return n * math.log10(n) if n > 10 else 10.0
    parts = [_digits(a) for a in e.args]
    if not parts:
        return 1.0
    return sum(parts) if e.is_Mul else max(parts) + 1.0


def _magnitude(e: Any) -> float:
    """An upper bound on ``|e|`` (of an exponent or a factorial's argument); 1 for infinities."""
    if getattr(e, "is_Number", False):
        if e.is_finite is False:
            return 1.0  # oo, zoo, nan: symbolic, no big integer is built
        return abs(float(e))
    d = _digits(e)
    return 10.0 ** d if d < 300 else math.inf


class _Timeout(BaseException):
    """Raised by :class:`_Deadline`; a BaseException so that the library's ``except Exception`` cannot
    swallow it."""


def _async_raise(thread_id: int, exc: type[BaseException] | None) -> None:
    """Schedules ``exc`` in thread ``thread_id`` (raised at its next bytecode); ``None`` cancels."""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id),
                                               ctypes.py_object(exc) if exc is not None else None)


class _Deadline:
    """A timer that raises :class:`_Timeout` in the thread that entered it, in any thread.

    One shot: the exception is scheduled at most once, and ``__exit__`` cancels it if it has not been
    delivered yet, so it never escapes the block's handler (see the module docstring)."""

    def __init__(self, seconds: float):
        self.seconds, self.fired = seconds, False

    def __enter__(self) -> "_Deadline":
        self._thread_id, self._lock, self._done = threading.get_ident(), threading.Lock(), False
        self._timer = threading.Timer(self.seconds, self._fire)
        self._timer.daemon = True
        self._timer.start()
        return self

    def _fire(self) -> None:
        with self._lock:
            if not self._done:
                self.fired = True
                _async_raise(self._thread_id, _Timeout)

    def __exit__(self, *exc_info) -> bool:
        with self._lock:
            self._done = True
            if self.fired:
                _async_raise(self._thread_id, None)
        self._timer.cancel()
        return False


class _NoTimeoutWarning(logging.Filter):
    """Drops the library's warning that its own (signal) timeout is off: :class:`_Deadline` is ours."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("Timeout is disabled")


def _quiet_library_logs() -> None:
    for name in ("math_verify.parser", "math_verify.grader"):
        log = logging.getLogger(name)
        if not any(isinstance(f, _NoTimeoutWarning) for f in log.filters):
            log.addFilter(_NoTimeoutWarning())


# =================================================================================================
# WikiTableQuestions
# =================================================================================================

_DATE_RE = re.compile(r"^(\d{4}|xx|XX)-(\d{2}|xx|XX)-(\d{2}|xx|XX)$")


def _wtq_normalize_string(x: str) -> str:
    """The official evaluator's string normalisation, re-implemented: NFKD without accents,
    quotes and brackets unified, final punctuation dropped, whitespace collapsed, lower case."""
    x = "".join(c for c in unicodedata.normalize("NFKD", str(x)) if unicodedata.category(c) != "Mn")
    x = re.sub(r"[‘’´`]", "'", x)
    x = re.sub(r"[“”]", '"', x)
    x = re.sub(r"[‐‑‒–—−]", "-", x)
    while True:
        old = x
        x = re.sub(r'((?<!^)\[[^\]]*\]|\[\d+\]|[•♦†‡*#+])*$', "", x.strip())
        x = re.sub(r'(?<!^)( \([^)]*\))*$', "", x.strip())
        x = re.sub(r'^"([^"]*)"$', r"\1", x.strip())
        if x == old:
            break
    if x and x[-1] == ".":
        x = x[:-1]
    return re.sub(r"\s+", " ", x, flags=re.U).lower().strip()


def _wtq_value(text: str) -> tuple:
    s = _wtq_normalize_string(text)
    num = _to_float(s) if re.fullmatch(r"-?[\d,]*\.?\d+", s.replace(" ", "")) else None
    if num is not None:
        return ("num", num, s)
    m = _DATE_RE.match(s)
    if m:
        return ("date", tuple(None if p.lower().startswith("x") else int(p) for p in m.groups()), s)
    return ("str", s, s)


def _wtq_value_match(p: tuple, g: tuple) -> bool:
    if p[2] == g[2]:
        return True
    if p[0] == "num" and g[0] == "num":
        return abs(p[1] - g[1]) < 1e-6
    if p[0] == "date" and g[0] == "date":
        return p[1] == g[1]
    return False


def wtq_match(prediction: str | Sequence[str], gold: str | Sequence[str]) -> bool:
    """Denotation match: both sides as lists of values (a string is one value; the ``|``-separated
    target form of the TSV files is split), the same length, and every predicted value matches a
    distinct gold value (strings normalised, numbers by value, dates ``yyyy-mm-dd`` with ``xx``)."""
    preds = _wtq_list(prediction)
    golds = _wtq_list(gold)
    if len(preds) != len(golds):
        return False
    left = [_wtq_value(g) for g in golds]
    for p in preds:
        pv = _wtq_value(p)
        for j, gv in enumerate(left):
            if _wtq_value_match(pv, gv):
                del left[j]
                break
        else:
            return False
    return True


def _wtq_list(value: str | Sequence[str]) -> list[str]:
    if isinstance(value, str):
        return [v for v in value.split("|")] if "|" in value else [value]
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return [repr(value)]
    return [str(v) for v in value]


# =================================================================================================
# FinQA
# =================================================================================================


def _finqa_number(x: Any) -> tuple[float | None, bool]:
    """(value, written as a percent)."""
    if isinstance(x, bool):
        return None, False
    if isinstance(x, (int, float)):
        return float(x), False
    s = str(x).strip().replace(",", "").replace("$", "")
    pct = s.endswith("%")
    s = s.rstrip("%").strip()
    if s.startswith("(") and s.endswith(")"):  # accounting negatives
        s = "-" + s[1:-1]
    try:
        v = float(s)
    except ValueError:
        return None, pct
    return (v if math.isfinite(v) else None), pct


def finqa_equal(prediction: Any, gold: Any, *, rel_tol: float = 1e-3) -> bool:
    """FinQA match: yes/no answers by text; numbers with relative error below ``rel_tol``, where a
    percent may be written either way (``12.5%``, ``12.5`` and ``0.125`` all match a gold ``12.5%``;
    a bare gold ``0.125`` also matches ``12.5%``). The ``%`` sign itself is only a marker."""
    if isinstance(gold, str) and gold.strip().lower() in ("yes", "no"):
        return isinstance(prediction, str) and prediction.strip().lower() == gold.strip().lower()
    p, p_pct = _finqa_number(prediction)
    g, g_pct = _finqa_number(gold)
    if p is None or g is None:
        return False

    def close(a: float, b: float) -> bool:
        if b == 0:
            return abs(a) < 1e-9
        return abs(a - b) / abs(b) < rel_tol

    # Either side may give a percent as a ratio or as a number of percent (FinQA's golds mix both).
    return any(close(c, g) for c in (p, p * 100, p / 100))


# =================================================================================================
# Embedded domains
# =================================================================================================


def answer_equal(prediction: Any, gold: Any, *, rel_tol: float = 1e-6) -> bool:
    """The result check of the embedded domains (synthetic math, tables): the program's ``answer``
    against the gold answer — numbers with a relative tolerance (int 3 equals 3.0), strings after
    trimming and case folding, containers element-wise."""
    if isinstance(prediction, str) and isinstance(gold, str):
        return prediction.strip().casefold() == gold.strip().casefold()
    return _value_close(prediction, gold, rel_tol, 1e-9)


# =================================================================================================
# RODS progress reward
# =================================================================================================


def progress_reward(gold_values: Iterable[Any], produced: Iterable[Any], *, rel_tol: float = 1e-6,
                    abs_tol: float = 1e-9) -> float:
    """The fraction of the gold intermediate values that the trajectory's executed calls produced.

    ``gold_values``: values or ``(name, value)`` pairs (e.g. ``MathTask.intermediates``);
    ``produced``: the same, e.g. the ``values`` of every :class:`~cocoda_jax.execution.RunResult`
    of the trajectory, concatenated. Matching is one-to-one (a gold value that occurs twice must be
    produced twice) and numeric with tolerance; other values compare with ``==``. In ``[0, 1]``.
    """
    golds = [_unpair(v) for v in gold_values]
    if not golds:
        raise ValueError("progress_reward needs at least one gold intermediate value")
    pool = [_unpair(v) for v in produced]
    hits = 0
    for g in golds:
        for j, v in enumerate(pool):
            if _value_close(v, g, rel_tol, abs_tol):
                del pool[j]
                hits += 1
                break
    return hits / len(golds)


def _unpair(v: Any) -> Any:
    if isinstance(v, tuple) and len(v) == 2 and isinstance(v[0], str):
        return v[1]
    return v


def _value_close(a: Any, b: Any, rel_tol: float, abs_tol: float) -> bool:
    from cocoda_jax.values import values_equal
    return values_equal(a, b, rel_tol=rel_tol, abs_tol=abs_tol)


def default_verify(answer: Any, task: Any) -> float:
    """``R_res`` of the embedded domains: 1.0 when the answer equals the task's gold answer."""
    return 1.0 if answer_equal(answer, task.answer) else 0.0


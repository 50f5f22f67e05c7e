r"""Answer verifiers of the paper's benchmarks and the RODS progress reward.

    from cocoda_jax.data.verifiers import extract_boxed, math_equal
    extract_boxed(r"so \boxed{\frac{1}{2}}.")        # '\\frac{1}{2}'
    math_equal(r"\dfrac12", "0.5")                   # True

* GSM8K: :func:`gsm8k_gold` (the number after ``####``), :func:`last_number`, :func:`gsm8k_equal`.
* MATH: :func:`extract_boxed` (``\boxed`` and ``\fbox``, nested braces, the last box wins),
  :func:`normalize_math` and :func:`math_equal` (normalised text, then numbers, then SymPy).
* WikiTableQuestions: :func:`wtq_match`, the normalised denotation match (numbers, dates, strings;
  lists unordered).
* FinQA: :func:`finqa_equal`, relative error below 1e-3 with percent handling.
* Embedded domains: :func:`answer_equal` (numbers with a tolerance, strings case-folded).
* RODS: :func:`progress_reward`, the fraction of gold intermediate values a trajectory produced.

Why SymPy is reached without ``parse_expr``: ``sympy.parsing.sympy_parser.parse_expr`` (and
``sympify`` on a string) end in Python ``eval`` of transformed text, so a prediction such as
``__import__('os').system(...)`` would run in the trainer. Here the normalised text is first checked
against a character whitelist and a length bound, then parsed with :func:`ast.parse` (which only
parses), and the tree is converted to SymPy objects by :func:`to_sympy`, which accepts only number
literals, whitelisted names (single-letter symbols, ``pi``, ``e``, ``i``, ``oo`` and a few functions)
and arithmetic operators, with bounds on exponents and on the size of integer literals. Nothing is
evaluated as code, so no subprocess is needed for safety. What remains is time: ``simplify`` can be
slow, so the symbolic comparison runs under a ``SIGALRM`` timer when called from the main thread; from
another thread (where no timer can interrupt it) the comparison is numeric only — the difference is
evaluated at a few random points, which the size bounds keep cheap.
"""

from __future__ import annotations

import ast
import contextlib
import math
import random
import re
import signal
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
# MATH: normalisation
# =================================================================================================

_UNITS = (
    "degrees", "degree", "cm", "centimeters", "centimetres", "meters", "metres", "m", "km", "kilometers",
    "mm", "inches", "inch", "in", "feet", "foot", "ft", "yards", "yard", "miles", "mile", "units", "unit",
    "square", "sq", "cubic", "dollars", "dollar", "cents", "cent", "hours", "hour", "minutes", "minute",
    "seconds", "second", "days", "day", "weeks", "week", "years", "year", "mph", "pounds", "pound", "lbs",
    "kg", "grams", "gram", "g", "liters", "litres", "liter", "ml", "people", "students", "ways", "points",
    "sq.", "per", "percent", "children", "girls", "boys", "apples", "marbles", "coins", "books",
)
_UNIT_TAIL = re.compile(r"^(.*?\d)\s*(?:(?:" + "|".join(re.escape(u) for u in sorted(_UNITS, key=len, reverse=True))
                        + r")\b\.?\s*(?:\^?\{?[23]\}?)?\s*)+$")
_TEXT_CMD = re.compile(r"\\(?:text|textbf|textit|mbox|mathrm|mathbf|mathit|operatorname)\s*\{([^{}]*)\}")


def _fix_fracs(s: str) -> str:
    r"""``\frac12`` -> ``\frac{1}{2}``, ``\frac1{x}`` -> ``\frac{1}{x}`` (single-token arguments)."""
    out, i = [], 0
    while True:
        j = s.find("\\frac", i)
        if j < 0:
            out.append(s[i:])
            return "".join(out)
        out.append(s[i:j + 5])
        i = j + 5
        for _ in range(2):
            if i < len(s) and s[i] == "{":
                depth = 0
                for k in range(i, len(s)):
                    depth += s[k] == "{"
                    depth -= s[k] == "}"
                    if depth == 0:
                        break
                out.append(s[i:k + 1])
                i = k + 1
            elif i < len(s) and s[i] != "\\":
                out.append("{" + s[i] + "}")
                i += 1


def _fix_sqrt(s: str) -> str:
    return re.sub(r"\\sqrt\s*([^{\[\s\\])", r"\\sqrt{\1}", s)


def normalize_math(answer: str) -> str:
    r"""A canonical text form of a MATH answer: LaTeX spacing and sizing commands, ``\text{}``, units,
    degrees, percent and dollar signs, thousands separators, ``\dfrac``/``\tfrac``, a leading
    ``x =``, choice brackets and trailing punctuation are removed or normalised."""
    s = str(answer).strip()
    s = s.replace("\n", " ").replace("\\!", "").replace("\\,", "").replace("\\;", "").replace("\\:", "")
    s = s.replace("\\ ", " ").replace("~", " ").replace("\\displaystyle", "").replace("\\left", "")
    s = s.replace("\\right", "").replace("\\big", "").replace("\\Big", "")
    s = s.replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac")
    s = s.replace("^{\\circ}", "").replace("^\\circ", "").replace("\\circ", "").replace("°", "")
    s = s.replace("\\%", "").replace("%", "").replace("\\$", "").replace("$", "")
    s = s.replace("{,}", ",").replace("\\cdot", "*").replace("\\times", "*")
    for _ in range(3):  # nested \text{\textbf{...}}
        s = _TEXT_CMD.sub(r"\1", s)
    s = s.strip().rstrip(".").strip()
    s = re.sub(r"\\(?:emph|bf)\b", "", s)
    m = _UNIT_TAIL.match(s)
    if m:
        s = m.group(1)
    # multiple choice: (A), A), \text{(B)} ... -> the letter
    m = re.fullmatch(r"\(?\s*([A-Ea-e])\s*\)?", s)
    if m:
        return m.group(1).upper()
    # a leading "x =" or "k=" (one short name)
    m = re.fullmatch(r"\s*[a-zA-Z](?:_\{?\w+\}?)?\s*=\s*(.+)", s)
    if m and "=" not in m.group(1):
        s = m.group(1)
    # thousands separators, only when the commas all separate thousands of one number
    if re.fullmatch(r"-?\d{1,3}(?:,\d{3})+(?:\.\d+)?", s.replace(" ", "")):
        s = s.replace(",", "")
    s = _fix_sqrt(_fix_fracs(s))
    s = s.replace(" ", "")
    s = re.sub(r"(?<![\d.])\.(\d)", r"0.\1", s)  # .5 -> 0.5
    if re.fullmatch(r"-?\d+\.\d*?0+", s) and "." in s:  # 2.50 -> 2.5, 3.0 -> 3
        s = s.rstrip("0").rstrip(".")
    return s


# =================================================================================================
# MATH: safe conversion to SymPy
# =================================================================================================

_MAX_EXPR_CHARS = 200
_MAX_EXPONENT = 200
_MAX_INT_DIGITS = 40
_SAFE_CHARS = re.compile(r"^[0-9a-zA-Z+\-*/^().,\s]*$")
_FUNCTIONS = ("sqrt", "sin", "cos", "tan", "log", "ln", "exp", "abs")
_CONSTANTS = ("pi", "e", "i", "oo")


class UnsafeExpression(ValueError):
    """Text that :func:`to_sympy` refuses to turn into a SymPy expression."""


def latex_to_plain(s: str) -> str:
    r"""A normalised LaTeX answer as plain infix text (``\frac{a}{b}`` -> ``((a)/(b))``, ``^`` -> ``**``)."""
    s = s.replace("\\infty", "oo").replace("\\pi", "pi")
    # \ln 2, \sin x: a function applied to one token without brackets
    s = re.sub(r"\\(ln|log|sin|cos|tan|exp)\s*(\d+(?:\.\d+)?|[a-zA-Z](?![a-zA-Z]))", r"\1(\2)", s)
    for fn in ("ln", "log", "sin", "cos", "tan", "exp"):
        s = s.replace("\\" + fn, fn)
    for _ in range(10):
        new = re.sub(r"\\frac\{([^{}]*)\}\{([^{}]*)\}", r"((\1)/(\2))", s)
        new = re.sub(r"\\sqrt\[([^{}\[\]]*)\]\{([^{}]*)\}", r"((\2)**(1/(\1)))", new)
        new = re.sub(r"\\sqrt\{([^{}]*)\}", r"sqrt(\1)", new)
        new = re.sub(r"\^\{([^{}]*)\}", r"**(\1)", new)
        if new == s:
            break
        s = new
    s = s.replace("^", "**").replace("{", "(").replace("}", ")")
    s = re.sub(r"(\d)\s*(?=[a-zA-Z(])(?!\*)", r"\1*", s)  # 2x -> 2*x, 3(x+1) -> 3*(x+1)
    s = re.sub(r"\)\s*(?=[\w(])", ")*", s)                 # (a)(b) -> (a)*(b)
    return s


def to_sympy(text: str):
    """A SymPy expression for plain infix ``text``, built from its syntax tree without ``eval``.

    Raises :class:`UnsafeExpression` for anything outside the whitelist (see the module docstring).
    """
    import sympy

    if len(text) > _MAX_EXPR_CHARS:
        raise UnsafeExpression(f"expression longer than {_MAX_EXPR_CHARS} characters")
    if not _SAFE_CHARS.match(text) or "__" in text:
        raise UnsafeExpression(f"characters outside the whitelist in {text[:50]!r}")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise UnsafeExpression(f"does not parse: {type(exc).__name__}") from None
    names = {"pi": sympy.pi, "e": sympy.E, "i": sympy.I, "oo": sympy.oo}
    funcs = {"sqrt": sympy.sqrt, "sin": sympy.sin, "cos": sympy.cos, "tan": sympy.tan, "log": sympy.log,
             "ln": sympy.log, "exp": sympy.exp, "abs": sympy.Abs}

    def conv(node: ast.AST, depth: int = 0):
        if depth > 40:
            raise UnsafeExpression("expression nested too deeply")
        if isinstance(node, ast.Constant) and type(node.value) in (int, float):
            if isinstance(node.value, int):
                if len(str(abs(node.value))) > _MAX_INT_DIGITS:
                    raise UnsafeExpression("integer literal too large")
                return sympy.Integer(node.value)
            return sympy.Rational(repr(node.value)) if math.isfinite(node.value) else sympy.nan
        if isinstance(node, ast.Name):
            if node.id in names:
                return names[node.id]
            if len(node.id) == 1 and node.id.isalpha():
                return sympy.Symbol(node.id)
            raise UnsafeExpression(f"unknown name {node.id!r}")
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            v = conv(node.operand, depth + 1)
            return -v if isinstance(node.op, ast.USub) else v
        if isinstance(node, ast.BinOp):
            a, b = conv(node.left, depth + 1), conv(node.right, depth + 1)
            if isinstance(node.op, ast.Add):
                return a + b
            if isinstance(node.op, ast.Sub):
                return a - b
            if isinstance(node.op, ast.Mult):
                return a * b
            if isinstance(node.op, ast.Div):
                return a / b
            if isinstance(node.op, ast.Pow):
                if b.is_number and (not b.is_finite or abs(b) > _MAX_EXPONENT):
                    raise UnsafeExpression("exponent too large")
                if a.is_number and b.is_number and a.is_finite and abs(a) > 10**6 and abs(b) > 20:
                    raise UnsafeExpression("power too large")
                return a ** b
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in funcs \
                and len(node.args) == 1 and not node.keywords:
            return funcs[node.func.id](conv(node.args[0], depth + 1))
        raise UnsafeExpression(f"{type(node).__name__} is not allowed")

    return conv(tree.body)


class _Timeout(BaseException):
    """Raised by the timer; a BaseException so that SymPy's own ``except Exception`` cannot swallow it."""


@contextlib.contextmanager
def _time_limit(seconds: float):
    """Raises :class:`_Timeout` after ``seconds`` (main thread only; a no-op guard elsewhere)."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        yield False
        return

    def handler(signum, frame):
        raise _Timeout()

    # Someone else's timer (pytest-timeout, an outer limit) is saved and re-armed afterwards with
    # what was left of it, so this limit nests instead of cancelling it.
    import time
    start = time.monotonic()
    old = signal.signal(signal.SIGALRM, handler)
    old_delay, old_interval = signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield True
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
        if old_delay > 0:
            left = max(old_delay - (time.monotonic() - start), 1e-3)
            signal.setitimer(signal.ITIMER_REAL, left, old_interval)


def _numeric_equal(a, b, rng: random.Random) -> bool:
    import sympy

    symbols = sorted(a.free_symbols | b.free_symbols, key=str)
    points = [{}] if not symbols else [{s: sympy.Rational(rng.randint(-9, 9), rng.randint(1, 9)) + sympy.Rational(1, 7)
                                        for s in symbols} for _ in range(5)]
    for point in points:
        try:
            va, vb = complex(a.subs(point).evalf(30)), complex(b.subs(point).evalf(30))
        except (TypeError, ValueError, ZeroDivisionError, OverflowError):
            return False
        if any(math.isnan(v.real) or math.isnan(v.imag) for v in (va, vb)):
            return False
        if abs(va - vb) > 1e-6 * max(1.0, abs(vb)):
            return False
    return True


def sympy_equal(pred: str, gold: str, *, timeout_s: float = 2.0) -> bool:
    """Whether two normalised answers denote the same value (see the module docstring)."""
    try:
        a = to_sympy(latex_to_plain(pred))
        b = to_sympy(latex_to_plain(gold))
    except UnsafeExpression:
        return False
    except (TypeError, ValueError, ZeroDivisionError, OverflowError, RecursionError, AttributeError):
        return False
    try:
        with _time_limit(timeout_s) as timed:
            if not _numeric_equal(a, b, random.Random(0)):
                return False
            if not timed:
                return True  # no timer in this thread: the numeric check is the verdict
            import sympy
            diff = sympy.simplify(a - b)
            return diff == 0 or bool(diff.is_zero)
    except _Timeout:
        return False
    except Exception:  # noqa: BLE001 - SymPy raises many kinds on odd input; all mean "not shown equal"
        return False


def _split_top(s: str) -> list[str]:
    parts, depth, cur = [], 0, []
    for ch in s:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return parts


def _plain_number(s: str) -> float | None:
    m = re.fullmatch(r"-?\d+(?:\.\d+)?", s)
    if m:
        return float(s)
    m = re.fullmatch(r"(-?)\\frac\{(-?\d+)\}\{(\d+)\}", s)
    if m and int(m.group(3)) != 0:
        v = int(m.group(2)) / int(m.group(3))
        return -v if m.group(1) else v
    return None


def math_equal(pred: Any, gold: Any, *, timeout_s: float = 2.0) -> bool:
    r"""Whether a MATH prediction equals the gold answer.

    Both are normalised (:func:`normalize_math`); equal texts match; then plain numbers compare with
    a relative tolerance of 1e-6; tuples and intervals (same brackets) compare element by element,
    bare comma lists and ``\{...\}`` sets without order; finally SymPy decides (see the module
    docstring), each symbolic comparison within ``timeout_s``.
    """
    if pred is None or gold is None:
        return False
    p, g = normalize_math(str(pred)), normalize_math(str(gold))
    if not p or not g:
        return p == g and bool(p)
    if p == g:
        return True
    pn, gn = _plain_number(p), _plain_number(g)
    if pn is not None and gn is not None:
        return math.isclose(pn, gn, rel_tol=1e-6, abs_tol=1e-9)
    # sets: \{a, b\}
    if p.startswith("\\{") and p.endswith("\\}") and g.startswith("\\{") and g.endswith("\\}"):
        return _unordered_equal(_split_top(p[2:-2]), _split_top(g[2:-2]), timeout_s)
    # tuples and intervals: the brackets must agree
    if len(p) >= 2 and len(g) >= 2 and p[0] in "([" and g[0] in "([" and p[-1] in ")]" and g[-1] in ")]":
        ps, gs = _split_top(p[1:-1]), _split_top(g[1:-1])
        if len(ps) > 1 or len(gs) > 1:
            if (p[0], p[-1]) != (g[0], g[-1]) or len(ps) != len(gs):
                return False
            return all(math_equal(a, b, timeout_s=timeout_s) for a, b in zip(ps, gs))
    ps, gs = _split_top(p), _split_top(g)
    if len(ps) > 1 or len(gs) > 1:
        return _unordered_equal(ps, gs, timeout_s)
    if re.fullmatch(r"[A-E]", p) or re.fullmatch(r"[A-E]", g):
        return False
    return sympy_equal(p, g, timeout_s=timeout_s)


def _unordered_equal(ps: list[str], gs: list[str], timeout_s: float) -> bool:
    if len(ps) != len(gs):
        return False
    left = list(gs)
    for a in ps:
        for j, b in enumerate(left):
            if math_equal(a, b, timeout_s=timeout_s):
                del left[j]
                break
        else:
            return False
    return True


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

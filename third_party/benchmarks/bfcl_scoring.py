r"""Scoring of BFCL v4 entries (:mod:`third_party.benchmarks.bfcl`) by the leaderboard's own rules.

* Multi-turn (:func:`score_multi_turn`): the installed package's checker,
  ``bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker.multi_turn_checker``, run as the package's
  ``eval_runner`` runs it: the model's calls are executed turn by turn on fresh backend instances next to
  the ground truth's, and after every turn with ground truth the instance states must be equal and the
  ground truth's execution results must all appear among the model's (of this turn and earlier ones).
  That module imports without the package's third-party dependencies.
* Single-turn (:func:`score_single_turn`): the package's AST checker
  (``bfcl_eval/eval_checker/ast_eval/ast_checker.py``) cannot be imported without its model handlers'
  dependencies (anthropic, openai, tree-sitter, ...), so its rules for Python are written out here; a
  test compares the two verdicts on every ground-truth answer and on perturbed ones.

Verdicts carry the package's ``error_type`` strings (``"simple_function_checker:missing_required"``,
``"multi_turn:instance_state_mismatch"``, ...).
"""

from __future__ import annotations

import ast
import copy
import dataclasses
import importlib
import inspect
import itertools
import re
from collections.abc import Mapping, Sequence
from typing import Any

from third_party.benchmarks.bfcl import IRRELEVANCE, MULTI_TURN, SINGLE_TURN, BfclEntry


@dataclasses.dataclass(frozen=True)
class Verdict:
    """Whether the model's output passes; when not, the package's ``error_type`` and a message."""

    valid: bool
    error_type: str | None = None
    message: str = ""


_PASS = Verdict(True)


# =================================================================================================
# Multi-turn: the package's checker
# =================================================================================================

_MT_PACKAGE = "bfcl_eval.eval_checker.multi_turn_eval"
_check_ids = itertools.count()
#: Prefix of the model names of :func:`score_multi_turn`; the package caches backend instances in the
#: module globals of ``multi_turn_utils`` under names that start with the model name.
MODEL_NAME_PREFIX = "cocoda_bfcl_check"


def _multi_turn_modules():
    checker = importlib.import_module(f"{_MT_PACKAGE}.multi_turn_checker")
    utils = importlib.import_module(f"{_MT_PACKAGE}.multi_turn_utils")
    return checker, utils


_method_names: dict[str, frozenset[str]] = {}


def _class_methods(class_name: str) -> frozenset[str]:
    """The public method names of a backend class's instance: the names the package routes to it."""
    if class_name not in _method_names:
        from bfcl_eval.constants.executable_backend_config import CLASS_FILE_PATH_MAPPING
        instance = getattr(importlib.import_module(CLASS_FILE_PATH_MAPPING[class_name]), class_name)()
        _method_names[class_name] = frozenset(
            name for name, _ in inspect.getmembers(instance, predicate=inspect.ismethod) if not name.startswith("_"))
    return _method_names[class_name]


#: What an unsafe call string is replaced with: a call of an undefined name, which the package evaluates to
#: an ``"Error during execution: ..."`` result like any other failing call.
BLOCKED_CALL = "_cocoda_blocked_call_()"


def _safe_call(text: str, methods: frozenset[str]) -> str:
    """``text`` when it is one call ``name(literal, ..., key=literal)`` of a method of the entry's backend
    classes; otherwise :data:`BLOCKED_CALL`.

    The package evaluates (``eval``) the model's call strings in its module's namespace and refuses only a
    few names (``kill``, ``exit``, ...), so a call of a builtin or a nested expression would run. The calls kept have
    the form of every ground-truth call; any other string could only yield an error result (an unknown name,
    bad syntax) or run code that is not a backend method, so it is not executed."""
    try:
        node = ast.parse(text.strip(), mode="eval").body
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return BLOCKED_CALL
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in methods
            and all(kw.arg is not None for kw in node.keywords)):
        return BLOCKED_CALL
    try:
        for arg in list(node.args) + [kw.value for kw in node.keywords]:
            ast.literal_eval(arg)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return BLOCKED_CALL
    return text


def score_multi_turn(entry: BfclEntry, calls_by_turn: Sequence[Sequence[str]], *,
                     check_irrelevance: bool = False) -> Verdict:
    """Score the model's call strings of every turn (``calls_by_turn[t]``: the calls it made in turn ``t``,
    in order, e.g. ``["cd(folder='document')", "mkdir(dir_name='temp')"]``) by the package's multi-turn
    checker.

    As in the package's runner, a result with a different number of turns than the entry fails
    (``multi_turn:force_terminated``); each non-empty turn is handed to the checker as one step (the checker
    takes ``list[turn][step][call]`` and concatenates the steps of a turn). The package's runner does not
    apply ``multi_turn_irrelevance_checker`` (it imports it only), so calls made in a turn whose ground truth
    is empty (the miss_func / miss_param turns) are executed but not penalised; ``check_irrelevance=True``
    adds that check (``multi_turn:irrelevance_error:decoder_success``).

    Each check uses a new model name and deletes, afterwards, the backend instances the package cached under
    it in ``multi_turn_utils``'s globals: two checks of the same entry never share state and the module does
    not grow. Call strings are screened before the package evaluates them (see :func:`_safe_call`).
    """
    if entry.category not in MULTI_TURN:
        raise ValueError(f"score_multi_turn: {entry.id!r} is a {entry.category} entry, not multi-turn")
    if isinstance(calls_by_turn, str) or not isinstance(calls_by_turn, Sequence):
        raise TypeError(f"calls_by_turn must be a list of turns, got {type(calls_by_turn).__name__}")
    turns = []
    for t, calls in enumerate(calls_by_turn):
        if isinstance(calls, str) or not isinstance(calls, Sequence) or not all(isinstance(c, str) for c in calls):
            raise TypeError(f"calls_by_turn[{t}] must be a list of call strings, got {calls!r}")
        turns.append(list(calls))
    ground_truth = [list(calls) for calls in entry.ground_truth]
    if len(turns) != len(ground_truth):
        return Verdict(False, "multi_turn:force_terminated",
                       f"the model's result has {len(turns)} turns, the entry {len(ground_truth)}")

    checker, utils = _multi_turn_modules()
    methods = frozenset().union(*(_class_methods(c) for c in entry.involved_classes))
    namespace = vars(utils)
    decoded = [[[_safe_call(c, methods) for c in calls]] if calls else [] for calls in turns]
    test_entry = {"id": entry.id, "initial_config": copy.deepcopy(entry.initial_config),
                  "involved_classes": list(entry.involved_classes)}
    model_name = f"{MODEL_NAME_PREFIX}_{next(_check_ids)}"
    try:
        result = checker.multi_turn_checker(decoded, ground_truth, test_entry, entry.category, model_name)
        if result["valid"] and check_irrelevance:
            result = checker.multi_turn_irrelevance_checker(decoded, ground_truth)
    finally:
        for name in [n for n in namespace if n.startswith(model_name + "_")]:
            del namespace[name]
    if result["valid"]:
        return _PASS
    return Verdict(False, result.get("error_type"), str(result.get("error_message", "")))


def cached_backend_instances() -> int:
    """How many backend instances this module's checks left in ``multi_turn_utils``'s globals (always 0
    after :func:`score_multi_turn` returns)."""
    _, utils = _multi_turn_modules()
    return sum(1 for name in vars(utils) if name.startswith(MODEL_NAME_PREFIX))


# =================================================================================================
# Single-turn: the AST checker's rules for Python
# =================================================================================================

_PY_TYPES = {"string": str, "integer": int, "float": float, "boolean": bool, "array": list, "tuple": list,
             "dict": dict, "any": str}
_NESTED = ("array", "tuple")
_PUNCTUATION = re.compile(r"[ ,./\-_*^]")


def standardize_string(text: str) -> str:
    """The package's string normalisation: drop spaces and ``,./-_*^``, lower-case, ``'`` -> ``"``."""
    return _PUNCTUATION.sub("", text).lower().replace("'", '"')


def _std(value: Any) -> Any:
    return standardize_string(value) if type(value) is str else value


def _fail(error_type: str, message: str) -> Verdict:
    return Verdict(False, error_type, message)


def _answer_type(allowed: Sequence) -> type | None:
    """The type of the first allowed value that is not ``""`` (the optional-parameter marker)."""
    for value in allowed:
        if value != "":
            return type(value)
    return None


def _type_check(param: str, value: Any, allowed: Sequence, type_name: str, expected: type,
                nested: type | None) -> tuple[Verdict, bool]:
    """``(verdict, is_variable)``. A value whose type differs from the doc's but equals the allowed values'
    type passes as a "variable" (the dataset writes variables as strings); arrays and tuples check their
    items against the item type, one level deep, against each allowed list in turn."""
    hint = _answer_type(allowed)
    is_variable = hint is not None and hint != expected
    if type(value) == expected:
        if nested is None:
            return _PASS, is_variable
        for candidate in allowed:
            if type(candidate) != list or all(
                    _type_check(param, item, candidate, nested.__name__, nested, None)[0].valid for item in value):
                return _PASS, is_variable
        kind = "type_error:nested" if hint is not None and type(value) == hint else "type_error:simple"
        return _fail(kind, f"parameter {param!r}: the items of {value!r} are not all {nested.__name__} "
                           f"({type_name} of {nested.__name__} expected)"), is_variable
    if hint is not None and type(value) == hint:
        return _PASS, True
    return _fail("type_error:simple", f"parameter {param!r}: expected type {type_name}, got "
                                      f"{type(value).__name__} ({value!r})"), is_variable


def _string_check(param: str, value: str, allowed: Sequence) -> Verdict:
    if standardize_string(value) in [standardize_string(a) for a in allowed if type(a) is str]:
        return _PASS
    return _fail("value_error:string", f"parameter {param!r}: {value!r} is not one of {list(allowed)} "
                                       f"(compared without case, spaces and ,./-_*^)")


def _list_check(param: str, value: list, allowed: Sequence) -> Verdict:
    got = [_std(v) for v in value]
    # An allowed value is iterated like a list: the optional marker "" reads as the empty list.
    if got in [[_std(v) for v in candidate] for candidate in allowed if isinstance(candidate, (list, str))]:
        return _PASS
    return _fail("value_error:list/tuple", f"parameter {param!r}: {value!r} is not one of {list(allowed)}")


def _dict_check(param: str, value: dict, allowed: Sequence) -> Verdict:
    """A dict value matches an allowed dict when its keys are among the allowed dict's, each value
    (strings standardised) is among that key's allowed values, and every allowed key without ``""`` among
    its values is present. Values are compared one level deep."""
    if type(value) is not dict:  # an item of a list of dicts (the package raises here)
        return _fail("type_error:nested", f"parameter {param!r}: {value!r} is not a dict")
    verdict = _fail("dict_checker:unclear", f"parameter {param!r}: no allowed dict to match {value!r}")
    for candidate in allowed:
        if candidate == "" or type(candidate) is not dict:
            continue
        verdict = _PASS
        for key, item in value.items():
            if key not in candidate:
                verdict = _fail("value_error:dict_key", f"parameter {param!r}: unexpected key {key!r}")
                break
            if _std(item) not in [_std(a) for a in candidate[key]]:
                verdict = _fail("value_error:dict_value", f"parameter {param!r}: key {key!r} = {item!r} is "
                                                          f"not one of {candidate[key]}")
                break
        # Checked even after a failure above (whose error type it then replaces), as the package does.
        missing = [key for key, options in candidate.items() if key not in value and "" not in options]
        if missing:
            verdict = _fail("value_error:dict_key", f"parameter {param!r}: missing key {missing[0]!r}")
        if verdict.valid:
            return verdict
    return verdict


def _list_of_dicts_check(param: str, value: list, allowed: Sequence) -> Verdict:
    verdict = _fail("list_dict_checker:unclear", f"parameter {param!r}: no allowed list to match {value!r}")
    for candidate in allowed:
        if len(value) != len(candidate):
            verdict = _fail("value_error:list_dict_count", f"parameter {param!r}: {len(value)} dicts, "
                                                           f"expected {len(candidate)}")
            continue
        for item, option in zip(value, candidate):
            verdict = _dict_check(param, item, [option])
            if not verdict.valid:
                break
        else:
            return _PASS
    return verdict


def _check_call(doc: Mapping, call: Mapping, answer: Mapping) -> Verdict:
    """One call ``{name: {param: value}}`` against one doc and one answer ``{name: {param: [allowed]}}``."""
    allowed_by_param = next(iter(answer.values()))
    name = doc["name"]
    if name not in call:
        return _fail("simple_function_checker:wrong_func_name", f"function {name!r} not called "
                                                                f"(called {list(call)})")
    args = call[name]
    properties = doc["parameters"]["properties"]
    for param in doc["parameters"]["required"]:
        if param not in args:
            return _fail("simple_function_checker:missing_required", f"missing required parameter {param!r}")
    for param, value in args.items():
        if param not in properties or param not in allowed_by_param:
            return _fail("simple_function_checker:unexpected_param", f"unexpected parameter {param!r}")
        allowed = allowed_by_param[param]
        type_name = properties[param]["type"]
        expected = _PY_TYPES[type_name]
        nested = _PY_TYPES[properties[param]["items"]["type"]] if type_name in _NESTED else None
        if type_name == "tuple" and type(value) is tuple:
            value = list(value)
        if type_name == "float" and type(value) is int:
            value = float(value)
        verdict, is_variable = _type_check(param, value, allowed, type_name, expected, nested)
        if not verdict.valid:
            return verdict
        if not is_variable:
            if expected is dict:
                verdict = _dict_check(param, value, allowed)
            elif expected is list and nested is dict:
                verdict = _list_of_dicts_check(param, value, allowed)
            elif expected is str:
                verdict = _string_check(param, value, allowed)
            elif expected is list:
                verdict = _list_check(param, value, allowed)
            else:
                verdict = None
            if verdict is not None:
                if not verdict.valid:
                    return verdict
                continue
        if value not in allowed:
            return _fail("value_error:others", f"parameter {param!r}: {value!r} is not one of {list(allowed)}")
    for param, allowed in allowed_by_param.items():
        if param not in args and "" not in allowed:
            return _fail("simple_function_checker:missing_optional",
                         f"parameter {param!r} not given and not optional")
    return _PASS


def is_function_call_list(calls: Any) -> bool:
    """The decoded form the checker takes: a list of ``{func_name: {param: value}}``, one key each."""
    return type(calls) is list and all(
        type(c) is dict and len(c) == 1 and type(next(iter(c.values()))) is dict for c in calls)


def _find_doc(functions: Sequence[Mapping], name: str) -> Mapping:
    for doc in functions:
        if doc["name"] == name:
            return doc
    raise ValueError(f"the ground truth calls {name!r}, which the entry's functions do not document")


def score_single_turn(entry: BfclEntry, calls: Any) -> Verdict:
    """Score the model's decoded calls (a list of ``{func_name: {param: value}}``; ``[]`` when it called
    nothing or its output did not decode) by the AST checker's rules for Python.

    The function name must be the documented one as written (``math.factorial``; this module never maps
    dots to underscores). ``simple`` categories want exactly one call; ``multiple`` ones (one right
    function among several) one call of the answer's function; ``parallel`` ones (also
    ``parallel_multiple``) as many calls as answers, matched without order: for each answer in turn, the
    first still unmatched call that passes it (the package's greedy matching). Within a call: required
    parameters present, no parameter unknown to the doc or to the answer, each value of the doc's type
    (an int passes for a float; array/tuple items checked one level deep; a value of the answer's type
    passes as a variable) and among the allowed values (strings standardised by
    :func:`standardize_string`, lists element-wise, dicts key by key), and a parameter of the answer may be
    left out only when ``""`` is among its allowed values. Irrelevance entries pass iff there is no call.
    """
    if type(calls) is tuple:
        calls = list(calls)
    if entry.category in IRRELEVANCE:
        empty = not is_function_call_list(calls) or len(calls) == 0 or (len(calls) == 1 and len(calls[0]) == 0)
        return _PASS if empty else _fail("irrelevance_error:decoder_success",
                                         "a function was called where none should be")
    if entry.category not in SINGLE_TURN:
        raise ValueError(f"score_single_turn: {entry.id!r} is a {entry.category} entry, not single-turn")
    if not is_function_call_list(calls):
        return _fail("ast_decoder:decoder_wrong_output_format",
                     "the calls must be a list of {func_name: {param: value}}")
    answers = entry.ground_truth
    if "parallel" in entry.category:
        if len(calls) != len(answers):
            return _fail("parallel_function_checker_no_order:wrong_count",
                         f"{len(calls)} calls, expected {len(answers)}")
        unmatched = list(range(len(calls)))
        for i, answer in enumerate(answers):
            doc = _find_doc(entry.functions, next(iter(answer)))
            errors = []
            for index in unmatched:
                verdict = _check_call(doc, calls[index], answer)
                if verdict.valid:
                    unmatched.remove(index)
                    break
                errors.append(f"call {index}: {verdict.message}")
            else:
                return _fail("parallel_function_checker_no_order:cannot_find_match",
                             f"no call matches answer {i} ({next(iter(answer))}): " + "; ".join(errors))
        return _PASS
    if "multiple" in entry.category:
        if len(calls) != len(answers):
            return _fail("multiple_function_checker:wrong_count", f"{len(calls)} calls, expected {len(answers)}")
        return _check_call(_find_doc(entry.functions, next(iter(answers[0]))), calls[0], answers[0])
    if len(calls) != 1:
        return _fail("simple_function_checker:wrong_count", f"{len(calls)} calls, expected 1")
    return _check_call(entry.functions[0], calls[0], answers[0])


def _first_allowed(allowed: Sequence) -> tuple[bool, Any]:
    """``(present, value)``: the first allowed value that is not ``""``; absent when there is none."""
    for value in allowed:
        if value != "":
            return True, value
    return False, None


def _reference_dict(options: Mapping[str, Sequence]) -> dict:
    """A dict matching an allowed dict of options (key -> allowed values, compared as they are)."""
    out = {}
    for key, allowed in options.items():
        present, value = _first_allowed(allowed) if "" not in allowed else (False, None)
        if present:
            out[key] = value
    return out


def _reference_value(allowed: Sequence) -> tuple[bool, Any]:
    """The first allowed value of a parameter; an allowed dict (or list of dicts) holds options per key,
    so the value is built key by key, as the checker compares it."""
    present, value = _first_allowed(allowed)
    if present and type(value) is dict:
        return True, _reference_dict(value)
    if present and type(value) is list and value and all(type(v) is dict for v in value):
        return True, [_reference_dict(v) for v in value]
    return present, value


def reference_output(entry: BfclEntry) -> list:
    """A correct output built from the ground truth, in the form the scorers take: single-turn — one decoded
    call per answer, each parameter at its first allowed value (left out when ``""`` marks it optional and
    the doc does not require it); multi-turn — the ground-truth call strings of every turn; irrelevance —
    ``[]``."""
    if entry.multi_turn:
        return [list(calls) for calls in entry.ground_truth]
    calls = []
    for answer in entry.ground_truth:
        (name, params), = answer.items()
        required = set(_find_doc(entry.functions, name)["parameters"]["required"])
        args = {}
        for param, allowed in params.items():
            if "" in allowed and param not in required:
                continue
            present, value = _reference_value(allowed)
            if present:
                args[param] = value
            elif "" in allowed:  # required, and "" is its only allowed value
                args[param] = ""
        calls.append({name: args})
    return calls


def ground_truth_defects(entry: BfclEntry) -> tuple[str, ...]:
    """Why no output can pass a single-turn entry by the checker's rules (``()`` for almost all entries): an
    answer parameter the doc does not have and that is not optional (giving it is an unexpected parameter,
    leaving it out a missing one), a required parameter the answer lacks, or one with no allowed value."""
    defects = []
    for answer in entry.ground_truth if not entry.multi_turn else ():
        (name, params), = answer.items()
        doc = _find_doc(entry.functions, name)
        properties = doc["parameters"]["properties"]
        for param, allowed in params.items():
            if param not in properties and "" not in allowed:
                defects.append(f"{name}: the answer's parameter {param!r} is not in the doc")
            elif not allowed:
                defects.append(f"{name}: parameter {param!r} has no allowed value")
        for param in doc["parameters"]["required"]:
            if param not in params:
                defects.append(f"{name}: the required parameter {param!r} is not in the answer")
    return tuple(defects)


def score(entry: BfclEntry, output: Any) -> Verdict:
    """:func:`score_multi_turn` or :func:`score_single_turn`, by the entry's category."""
    return score_multi_turn(entry, output) if entry.multi_turn else score_single_turn(entry, output)

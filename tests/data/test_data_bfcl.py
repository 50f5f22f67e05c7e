"""BFCL v4 (third_party/benchmarks/bfcl*.py): the loader on the installed package's data, its errors on
broken files, the multi-turn split, and scoring by BFCL's rules — the ground truth replays at 100%, broken
programs fail, checks share no state, and the single-turn rules agree with the package's own AST checker
(made importable here by stubbing its model handlers' third-party imports)."""

import copy
import importlib
import importlib.abc
import importlib.machinery
import json
import os
import shutil
import sys
import types

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("bfcl_eval")

from bfcl_eval.eval_checker.multi_turn_eval import multi_turn_utils  # noqa: E402  (kept loaded for the whole module)

from third_party.benchmarks import bfcl  # noqa: E402
from third_party.benchmarks import bfcl_scoring as scoring  # noqa: E402
from third_party.benchmarks.common import BenchmarkFormatError  # noqa: E402

COUNTS = {"simple_python": 400, "multiple": 200, "parallel": 200, "parallel_multiple": 200, "live_simple": 258,
          "live_multiple": 1053, "multi_turn_base": 200, "multi_turn_miss_func": 200, "multi_turn_miss_param": 200,
          "multi_turn_long_context": 200}
POOL_SIZE = 2478
#: Entries whose ground truth no output can satisfy under the checker's rules (see ground_truth_defects).
DEFECTIVE = {"live_simple_106-63-0", "live_simple_112-68-0", "live_multiple_862-181-3", "live_multiple_964-207-0"}


@pytest.fixture(scope="module")
def entries():
    return {c: bfcl.load_category(c) for c in bfcl.SUPPORTED}


# -- loader --------------------------------------------------------------------------------------

def test_counts_and_shapes(entries):
    assert {c: len(e) for c, e in entries.items()} == COUNTS
    assert len(bfcl.load_category("irrelevance")) == 240 and len(bfcl.load_category("live_irrelevance")) == 884
    for category, es in entries.items():
        assert len({e.id for e in es}) == len(es) and all(e.category == category for e in es)
        for e in es:
            assert e.turns and all(isinstance(t, tuple) for t in e.turns) and e.functions
            assert len(e.messages) == len(e.turns)
            if e.multi_turn:
                assert len(e.ground_truth) == len(e.turns) and e.involved_classes and e.path
                assert all(isinstance(c, str) for turn in e.ground_truth for c in turn)
            else:
                assert len(e.turns) == 1 and e.turns[0] and e.ground_truth and e.initial_config == {}
    # a live entry with a system message keeps it in ``messages``, not in ``turns``
    e = next(e for e in entries["live_simple"] if len(e.messages[0]) == 2)
    assert e.messages[0][0][0] == "system" and e.turns[0] == (e.messages[0][1][1],)


def test_multi_turn_functions(entries):
    e = entries["multi_turn_miss_func"][0]
    assert e.id == "multi_turn_miss_func_0" and e.missed_function == {3: ("sort",)}
    assert e.excluded_function == ("cp",) and e.turns[3] == ()
    names = [d["name"] for d in e.functions]
    assert "sort" not in names and "cp" not in names and "mv" in names and "post_tweet" in names
    assert "sort" not in [d["name"] for d in e.functions_at_turn(2)]
    assert [d["name"] for d in e.functions_at_turn(3)] == names + ["sort"]
    assert e.ground_truth[2] == () and e.ground_truth[3] == ("sort('final_report.pdf')",)
    base = entries["multi_turn_base"][0]
    assert base.missed_function == {} and base.withheld_functions == () and base.base_index == 0
    assert {d["name"] for d in base.functions} == set(names) | {"sort"}


def test_class_file_mapping_matches_the_package():
    from bfcl_eval.constants.executable_backend_config import CLASS_FILE_PATH_MAPPING, MULTI_TURN_FUNC_DOC_FILE_MAPPING
    assert bfcl.MULTI_TURN_FUNC_DOC_FILES == MULTI_TURN_FUNC_DOC_FILE_MAPPING
    assert set(bfcl.MULTI_TURN_CLASSES) < set(CLASS_FILE_PATH_MAPPING)


def test_function_pool():
    pool = bfcl.function_pool()
    keys = [json.dumps(d, sort_keys=True) for d in pool]
    assert len(pool) == POOL_SIZE == len(set(keys))
    assert {"ls", "cd", "calculate_triangle_area", "math.factorial"} <= {d["name"] for d in pool}


@pytest.mark.parametrize("category", ["memory", "web_search", "format_sensitivity", "simple_java", "nope"])
def test_unsupported_category_refused(category, tmp_path):
    with pytest.raises(ValueError, match="not supported") as err:
        bfcl.load_category(category, data_dir=tmp_path)
    assert "simple_python" in str(err.value) and "multi_turn_base" in str(err.value)
    assert category in bfcl.UNSUPPORTED or "unknown" in str(err.value)


def test_missing_package_data(tmp_path):
    with pytest.raises(FileNotFoundError, match="BFCL simple_python questions"):
        bfcl.load_category("simple_python", data_dir=tmp_path)


# -- malformed files -----------------------------------------------------------------------------

Q = {"id": "simple_python_0", "question": [[{"role": "user", "content": "area?"}]],
     "function": [{"name": "area", "description": "d", "parameters": {
         "type": "dict", "properties": {"base": {"type": "integer"}}, "required": ["base"]}}]}
A = {"id": "simple_python_0", "ground_truth": [{"area": {"base": [10]}}]}


def _write(path, lines):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n", encoding="utf-8")
    return str(path)


def _single(tmp_path, questions, answers):
    q = _write(tmp_path / "BFCL_v4_simple_python.json", questions)
    a = _write(tmp_path / "possible_answer" / "BFCL_v4_simple_python.json", answers)
    return q, a


def _with(obj, **changes):
    out = copy.deepcopy(obj)
    for key, value in changes.items():
        if value is None:
            del out[key]
        else:
            out[key] = value
    return out


def test_small_valid_file(tmp_path):
    _single(tmp_path, [Q, _with(Q, id="simple_python_1")], [_with(A, id="simple_python_1"), A])
    es = bfcl.load_category("simple_python", data_dir=tmp_path)
    assert [e.id for e in es] == ["simple_python_0", "simple_python_1"] and es[0].turns == (("area?",),)
    assert scoring.score_single_turn(es[1], [{"area": {"base": 10}}]).valid


@pytest.mark.parametrize("questions, answers, which, line, fld, message", [
    ([Q, "{not json"], [A], "q", 2, None, "not valid JSON"),
    ([_with(Q, function=None)], [A], "q", 1, "function", "missing field 'function'"),
    ([_with(Q, question="hi")], [A], "q", 1, "question", "must be list"),
    ([_with(Q, question=[[{"role": "user"}]])], [A], "q", 1, "question[0][0].content", "missing field"),
    ([Q, Q], [A], "q", 2, "id", "duplicate id"),
    ([Q, _with(Q, id="simple_python_1")], [A], "q", 2, "id", "no ground truth"),
    ([Q], [A, _with(A, id="simple_python_9")], "a", 2, "id", "no question"),
    ([Q], [_with(A, ground_truth={"area": {}})], "a", 1, "ground_truth", "must be list"),
    ([Q], [_with(A, ground_truth=[{"other": {"base": [1]}}])], "a", 1, "ground_truth[0]", "not among"),
    ([Q], [_with(A, ground_truth=[{"area": {"base": 10}}])], "a", 1, "ground_truth[0].area", "list of allowed"),
    ([_with(Q, function=[{"name": "area", "parameters": {"properties": {"b": {"type": "int"}}, "required": []}}])],
     [A], "q", 1, "function[0].parameters.properties.b.type", "not one of"),
])
def test_malformed_single_turn(tmp_path, questions, answers, which, line, fld, message):
    q, a = _single(tmp_path, questions, answers)
    with pytest.raises(BenchmarkFormatError, match=message) as err:
        bfcl.load_category("simple_python", data_dir=tmp_path)
    path = q if which == "q" else a
    assert err.value.path == path and err.value.line == line and err.value.field == fld
    assert f"{path}:{line}" in str(err.value)


@pytest.fixture(scope="module")
def multi_turn_records():
    root = bfcl.default_data_dir()
    with open(os.path.join(root, "BFCL_v4_multi_turn_miss_func.json")) as f:
        q = [json.loads(next(f)) for _ in range(2)]
    with open(os.path.join(root, "possible_answer", "BFCL_v4_multi_turn_miss_func.json")) as f:
        a = [json.loads(next(f)) for _ in range(2)]
    return q, a


@pytest.mark.parametrize("break_it, which, fld, message", [
    (lambda q, a: a[1]["ground_truth"].pop(), "a", "ground_truth", "turns"),
    (lambda q, a: a[1]["ground_truth"][0].append("ls(a=os.getcwd())"), "a", "ground_truth", "literals"),
    (lambda q, a: a[1]["ground_truth"][0].append("not a call"), "a", "ground_truth", "not a"),
    (lambda q, a: q[1]["involved_classes"].append("Nope"), "q", "involved_classes", "Nope"),
    (lambda q, a: q[1].update(missed_function={"99": ["sort"]}), "q", "missed_function", "turn index"),
    (lambda q, a: q[1].update(missed_function={"1": ["no_such_fn"]}), "q", "missed_function.1", "no_such_fn"),
    (lambda q, a: q[1].pop("initial_config"), "q", "initial_config", "missing field"),
])
def test_malformed_multi_turn(tmp_path, multi_turn_records, break_it, which, fld, message):
    q, a = copy.deepcopy(multi_turn_records)
    break_it(q, a)
    shutil.copytree(os.path.join(bfcl.default_data_dir(), "multi_turn_func_doc"), tmp_path / "multi_turn_func_doc")
    qp = _write(tmp_path / "BFCL_v4_multi_turn_miss_func.json", q)
    ap = _write(tmp_path / "possible_answer" / "BFCL_v4_multi_turn_miss_func.json", a)
    with pytest.raises(BenchmarkFormatError, match=message) as err:
        bfcl.load_category("multi_turn_miss_func", data_dir=tmp_path)
    assert err.value.path == (qp if which == "q" else ap) and err.value.line == 2 and err.value.field == fld


def test_multi_turn_copy_loads(tmp_path, multi_turn_records):
    q, a = multi_turn_records
    shutil.copytree(os.path.join(bfcl.default_data_dir(), "multi_turn_func_doc"), tmp_path / "multi_turn_func_doc")
    _write(tmp_path / "BFCL_v4_multi_turn_miss_func.json", q)
    _write(tmp_path / "possible_answer" / "BFCL_v4_multi_turn_miss_func.json", a)
    es = bfcl.load_category("multi_turn_miss_func", data_dir=tmp_path)
    assert es == bfcl.load_category("multi_turn_miss_func")[:2]


# -- call strings --------------------------------------------------------------------------------

def test_parse_call():
    assert bfcl.parse_call("mv(source='a', destination='b')") == ("mv", (), {"source": "a", "destination": "b"})
    assert bfcl.parse_call("sort('final_report.pdf')") == ("sort", ("final_report.pdf",), {})
    assert bfcl.parse_call("math.factorial(number=5)") == ("math.factorial", (), {"number": 5})
    assert bfcl.parse_call("f(1, x=[1, {'a': (2, None)}], y=-3.5)") == (
        "f", (1,), {"x": [1, {"a": (2, None)}], "y": -3.5})
    for bad in ["f(x=g())", "f(**k)", "f(x=1, x=2)", "x", "f(", "f()()", "(lambda: 1)()", 3]:
        with pytest.raises(ValueError):
            bfcl.parse_call(bad)


_literals = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=8)


@settings(max_examples=60, deadline=None)
@given(st.from_regex(r"[a-z_][a-z0-9_]{0,8}(\.[a-z_][a-z0-9_]{0,5})?", fullmatch=True),
       st.lists(_literals, max_size=2).map(tuple),
       st.dictionaries(st.from_regex(r"[a-z][a-z0-9_]{0,6}", fullmatch=True), _literals, max_size=3))
def test_format_parse_round_trip(name, args, kwargs):
    import keyword
    if any(keyword.iskeyword(part) for part in name.split(".")) or any(keyword.iskeyword(k) for k in kwargs):
        return
    assert bfcl.parse_call(bfcl.format_call(name, args, kwargs)) == (name, args, kwargs)


# -- split ---------------------------------------------------------------------------------------

def test_split(entries):
    everything = [e for c in bfcl.MULTI_TURN for e in entries[c]]
    train, val, test = bfcl.split_multi_turn(everything)
    assert (train, val, test) == bfcl.split_multi_turn(everything, seed=0)
    ids = [[e.id for e in part] for part in (train, val, test)]
    assert sorted(sum(ids, [])) == sorted(e.id for e in everything)  # covering, and disjoint
    bases = [{e.base_index for e in part} for part in (train, val, test)]
    assert not (bases[0] & bases[1] or bases[0] & bases[2] or bases[1] & bases[2])
    assert all(len(part) == 4 * len(b) for part, b in zip((train, val, test), bases))  # all 4 variants together
    assert [len(b) for b in bases] == [121, 40, 39]
    # a category split alone lands each scenario where the joint split put it
    alone = bfcl.split_multi_turn(entries["multi_turn_base"])
    assert [{e.base_index for e in part} for part in alone] == bases
    assert bfcl.split_multi_turn(everything, seed=1) != (train, val, test)
    with pytest.raises(ValueError, match="fractions"):
        bfcl.split_multi_turn(everything, fractions=(0.5, 0.5, 0.5))
    with pytest.raises(ValueError, match="not a multi-turn"):
        bfcl.split_multi_turn(entries["simple_python"][:1])


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2 ** 31), st.tuples(st.integers(0, 10), st.integers(0, 10), st.integers(1, 10)))
def test_split_property(entries, seed, weights):
    fractions = tuple(w / sum(weights) for w in weights)
    base = entries["multi_turn_base"]
    parts = bfcl.split_multi_turn(base, seed=seed, fractions=fractions)
    assert parts == bfcl.split_multi_turn(base, seed=seed, fractions=fractions)
    assert sorted(e.id for p in parts for e in p) == sorted(e.id for e in base)
    for part, f in zip(parts, fractions):
        if f == 0:
            assert part == ()


# -- scoring: the ground truth replays -------------------------------------------------------------

def test_ground_truth_defects(entries):
    defective = {e.id for c in bfcl.SINGLE_TURN for e in entries[c] if scoring.ground_truth_defects(e)}
    assert defective == DEFECTIVE


@pytest.mark.parametrize("category", bfcl.SUPPORTED + bfcl.IRRELEVANCE)
def test_ground_truth_replays(entries, category):
    es = entries[category] if category in entries else bfcl.load_category(category)
    verdicts = {e.id: scoring.score(e, scoring.reference_output(e)) for e in es}
    failed = {i for i, v in verdicts.items() if not v.valid}
    assert failed == DEFECTIVE & set(verdicts)
    assert scoring.cached_backend_instances() == 0


def _perturb_value(value):
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value + 1
    if isinstance(value, str):
        return value + " changed"
    if isinstance(value, list):
        return value + value[:1] if value else ["changed"]
    if isinstance(value, dict):
        return {**value, "changed": 1}
    return "changed"


def _wrong_type(value):
    return "12345" if not isinstance(value, str) else 12345


def _restyled(value):
    """A string written differently but equal after the package's standardisation."""
    return value.upper().replace(" ", "-") + "." if isinstance(value, str) else value


def _value_variants(value):
    """Other values of the same parameter, right or wrong (for the cross-check with the package)."""
    out = [("changed", _perturb_value(value)), ("wrong type", _wrong_type(value)), ("None", None)]
    if isinstance(value, bool):
        out += [("as int", int(value))]
    elif isinstance(value, float):
        out += [("as int", int(value)), ("as str", str(value))]
    elif isinstance(value, int):
        out += [("as float", float(value)), ("as bool", bool(value)), ("as str", str(value))]
    elif isinstance(value, str):
        out += [("restyled", _restyled(value)), ("empty", ""), ("quoted", f"'{value}'")]
    elif isinstance(value, list):
        out += [("items as str", [str(x) for x in value]), ("as tuple", tuple(value)), ("empty", []),
                ("shorter", value[:-1]), ("reversed", value[::-1]), ("nested", [value]),
                ("items restyled", [_restyled(x) for x in value])]
    elif isinstance(value, dict):
        first = next(iter(value), None)
        out += [("as list", [value]), ("empty", {})]
        if first is not None:
            out += [("key dropped", {k: v for k, v in value.items() if k != first}),
                    ("key changed", {**value, first: _perturb_value(value[first])}),
                    ("key renamed", {**{k: v for k, v in value.items() if k != first}, first + "_x": value[first]}),
                    ("values restyled", {k: _restyled(v) for k, v in value.items()})]
            last = list(value)[-1]
            if last != first:
                out.append(("key changed, another dropped",
                            {k: _perturb_value(v) if k == first else v for k, v in value.items() if k != last}))
    return out


def single_turn_variants(entry, *, thorough=False):
    """(label, calls, should_pass) — the reference output and broken copies of it; with ``thorough``, also
    every parameter of the first call set to other values, right or wrong (``should_pass`` None: it depends
    on the entry)."""
    gold = scoring.reference_output(entry)
    out = [("gold", gold, True)]
    name, args = next(iter(gold[0].items()))
    doc = next(d for d in entry.functions if d["name"] == name)

    def edit(new_args, new_name=name):
        return [{new_name: new_args}] + copy.deepcopy(gold[1:])

    for p in doc["parameters"]["required"][:1]:
        out.append(("drop required", edit({k: v for k, v in args.items() if k != p}), False))
    if args:
        p, v = next(iter(args.items()))
        out.append(("change value", edit({**args, p: _perturb_value(v)}), False))
        out.append(("wrong type", edit({**args, p: _wrong_type(v)}), False))
    out.append(("wrong name", edit(dict(args), name + "_v2"), False))
    out.append(("extra param", edit({**args, "extra_param_zz": 1}), False))
    out.append(("drop a call", gold[:-1], False))
    out.append(("extra call", gold + gold[:1], False))
    if len(gold) > 1:  # passes unless the greedy matching trips over answers that overlap (parallel_178)
        out.append(("reordered", gold[::-1], None))
    if thorough:
        for p, v in args.items():
            out.append((f"{p} dropped", edit({k: x for k, x in args.items() if k != p}), None))
            out += [(f"{p} {label}", edit({**args, p: x}), None) for label, x in _value_variants(v)]
        answer = next(iter(entry.ground_truth[0].values()))
        for p, allowed in answer.items():
            if p not in args and any(a != "" for a in allowed):
                value = next(a for a in allowed if a != "")
                out.append((f"{p} given", edit({**args, p: value}), None))
                out += [(f"{p} given {label}", edit({**args, p: x}), None) for label, x in _value_variants(value)]
        out += [("no call", [], False), ("not decoded", ["f()"], False), ("empty call", [{}], False)]
    return out


@pytest.mark.parametrize("category", bfcl.SINGLE_TURN)
def test_single_turn_broken_outputs_fail(entries, category):
    for e in entries[category]:
        if e.id in DEFECTIVE:
            continue
        for label, calls, should_pass in single_turn_variants(e):
            verdict = scoring.score_single_turn(e, calls)
            assert should_pass is None or verdict.valid == should_pass, (e.id, label, verdict)


def test_single_turn_rules_by_hand():
    doc = {"name": "f", "parameters": {"type": "dict", "required": ["x"], "properties": {
        "x": {"type": "float"}, "s": {"type": "string"}, "xs": {"type": "array", "items": {"type": "integer"}},
        "d": {"type": "dict"}, "t": {"type": "tuple", "items": {"type": "string"}}}}}
    answer = {"f": {"x": [2.0], "s": ["New York, NY", ""], "xs": [[1, 2], ""], "d": [{"k": ["a"], "o": ["", 1]}, ""],
                    "t": [["a", "b"], ""]}}
    e = bfcl.BfclEntry("simple_python_x", "simple_python", (("q",),), (doc,), (answer,))
    ok = lambda **kw: scoring.score_single_turn(e, [{"f": kw}])  # noqa: E731
    assert ok(x=2).valid and ok(x=2.0, s="new york ny").valid and ok(x=2.0, s="NEW-YORK, NY").valid
    assert ok(x=2.0, xs=[1, 2], d={"k": "A"}, t=("a", "b")).valid and ok(x=2.0, d={"k": "a", "o": 1}).valid
    assert ok(x=2.0, xs=[]).valid  # "" reads as the empty list for arrays, as in the package
    assert ok().error_type == "simple_function_checker:missing_required"
    assert ok(x=True).error_type == "type_error:simple"
    assert ok(x=2.5).error_type == "value_error:others"
    assert ok(x=2.0, s="Boston").error_type == "value_error:string"
    # the "" option passes any item types (the package's nested check accepts a non-list option) ...
    assert ok(x=2.0, xs=[1, "2"]).error_type == "value_error:list/tuple"
    # ... without it, the items are type-checked
    e2 = bfcl.BfclEntry("simple_python_y", "simple_python", (("q",),), (doc,), ({"f": {"x": [2.0], "xs": [[1, 2]]}},))
    assert scoring.score_single_turn(e2, [{"f": {"x": 2.0, "xs": [1, "2"]}}]).error_type == "type_error:nested"
    assert scoring.score_single_turn(e2, [{"f": {"x": 2.0, "xs": "v"}}]).valid is False
    assert ok(x=2.0, xs=[2, 1]).error_type == "value_error:list/tuple"
    assert ok(x=2.0, d={"k": "b"}).error_type == "value_error:dict_value"
    assert ok(x=2.0, d={"z": "a"}).error_type == "value_error:dict_key"
    assert ok(x=2.0, q=1).error_type == "simple_function_checker:unexpected_param"
    assert scoring.score_single_turn(e, [{"g": {"x": 2.0}}]).error_type == "simple_function_checker:wrong_func_name"
    assert scoring.score_single_turn(e, []).error_type == "simple_function_checker:wrong_count"
    assert scoring.score_single_turn(e, ["f(x=2)"]).error_type == "ast_decoder:decoder_wrong_output_format"
    irr = bfcl.load_category("irrelevance")[0]
    assert scoring.score_single_turn(irr, []).valid and scoring.score_single_turn(irr, [{}]).valid
    assert not scoring.score_single_turn(irr, [{"f": {}}]).valid
    assert scoring.standardize_string("April 1, 2024") == "april12024"


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_parallel_order_does_not_matter(entries, data):
    """Calls of different functions match their answers in any order."""
    pool = [e for c in ("parallel", "parallel_multiple") for e in entries[c]
            if len(e.ground_truth) > 1 and len({next(iter(a)) for a in e.ground_truth}) == len(e.ground_truth)]
    e = data.draw(st.sampled_from(pool))
    calls = data.draw(st.permutations(scoring.reference_output(e)))
    assert scoring.score_single_turn(e, calls).valid


def test_parallel_matching_is_greedy(entries):
    """Each answer takes the first unmatched call it accepts, as in the package: in parallel_178 answer 0 allows
    Microsoft or Apple on Jan 1, so with the calls reversed it takes Apple's, which answer 2 needed."""
    e = next(e for e in entries["parallel"] if e.id == "parallel_178")
    gold = scoring.reference_output(e)
    assert scoring.score_single_turn(e, gold).valid
    assert scoring.score_single_turn(e, gold[::-1]).error_type == "parallel_function_checker_no_order:cannot_find_match"


# -- scoring: multi-turn programs ----------------------------------------------------------------

def _last_nonempty(turns):
    return max(t for t, calls in enumerate(turns) if calls)


@pytest.mark.parametrize("category", bfcl.MULTI_TURN)
def test_multi_turn_dropped_call_fails(entries, category):
    for e in entries[category]:
        program = scoring.reference_output(e)
        program[_last_nonempty(program)].pop()
        assert not scoring.score_multi_turn(e, program).valid, e.id


@pytest.mark.parametrize("category", bfcl.MULTI_TURN)
def test_multi_turn_changed_argument_fails(entries, category):
    """The last string argument of the program, changed, fails — except in scenario 139, where the call is
    ``add_to_watchlist(stock='ZETA')`` with ZETA already watched: the backend ignores an unknown symbol and
    returns the same watchlist, so BFCL's state and result checks cannot tell the two apart."""
    passed = set()
    for e in entries[category]:
        program = scoring.reference_output(e)
        t, i, key = next((t, i, k) for t in reversed(range(len(program))) for i in reversed(range(len(program[t])))
                         for k, v in bfcl.parse_call(program[t][i])[2].items() if isinstance(v, str))
        name, args, kwargs = bfcl.parse_call(program[t][i])
        program[t][i] = bfcl.format_call(name, args, {**kwargs, key: kwargs[key] + "_changed"})
        if scoring.score_multi_turn(e, program).valid:
            passed.add(e.base_index)
    assert passed <= {139}


def test_multi_turn_force_terminated_and_types(entries):
    e = entries["multi_turn_base"][0]
    gold = scoring.reference_output(e)
    assert scoring.score_multi_turn(e, gold[:-1]).error_type == "multi_turn:force_terminated"
    assert scoring.score_multi_turn(e, [[] for _ in gold]).error_type == "multi_turn:empty_turn_model_response"
    with pytest.raises(TypeError):
        scoring.score_multi_turn(e, ["ls()"] * len(gold))
    with pytest.raises(ValueError):
        scoring.score_multi_turn(entries["simple_python"][0], gold)


def test_no_state_leaks_between_checks(entries):
    before = len(vars(multi_turn_utils))
    for e in entries["multi_turn_base"][:10] + entries["multi_turn_long_context"][:5]:
        gold = scoring.reference_output(e)
        wrong = [list(calls) for calls in gold]
        wrong[_last_nonempty(wrong)].pop()
        assert not scoring.score_multi_turn(e, wrong).valid
        assert scoring.score_multi_turn(e, gold).valid  # the wrong run left nothing behind
        assert not scoring.score_multi_turn(e, wrong).valid
        assert scoring.score_multi_turn(e, gold).valid
    assert len(vars(multi_turn_utils)) == before and scoring.cached_backend_instances() == 0


def test_miss_turn_irrelevance_option(entries):
    e = entries["multi_turn_miss_func"][0]
    program = scoring.reference_output(e)
    assert program[2] == []
    program[2] = ["pwd()"]  # acting in the turn where the needed function is missing
    assert scoring.score_multi_turn(e, program).valid  # the package's runner does not penalise it
    verdict = scoring.score_multi_turn(e, program, check_irrelevance=True)
    assert verdict.error_type == "multi_turn:irrelevance_error:decoder_success"


def test_unsafe_calls_are_not_executed(entries):
    e = entries["multi_turn_base"][0]
    program = scoring.reference_output(e)
    program[0] = ["globals().clear()", "__import__('os').getcwd()", "exec('x = 1')", "ls(a=len('ab'))"] + program[0]
    assert scoring.score_multi_turn(e, program).valid  # extra failing calls do not change the state
    assert hasattr(multi_turn_utils, "execute_multi_turn_func_call")
    program[0] = ["mkdir(dir_name='x')"] + program[0]
    assert scoring.score_multi_turn(e, program).error_type == "multi_turn:instance_state_mismatch"


# -- cross-check with the package's own AST checker -------------------------------------------------

#: Third-party modules that ``bfcl_eval.constants.model_config`` (imported by the AST checker) needs through
#: its model handlers, none of them used by the checker itself.
STUBBED = ("anthropic", "boto3", "cohere", "datamodel_code_generator", "google.genai", "httpx", "mistralai",
           "openai", "overrides", "qwen_agent", "tenacity", "tree_sitter", "tree_sitter_java",
           "tree_sitter_javascript", "writerai")


class _StubMeta(type):
    """Stub classes: any attribute, call, subclassing and ``|`` work and do nothing."""

    def __getattr__(cls, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _stub_class(name)

    def __call__(cls, *args, **kwargs):
        return super().__call__()


def _stub_attribute(self, name):
    if name.startswith("__"):
        raise AttributeError(name)
    return _stub_class(name)


def _stub_class(name):
    return _StubMeta(name, (), {
        "__getattr__": _stub_attribute,
        "__call__": lambda self, *a, **k: a[0] if len(a) == 1 and callable(a[0]) and not k else self,
        "__or__": lambda self, other: self, "__ror__": lambda self, other: self,
        "__and__": lambda self, other: self})


class _StubModule(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        value = _stub_class(name)
        setattr(self, name, value)
        return value


class _StubFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Last on ``sys.meta_path``: only modules that are not installed are stubbed."""

    def __init__(self):
        self.created = []

    def find_spec(self, name, path, target=None):
        if any(name == s or name.startswith(s + ".") for s in STUBBED):
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec):
        self.created.append(spec.name)
        return _StubModule(spec.name)

    def exec_module(self, module):
        module.__path__ = []


@pytest.fixture(scope="module")
def package_ast_checker(tmp_path_factory):
    finder = _StubFinder()
    before = set(sys.modules)
    with pytest.MonkeyPatch.context() as mp:
        # the package's eval_config creates result/score/lock directories under BFCL_PROJECT_ROOT on import
        mp.setenv("BFCL_PROJECT_ROOT", str(tmp_path_factory.mktemp("bfcl_project")))
        mp.setattr(sys, "meta_path", sys.meta_path + [finder])
        try:
            ast_checker = importlib.import_module("bfcl_eval.eval_checker.ast_eval.ast_checker")
            from bfcl_eval.constants.enums import Language
            model = "gorilla-openfunctions-v2"  # keeps dotted function names as they are
            assert not ast_checker.MODEL_CONFIG_MAPPING[model].underscore_to_dot

            from bfcl_eval.utils import is_function_calling_format_output

            def check(entry, calls):  # as the package's _evaluate_single_ast_entry: format first, then AST
                if not is_function_calling_format_output(calls):
                    return {"valid": False, "error_type": "ast_decoder:decoder_wrong_output_format"}
                return ast_checker.ast_checker(copy.deepcopy(list(entry.functions)), copy.deepcopy(calls),
                                               copy.deepcopy(list(entry.ground_truth)), Language.PYTHON,
                                               entry.category, model)
            yield check
        finally:
            for name in set(sys.modules) - before:
                if name.startswith("bfcl_eval.") or name in finder.created:
                    del sys.modules[name]


@pytest.mark.parametrize("category", bfcl.SINGLE_TURN)
def test_agrees_with_the_package_ast_checker(entries, package_ast_checker, category):
    compared = 0
    for e in entries[category]:
        for label, calls, _ in single_turn_variants(e, thorough=True):
            ours = scoring.score_single_turn(e, calls)
            theirs = package_ast_checker(e, calls)
            assert (ours.valid, ours.error_type) == (theirs["valid"], theirs.get("error_type")) or (
                ours.valid and theirs["valid"]), (e.id, label, calls, ours, theirs)
            compared += 1
    assert compared >= 20 * len(entries[category])


_json_like = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.floats(-3, 3, allow_nan=False) | st.sampled_from(["", "a", "A b"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(["a", "b", "k"]), inner, max_size=2),
    max_leaves=5)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_random_values_agree_with_the_package(entries, package_ast_checker, data):
    """Any value, for any parameter of the first call (allowed values and variants of them included)."""
    category = data.draw(st.sampled_from(bfcl.SINGLE_TURN))
    e = data.draw(st.sampled_from(entries[category]))
    calls = scoring.reference_output(e)
    (name, args), = calls[0].items()
    answer = next(iter(e.ground_truth[0].values()))
    doc = next(d for d in e.functions if d["name"] == name)
    param = data.draw(st.sampled_from(sorted(set(doc["parameters"]["properties"]) | set(answer)) + ["zz_unknown"]))
    options = [a for a in answer.get(param, []) if a != ""]
    pick = st.sampled_from(options) if options else _json_like
    value = data.draw(st.one_of(_json_like, pick, pick.map(_restyled), pick.flatmap(
        lambda v: st.sampled_from([x for _, x in _value_variants(v)]))))
    calls[0] = {name: {**args, param: value}}
    ours = scoring.score_single_turn(e, calls)
    theirs = package_ast_checker(e, calls)
    assert (ours.valid, ours.error_type) == (theirs["valid"], theirs.get("error_type")) or (
        ours.valid and theirs["valid"]), (e.id, calls, ours, theirs)


def test_synthetic_entries_agree_with_the_package(package_ast_checker):
    """Rare paths on a made-up entry: variables (an answer of another type than the doc's), nested item types
    with and without the "" option, tuples, dicts and lists of dicts, ints for floats."""
    doc = {"name": "pkg.f", "parameters": {"type": "dict", "required": ["x"], "properties": {
        "x": {"type": "float"}, "v": {"type": "array", "items": {"type": "float"}},
        "xs": {"type": "array", "items": {"type": "integer"}}, "t": {"type": "tuple", "items": {"type": "string"}},
        "d": {"type": "dict"}, "ld": {"type": "array", "items": {"type": "dict"}}, "b": {"type": "boolean"},
        "s": {"type": "any"}}}}
    answer = {"pkg.f": {"x": [2.0, 3], "v": ["data['sales']"], "xs": [[1, 2], [3]], "t": [["a", "b"], ""],
                        "d": [{"k": ["a", "B c"], "o": ["", 1]}, ""], "ld": [[{"n": ["x"]}, {"n": ["y", ""]}], ""],
                        "b": [True, ""], "s": ["Any Thing", ""]}}
    e = bfcl.BfclEntry("simple_python_z", "simple_python", (("q",),), (doc,), (answer,))
    base = {"x": 2.0, "v": "data['sales']", "xs": [1, 2]}
    values = {"x": [2, 3, 3.0, 2.5, "2", True, None], "v": ["DATA['sales']", [1.0], [None], ["a"], [], 5],
              "xs": [[1, 2], [1, "2"], [3], (3,), [True], [], "xs"], "t": [("a", "b"), ["A", "B"], ("a",), [1, 2]],
              "d": [{"k": "b c"}, {"k": "a", "o": 1}, {"k": "z"}, {"o": 1}, {"k": "z", "x": 1}, {}, [], "d"],
              "ld": [[{"n": "x"}, {"n": "Y"}], [{"n": "x"}, {}], [{"n": "x"}], [{"n": "z"}, {"n": "y"}], []],
              "b": [True, False, 1, "True"], "s": ["any-thing", "other", 1]}
    compared = 0
    for param, options in values.items():
        for value in options:
            for args in ({**base, param: value}, {k: v for k, v in {**base, param: value}.items() if k != "x"}):
                calls = [{"pkg.f": args}]
                ours, theirs = scoring.score_single_turn(e, calls), package_ast_checker(e, calls)
                assert (ours.valid, ours.error_type) == (theirs["valid"], theirs.get("error_type")) or (
                    ours.valid and theirs["valid"]), (args, ours, theirs)
                compared += 1
    assert compared == 2 * sum(map(len, values.values()))
    # a parameter with no allowed value (as in live_simple_112-68-0) fails whatever is given
    empty = bfcl.BfclEntry("simple_python_e", "simple_python", (("q",),), (doc,), ({"pkg.f": {"x": [2.0], "xs": []}},))
    for value in ([1], [], ["a"], 1, "a"):
        calls = [{"pkg.f": {"x": 2.0, "xs": value}}]
        ours, theirs = scoring.score_single_turn(empty, calls), package_ast_checker(empty, calls)
        assert (ours.valid, ours.error_type) == (theirs["valid"], theirs["error_type"]) and not ours.valid
    # non-dict items where dicts are expected: the package raises AttributeError; here the call fails
    assert not scoring.score_single_turn(e, [{"pkg.f": {**base, "ld": [1, 2]}}]).valid

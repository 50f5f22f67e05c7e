"""BFCL function docs -> library Tools: every doc converts, the type table, pre-conditions, names, bodies."""

import ast
import json

import pytest

from third_party.benchmarks import bfcl_tools as B
from cocoda_jax.execution.guard import check_tree
from cocoda_jax.library import BUILTIN_NAMES, LibrarySnapshot, Tool
from cocoda_jax.types import ANY, BOOL, FLOAT, INT, NONE, STR, dict_of, list_of, optional, parse_type


def _eval_pre(tool: Tool, args: dict) -> list[bool]:
    """The tool's pre-conditions on ``args`` (our own generated expressions: plain eval is fine here)."""
    env = {p: args.get(p) for p in tool.param_names}
    return [bool(eval(c, {"__builtins__": {"all": all}}, env)) for c in tool.pre]


# -- every doc converts ---------------------------------------------------------------------------

def test_every_single_turn_doc_converts():
    total, distinct, failures = 0, {}, {}
    for cat in B.SINGLE_TURN_CATEGORIES:
        for doc, where in B.category_docs(cat):
            total += 1
            key = B.doc_key(doc)
            if key in distinct:
                continue
            try:
                distinct[key] = B.convert_doc(doc, where=where)
            except B.BfclDocError as err:
                assert err.doc_name == doc["name"] and where in str(err)
                failures[(where.split("#")[0], doc["name"])] = err.reason
                distinct[key] = None
    assert (total, len(distinct)) == (8726, 3258)
    assert failures == dict(B.KNOWN_FAILURES)
    tools = [c.tool for c in distinct.values() if c is not None]
    assert all(t.description and t.signature is not None for t in tools)


def test_every_multi_turn_doc_converts_with_both_bodies():
    files = B.func_doc_files()
    assert set(B.MULTI_TURN_CLASSES) <= set(files) and len(files) == 12
    counts = {cls: len(B.multi_turn_docs(cls)) for cls in files}
    assert sum(counts.values()) == 162
    assert sum(counts[c] for c in B.MULTI_TURN_CLASSES) == 128
    for cls in files:
        for doc in B.multi_turn_docs(cls):
            doc_tool = B.tool_from_doc(doc)
            env_tool = B.tool_from_doc(doc, "environment", class_name=cls)
            assert doc_tool.signature == env_tool.signature and doc_tool.id != env_tool.id
            if cls in B.MULTI_TURN_CLASSES:  # each of the eight classes' docs has a dict response
                assert env_tool.signature.result == dict_of(STR, ANY)


def test_conversion_failures_are_typed_and_name_the_doc():
    bad = {"name": "broken.fn", "description": "x",
           "parameters": {"type": "dict", "properties": {"a": {"type": "string"}}, "required": ["a", "b"]}}
    with pytest.raises(B.BfclDocError) as err:
        B.convert_doc(bad, where="somefile.json#7")
    assert err.value.doc_name == "broken.fn" and "['b']" in err.value.reason and "somefile.json#7" in str(err.value)
    with pytest.raises(B.BfclDocError):
        B.library_from_docs([bad])
    with pytest.raises(B.BfclDocError):
        B.convert_doc({"description": "no name"})
    with pytest.raises(B.BfclDocError, match="class name"):
        B.convert_doc({"name": "f", "description": "", "parameters": {}}, "environment")


# -- types ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("schema, expected", [
    ({"type": "integer"}, INT), ({"type": "long"}, INT), ({"type": "float"}, FLOAT), ({"type": "number"}, FLOAT),
    ({"type": "double"}, FLOAT), ({"type": "string"}, STR), ({"type": "String"}, STR), ({"type": "char"}, STR),
    ({"type": "boolean"}, BOOL), ({"type": "Boolean"}, BOOL),
    ({"type": "array", "items": {"type": "integer"}}, list_of(INT)),
    ({"type": "array", "items": {"type": "array", "items": {"type": "float"}}}, list_of(list_of(FLOAT))),
    ({"type": "array"}, list_of(ANY)), ({"type": "ArrayList", "items": {"type": "String"}}, list_of(STR)),
    ({"type": "tuple", "items": {"type": "string"}}, list_of(STR)),
    ({"type": "dict", "properties": {"a": {"type": "integer"}}}, dict_of(STR, ANY)),
    ({"type": "object"}, dict_of(STR, ANY)), ({"type": "HashMap"}, dict_of(STR, ANY)),
    ({"type": "object", "additionalProperties": {"type": "number"}}, dict_of(STR, FLOAT)),
    ({"type": "any"}, ANY), ({"type": "null"}, NONE), ({"type": ["string", "null"]}, optional(STR)),
])
def test_schema_type_table(schema, expected):
    notes = []
    assert B.schema_type(schema, notes) == expected
    assert notes == []


@pytest.mark.parametrize("schema", [{"type": "quaternion"}, {"type": ""}, {}, {"type": ["string", "integer"]}, "str"])
def test_unknown_types_become_any_with_the_reason_recorded(schema):
    notes = []
    assert B.schema_type(schema, notes, "parameter 'q'") == ANY
    assert len(notes) == 1 and notes[0].startswith("parameter 'q'")


def _doc(**props):
    required = [k for k, v in props.items() if v.pop("_required", False)]
    return {"name": "demo.fn", "description": "Demo function. Second sentence.",
            "parameters": {"type": "dict", "properties": props, "required": required}}


def test_optional_parameters_get_defaults_and_optional_types():
    doc = _doc(city={"type": "string", "_required": True, "description": "City name. More."},
               unit={"type": "string", "enum": ["c", "f"], "default": "f"},
               days={"type": "integer"},
               flag={"type": "boolean", "default": "false"},
               mode={"type": "boolean", "enum": ["True", "False", "dontcare"], "default": "dontcare"},
               tags={"type": "array", "items": {"type": "string", "enum": ["x", "y"]}})
    conv = B.convert_doc(doc)
    tool = conv.tool
    assert str(tool.signature) == ("(city: str, unit: str, days: Optional[int], flag: bool, mode: Any, "
                                   "tags: Optional[list[str]]) -> Any")
    fn = ast.parse(tool.source).body[-1]
    assert [ast.literal_eval(d) for d in fn.args.defaults] == ["f", None, False, "dontcare", None]
    assert any("converted to False" in n for n in conv.notes)
    assert any("dontcare" in n and "typed Any" in n for n in conv.notes)
    assert tool.description.startswith("Demo function. Second sentence. Parameters: city: City name;")


def test_result_type_comes_from_the_response_schema():
    doc = dict(_doc(), response={"type": "array", "items": {"type": "string"}})
    assert B.tool_from_doc(doc).signature.result == list_of(STR)
    assert B.tool_from_doc(_doc()).signature.result == ANY


# -- pre-conditions -------------------------------------------------------------------------------

def test_enum_pre_conditions_hold_for_allowed_values_and_fail_for_others():
    doc = _doc(unit={"type": "string", "enum": ["celsius", "fahrenheit"], "_required": True},
               stars={"type": "integer", "enum": [1, 2, 3]},
               size={"type": "string", "enum": ["s", "m"], "default": "xl"},
               sensors={"type": "array", "items": {"type": "string"}, "enum": ["co2", "noise"]})
    tool = B.tool_from_doc(doc)
    assert "unit is not None" in tool.pre and "unit in ('celsius', 'fahrenheit')" in tool.pre
    ok = dict(unit="celsius", stars=2, size="m", sensors=["co2", "noise"])
    assert all(_eval_pre(tool, ok))
    assert all(_eval_pre(tool, dict(ok, stars=None, size="xl", sensors=None)))  # defaults are allowed
    for bad in (dict(ok, unit="kelvin"), dict(ok, unit=None), dict(ok, stars=7), dict(ok, size="l"),
                dict(ok, sensors=["co2", "dust"])):
        assert not all(_eval_pre(tool, bad)), bad


def test_real_enum_pre_conditions():
    doc = next(d for d, _ in B.category_docs("live_simple") if d["name"] == "get_current_weather"
               and "enum" in d["parameters"]["properties"].get("unit", {}))
    tool = B.tool_from_doc(doc)
    allowed = doc["parameters"]["properties"]["unit"]["enum"]
    base = {p: "Boston, MA" for p in tool.param_names}
    for v in allowed:
        assert all(_eval_pre(tool, dict(base, unit=v)))
    assert not all(_eval_pre(tool, dict(base, unit="kelvin")))


# -- names ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("bfcl, tool", [
    ("math.factorial", "math_factorial"), ("uber.eat.reviews", "uber_eat_reviews"), ("sum", "sum_"),
    ("help", "help_"), ("1st-place", "f_1st_place"), ("_private", "f_private"), ("año.x", "ano_x"),
    ("a b/c", "a_b_c"), ("class", "class_"), ("environment_call", "environment_call_"), ("Any", "Any_"),
])
def test_tool_name(bfcl, tool):
    assert B.tool_name(bfcl) == tool and tool.isidentifier()


def test_name_map_resolves_collisions_deterministically_and_round_trips():
    pool = ["a.b", "a_b", "a_b_2", "a.b", "x"]
    names = B.NameMap.build(pool)
    assert names.tool_names == ("a_b", "a_b_3", "a_b_2", "a_b_4", "x")  # plain names are reserved first
    assert len(set(names.tool_names)) == len(pool)
    assert [names.bfcl(t) for t in names.tool_names] == pool
    assert names.tools("a.b") == ("a_b", "a_b_4") and names.tool("x") == "x"
    with pytest.raises(KeyError):
        names.tool("a.b")
    assert names.collisions() == {"a_b": ("a_b", "a_b_3", "a_b_4")}
    assert names.as_dict()["a_b_3"] == "a_b"


def test_library_order_and_names_do_not_depend_on_input_order():
    docs = [d for d, _ in B.category_docs("live_simple")]
    a = B.library_from_docs(docs)
    b = B.library_from_docs(list(reversed(docs)))
    assert [t.name for t in a.tools] == [t.name for t in b.tools]
    assert len(a) == len({B.doc_key(d) for d in docs}) == 154
    assert len({t.name for t in a.tools}) == len(a)
    for doc in docs:
        assert a.names.bfcl(a.tool_for(doc)) == doc["name"]
    assert len(a.names.tools("get_current_weather")) > 1  # several distinct docs of one BFCL name


def test_method_names_shared_by_two_classes_give_two_tools():
    doc = {"name": "reset", "description": "Reset.", "parameters": {"type": "dict", "properties": {}, "required": []}}
    lib = B.library_from_docs([doc, doc], "environment", class_of=lambda d, c=iter(["Car", "Bank"]): next(c))
    assert [t.name for t in lib.tools] == ["reset", "reset_2"] and lib.classes == ("Bank", "Car")
    assert "'Bank', 'reset'" in lib.tools[0].source and "'Car', 'reset'" in lib.tools[1].source
    assert lib.tool_for(doc, "Car") == "reset_2"
    # the real eight classes share no method name; with the single-turn pool some names collide
    env = B.multi_turn_library()
    assert len(env) == 128 and env.names.collisions() == {}
    single = [d for d, _ in B.category_docs("simple_python")] + [d for d, _ in B.category_docs("multiple")]
    multi = [d for c in B.MULTI_TURN_CLASSES for d in B.multi_turn_docs(c)]
    mixed = B.library_from_docs(single + multi)
    for name in ("get_current_time", "get_stock_info"):
        tools = mixed.names.tools(name)
        from_multi = {mixed.tool_for(d) for d in multi if d["name"] == name}
        assert len(from_multi) == 1 and from_multi < set(tools) and len(tools) > 1
    assert all(mixed.names.bfcl(mixed.tool_for(d)) == d["name"] for d in single + multi)


def test_parameter_names_are_mapped_and_mapped_back():
    doc = _doc(**{"id": {"type": "string", "_required": True}, "from": {"type": "string", "_required": True},
                  "all": {"type": "integer"}})
    conv = B.convert_doc(doc, "environment", class_name="Api")
    assert conv.tool.param_names == ("id_", "from_", "all_")
    assert dict(conv.params) == {"id_": "id", "from_": "from", "all_": "all"}
    body = ast.parse(conv.tool.source).body[-1].body
    assert len(body) == 1 and ast.unparse(body[0]) == (
        "return environment_call('Api', 'demo.fn', id=id_, all=all_, **{'from': from_})")


# -- bodies ---------------------------------------------------------------------------------------

def test_guard_accepts_the_environment_body():
    env = B.multi_turn_library()
    for tool, cls, doc in zip(env.tools, env.classes, env.docs):
        tree = ast.parse(tool.source)
        assert check_tree(tree, tool=True) == (), tool.name
        body = tree.body[-1].body
        assert len(body) == 1 and isinstance(body[0], ast.Return)
        call = body[0].value
        assert call.func.id == "environment_call" and [a.value for a in call.args] == [cls, doc["name"]]
        props = doc["parameters"].get("properties", {})
        assert {k.arg: k.value.id for k in call.keywords} == {p: p for p in props}
    snap = env.snapshot  # environment_call is a sandbox builtin the library knows: INSERTTOOL takes them
    assert "environment_call" in BUILTIN_NAMES and len(snap) == 128
    assert LibrarySnapshot.from_json(snap.to_json()) == snap


def test_documentation_only_body_raises_a_clear_error():
    tool = B.tool_from_doc(next(d for d, _ in B.category_docs("simple_python") if d["name"] == "math.factorial"))
    assert tool.name == "math_factorial"
    assert check_tree(ast.parse(tool.source), tool=True) == ()
    namespace: dict = {}
    exec(compile(tool.source, "<tool>", "exec"), namespace)  # our own generated source
    with pytest.raises(NotImplementedError, match="documentation-only"):
        namespace["math_factorial"](5)


# -- libraries ------------------------------------------------------------------------------------

def test_library_json_round_trip():
    docs = [d for d, _ in B.category_docs("simple_python")] + list(B.multi_turn_docs("MathAPI"))
    lib = B.library_from_docs(docs)
    snap = lib.snapshot
    assert len(snap) == len(lib) == 417 and snap.names() == tuple(sorted(t.name for t in lib.tools))
    text = snap.to_json()
    again = LibrarySnapshot.from_json(text)
    assert again == snap and again.to_json() == text
    assert json.loads(text)["tools"][0]["source"]
    # environment-bodied tools survive a record round trip through their source
    for tool in B.multi_turn_library(["MathAPI"]).tools:
        assert Tool.from_source(tool.source, tool.description, pre=tool.pre) == tool
        assert parse_type(str(tool.signature.result)) == tool.signature.result

"""The action format: splitting, the static checker's verdicts, running a step, observations."""

from types import MappingProxyType

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cocoda_jax.rl import actions as A
from cocoda_jax.types import ANY, BOOL, FLOAT, INT, NONE, STR, dict_of, list_of

ENV = MappingProxyType({"n0": INT, "n1": FLOAT, "n2": INT, "x0": FLOAT, "xs": list_of(FLOAT), "w": STR})
KINDS = {"ok", *A.STATIC_ERRORS}


# ------------------------------------------------------------------------------------------------
# splitting


def test_split_steps_one_per_line_dropping_blanks_fences_and_echoed_observations():
    text = "```python\n x0 = add(n0, n1)  \n\n-> 5\nanswer = x0\n```\n"
    assert A.split_steps(text) == ("x0 = add(n0, n1)", "answer = x0")
    assert A.first_step(text) == "x0 = add(n0, n1)"
    assert A.first_step("\n  \n") == ""
    assert A.split_steps("x0 = add(n0, n1); x1 = add(x0, n0)") == ("x0 = add(n0, n1); x1 = add(x0, n0)",)


# ------------------------------------------------------------------------------------------------
# the checker's verdicts


@pytest.mark.parametrize("text, kind, fragment", [
    ("x1 = add(n0, n1)", "ok", ""),
    ("x1 = add(a=n0, b=2.5)", "ok", ""),
    ("x1 = add(n0, b=-3)", "ok", ""),
    ("x1 = mean([n0, n1, 2])", "ok", ""),
    ("x1 = mean(xs)", "ok", ""),
    ("answer = x0", "ok", ""),
    ("answer = add(x0, n0)", "ok", ""),
    ("", "malformed", "empty"),
    ("x1 = add(n0, n1", "malformed", "parse"),
    ("x1 = add(n0, n1); x2 = add(n0, n1)", "malformed", "2 statements"),
    ("add(n0, n1)", "malformed", "assignment"),
    ("x1 = x2 = add(n0, n1)", "malformed", "assignment"),
    ("x1, x2 = add(n0, n1)", "malformed", "assignment"),
    ("x1 += add(n0, n1)", "malformed", "assignment"),
    ("x1 = n0", "malformed", "copies"),
    ("x1 = n0 + n1", "malformed", "call a library tool"),
    ("x1 = math.sqrt(n0)", "malformed", "call a library tool"),
    ("x1 = add(add(n0, n1), n2)", "malformed", "Call expression"),
    ("x1 = add(n0 * 2, n1)", "malformed", "BinOp"),
    ("x1 = mean([[n0], [n1]])", "malformed", "nested list"),
    ("x1 = add(*xs)", "malformed", "'*'"),
    ("x1 = add(**w)", "malformed", "'**'"),
    ("x1 = add(n0, float('inf'))", "malformed", "Call"),
    ("n0 = add(n0, n1)", "bad_target", "already bound"),
    ("x0 = add(n0, n1)", "bad_target", "already bound"),
    ("add = add(n0, n1)", "bad_target", "tool name"),
    ("_x = add(n0, n1)", "bad_target", "not an allowed"),
    ("x1 = addd(n0, n1)", "unknown_tool", "addd"),
    ("x1 = open(n0)", "unknown_tool", "open"),
    ("x1 = add(n0, n9)", "unbound_name", "n9"),
    ("x1 = add(n0, subtract)", "unbound_name", "never passed"),
    ("answer = x7", "unbound_name", "x7"),
    ("x1 = add(n0)", "bad_arguments", "missing argument(s) b"),
    ("x1 = add(n0, n1, n2)", "bad_arguments", "takes 2"),
    ("x1 = add(n0, c=n1)", "bad_arguments", "no parameter 'c'"),
    ("x1 = add(n0, a=n1)", "bad_arguments", "twice"),
    ("x1 = mean(n0)", "ill_typed", "xs expects list[float], got n0: int"),
    ("x1 = add(xs, n1)", "ill_typed", "parameter a"),
    ("x1 = add(n0, w)", "ill_typed", "parameter b"),
    ("x1 = add(n0, 'three')", "ill_typed", "str"),
    ("x1 = round_to(x0, 1.5)", "ill_typed", "digits expects int"),
])
def test_check_step_verdicts(math_library, text, kind, fragment):
    check = A.check_step(text, math_library, ENV)
    assert check.kind == kind, check
    assert fragment in check.message
    assert check.ok == (kind == "ok")
    if kind == "ok":
        assert check.result_type == FLOAT


def test_parse_step_keeps_argument_texts_and_values():
    step = A.parse_step("x1 = mean([n0, -2.5, 'a'], k=-3)")
    assert step.target == "x1" and step.tool == "mean" and not step.is_answer
    lst, kw = step.args
    assert lst.kind == "list" and lst.text == "[n0, -2.5, 'a']"
    assert [(i.kind, i.text, i.value) for i in lst.items] == [("name", "n0", None), ("literal", "-2.5", -2.5),
                                                              ("literal", "'a'", "a")]
    assert (kw.kind, kw.text, kw.value, kw.keyword) == ("literal", "-3", -3, "k")
    assert step.names_used == ("n0",)
    answer = A.parse_step("answer = x3")
    assert answer.is_answer and answer.source == "x3" and answer.names_used == ("x3",)


def test_list_literal_element_types(math_library):
    # A list of str is refused where list[float] goes; a mixed list has element type Any, which
    # L1 lets through (Any is a wildcard) and leaves to the sandbox.
    assert A.check_step("x1 = mean([w])", math_library, ENV).kind == "ill_typed"
    assert A.check_step("x1 = mean([n0, w])", math_library, ENV).ok


def test_types_flow_through_generic_tools_and_defaults(generic_library):
    env = {"n0": INT, "n1": INT, "f": FLOAT, "w": STR}
    head = A.check_step("x0 = head([n0, n1])", generic_library, env)
    assert head.ok and head.result_type == INT
    env2 = A.bind(env, head)
    assert env2["x0"] == INT and "x0" not in env  # bind is pure
    pair = A.check_step("x1 = same_pair(w, w)", generic_library, env2)
    assert pair.ok and pair.result_type == list_of(STR)
    # one substitution across the arguments: T is bound to int by the first, str does not fit
    bad = A.check_step("x1 = same_pair(n0, w)", generic_library, env2)
    assert bad.kind == "ill_typed" and "expects int" in bad.message
    assert A.check_step("x1 = head(n0)", generic_library, env2).kind == "ill_typed"
    # a parameter with a default may be left out; a literal bool is accepted where an int goes
    assert A.check_step("x1 = scale(f)", generic_library, env2).ok
    assert A.check_step("x1 = scale(f, k=3)", generic_library, env2).ok
    assert A.check_step("x1 = scale(f, 2.5)", generic_library, env2).kind == "ill_typed"
    # a free type variable left in the result becomes Any
    assert A.check_step("x1 = head([])", generic_library, env2).result_type == ANY


def test_bind_refuses_a_failed_check(math_library):
    check = A.check_step("x1 = mean(n0)", math_library, ENV)
    with pytest.raises(ValueError, match="ill_typed"):
        A.bind(ENV, check)


def test_type_of_value():
    assert A.type_of_value(3) == INT and A.type_of_value(3.5) == FLOAT and A.type_of_value(True) == BOOL
    assert A.type_of_value("a") == STR and A.type_of_value(None) == NONE
    assert A.type_of_value([1, 2.5]) == list_of(FLOAT) and A.type_of_value([1, 2]) == list_of(INT)
    assert A.type_of_value([]) == list_of(ANY) and A.type_of_value(["a", 1]) == list_of(ANY)
    assert A.type_of_value({"a": 1, "b": 2.0}) == dict_of(STR, FLOAT)
    assert A.type_of_value({"columns": ["a"], "rows": []}) == ANY  # could be a Table: unknown
    assert A.input_types((("n0", 1), ("n1", 2.5))) == {"n0": INT, "n1": FLOAT}


_TEXT = st.text(alphabet=st.sampled_from(list("x0n1 =(),[]'\"add_meanb+.-\n:#*")), max_size=40)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.one_of(_TEXT, st.text(max_size=30)))
def test_checker_never_raises_and_answers_with_a_known_kind(math_library, text):
    check = A.check_step(text, math_library, ENV)
    assert check.kind in KINDS
    if check.ok:
        assert check.step is not None and check.result_type is not None


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_well_formed_numeric_calls_are_ok_exactly_when_the_arity_fits(math_library, data):
    """Every number-only primitive takes floats: with numeric names, only the arity can be wrong."""
    numeric = [n for n in math_library.names()
               if all(str(p.type) in ("float",) for p in math_library.tool(n).signature.params)]
    tool = data.draw(st.sampled_from(numeric))
    arity = math_library.tool(tool).signature.arity
    args = data.draw(st.lists(st.sampled_from(["n0", "n1", "x0", "7", "-2.5"]), max_size=4))
    check = A.check_step(f"y = {tool}({', '.join(args)})", math_library, ENV)
    assert check.kind == ("ok" if len(args) == arity else "bad_arguments")


# ------------------------------------------------------------------------------------------------
# observations


def test_format_value():
    assert A.format_value(70.0) == "70" and A.format_value(14.230769230769) == "14.2308"
    assert A.format_value(3) == "3" and A.format_value(-0.35) == "-0.35"
    assert A.format_value([1, 2.5, "a"]) == "[1, 2.5, 'a']" and A.format_value((1,)) == "(1,)"
    assert A.format_value({"a": 1.0}) == "{'a': 1}" and A.format_value(None) == "None"
    long = A.format_value(list(range(1000)))
    assert len(long) == A.MAX_OBSERVATION_CHARS and long.endswith("...")


def test_render_observation_for_refused_ok_and_failed_steps(math_library):
    refused = A.check_step("x1 = mean(n0)", math_library, ENV)
    assert A.render_observation(refused) == "-> error[ill_typed]: mean: parameter xs expects list[float], got n0: int"
    ok = A.check_step("x1 = add(n0, n1)", math_library, ENV)
    assert A.render_observation(ok, A.StepOutcome(ok=True, value=5.0)) == "-> 5"
    failed = A.StepOutcome(ok=False, error="runtime", message="ZeroDivisionError:\n division by zero" + "x" * 300)
    text = A.render_observation(ok, failed)
    assert text.startswith("-> error[runtime]: ZeroDivisionError: division by zero")
    assert "\n" not in text and len(text) <= A.MAX_OBSERVATION_CHARS
    with pytest.raises(ValueError):
        A.render_observation(ok)


# ------------------------------------------------------------------------------------------------
# running a step in the sandbox


def test_execute_step_binds_the_value_with_the_variables_so_far(math_library, sandbox):
    bindings = {"n0": 131, "n1": 4}
    check = A.check_step("x0 = floor_div(n0, n1)", math_library, A.input_types(bindings))
    assert A.step_program(check, "x0 = floor_div(n0, n1)") == "x0 = floor_div(n0, n1)\nanswer = x0\n"
    out = A.execute_step("x0 = floor_div(n0, n1)", check, bindings, math_library, sandbox)
    assert out.ok and out.value == 32 and out.calls == ("floor_div",) and out.error is None
    assert bindings == {"n0": 131, "n1": 4}


def test_execute_step_reports_a_runtime_error_as_an_observation(math_library, sandbox):
    bindings = {"n0": 3, "n1": 0}
    text = "x0 = divide(n0, n1)"
    check = A.check_step(text, math_library, A.input_types(bindings))
    out = A.execute_step(text, check, bindings, math_library, sandbox)
    assert not out.ok and out.error == "runtime" and "ZeroDivisionError" in out.message
    assert A.render_observation(check, out).startswith("-> error[runtime]: ZeroDivisionError")


def test_execute_steps_runs_a_batch_each_with_its_own_bindings(math_library, sandbox):
    texts = ["x0 = add(n0, n1)", "answer = x0", "x1 = mean([n0, 1])"]
    bindings = [{"n0": 1, "n1": 2}, {"x0": 7.5}, {"n0": 3}]
    checks = [A.check_step(t, math_library, A.input_types(b)) for t, b in zip(texts, bindings)]
    outs = A.execute_steps(texts, checks, bindings, math_library, sandbox)
    assert [o.value for o in outs] == [3, 7.5, 2.0]
    assert [o.calls for o in outs] == [("add",), (), ("mean",)]


def test_a_refused_step_never_reaches_the_sandbox(math_library):
    check = A.check_step("x0 = open(n0)", math_library, ENV)
    with pytest.raises(ValueError, match="must not run"):
        A.step_program(check, "x0 = open(n0)")

"""Stable JSON and loading that re-checks well-formedness."""

import json

import pytest

from cocoda_jax.library import SCHEMA, LibraryFormatError, LibrarySnapshot, analyse
from cocoda_jax.library.serialize import entry_digest
from tests.library.library_corpus import CORPUS, build


def test_round_trip_is_exact(static_library):
    text = static_library.to_json()
    assert isinstance(text, str) and text.endswith("}\n")
    loaded = LibrarySnapshot.from_json(text)
    assert loaded == static_library
    assert loaded.to_json() == text
    assert LibrarySnapshot.from_json(text.encode("utf-8")).to_json() == text  # bytes too
    for name in static_library.names():
        assert loaded.children(name) == static_library.children(name)
        assert loaded.flat(name) == static_library.flat(name)


def test_same_library_same_bytes_whatever_the_insertion_order():
    one = build(["add", "sub", "mul", "div", "square", "mean2", "sum_sq", "quad", "spread"], with_examples=False)
    two = build(["mul", "square", "div", "add", "quad", "sum_sq", "sub", "mean2", "spread"], with_examples=False)
    assert one == two and one.to_json() == two.to_json()


def test_layout_tools_in_topological_order_with_derived_facts(static_library):
    doc = json.loads(static_library.to_json())
    assert doc["schema"] == SCHEMA and doc["max_depth"] == 8
    assert [t["name"] for t in doc["tools"]] == list(static_library.topological_order())
    spread = doc["tools"][-1]
    assert spread["calls"] == ["sum_sq", "mean2", "sub"] and spread["depth"] == 3 and spread["flat"] == 6
    assert spread["signature"] == "(x: float, y: float) -> float"


def test_example_values_round_trip_through_the_codec():
    from cocoda_jax.library import Tool

    tool = Tool.from_source("def pick(xs: tuple[int, ...], key: dict[int, str]) -> Optional[str]:\n"
                            "    return key.get(xs[0])\n", "Pick.",
                            examples=[({"xs": (1, 2), "key": {1: "a"}}, "a"), ({"xs": (3,), "key": {}}, None)])
    snap = LibrarySnapshot.empty(max_depth=3).insert(tool, runner=_NoRun())
    loaded = LibrarySnapshot.from_json(snap.to_json())
    assert loaded.tool("pick").examples == tool.examples
    assert isinstance(loaded.tool("pick").examples[0][0]["xs"], tuple)
    assert loaded.max_depth == 3


class _NoRun:
    """A runner double that passes every example check (only the serialisation is under test here)."""

    def run_many(self, programs, library, timeout_s):
        from types import SimpleNamespace

        def answer(program):
            value = "a" if "pick((1, 2)" in program else None
            return SimpleNamespace(ok=True, value=([], None, value, []), error=None)

        return [answer(p) for p in programs]


def edited(snap, edit):
    doc = json.loads(snap.to_json())
    edit(doc)
    return json.dumps(doc)


def tool_entry(doc, name):
    return next(t for t in doc["tools"] if t["name"] == name)


def load_error(text, rederive=False) -> LibraryFormatError:
    with pytest.raises(LibraryFormatError) as info:
        LibrarySnapshot.from_json(text, rederive=rederive)
    return info.value


def set_source(doc, name, source):
    """A consistent hand edit: new source with its true id and calls, so only deeper checks can object."""
    entry = tool_entry(doc, name)
    entry["source"] = source
    entry["id"] = analyse(source).code_id
    entry["calls"] = list(analyse(source).calls)


@pytest.mark.parametrize("edit, where, fragment", [
    (lambda d: d.update(schema="other/9"), "schema", "expected 'cocoda_jax.library/2'"),
    (lambda d: d.update(max_depth=-1), "max_depth", "integer >= 0"),
    (lambda d: d.pop("tools"), "top level", "missing key(s) ['tools']"),
    (lambda d: d.update(extra=1), "top level", "unknown key(s) ['extra']"),
    (lambda d: tool_entry(d, "mean2").pop("description"), "tools[4] 'mean2'", "missing key(s) ['description']"),
    (lambda d: tool_entry(d, "mean2").update(pre="b != 0"), "'mean2'", "'pre' must be a list of strings"),
    (lambda d: tool_entry(d, "mean2").update(id="0123456789abcdef"), "'mean2'", "stored id 0123456789abcdef"),
    (lambda d: tool_entry(d, "mean2").update(signature="(a: int, b: float) -> float"), "'mean2'",
     "stored signature"),
    (lambda d: tool_entry(d, "mean2").update(source=CORPUS["mean2"][0].replace("2)", "3)")), "'mean2'",
     "does not match the code's id"),
    (lambda d: tool_entry(d, "mean2").update(calls=["add"]), "'mean2'", "differ from the calls in the code"),
    (lambda d: tool_entry(d, "spread").update(depth=2), "'spread'", "stored depth 2 differs from 3"),
    (lambda d: tool_entry(d, "sum_sq").update(flat=5), "'sum_sq'", "stored flat 5 differs from 3"),
    (lambda d: tool_entry(d, "mean2").update(name="mean3"), "'mean3'", "defines a function named 'mean2'"),
    (lambda d: d["tools"].append(dict(tool_entry(d, "add"))), "tools[9] 'add'", "a second tool named 'add'"),
    (lambda d: set_source(d, "mean2", "def mean2(a: float, b: float) -> float:\n    return div(plus(a, b), 2)\n"),
     "'mean2'", "calls ['plus'], which the file does not define"),
    (lambda d: set_source(d, "square", "def square(x: float) -> float:\n    return mul(x, quad(x))\n"),
     "tools", "cycle: quad -> square -> quad"),
    (lambda d: d.update(max_depth=2), "'spread'", "depth_exceeded"),
    (lambda d: set_source(d, "mean2", "def mean2(a: float, b: float) -> float:\n    return div(add(a, b), '2')\n"),
     "'mean2'", "ill_typed_call"),
    (lambda d: set_source(d, "sub", CORPUS["add"][0].replace("def add", "def sub")), "'sub'", "duplicate_code"),
    (lambda d: tool_entry(d, "add")["examples"].append({"args": {"a": 1}, "expected": 1}), "'add'",
     "must bind exactly the parameters"),
])
@pytest.mark.parametrize("rederive", [False, True], ids=["digests", "rederive"])
def test_corrupt_files_are_refused_with_the_place(static_library, edit, where, fragment, rederive):
    err = load_error(edited(static_library, edit), rederive)
    assert where in err.where, (err.where, str(err))
    assert fragment in str(err), str(err)


@pytest.mark.parametrize("text, fragment", [
    ("{not json", "not valid JSON at line 1, column 2"),
    (b"\xff\xfe", "not UTF-8"),
    ("[]", "expected an object"),
])
def test_unreadable_files(text, fragment):
    assert fragment in str(load_error(text))


def test_tools_may_be_listed_in_any_order(static_library):
    text = edited(static_library, lambda d: d["tools"].reverse())
    assert LibrarySnapshot.from_json(text) == static_library


def test_verify_examples_reruns_the_checks_in_the_sandbox(sandbox):
    snap = build(["add", "mul", "square"], runner=sandbox)
    assert LibrarySnapshot.from_json(snap.to_json(), runner=sandbox, verify_examples=True) == snap

    def wrong_example(doc):
        tool_entry(doc, "square")["examples"][0]["expected"] = 10

    text = edited(snap, wrong_example)
    assert LibrarySnapshot.from_json(text).tool("square").examples[0][1] == 10  # not verified by default
    with pytest.raises(LibraryFormatError) as info:
        LibrarySnapshot.from_json(text, runner=sandbox, verify_examples=True)
    assert "'square'" in info.value.where and "example_failed" in str(info.value)
    assert "returned 9, expected 10" in str(info.value)


def test_text_is_one_tool_per_line_with_sorted_keys(static_library):
    text = static_library.to_json()
    lines = text.splitlines()
    assert len(lines) == len(static_library) + 2 and text.isascii()
    assert json.loads(lines[1].rstrip(","))["name"] == static_library.topological_order()[0]
    for line in lines[1:-1]:
        assert line.rstrip(",") == json.dumps(json.loads(line.rstrip(",")), sort_keys=True)  # sorted keys
    assert LibrarySnapshot.empty(max_depth=2).to_json() == '{"max_depth": 2, "schema": "cocoda_jax.library/2", "tools": []}\n'


def test_a_loaded_library_has_the_index_of_one_built_by_inserts(static_library):
    """from_json builds the signature index in bulk; it must equal the incrementally kept one."""
    from cocoda_jax.types import parse_signature

    loaded = LibrarySnapshot.from_json(static_library.to_json())
    assert sorted(loaded.signature_index.items()) == sorted(static_library.signature_index.items())
    for query in ("(x: float, y: float) -> float", "(xs: list[float]) -> float", "(n: int) -> float"):
        q = parse_signature(query)
        assert loaded.signature_index.lookup(q, limit=20) == static_library.signature_index.lookup(q, limit=20)


# -- digests: what they vouch for, and what is still checked ---------------------------------------

def rehashed(snap, edit):
    """A deliberate hand edit that also recomputes every digest (what the digest cannot catch)."""
    def both(doc):
        edit(doc)
        for entry in doc["tools"]:
            entry["digest"] = entry_digest(entry)
    return edited(snap, both)


@pytest.fixture
def derived_calls(monkeypatch):
    """Counts the tools the loader rebuilds from their source."""
    from cocoda_jax.library import serialize

    seen = []
    real = serialize._derived_tool

    def counting(entry, where):
        seen.append(entry["name"])
        return real(entry, where)

    monkeypatch.setattr(serialize, "_derived_tool", counting)
    return seen


def test_each_entry_carries_the_digest_of_its_line(static_library):
    doc = json.loads(static_library.to_json())
    for entry in doc["tools"]:
        assert len(entry["digest"]) == 64 and entry["digest"] == entry_digest(entry)
        assert entry_digest(dict(entry, description="other")) != entry["digest"]


def test_vouched_entries_are_not_rebuilt_and_edited_ones_are(static_library, derived_calls):
    assert LibrarySnapshot.from_json(static_library.to_json()) == static_library
    assert derived_calls == []
    text = edited(static_library, lambda d: tool_entry(d, "mean2").update(description="The average."))
    loaded = LibrarySnapshot.from_json(text)
    assert derived_calls == ["mean2"] and loaded.tool("mean2").description == "The average."
    derived_calls.clear()
    assert LibrarySnapshot.from_json(static_library.to_json(), rederive=True) == static_library
    assert sorted(derived_calls) == sorted(static_library.names())


def test_a_rehashed_lie_passes_the_digests_but_not_rederive(static_library):
    """The boundary, stated in serialize's docstring: a digest is a checksum, not a signature."""
    text = rehashed(static_library, lambda d: tool_entry(d, "mean2").update(id="0123456789abcdef"))
    assert LibrarySnapshot.from_json(text).tool("mean2").id == "0123456789abcdef"
    assert "stored id 0123456789abcdef" in str(load_error(text, rederive=True))


@pytest.mark.parametrize("edit, where, fragment", [
    (lambda d: tool_entry(d, "spread").update(depth=2), "'spread'", "stored depth 2 differs from 3"),
    (lambda d: tool_entry(d, "mean2").update(calls=["add", "plus"]), "'mean2'", "calls ['plus'], which the file"),
    (lambda d: tool_entry(d, "square").update(calls=["mul", "quad"]), "tools", "cycle: quad -> square -> quad"),
    (lambda d: d["tools"].append(dict(tool_entry(d, "add"), name="plus")), "'plus'", "duplicate_code"),
    (lambda d: tool_entry(d, "mean2").update(signature="(a: float, b: float -> float"), "'mean2'", "bad signature"),
])
def test_structure_is_checked_even_where_digests_match(static_library, edit, where, fragment):
    err = load_error(rehashed(static_library, edit))
    assert where in err.where and fragment in str(err), str(err)


def test_older_files_without_digests_load_with_every_fact_rederived(static_library, derived_calls):
    def to_v1(doc):
        doc["schema"] = "cocoda_jax.library/1"
        for entry in doc["tools"]:
            del entry["digest"]
    assert LibrarySnapshot.from_json(edited(static_library, to_v1)) == static_library
    assert sorted(derived_calls) == sorted(static_library.names())
    err = load_error(edited(static_library, lambda d: tool_entry(d, "add").pop("digest")))
    assert "'add'" in err.where and "missing key(s) ['digest']" in str(err)

"""The co-evolution report: exact numbers from hand-made round records, typed errors for malformed ones,
the five plots, the drawing of the learned DAG and the retrieval token cost per query."""

import copy
import json

import matplotlib.image
import pytest

from cocoda_jax.report import (
    ReportError, build_report, draw_library, plot_coevolution, retrieval_tokens_per_query, write_report,
)
from cocoda_jax.report.coevolution import PLOT_NAMES
from cocoda_jax.report.rounds import SCHEMA_KEYS

COMPOSITE = ("def discount_then_tax(tax: float, price: float, off: float) -> float:\n"
             "    sale = subtract(price, percent_of(off, price))\n"
             "    return add(sale, percent_of(tax, sale))\n")


@pytest.fixture(scope="module")
def sandbox():
    from cocoda_jax.execution import Sandbox

    with Sandbox(workers=2, timeout_s=30.0) as sb:
        yield sb


@pytest.fixture(scope="module")
def primitives(sandbox):
    from cocoda_jax.data import synthetic_math

    return synthetic_math.primitive_library(sandbox)


@pytest.fixture(scope="module")
def learned(primitives, sandbox):
    """The 30 primitives plus one depth-1 composite (flat 4, Phi 3)."""
    from cocoda_jax.library import Tool

    tool = Tool.from_source(COMPOSITE, "A price after an off percent discount, then a tax percent tax.",
                            examples=[({"tax": 10, "price": 100, "off": 20}, 88.0)])
    return primitives.insert(tool, runner=sandbox)


def record(round_, outcome, *, size=30, composites=0, depth=0, val=None, tcps=None, share=0.0, tokens=None,
           train=None, inserted=(), uses=None):
    return {"round": round_, "outcome": outcome, "reason": f"r{round_}", "library_size": size,
            "primitives": size - composites, "composites": composites, "max_depth": depth,
            "val_accuracy": val, "val_reward": None if val is None else val - 0.1, "train_accuracy": train,
            "tool_calls_per_solved": tcps, "composite_share": share, "retrieval_tokens_per_query": tokens,
            "inserted": list(inserted), "composite_uses": dict(uses or {}), "wall_s": 10.0 * round_}


ROUNDS = [
    record(0, "initial", val=0.40, tcps=4.0, share=0.0, tokens=1000.0),
    record(1, "accept", size=31, composites=1, depth=1, val=0.50, tcps=3.0, share=0.25, tokens=1100.0,
           inserted=["discount_then_tax"], uses={"discount_then_tax": 5}),
    record(2, "reject", size=32, composites=2, depth=2, val=0.45, tcps=2.5, share=0.5, tokens=None,
           inserted=["bad_tool"], uses={"discount_then_tax": 3, "bad_tool": 4}),
    record(3, "accept_planner", size=31, composites=1, depth=1, val=0.55, tcps=2.0, share=0.3, tokens=1150.0,
           train=0.6, uses={"discount_then_tax": 7}),
]


def report_of(rounds, learned, primitives, **kw):
    return build_report(rounds, sft_accuracy=0.38, final_accuracy=0.52, final_library=learned,
                        primitive_names=primitives.names(), wall_s=123.5, **kw)


def test_report_numbers_are_exact(learned, primitives):
    rounds = copy.deepcopy(ROUNDS)
    rep = report_of(rounds, learned, primitives, baseline={"accuracy": 0.47, "rounds": 3}, rods={"solved": 2},
                    config={"seed": 0}, extra={"note": "x"})
    assert rounds == ROUNDS  # the input is not changed
    assert rep["rounds"] == 3
    assert rep["per_round"] == ROUNDS and list(rep["per_round"][0]) == list(SCHEMA_KEYS)
    assert rep["library"] == {"primitives": 30, "composites": 1, "max_depth": 1, "size": 31, "learned": 1}
    assert rep["accuracy"] == {"sft": 0.38, "final": 0.52, "per_round": [0.40, 0.50, 0.45, 0.55]}
    assert rep["tool_calls_per_solved"] == {"first_round": 3.0, "final": 2.0}
    assert rep["composite_share"] == 0.3 and rep["retrieval_tokens_per_query"] == 1150.0
    assert rep["accepted_rounds"] == 2 and rep["rejected_rounds"] == 1 and rep["wall_s"] == 123.5
    assert rep["composites"] == [{"name": "discount_then_tax", "depth": 1, "flat": 4, "phi": 3,
                                  "children": ["percent_of", "subtract", "percent_of", "add"], "uses": 15}]
    assert rep["baseline_frozen_library"] == {"accuracy": 0.47, "rounds": 3}
    assert rep["rods"] == {"solved": 2} and rep["config"] == {"seed": 0} and rep["note"] == "x"
    assert list(rep)[:12] == ["rounds", "per_round", "library", "accuracy", "tool_calls_per_solved",
                              "composite_share", "retrieval_tokens_per_query", "accepted_rounds",
                              "rejected_rounds", "wall_s", "composites", "config"]


def test_final_values_come_from_the_last_accepted_state(learned, primitives):
    rep = report_of(copy.deepcopy(ROUNDS[:3]), learned, primitives)  # ends with a rejected round
    assert rep["tool_calls_per_solved"] == {"first_round": 3.0, "final": 3.0}
    assert rep["composite_share"] == 0.25 and rep["retrieval_tokens_per_query"] == 1100.0
    assert "baseline_frozen_library" not in rep and "rods" not in rep
    only_sft = report_of([copy.deepcopy(ROUNDS[0])], primitives, primitives)
    assert only_sft["rounds"] == 0 and only_sft["tool_calls_per_solved"] == {"first_round": 4.0, "final": 4.0}
    assert only_sft["composites"] == [] and only_sft["library"]["learned"] == 0
    empty = report_of([], primitives, primitives)
    assert empty["rounds"] == 0 and empty["tool_calls_per_solved"] == {"first_round": None, "final": None}


def test_write_report_is_sorted_json_and_leaves_no_temporary(learned, primitives, tmp_path):
    rep = report_of(copy.deepcopy(ROUNDS), learned, primitives)
    path = write_report(rep, tmp_path / "out" / "report.json")
    text = path.read_text()
    assert json.loads(text) == rep
    assert text == json.dumps(rep, sort_keys=True, indent=2) + "\n"
    assert [p.name for p in path.parent.iterdir()] == ["report.json"]


@pytest.mark.parametrize("change, match", [
    (lambda r: r[2].pop("val_accuracy"), r"round 2: missing key\(s\) \['val_accuracy'\]"),
    (lambda r: r[1].__setitem__("library_size", "31"), r"round 1: key 'library_size' must be an int"),
    (lambda r: r[1].__setitem__("val_accuracy", float("nan")), r"round 1: key 'val_accuracy' must be a finite"),
    (lambda r: r[3].__setitem__("outcome", "maybe"), r"round 3: key 'outcome' must be one of"),
    (lambda r: r[3].__setitem__("composite_uses", {"x": -1}), r"round 3: key 'composite_uses'"),
    (lambda r: r[3].__setitem__("inserted", "abc"), r"round 3: key 'inserted' must be a list of str"),
    (lambda r: r[1].__setitem__("composites", 2), r"round 1: key 'library_size' is 31"),
    (lambda r: r[2].__setitem__("round", 1), r"round 1: key 'round' does not increase"),
    (lambda r: r[1].__setitem__("outcome", "initial"), r"round 1: key 'outcome'"),
])
def test_malformed_records_raise_a_report_error_naming_round_and_key(learned, primitives, change, match):
    rounds = copy.deepcopy(ROUNDS)
    change(rounds)
    with pytest.raises(ReportError, match=match):
        report_of(rounds, learned, primitives)
    assert issubclass(ReportError, ValueError)


def test_bad_report_inputs_raise(learned, primitives):
    rounds = copy.deepcopy(ROUNDS)
    with pytest.raises(ReportError, match="baseline"):
        report_of(rounds, learned, primitives, baseline={"acc": 0.4})
    with pytest.raises(ReportError, match=r"overwrite report key\(s\) \['accuracy'\]"):
        report_of(rounds, learned, primitives, extra={"accuracy": 1.0})
    with pytest.raises(ReportError, match="rods is not JSON-ready"):
        report_of(rounds, learned, primitives, rods={"x": object()})
    with pytest.raises(ReportError, match="round record #0"):
        report_of(["not a dict"], learned, primitives)


def test_plots_are_written_and_skip_missing_values(tmp_path):
    paths = plot_coevolution(copy.deepcopy(ROUNDS), tmp_path / "plots")
    assert [p.name for p in paths] == list(PLOT_NAMES)
    for p in paths:
        data = p.read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000
        assert matplotlib.image.imread(p).shape[0] > 100
    assert sorted(p.name for p in (tmp_path / "plots").iterdir()) == sorted(PLOT_NAMES)  # no temporaries
    unmeasured = [dict(r, tool_calls_per_solved=None, retrieval_tokens_per_query=None, val_accuracy=None)
                  for r in copy.deepcopy(ROUNDS)]
    for p in plot_coevolution(unmeasured, tmp_path / "none"):
        assert p.read_bytes()[:4] == b"\x89PNG"
    with pytest.raises(ReportError):
        plot_coevolution([dict(ROUNDS[0], round=-1)], tmp_path / "bad")


@pytest.mark.parametrize("suffix, magic", [(".png", b"\x89PNG"), (".svg", b"<?xml")])
def test_draw_library_writes_the_learned_dag(learned, primitives, tmp_path, suffix, magic):
    path = tmp_path / f"dag{suffix}"
    assert draw_library(learned, path, primitive_names=primitives.names()) == str(path)
    data = path.read_bytes()
    assert data.startswith(magic) and len(data) > 1000
    if suffix == ".svg":
        text = data.decode()
        for name in ("discount_then_tax", "percent_of", "subtract", "add"):
            assert name in text
        assert "floor_div" not in text and "27 primitives called by no composite not drawn" in text
    assert [p.name for p in tmp_path.iterdir()] == [path.name]
    if suffix == ".svg":  # with no composite, the primitives are all that is left to draw
        only = draw_library(primitives, tmp_path / "sub" / "prims.svg")
        assert "floor_div" in open(only).read()
    with pytest.raises(ValueError, match=".png or .svg"):
        draw_library(learned, tmp_path / "dag.pdf")


def test_retrieval_tokens_per_query_is_positive_and_deterministic(learned, primitives):
    from cocoda_jax.data import synthetic_math

    questions = [t.question for t in synthetic_math.generate(4, seed=0, split="validation")]
    first = retrieval_tokens_per_query(learned, questions)
    assert first > 0 and first == retrieval_tokens_per_query(learned, questions)
    assert retrieval_tokens_per_query(learned, questions[:1]) == retrieval_tokens_per_query(learned, questions[0])
    assert retrieval_tokens_per_query(learned, questions, k=2) < first  # fewer final cards
    with pytest.raises(ValueError):
        retrieval_tokens_per_query(learned, [])

"""Benchmark loaders (third_party/benchmarks): small files written in each official format, and the
errors for broken ones (file, line and field named)."""

import json

import pytest

from cocoda_jax.data import tables as tb
from cocoda_jax.data.verifiers import finqa_equal, gsm8k_equal, math_equal, wtq_match
from third_party.benchmarks import (
    BenchmarkFormatError, load_finqa, load_gsm8k, load_math, load_mbpp, load_wtq, load_wtq_table,
)


def _jsonl(path, objs, extra_lines=()):
    path.write_text("\n".join([json.dumps(o) for o in objs] + list(extra_lines)) + "\n", encoding="utf-8")
    return path


# -- GSM8K ---------------------------------------------------------------------------------------

GSM = [
    {"question": "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. "
                 "How many clips did Natalia sell altogether in April and May?",
     "answer": "Natalia sold 48/2 = <<48/2=24>>24 clips in May.\nNatalia sold 48+24 = <<48+24=72>>72 clips "
               "altogether in April and May.\n#### 72"},
    {"question": "A shirt costs $1,200. What does it cost?", "answer": "It costs 1,200 dollars.\n#### 1,200"},
]


def test_gsm8k(tmp_path):
    problems = load_gsm8k(_jsonl(tmp_path / "test.jsonl", GSM, extra_lines=[""]))
    assert [p.answer for p in problems] == [72, 1200]
    assert problems[0].question.startswith("Natalia") and problems[0].id == "gsm8k-1"
    assert gsm8k_equal("so the answer is 72", problems[0].solution)


@pytest.mark.parametrize("lines, message, line, fld", [
    ([json.dumps({"answer": "#### 1"})], "missing field 'question'", 1, "question"),
    ([json.dumps(GSM[0]), json.dumps({"question": "q"})], "missing field 'answer'", 2, "answer"),
    ([json.dumps({"question": "q", "answer": "no marker"})], "####", 1, "answer"),
    ([json.dumps({"question": 3, "answer": "#### 1"})], "must be str", 1, "question"),
    (["{not json"], "not valid JSON", 1, None),
    (["[1, 2]"], "JSON object", 1, None),
])
def test_gsm8k_errors(tmp_path, lines, message, line, fld):
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(BenchmarkFormatError, match=message) as err:
        load_gsm8k(path)
    assert err.value.line == line and err.value.field == fld and err.value.path == str(path)
    assert f"bad.jsonl:{line}" in str(err.value)


def test_missing_path(tmp_path):
    with pytest.raises(FileNotFoundError, match="GSM8K"):
        load_gsm8k(tmp_path / "nope.jsonl")
    with pytest.raises(BenchmarkFormatError, match="directory"):
        load_gsm8k(tmp_path)


# -- MATH ----------------------------------------------------------------------------------------

MATH = [
    {"problem": "What is $\\frac{1}{2} + \\frac{1}{4}$?", "level": "Level 1", "type": "Prealgebra",
     "solution": "We have $\\frac{1}{2}+\\frac14 = \\boxed{\\frac{3}{4}}$."},
    {"problem": "Solve $x^2 = 4$.", "level": "Level ?", "type": "Algebra",
     "solution": "Both \\boxed{2} and $-2$ work, so the answer is $\\boxed{\\{-2, 2\\}}$."},
]


def test_math_directory_tree(tmp_path):
    for i, obj in enumerate(MATH):
        folder = tmp_path / "MATH" / "test" / obj["type"].lower()
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{i}.json").write_text(json.dumps(obj))
    problems = load_math(tmp_path / "MATH")
    assert [p.type for p in problems] == ["Algebra", "Prealgebra"]  # sorted path order
    assert [p.level for p in problems] == [None, 1]
    assert problems[1].answer == "\\frac{3}{4}" and math_equal(problems[1].answer, "0.75")
    assert problems[0].answer == "\\{-2, 2\\}"  # the last box wins
    assert problems[0].id == "math-test/algebra/1.json"


def test_math_single_file_list_and_jsonl(tmp_path):
    one = tmp_path / "one.json"
    one.write_text(json.dumps(MATH[0]))
    assert load_math(one)[0].answer == "\\frac{3}{4}"
    many = tmp_path / "many.json"
    many.write_text(json.dumps(MATH))
    assert len(load_math(many)) == 2
    assert [p.level for p in load_math(_jsonl(tmp_path / "m.jsonl", MATH))] == [1, None]


@pytest.mark.parametrize("obj, message, fld", [
    ({k: v for k, v in MATH[0].items() if k != "level"}, "missing field 'level'", "level"),
    (dict(MATH[0], level="hard"), "Level 3", "level"),
    (dict(MATH[0], solution="no box"), "boxed", "solution"),
    (dict(MATH[0], type=None), "must be str", "type"),
])
def test_math_errors(tmp_path, obj, message, fld):
    path = _jsonl(tmp_path / "bad.jsonl", [MATH[1], obj])
    with pytest.raises(BenchmarkFormatError, match=message) as err:
        load_math(path)
    assert err.value.line == 2 and err.value.field == fld
    listed = tmp_path / "bad.json"
    listed.write_text(json.dumps([MATH[1], obj]))
    with pytest.raises(BenchmarkFormatError, match=r"\[1\]\.") as err:
        load_math(listed)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(BenchmarkFormatError, match="no .json"):
        load_math(empty)


# -- WikiTableQuestions ----------------------------------------------------------------------------

CSV = ('Year,Team,"Goals, total",Notes\n'
       '2001,"Ajax",12,"won \\"cup\\""\n'
       '2002,PSV,7.5,\n'
       '2003,Ajax,3,moved\n')
TSV = ("id\tutterance\tcontext\ttargetValue\n"
       "nt-0\twhich team scored the most goals?\tcsv/200-csv/1.csv\tAjax\n"
       "nt-1\twhich years did ajax play?\tcsv/200-csv/1.csv\t2001|2003\n"
       "nt-2\twhat is a \\p?\tcsv/200-csv/1.csv\ta\\pb\n")


def _wtq_tree(tmp_path, tsv=TSV, csv_text=CSV):
    (tmp_path / "data").mkdir()
    (tmp_path / "csv" / "200-csv").mkdir(parents=True)
    (tmp_path / "csv" / "200-csv" / "1.csv").write_text(csv_text)
    (tmp_path / "data" / "training.tsv").write_text(tsv)
    return tmp_path / "data" / "training.tsv"


def test_wtq(tmp_path):
    examples = load_wtq(_wtq_tree(tmp_path))
    assert [e.id for e in examples] == ["nt-0", "nt-1", "nt-2"]
    assert examples[1].answers == ("2001", "2003") and wtq_match(["2003", "2001"], list(examples[1].answers))
    assert examples[2].question == "what is a |?" and examples[2].answers == ("a|b",)
    table = examples[0].table
    tb.check_table(table)
    assert table["columns"] == ["Year", "Team", "Goals, total", "Notes"]
    assert table["types"] == ["int", "str", "float", "str"]
    assert table["rows"][0] == [2001, "Ajax", 12.0, 'won "cup"']
    assert examples[0].table is examples[1].table  # each table read once


def test_wtq_table_works_with_the_table_primitives(tmp_path):
    table = load_wtq(_wtq_tree(tmp_path))[0].table
    fns = tb.local_functions()
    assert fns["argmax_key"](fns["group_sum"](table, "Team", "Goals, total")) == "Ajax"


@pytest.mark.parametrize("tsv, message, line, fld", [
    ("id\tutterance\tcontext\n", "lacks the column", 1, "targetValue"),
    ("id\tutterance\tcontext\ttargetValue\nnt-0\tq\tcsv/200-csv/9.csv\tx\n", "does not exist", 2, "context"),
    ("id\tutterance\tcontext\ttargetValue\nnt-0\tq\tx\n", "3 tab-separated fields", 2, None),
    ("", "empty file", 1, None),
])
def test_wtq_errors(tmp_path, tsv, message, line, fld):
    with pytest.raises(BenchmarkFormatError, match=message) as err:
        load_wtq(_wtq_tree(tmp_path, tsv=tsv))
    assert err.value.line == line and err.value.field == fld


def test_wtq_table_errors(tmp_path):
    bad = tmp_path / "t.csv"
    bad.write_text("a,b\n1,2,3\n")
    with pytest.raises(BenchmarkFormatError, match="3 cells, expected 2") as err:
        load_wtq_table(bad)
    assert err.value.line == 2
    dup = tmp_path / "d.csv"
    dup.write_text("a,a\nx,y\n")
    assert load_wtq_table(dup)["columns"] == ["a", "a_2"]


# -- FinQA ---------------------------------------------------------------------------------------

FINQA = [{
    "id": "ADI/2009/page_49.pdf-1",
    "pre_text": ["interest rate to a variable interest rate based on the three-month libor plus 2.05% ."],
    "post_text": ["fair value of forward exchange contracts ."],
    "table": [["", "october 31 2009", "november 1 2008"], ["fair value", "$ 1.4", "$ 2.1"]],
    "qa": {"question": "what is the percent change in fair value from 2008 to 2009?",
           "program": "subtract(1.4, 2.1), divide(#0, 2.1)", "answer": "-33.3%", "exe_ans": -0.33333},
}]


def test_finqa(tmp_path):
    path = tmp_path / "test.json"
    path.write_text(json.dumps(FINQA))
    ex = load_finqa(path)[0]
    assert ex.id == "ADI/2009/page_49.pdf-1" and ex.program.startswith("subtract")
    assert ex.table[1] == ("fair value", "$ 1.4", "$ 2.1")
    assert finqa_equal(ex.exe_ans, ex.answer) and finqa_equal("-33.33%", ex.answer)


@pytest.mark.parametrize("mutate, message, fld", [
    (lambda o: o.pop("pre_text"), "missing field '\\[0\\].pre_text'", "[0].pre_text"),
    (lambda o: o["qa"].pop("program"), "missing field '\\[0\\].qa.program'", "[0].qa.program"),
    (lambda o: o["qa"].pop("answer"), "qa.answer", "[0].qa.answer"),
    (lambda o: o.__setitem__("table", [["a", 1]]), "rows of str", "[0].table"),
    (lambda o: o.__setitem__("qa", "x"), "must be dict", "[0].qa"),
])
def test_finqa_errors(tmp_path, mutate, message, fld):
    obj = json.loads(json.dumps(FINQA[0]))
    mutate(obj)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps([obj]))
    with pytest.raises(BenchmarkFormatError, match=message) as err:
        load_finqa(path)
    assert err.value.field == fld
    path.write_text(json.dumps({"not": "a list"}))
    with pytest.raises(BenchmarkFormatError, match="JSON list"):
        load_finqa(path)


# -- MBPP ----------------------------------------------------------------------------------------

MBPP = [{"task_id": 2, "text": "Write a function to find the shared elements from the given two lists.",
         "code": "def similar_elements(a, b):\n    return tuple(set(a) & set(b))",
         "test_list": ["assert set(similar_elements((3, 4, 5, 6),(5, 7, 4, 10))) == set((4, 5))"],
         "test_setup_code": "", "challenge_test_list": []}]


def test_mbpp(tmp_path):
    problem = load_mbpp(_jsonl(tmp_path / "mbpp.jsonl", MBPP))[0]
    assert problem.task_id == 2 and problem.test_list[0].startswith("assert")
    namespace = {}
    exec(problem.code + "\n" + "\n".join(problem.test_list), namespace)  # our own fixture text
    sanitized = [{"task_id": 2, "prompt": MBPP[0]["text"], "code": MBPP[0]["code"], "test_list": MBPP[0]["test_list"]}]
    assert load_mbpp(_jsonl(tmp_path / "s.jsonl", sanitized))[0].text == MBPP[0]["text"]


@pytest.mark.parametrize("obj, message, fld", [
    ({k: v for k, v in MBPP[0].items() if k != "code"}, "missing field 'code'", "code"),
    (dict(MBPP[0], test_list=[]), "non-empty list", "test_list"),
    (dict(MBPP[0], task_id="2"), "must be int", "task_id"),
    (dict(MBPP[0], challenge_test_list=[1]), "list of str", "challenge_test_list"),
])
def test_mbpp_errors(tmp_path, obj, message, fld):
    with pytest.raises(BenchmarkFormatError, match=message) as err:
        load_mbpp(_jsonl(tmp_path / "bad.jsonl", [MBPP[0], obj]))
    assert err.value.line == 2 and err.value.field == fld

"""GSM8K and WikiTableQuestions read through TensorFlow Datasets from a prepared data directory.

The data directories are prepared here, offline, by the real TFDS builders with their download step
replaced by the small files this test writes (ArrayRecord format; no TensorFlow needed)."""

import json

import pytest

import tensorflow_datasets  # noqa: F401  (a dependency in setup.py)

from third_party.benchmarks import BenchmarkFormatError, load_tfds  # noqa: E402
from third_party.benchmarks.tfds_readers import prepared_dir  # noqa: E402


@pytest.fixture(scope="module")
def gsm8k_dir(tmp_path_factory):
    from tensorflow_datasets.text.gsm8k import gsm8k

    src = tmp_path_factory.mktemp("gsm_src")
    for split in ("train", "test"):
        (src / f"{split}.jsonl").write_text(json.dumps({"question": f"{split}: what is 2+3?",
                                                        "answer": "2+3=5\n#### 5"}) + "\n")

    class LocalGsm8k(gsm8k.Gsm8k, skip_registration=True):
        name = "gsm8k"

        def _split_generators(self, dl_manager):
            return {s: self._generate_examples(str(src / f"{s}.jsonl")) for s in ("train", "test")}

    data_dir = tmp_path_factory.mktemp("tfds")
    LocalGsm8k(data_dir=str(data_dir), file_format="array_record").download_and_prepare()
    return data_dir


def test_gsm8k_through_tfds(gsm8k_dir):
    problems = load_tfds("gsm8k", gsm8k_dir, "test")
    assert len(problems) == 1 and problems[0].answer == 5 and problems[0].question.startswith("test:")
    with pytest.raises(BenchmarkFormatError, match="no split 'validation'"):
        load_tfds("gsm8k", gsm8k_dir, "validation")


def test_wiki_table_questions_through_tfds(tmp_path):
    from tensorflow_datasets.structured.wiki_table_questions import wiki_table_questions as wtq

    (tmp_path / "src" / "data").mkdir(parents=True)
    (tmp_path / "src" / "csv").mkdir()
    (tmp_path / "src" / "csv" / "t.csv").write_text("Year,Team\n2001,Ajax\n2002,PSV\n")
    (tmp_path / "src" / "data" / "q.tsv").write_text(
        "id\tutterance\tcontext\ttargetValue\nnt-0\twho won in 2002?\tcsv/t.csv\tPSV\n")

    class LocalWTQ(wtq.WikiTableQuestions, skip_registration=True):
        name = "wiki_table_questions"

        def _split_generators(self, dl_manager):
            root = str(tmp_path / "src")
            return {"test": self._generate_examples(examples_path=root + "/data/q.tsv", tables_path=root)}

    LocalWTQ(data_dir=str(tmp_path / "tfds"), file_format="array_record").download_and_prepare()
    (example,) = load_tfds("wiki_table_questions", tmp_path / "tfds", "test")
    assert example.question == "who won in 2002?" and example.answers == ("PSV",)
    assert example.table["columns"] == ["Year", "Team"]
    assert example.table["rows"] == [["2001", "Ajax"], ["2002", "PSV"]]


def test_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="no prepared TFDS dataset 'gsm8k'"):
        load_tfds("gsm8k", tmp_path, "train")
    with pytest.raises(ValueError, match="unsupported"):
        load_tfds("mnist", tmp_path, "train")
    with pytest.raises(FileNotFoundError):
        prepared_dir(tmp_path, "wiki_table_questions")


def test_tfrecord_preparations_get_a_re_prepare_hint(gsm8k_dir, tmp_path):
    import shutil

    copy = tmp_path / "gsm8k" / "1.0.0"
    shutil.copytree(prepared_dir(gsm8k_dir, "gsm8k"), copy)
    info = copy / "dataset_info.json"
    info.write_text(info.read_text().replace('"array_record"', '"tfrecord"'))
    with pytest.raises(BenchmarkFormatError, match="file_format='array_record'"):
        load_tfds("gsm8k", tmp_path, "test")

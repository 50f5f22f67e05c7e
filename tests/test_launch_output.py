"""launch/output.py: the console and the --json_out file get the same JSON text."""

import json

from launch.output import emit_json


def test_emit_json_prints_and_writes_the_same_text(tmp_path, capsys):
    result = {"ratio": 1.5, "rows": [1, 2]}
    text = emit_json(result, str(tmp_path / "out.json"), indent=1)
    assert capsys.readouterr().out == text + "\n"
    assert (tmp_path / "out.json").read_text() == text + "\n" and json.loads(text) == result
    emit_json(result)  # no file asked: prints only
    assert json.loads(capsys.readouterr().out) == result

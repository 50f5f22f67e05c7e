"""What every launcher that reports does last: print its result as JSON, and write the same text to
``--json_out`` when given (one place, so every launcher's file and console agree byte for byte)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def emit_json(result: Any, json_out: str | None = None, *, indent: int = 2) -> str:
    """Prints ``result`` as JSON; also writes it (with a final newline) to ``json_out`` when set.
    Returns the text."""
    text = json.dumps(result, indent=indent)
    print(text)
    if json_out:
        Path(json_out).write_text(text + "\n")
    return text


__all__ = ["emit_json"]

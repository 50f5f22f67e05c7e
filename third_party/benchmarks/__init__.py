"""Adapters to the paper's benchmark files (read from local paths; nothing is downloaded).

    from third_party.benchmarks import load_gsm8k, load_math, load_wtq, load_finqa, load_mbpp

See :mod:`third_party.benchmarks.loaders` for the formats and
:class:`~third_party.benchmarks.common.BenchmarkFormatError` for the errors.
"""

from third_party.benchmarks.common import BenchmarkFormatError
from third_party.benchmarks.loaders import (
    FinQAExample, GSM8KProblem, MATHProblem, MBPPProblem, WTQExample, load_finqa, load_gsm8k, load_math,
    load_mbpp, load_wtq, load_wtq_table,
)

__all__ = [
    "BenchmarkFormatError", "FinQAExample", "GSM8KProblem", "MATHProblem", "MBPPProblem", "WTQExample",
    "load_finqa", "load_gsm8k", "load_math", "load_mbpp", "load_wtq", "load_wtq_table",
]

from third_party.benchmarks.tfds_readers import load_tfds  # noqa: E402  (TFDS itself is imported on use)

__all__ += ["load_tfds"]

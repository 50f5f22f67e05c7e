r"""GSM8K and MATH as task domains of the co-evolution job (``config.domain.name = "gsm8k" | "math"``).

The benchmarks carry questions and answers, not programs: their training tasks start with an empty
``program``, and the job's stage 0 (:mod:`cocoda_jax.demos`) collects verified programs for them
before stage 1. The planner uses the synthetic-math domain's 30 arithmetic primitives; the numbers
of a question are its inputs ``n0, n1, ...`` (in order of appearance, as the prompt tags them).
R_res is the benchmark's own verifier against ``gold``: :func:`~cocoda_jax.data.verifiers.gsm8k_equal`
(numeric) and :func:`~cocoda_jax.data.verifiers.math_equal` (math-verify behind the project's adapter).

Config keys (``config.domain``): ``data_dir`` (the benchmark's local files: GSM8K ``train.jsonl``
and ``test.jsonl``; MATH ``train`` and ``test``, each a directory tree, ``.json`` or ``.jsonl``, or
``train.jsonl``/``test.jsonl``), ``seed`` (the shuffle that picks validation from the training file),
``n_train``, ``n_val``, ``n_test`` (0: all that is left / all). Validation is held out of the training file, never the test file.
Nothing is downloaded.
"""

from __future__ import annotations

import dataclasses
import os
import random
import re
from collections.abc import Mapping
from typing import Any

from cocoda_jax.data.domain import (DomainBase, DomainConfigError, DomainSplits, dataclass_from_dict, is_number,
                                    pairs, register_domain)
from cocoda_jax.data.task import GoldProgramTask
from cocoda_jax.data.verifiers import gsm8k_equal, math_equal

#: The numbers a question states, as :func:`cocoda_jax.rl.trajectory.tag_numbers` finds them.
_NUMBER = re.compile(r"\$?(\d+(?:\.\d+)?)%?")
_KEYS = ("data_dir", "seed", "n_train", "n_val", "n_test")


@dataclasses.dataclass(frozen=True)
class BenchmarkTask(GoldProgramTask):
    """One benchmark question. ``gold``: the benchmark's answer (GSM8K: a number; MATH: the
    ``\\boxed{}`` text); ``program``/``intermediates``/``answer``: the collected demonstration once
    stage 0 found one (``program == ""`` before; ``answer`` is then the gold), ``answer`` being the
    value the program computes (what a demonstration shows). ``category``: MATH's subject, else the
    benchmark's name."""

    id: str
    split: str
    question: str
    inputs: tuple[tuple[str, float], ...]
    gold: Any
    category: str
    program: str = ""
    answer: Any = None
    answer_type: str = "float"
    intermediates: tuple[tuple[str, Any], ...] = ()


class GSM8KTask(BenchmarkTask):
    """A GSM8K question (its own class: a task finds its domain by its type)."""


class MATHTask(BenchmarkTask):
    """A MATH problem."""


def question_inputs(question: str) -> tuple[tuple[str, float], ...]:
    """``(("n0", v0), ...)``: every number the question writes, in order (ints stay ints)."""
    out = []
    for i, m in enumerate(_NUMBER.finditer(question)):
        text = m.group(1)
        out.append((f"n{i}", int(text) if "." not in text else float(text)))
    return tuple(out)


class _WordProblems(DomainBase):
    """What GSM8K and MATH share: the splits from local files, the math primitives, stated numbers."""

    def _read(self, data_dir: str, split: str) -> list[tuple[str, str, Any, str]]:
        """``(id, question, gold, category)`` of the split's file."""
        raise NotImplementedError

    def verify(self, answer: Any, task: BenchmarkTask) -> float:
        raise NotImplementedError

    def build(self, section: Any, sandbox: Any) -> DomainSplits:
        unknown = sorted(set(section.keys()) - {*_KEYS, "name", "module"})
        if unknown:
            raise DomainConfigError(f"config.domain: unknown keys {unknown} for {self.name!r} (known: {list(_KEYS)})")
        data_dir = str(section.get("data_dir", "") or "")
        if not data_dir:
            raise DomainConfigError(f"config.domain.data_dir: the directory of the {self.name} files is required "
                                    "(nothing is downloaded)")
        if not os.path.isdir(data_dir):
            raise DomainConfigError(f"config.domain.data_dir {data_dir!r} is not a directory")
        from third_party.benchmarks.common import BenchmarkFormatError
        try:
            train_rows, test_rows = self._read(data_dir, "train"), self._read(data_dir, "test")
        except (BenchmarkFormatError, FileNotFoundError) as e:
            raise DomainConfigError(f"config.domain.data_dir: {e}") from e
        order = list(range(len(train_rows)))
        random.Random(int(section.get("seed", 0))).shuffle(order)
        n_val = int(section.get("n_val", 0))
        n_train, n_test = int(section.get("n_train", 0)), int(section.get("n_test", 0))
        val_idx, train_idx = order[:n_val], order[n_val:]
        train_idx = train_idx[:n_train] if n_train else train_idx
        test_rows = test_rows[:n_test] if n_test else test_rows
        make = lambda row, split: self.task_type(row[0], split, row[1], question_inputs(row[1]), row[2], row[3],
                                                answer=row[2])
        from cocoda_jax.data.synthetic_math import primitive_library
        return DomainSplits(tuple(make(train_rows[i], "train") for i in sorted(train_idx)),
                            tuple(make(train_rows[i], "validation") for i in val_idx),
                            tuple(make(r, "test") for r in test_rows), primitive_library(sandbox))

    def task_from_dict(self, d: Mapping[str, Any]) -> BenchmarkTask:
        return dataclass_from_dict(self.task_type, d, {"inputs": pairs, "intermediates": pairs})

    def stated_numbers(self, task: BenchmarkTask) -> tuple[tuple[str, float], ...]:
        return tuple((n, v) for n, v in task.inputs if is_number(v))


class GSM8K(_WordProblems):
    """GSM8K (``train.jsonl``/``test.jsonl`` of the release) with its numeric verifier."""

    name, kind, task_type = "gsm8k", "gsm8k", GSM8KTask

    def _read(self, data_dir: str, split: str) -> list[tuple[str, str, Any, str]]:
        from third_party.benchmarks.loaders import load_gsm8k
        return [(f"gsm8k-{split}-{p.id.rsplit('-', 1)[1]}", p.question, p.answer, "gsm8k")
                for p in load_gsm8k(os.path.join(data_dir, f"{split}.jsonl"))]

    def verify(self, answer: Any, task: BenchmarkTask) -> float:
        ok = is_number(answer) and gsm8k_equal(float(answer), task.gold)
        return 1.0 if ok else 0.0


class MATH(_WordProblems):
    """MATH (the release's tree, or JSON/JSON lines) with the math-verify adapter; accuracy per subject."""

    name, kind, task_type = "math", "math_benchmark", MATHTask

    def _read(self, data_dir: str, split: str) -> list[tuple[str, str, Any, str]]:
        from third_party.benchmarks.loaders import load_math
        path = os.path.join(data_dir, split)
        if not os.path.exists(path) and os.path.exists(path + ".jsonl"):
            path += ".jsonl"
        return [(f"math-{split}-{p.id.split('-', 1)[1]}", p.problem, p.answer, p.type) for p in load_math(path)]

    @staticmethod
    def categories(task: BenchmarkTask) -> str:
        return task.category

    def verify(self, answer: Any, task: BenchmarkTask) -> float:
        if answer is None or isinstance(answer, bool):
            return 0.0
        if isinstance(answer, float):  # 12 significant digits: 0.1 + 0.2 is written 0.3
            answer = int(answer) if answer.is_integer() else float(f"{answer:.12g}")
        return 1.0 if math_equal(str(answer), task.gold) else 0.0


register_domain("gsm8k", GSM8K)
register_domain("math", MATH)

__all__ = ["BenchmarkTask", "GSM8K", "GSM8KTask", "MATH", "MATHTask", "question_inputs"]

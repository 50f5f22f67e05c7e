"""GSM8K- and MATH-format files written from synthetic-math tasks (whose programs are known), and an
oracle "teacher" that answers each question with its program: stage 0's tests need a teacher that
can succeed, and no model here can."""

from __future__ import annotations

import json
import re
from pathlib import Path

from cocoda_jax.data.synthetic_math import generate

_TAG = re.compile(r" \[n\d+\]")


def synthetic_tasks(n_train: int, n_test: int, seed: int = 3):
    return (generate(n_train, seed=seed, split="train", max_depth=2),
            generate(n_test, seed=seed, split="train", start=2_000_000, max_depth=2))


def write_gsm8k(directory: Path, train, test) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for name, tasks in (("train", train), ("test", test)):
        with open(directory / f"{name}.jsonl", "w") as f:
            for t in tasks:
                f.write(json.dumps({"question": t.question, "answer": f"Some steps.\n#### {t.answer:g}"}) + "\n")
    return directory


def write_math(directory: Path, train, test) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for name, tasks in (("train", train), ("test", test)):
        with open(directory / f"{name}.jsonl", "w") as f:
            for i, t in enumerate(tasks):
                f.write(json.dumps({"problem": t.question, "solution": f"So it is $\\boxed{{{t.answer:g}}}$.",
                                    "level": f"Level {1 + i % 5}", "type": ("Algebra", "Prealgebra")[i % 2]}) + "\n")
    return directory


def question_of(user_message: str) -> str:
    """The untagged question of a stage-0 request's user message (the planner's prompt)."""
    line = user_message.split("Question: ", 1)[1].split("\n", 1)[0]
    return _TAG.sub("", line)


class Oracle:
    """``complete(messages, extra)`` that answers with the task's gold program (in a code fence, with
    prose around it) except for the questions in ``wrong`` (a wrong program) and for seeds the
    ``garble`` predicate picks (prose, no program). Records every request."""

    def __init__(self, tasks, wrong=(), garble=lambda seed: False):
        self.programs = {t.question: t.program for t in tasks}
        self.wrong = set(wrong)
        self.garble = garble
        self.requests = []

    def reply_for(self, question: str, seed: int) -> str:
        if self.garble(seed):
            return "I believe the answer is 42."
        if question in self.wrong:
            return "x0 = add(n0, n1)\nanswer = x0"
        return "Here is the program:\n```\n" + self.programs.get(question, "") + "\n```\n"

    def __call__(self, messages, extra):
        self.requests.append((messages, dict(extra)))
        return self.reply_for(question_of(messages[-1]["content"]), extra.get("seed", 0))


class OracleServer:
    """:class:`Oracle` behind a local OpenAI-compatible ``/v1/chat/completions`` (what a vLLM teacher
    would be in real use); ``url`` for ``config.demos.base_url``."""

    def __init__(self, oracle: Oracle):
        import http.server
        import threading

        self.oracle = oracle
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                extra = {k: v for k, v in body.items() if k == "seed"}
                text = outer.oracle(body["messages"], extra)
                data = json.dumps({"id": "x", "object": "chat.completion", "model": body["model"], "choices": [
                    {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)

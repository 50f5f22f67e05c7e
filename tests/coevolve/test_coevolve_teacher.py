"""The teacher abstractor against a local HTTP server that this test starts (127.0.0.1 only):
good proposals pass the real validation on synthetic-math traces, bad replies give typed errors,
transient HTTP failures are retried, timeouts end in a typed error, never a crash."""

import http.server
import json
import os
import threading
import time

import pytest

from cocoda_jax.coevolve.teacher import (
    ERROR_KINDS, ProposalError, TeacherAbstractor, TeacherConfig, build_messages, candidates_from_reply, extract_json,
    parse_reply,
)
from third_party.teacher import (
    ChatClient, TeacherConnectionError, TeacherEndpointConfig, TeacherHTTPError, TeacherResponseError, TeacherTimeout,
)

GOOD = {
    "name": "discount_then_tax",
    "code": ("def discount_then_tax(tax: float, price: float, off: float) -> float:\n"
             "    sale = subtract(price, percent_of(off, price))\n"
             "    return add(sale, percent_of(tax, sale))\n"),
    "description": "A price after an off percent discount, then a tax percent tax.",
    "pre": ["price >= 0"],
    "post": ["result >= 0"],
}
GOOD_REPLY = "Here are my composites:\n```json\n" + json.dumps([GOOD], indent=2) + "\n```\nHope this helps."


def completion(content):
    return {"id": "x", "object": "chat.completion", "model": "m",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}]}


class Teacher:
    """A canned OpenAI-compatible server: ``script`` is a list of (status, body or content, delay_s),
    served in order (the last one repeats); every request is recorded."""

    def __init__(self):
        self.script = []
        self.requests = []
        self.release = threading.Event()
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                outer.requests.append({"path": self.path, "headers": dict(self.headers), "body": json.loads(body)})
                k = min(len(outer.requests), len(outer.script)) - 1
                status, payload, delay = outer.script[k]
                if delay:
                    outer.release.wait(delay)
                data = (json.dumps(completion(payload)) if status == 200 and isinstance(payload, str)
                        else payload if isinstance(payload, str) else json.dumps(payload)).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self):
        self.release.set()
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)


@pytest.fixture
def teacher():
    t = Teacher()
    yield t
    t.close()


def endpoint(teacher, **kw):
    kw.setdefault("timeout_s", 5.0)
    return TeacherEndpointConfig(base_url=teacher.url, model="tiny-teacher", api_key_env="COCODA_TEST_TEACHER_KEY",
                                 max_retries=kw.pop("max_retries", 2), backoff_s=0.25, **kw)


# ------------------------------------------------------------------------------------------------
# End to end: endpoint -> candidates -> the real validation
# ------------------------------------------------------------------------------------------------


def test_a_good_proposal_passes_validation_end_to_end(teacher, gold_traces, math_library, sandbox, monkeypatch):
    from cocoda_jax.coevolve.abstractor import Abstractor
    from cocoda_jax.coevolve.validate import validate

    monkeypatch.setenv("COCODA_TEST_TEACHER_KEY", "sk-local-test")
    teacher.script = [(200, GOOD_REPLY, 0)]
    abstractor = TeacherAbstractor.from_endpoint(endpoint(teacher), TeacherConfig(max_programs=10))
    assert isinstance(abstractor, Abstractor)
    report = abstractor.propose_with_report(gold_traces, math_library)
    assert not report.errors and report.reply == GOOD_REPLY
    (cand,) = report.candidates
    assert cand.name == "discount_then_tax" and cand.proposer == "teacher" and cand.arg_order == (2, 0, 1)
    assert cand.score.uses >= 20 and cand.phi == 3 and cand.pre == ("price >= 0",)
    assert len(cand.examples) == 3 and cand.examples == cand.observed[:3]   # L4 filled from observed uses

    (req,) = teacher.requests
    assert req["path"] == "/v1/chat/completions"
    assert req["headers"]["Authorization"] == "Bearer sk-local-test"
    body = req["body"]
    assert body["model"] == "tiny-teacher" and [m["role"] for m in body["messages"]] == ["system", "user"]
    user = body["messages"][1]["content"]
    assert user.count("# program ") == 10
    assert "### percent_of(" in user and gold_traces[0].program().splitlines()[0] in user

    result = validate(report.candidates, gold_traces, math_library, sandbox)
    assert [t.name for t in result.accepted] == ["discount_then_tax"] and not result.rejections
    assert "discount_then_tax" in result.snapshot and result.refactorings[0].uses == cand.score.uses
    assert any("discount_then_tax(" in t.program() for t in result.traces)


def test_a_proposal_that_changes_outputs_is_rejected_by_validation(gold_traces, math_library, sandbox):
    """A well-formed composite with the same call graph but another computation: only the sandboxed
    rewrite check can catch it, and does."""
    from cocoda_jax.coevolve.validate import validate

    wrong = dict(GOOD, code=GOOD["code"].replace("percent_of(off, price)", "percent_of(price, off)"), pre=[], post=[])
    cands, errors = candidates_from_reply(json.dumps([wrong]), gold_traces, math_library)
    assert not errors and len(cands) == 1
    result = validate(cands, gold_traces, math_library, sandbox)
    assert not result.accepted and [r.stage for r in result.rejections] == ["rewrite"]
    assert result.rejections[0].reason in ("no_use", "output_mismatch")


def test_malformed_replies_give_typed_errors_and_no_candidates(teacher, gold_traces, math_library):
    teacher.script = [(200, "Sure! {\"name\": \"oops\", \"code\": ", 0)]
    abstractor = TeacherAbstractor.from_endpoint(endpoint(teacher))
    assert abstractor.propose(gold_traces[:5], math_library) == []
    teacher.script = [(200, "I would rather not propose anything today.", 0)]
    teacher.requests.clear()
    assert abstractor.propose(gold_traces[:5], math_library) == []
    assert abstractor.error_counts == {"bad_json": 1, "no_json": 1}


def test_each_bad_proposal_gets_its_own_typed_error(gold_traces, math_library):
    marker = "COCODA_TEACHER_CODE_RAN"
    items = [
        {"name": "f", "description": "no code"},                                               # missing_field
        {"name": "f", "code": 3, "description": "code is a number"},                           # bad_field
        {"name": "g", "code": "def g(x: float) -> float:\n    return add(x, x)\n", "description": "d",
         "post": 5},                                                                           # bad_field
        {"name": "h", "code": "def h(x: float -> float:\n  return x", "description": "syntax"},  # malformed_tool
        {"name": "k", "code": "def k(x: float) -> float:\n    return add(x, 1)\n", "description": "literal"},
        {"name": "other", "code": GOOD["code"], "description": "name differs"},                # bad_field
        {"name": "evil", "code": f"import os\nos.environ['{marker}'] = '1'\n"
                                 "def evil(x: float) -> float:\n    return add(x, x)\n", "description": "side effect"},
        "not an object",                                                                       # bad_shape
        GOOD,
        {"name": "add", "code": "def add(a: float, b: float) -> float:\n    return add(a, b)\n",
         "description": "shadows a primitive"},                                                # name_taken
        GOOD,                                                                                  # name_taken
    ]
    cands, errors = candidates_from_reply(json.dumps({"composites": items}), gold_traces, math_library)
    assert [c.name for c in cands] == ["discount_then_tax"]
    assert [(e.index, e.kind) for e in errors] == [
        (0, "missing_field"), (1, "bad_field"), (2, "bad_field"), (3, "malformed_tool"), (4, "not_straight_line"),
        (5, "bad_field"), (6, "malformed_tool"), (7, "bad_shape"), (9, "name_taken"), (10, "name_taken")]
    assert all(e.kind in ERROR_KINDS for e in errors)
    assert marker not in os.environ          # the teacher's code was parsed, never executed here
    with pytest.raises(ValueError):
        ProposalError("made_up", "x")


@pytest.mark.parametrize("text, kind, value", [
    ('```json\n[{"a": 1}]\n```', None, [{"a": 1}]),
    ('```\n{"composites": []}\n```', None, {"composites": []}),
    ('Answer: [1, 2] and more text', None, [1, 2]),
    ('[{"a": 1},]', "bad_json", None),
    ("no json here", "no_json", None),
])
def test_extract_json(text, kind, value):
    got, err = extract_json(text)
    assert (err.kind if err else None) == kind and got == value


def test_a_reply_of_the_wrong_shape_is_a_typed_error():
    expected = ProposalError("bad_shape", "expected a JSON list of proposals, got str")
    assert parse_reply('"just a string"') == ([], [expected])
    items, errors = parse_reply(json.dumps([dict(GOOD, code="```python\n" + GOOD["code"] + "```", pre="price >= 0")]))
    assert not errors and items[0]["code"] == GOOD["code"] and items[0]["pre"] == ("price >= 0",)


# ------------------------------------------------------------------------------------------------
# The client: retries, backoff, timeouts, typed errors
# ------------------------------------------------------------------------------------------------


def test_http_500_is_retried_with_backoff_then_succeeds(teacher, gold_traces, math_library):
    waits = []
    teacher.script = [(500, {"error": "overloaded"}, 0), (503, "busy", 0), (200, GOOD_REPLY, 0)]
    abstractor = TeacherAbstractor.from_endpoint(endpoint(teacher), sleep=waits.append)
    cands = abstractor.propose(gold_traces[:40], math_library)
    assert [c.name for c in cands] == ["discount_then_tax"] and not abstractor.error_counts
    assert len(teacher.requests) == 3 and waits == [0.25, 0.5]
    assert teacher.requests[0]["body"] == teacher.requests[2]["body"]


def test_persistent_errors_end_in_typed_errors(teacher):
    waits = []
    teacher.script = [(500, "down", 0)]
    client = ChatClient(endpoint(teacher, max_retries=2), sleep=waits.append)
    with pytest.raises(TeacherHTTPError) as info:
        client.complete([{"role": "user", "content": "hi"}])
    assert info.value.status == 500 and info.value.attempts == 3 and len(teacher.requests) == 3
    teacher.requests.clear()
    teacher.script = [(400, "bad request", 0)]
    with pytest.raises(TeacherHTTPError) as info:
        client.complete([{"role": "user", "content": "hi"}])
    assert info.value.status == 400 and len(teacher.requests) == 1        # a client error is not retried
    teacher.requests.clear()
    teacher.script = [(200, {"choices": []}, 0)]
    with pytest.raises(TeacherResponseError):
        client.complete([{"role": "user", "content": "hi"}])
    assert "Authorization" not in teacher.requests[0]["headers"]          # no key in the env: no header


def test_a_timeout_is_retried_then_a_typed_error_and_no_crash(teacher, gold_traces, math_library):
    teacher.script = [(200, GOOD_REPLY, 3.0)]
    cfg = endpoint(teacher, timeout_s=0.3, max_retries=1)
    start = time.monotonic()
    with pytest.raises(TeacherTimeout) as info:
        ChatClient(cfg, sleep=lambda s: None).complete([{"role": "user", "content": "hi"}])
    assert info.value.attempts == 2 and time.monotonic() - start < 2.5
    abstractor = TeacherAbstractor.from_endpoint(cfg, sleep=lambda s: None)
    assert abstractor.propose(gold_traces[:5], math_library) == []
    assert abstractor.error_counts == {"endpoint": 1}


def test_a_closed_port_is_a_connection_error():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cfg = TeacherEndpointConfig(base_url=f"http://127.0.0.1:{port}", model="m", max_retries=1, backoff_s=0.0)
    with pytest.raises(TeacherConnectionError) as info:
        ChatClient(cfg).complete([{"role": "user", "content": "hi"}])
    assert info.value.attempts == 2


def test_endpoint_config_is_checked():
    for bad in ("file:///etc/passwd", "ftp://127.0.0.1/", "127.0.0.1:8000", "http://"):
        with pytest.raises(ValueError):
            TeacherEndpointConfig(base_url=bad)
    with pytest.raises(ValueError):
        TeacherEndpointConfig(max_retries=-1)
    assert TeacherEndpointConfig(base_url="http://h:1/v1/").url == "http://h:1/v1/chat/completions"
    assert TeacherEndpointConfig(base_url="http://h:1").url == "http://h:1/v1/chat/completions"
    cfg = TeacherEndpointConfig(backoff_s=1.0, backoff_max_s=3.0)
    assert [cfg.backoff(k) for k in range(4)] == [1.0, 2.0, 3.0, 3.0]
    with pytest.raises(ValueError):
        ChatClient(cfg).request_body([{"role": "user"}])


def test_the_prompt_shows_distinct_programs_and_only_the_cards_they_use(gold_traces, math_library):
    msgs = build_messages(list(gold_traces[:3]) * 2, math_library, TeacherConfig(max_programs=50))
    user = msgs[1]["content"]
    assert user.count("# program ") == len({t.program() for t in gold_traces[:3]})
    used = {c.tool for t in gold_traces[:3] for c in t.calls}
    cards = {line[4:].split("(")[0] for line in user.splitlines() if line.startswith("### ")}
    assert cards == used


# ------------------------------------------------------------------------------------------------
# Symbolic and teacher together (coevolve.proposers = "both")
# ------------------------------------------------------------------------------------------------


def test_both_proposers_keep_order_and_drop_repeats_and_refused_patterns(gold_traces, math_library):
    from cocoda_jax.coevolve.abstractor import CombinedAbstractor, SymbolicAbstractor

    symbolic = SymbolicAbstractor()
    mined = symbolic.propose(gold_traces, math_library)
    teacher = TeacherAbstractor(lambda messages: GOOD_REPLY)
    (taught,) = teacher.propose(gold_traces, math_library)
    both = CombinedAbstractor((symbolic, teacher)).propose(gold_traces, math_library)
    expected = [c.name for c in mined] + ([] if taught.pattern in {c.pattern for c in mined} else [taught.name])
    assert [c.name for c in both] == expected and mined and both[0].proposer == "symbolic"
    twice = CombinedAbstractor((teacher, teacher)).propose(gold_traces, math_library)
    assert [c.name for c in twice] == ["discount_then_tax"] and twice[0].proposer == "teacher"
    refused = CombinedAbstractor((symbolic, teacher), frozenset({taught.pattern, mined[0].pattern}))
    names = [c.name for c in refused.propose(gold_traces, math_library)]
    assert "discount_then_tax" not in names and mined[0].name not in names

"""The OpenAI-compatible server (cocoda_jax/serving) through the official ``openai`` client.

One small random planner (the ``tiny`` preset with a 300-id BPE trained here) saved as an HF
directory, served on a free port in a background thread for the whole module. Its weights are scaled
up so greedy continuations depend on the prompt (a fresh init repeats one token whatever it is given,
which would make every equality below trivially true). Requests keep ``max_tokens <= 16`` so they
share the engine's one decode length, and the module compiles a handful of shapes in all.
"""

import http.client
import json
import threading

import jax
import openai
import pytest
from flax import nnx

from cocoda_jax.models import Sampler, SamplingParams, Transformer, load_hf_checkpoint, save_hf_checkpoint
from cocoda_jax.models.config import tiny
from cocoda_jax.models.tokenizer import load_tokenizer, train_and_save, train_bpe_tokenizer
from cocoda_jax.serving import (ChatMessage, EngineStoppedError, GenerationRequest, ModelLoadError, OpenAIServer,
                                RequestError, load_served_model, parse_messages)
from cocoda_jax.serving.chat import planner_text, plain_text
from cocoda_jax.serving.engine import decode_budget, finish_choice

VOCAB = 300
CACHE = 128
MAX_BATCH = 8
NEW = 16  # max_tokens of the comparisons: the engine's smallest decode bucket


def corpus():
    ops = ("add", "subtract", "multiply", "percent_of", "divide")
    for i in range(400):
        a, b, op = i % 17, (i * 7) % 23, ops[i % 5]
        yield f"Question: what is {op} of {a} and {b}? Program:\nx0 = {op}(n0, n1)\nanswer(x0)\n"


def random_planner(cfg, factor=3.0):
    """A random planner, its weights scaled by ``factor``; initialised eagerly (op by op), which on
    2 cores is cheaper here than compiling ``create_model``'s jitted init for each layout."""
    graphdef, state = nnx.split(Transformer(cfg, rngs=nnx.Rngs(0)))
    return nnx.merge(graphdef, jax.tree.map(lambda x: x * factor, state))


@pytest.fixture(scope="module")
def hf_dir(tmp_path_factory):
    tok = train_bpe_tokenizer(corpus(), VOCAB)
    model = random_planner(tiny(len(tok)))
    path = tmp_path_factory.mktemp("hf_planner")
    save_hf_checkpoint(model, path)
    tok.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def hf_tok(hf_dir):
    return load_tokenizer(hf_dir)


@pytest.fixture(scope="module")
def server(hf_dir):
    served = load_served_model(hf_dir, model_id="tiny-planner")
    with OpenAIServer(served, cache_size=CACHE, max_batch=MAX_BATCH, batch_wait_ms=100, seed=0) as srv:
        yield srv


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server.url, api_key="x", max_retries=0, timeout=300)


def user(text):
    return [{"role": "system", "content": "Write the program."}, {"role": "user", "content": text}]


def prompt_ids(hf_tok, messages):
    text = hf_tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return hf_tok.encode(text, add_special_tokens=False)


def chat(client, messages, **kw):
    kw.setdefault("max_tokens", NEW)
    kw.setdefault("temperature", 0)
    return client.chat.completions.create(model="tiny-planner", messages=messages, **kw)


def raw_request(server, method, path, body: bytes = b"", headers=None):
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    conn.request(method, path, body=body, headers=headers or {"Content-Type": "application/json"})
    resp = conn.getresponse()
    out = resp.status, json.loads(resp.read())
    conn.close()
    return out


# ------------------------------------------------------------------------------------- pure parts
def test_messages_are_checked_and_rendered():
    parts = [{"type": "text", "text": "Tools:"}, {"type": "text", "text": " add"}]
    msgs = parse_messages([{"role": "developer", "content": "Be brief."}, {"role": "user", "content": parts}])
    assert msgs == (ChatMessage("system", "Be brief."), ChatMessage("user", "Tools: add"))
    assert planner_text(msgs) == "Be brief.\nTools: add\n"
    assert planner_text([ChatMessage("user", "Program:\n")]) == "Program:\n"  # no newline doubled
    assert plain_text(msgs) == "system: Be brief.\nuser: Tools: add\nassistant:"
    for bad, param in [(None, "messages"), ([], "messages"), ([{"role": "tool", "content": "x"}], "messages.[0].role"),
                       ([{"role": "user", "content": [{"type": "image_url"}]}], "messages.[0].content"),
                       ([{"role": "user", "content": 3}], "messages.[0].content")]:
        with pytest.raises(RequestError) as e:
            parse_messages(bad)
        assert e.value.param == param


def test_decode_budget_and_choice_cutting():
    assert decode_budget(1, 10, 128, 8) == 16 and decode_budget(17, 10, 128, 8) == 32
    assert decode_budget(100, 60, 128, 8) == 100  # room (128 - 64) < 128: capped, never below max_tokens
    req = GenerationRequest(prompt=(1,), max_tokens=3, stop=("c",))
    dec = lambda ids: "".join("abcde"[i] for i in ids)  # noqa: E731
    assert finish_choice([0, 1, 2, 3], "length", req, dec) == finish_choice([0, 1, 2], "length", req, dec)
    assert finish_choice([0, 1, 2, 3], "length", req, dec).finish_reason == "length"
    assert finish_choice([0, 4], "stop_token", req, dec).text == "a"  # the stop token is not content
    got = finish_choice([0, 1, 2], "stop_string", req, dec)
    assert (got.text, got.finish_reason, len(got.tokens)) == ("ab", "stop", 3)


def test_loader_refuses_what_it_cannot_serve(tmp_path):
    with pytest.raises(ModelLoadError, match="neither"):
        load_served_model(tmp_path)
    (tmp_path / "checkpoints").mkdir()
    with pytest.raises(ModelLoadError):
        load_served_model(tmp_path)


# ------------------------------------------------------------------------------------- the server
def test_models_list_and_retrieve(client):
    assert [m.id for m in client.models.list().data] == ["tiny-planner"]
    assert client.models.retrieve("tiny-planner").owned_by == "cocoda_jax"
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve("gpt-4o")


def test_greedy_completion_equals_the_sampler_and_counts_tokens(client, hf_dir, hf_tok):
    messages = user("what is add of 3 and 4?")
    got = chat(client, messages)
    ids = prompt_ids(hf_tok, messages)
    sampler = Sampler(load_hf_checkpoint(hf_dir), cache_size=CACHE, pad_id=hf_tok.pad_token_id)
    direct = sampler.generate([ids], SamplingParams(max_new_tokens=NEW, greedy=True,
                                                    stop_tokens=(hf_tok.eos_token_id,)), jax.random.key(0))
    tokens = direct.tokens[0]
    stopped = direct.stop_reasons[0] == "stop_token"
    expected = hf_tok.decode(tokens[:-1] if stopped else tokens, skip_special_tokens=False)
    assert got.object == "chat.completion" and got.model == "tiny-planner" and got.id.startswith("chatcmpl-")
    assert len(got.choices) == 1 and got.choices[0].index == 0 and got.choices[0].message.role == "assistant"
    assert got.choices[0].message.content == expected and expected.strip()
    assert got.choices[0].finish_reason == ("stop" if stopped else "length")
    assert got.usage.prompt_tokens == len(ids)
    assert got.usage.completion_tokens == len(tokens)
    assert got.usage.total_tokens == len(ids) + len(tokens)


def test_n_choices_and_seeded_sampling(client):
    messages = user("what is multiply of 5 and 6?")
    one = chat(client, messages, max_tokens=8)
    three = chat(client, messages, max_tokens=8, n=3, temperature=1.0, seed=7)
    assert [c.index for c in three.choices] == [0, 1, 2]
    assert three.usage.prompt_tokens == one.usage.prompt_tokens
    assert 3 <= three.usage.completion_tokens <= 3 * 8  # summed over the choices
    assert all(c.finish_reason in ("stop", "length") for c in three.choices)
    again = chat(client, messages, max_tokens=8, n=3, temperature=1.0, seed=7)
    assert [c.message.content for c in again.choices] == [c.message.content for c in three.choices]
    greedy = chat(client, messages, max_tokens=8, n=3)
    assert {c.message.content for c in greedy.choices} == {one.choices[0].message.content}


def test_max_tokens_one_ends_with_length(client):
    got = chat(client, user("what is divide of 8 and 2?"), max_tokens=1)
    assert got.choices[0].finish_reason == "length"
    assert got.usage.completion_tokens == 1
    got = chat(client, user("what is divide of 8 and 2?"), max_completion_tokens=2)
    assert got.usage.completion_tokens == 2


def test_stop_string_cuts_the_content(client):
    messages = user("what is subtract of 9 and 1?")
    full = chat(client, messages).choices[0].message.content
    stop = full[3:5]
    assert stop and full.find(stop) >= 1
    got = chat(client, messages, stop=[stop]).choices[0]
    assert got.finish_reason == "stop" and got.message.content == full[:full.find(stop)]


def test_concurrent_requests_are_batched_and_unchanged(client, server):
    questions = [f"what is {op} of {a} and {b}?" + " what is" * (a % 3)
                 for op, a, b in zip(("add", "subtract", "multiply", "divide") * 2, range(8), range(10, 18))]
    # prompts of different lengths and padding buckets (with and without the system message)
    conversations = [user(q) if i % 2 else [{"role": "user", "content": q}] for i, q in enumerate(questions)]
    single = [chat(client, m).choices[0].message.content for m in conversations]
    before = server.engine.stats()
    barrier = threading.Barrier(len(questions))
    answers = [None] * len(questions)

    def ask(i):
        barrier.wait()
        answers[i] = chat(client, conversations[i]).choices[0].message.content

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(len(questions))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    after = server.engine.stats()
    assert answers == single
    assert after.requests - before.requests == len(questions)
    assert after.batches - before.batches < len(questions)  # some requests shared a sampler call


def test_bad_requests_get_typed_errors_and_the_server_goes_on(client, server):
    status, body = raw_request(server, "POST", "/v1/chat/completions", b"{not json")
    assert status == 400 and set(body["error"]) == {"message", "type", "param", "code"}
    assert body["error"]["type"] == "invalid_request_error"
    status, body = raw_request(server, "POST", "/v1/chat/completions", json.dumps({"model": "tiny-planner"}).encode())
    assert status == 400 and body["error"]["param"] == "messages"
    assert raw_request(server, "GET", "/v1/nowhere")[0] == 404
    status, body = raw_request(server, "GET", "/stats")
    assert status == 200 and body["requests"] >= 1 and body["max_batch"] == MAX_BATCH
    assert raw_request(server, "GET", "/v1/chat/completions")[0] == 405
    status, body = raw_request(server, "DELETE", "/v1/models/tiny-planner")
    assert status == 405 and body["error"]["code"] == "method_not_allowed"
    with pytest.raises(openai.NotFoundError) as e:
        client.chat.completions.create(model="gpt-4o", messages=user("hi"))
    assert e.value.code == "model_not_found"
    with pytest.raises(openai.BadRequestError) as e:
        chat(client, user("hi " * 200))  # longer than the 128-slot cache
    assert e.value.code == "context_length_exceeded"
    with pytest.raises(openai.BadRequestError) as e:
        chat(client, user("hi"), max_tokens=CACHE)
    assert e.value.param == "max_tokens"
    for kw, param in [(dict(stream=True), "stream"), (dict(n=MAX_BATCH + 1), "n"), (dict(temperature=3), "temperature"),
                      (dict(stop=["a", "b", "c", "d", "e"]), "stop"), (dict(top_p=-1), "top_p")]:
        with pytest.raises(openai.BadRequestError) as e:
            chat(client, user("hi"), **kw)
        assert e.value.param == param
    assert chat(client, user("hi"), max_tokens=4).usage.completion_tokens == 4


# ------------------------------------------------------------------------------------- a run's workdir
def test_serves_a_run_workdir_and_shuts_down(tmp_path):
    from configs import default
    from cocoda_jax.runs import builders, rundir
    from cocoda_jax.rl.learner import TrainState

    workdir = tmp_path / "run"
    train_and_save(corpus(), workdir / "tokenizer", VOCAB)
    config = default.get_config()
    config.mesh.data = 1  # one device, as the server runs it
    tok = builders.tokenizer_for(workdir, (), config.model.vocab_size)
    learner = builders.sft_learner(random_planner(tiny(tok.vocab_size), factor=1.0), config, None)
    state = learner.init_state()
    trained = jax.tree.map(lambda x: x * 3.0, state.params)  # not an init the loader could build itself
    rundir.save_checkpoint(workdir, 5, TrainState(trained, state.opt_state, state.step), {}, config)

    served = load_served_model(workdir)
    assert (served.source, served.chat_format, served.step, served.model_id) == ("run", "planner", 5, "run")
    chex_equal = jax.tree.map(lambda a, b: bool((a == b).all()), nnx.state(served.model), trained)
    assert all(jax.tree.leaves(chex_equal))

    prompt = "Tools:\nadd\n\nQuestion: what is add of 3 [n0] and 4 [n1]?\nProgram:\n"
    ids = tok.encode(prompt)
    direct = Sampler(learner.model(TrainState(trained, state.opt_state, state.step)), cache_size=CACHE,
                     pad_id=tok.pad_id).generate([ids], SamplingParams(max_new_tokens=NEW, greedy=True,
                                                                       stop_tokens=served.stop_token_ids),
                                                 jax.random.key(0))
    with OpenAIServer(served, cache_size=CACHE, max_batch=2) as srv:
        c = openai.OpenAI(base_url=srv.url, api_key="x", max_retries=0, timeout=300)
        got = c.chat.completions.create(model="run", messages=[{"role": "user", "content": prompt}],
                                        max_tokens=NEW, temperature=0)
        assert got.usage.prompt_tokens == len(ids)
        assert got.usage.completion_tokens == len(direct.tokens[0])
        toks = direct.tokens[0]
        stopped = direct.stop_reasons[0] == "stop_token"
        assert got.choices[0].message.content == tok.decode(toks[:-1] if stopped else toks)
    with pytest.raises(openai.APIConnectionError):
        c.models.list()
    with pytest.raises(EngineStoppedError):
        srv.engine.submit(GenerationRequest(prompt=(1, 2), max_tokens=1))

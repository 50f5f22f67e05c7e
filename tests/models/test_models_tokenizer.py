"""Small BPE training, saved as an HF tokenizer directory that AutoTokenizer loads."""

import json

import pytest
from transformers import AutoTokenizer

from cocoda_jax.models.tokenizer import (IM_END, TokenizerError, load_tokenizer, train_and_save,
                                         train_bpe_tokenizer)


def corpus():
    ops = ["add", "subtract", "multiply", "percent_of", "divide"]
    for i in range(300):
        a, b = i % 17, (i * 7) % 23
        yield f"Question: what is {ops[i % 5]} of {a} and {b}? x0 = {ops[i % 5]}(n0, n1)\n"
        yield f"The table has {a} rows; total = sum(column_{b % 4})."


@pytest.fixture(scope="module")
def tok_dir(tmp_path_factory):
    return train_and_save(corpus(), tmp_path_factory.mktemp("tok"), vocab_size=340)


def test_auto_tokenizer_loads_and_round_trips(tok_dir):
    tok = AutoTokenizer.from_pretrained(tok_dir)
    assert len(tok) == 340
    text = "Question: what is percent_of of 3 and 9? x0 = percent_of(n0, n1)"
    ids = tok(text)["input_ids"]
    assert tok.decode(ids) == text
    assert len(ids) < len(text) / 2  # merges learned from the corpus compress the text
    odd = "ünïcödé ✓ never seen"
    assert tok.decode(tok(odd)["input_ids"]) == odd  # byte-level: nothing is unknown
    assert tok.eos_token == IM_END and tok.pad_token == "<|endoftext|>"


def test_special_tokens_and_chat_template(tok_dir):
    tok = load_tokenizer(tok_dir)
    ids = tok("<|im_start|>user\nhi<|im_end|>")["input_ids"]
    assert ids[0] == tok.convert_tokens_to_ids("<|im_start|>")
    assert tok.convert_tokens_to_ids(IM_END) in ids
    text = tok.apply_chat_template([{"role": "user", "content": "add 2 and 3"}], tokenize=False,
                                   add_generation_prompt=True)
    assert text == "<|im_start|>user\nadd 2 and 3<|im_end|>\n<|im_start|>assistant\n"
    files = {p.name for p in tok_dir.iterdir()}
    assert "tokenizer.json" in files and "tokenizer_config.json" in files
    assert json.loads((tok_dir / "tokenizer.json").read_text())["model"]["type"] == "BPE"


def test_deterministic():
    a = train_bpe_tokenizer(corpus(), 320)
    b = train_bpe_tokenizer(list(corpus()), 320)
    assert a.get_vocab() == b.get_vocab()


def test_bad_input(tmp_path):
    with pytest.raises(TokenizerError, match="no training texts"):
        train_bpe_tokenizer(iter(()), 300)
    with pytest.raises(TokenizerError, match="must be str"):
        train_bpe_tokenizer([b"bytes"], 300)
    with pytest.raises(TokenizerError, match="vocab_size"):
        train_bpe_tokenizer(["a"], 100)
    with pytest.raises(TokenizerError, match="not a tokenizer directory"):
        load_tokenizer(tmp_path / "nope")


def test_trained_tokenizer_drives_the_sampler(tok_dir):
    """The tiny planner path: AutoTokenizer dir -> chat prompt ids -> sampler with the
    tokenizer's eos as stop token and a stop string decoded by the tokenizer."""
    import jax

    from cocoda_jax.models import ModelConfig, create_model
    from cocoda_jax.models.sampler import Sampler, SamplingParams

    tok = load_tokenizer(tok_dir)
    cfg = ModelConfig(family="qwen3", vocab_size=len(tok), d_model=32, n_layers=1, n_heads=2, n_kv_heads=1,
                      head_dim=16, ffn_dim=64, qk_norm=True, tie_embeddings=True)
    model = create_model(cfg, seed=0)
    prompt = tok.apply_chat_template([{"role": "user", "content": "add 2 and 3"}], tokenize=True,
                                     add_generation_prompt=True)
    prompt = list(prompt["input_ids"] if hasattr(prompt, "keys") else prompt)
    s = Sampler(model, cache_size=64, tokenizer=tok, pad_id=tok.pad_token_id)
    free = s.generate([prompt], SamplingParams(max_new_tokens=12, temperature=3.0), jax.random.key(0))
    text = tok.decode(free.tokens[0])
    stop = text[len(text) // 2:len(text) // 2 + 1]  # a character the row is known to produce
    assert stop
    p = SamplingParams(max_new_tokens=12, temperature=3.0, stop_strings=(stop,),
                       stop_tokens=(tok.eos_token_id,))
    cut = s.generate([prompt], p, jax.random.key(0))
    got = tok.decode(cut.tokens[0])
    assert stop in got and stop not in tok.decode(cut.tokens[0][:-1])
    assert cut.stop_reasons[0] in ("stop_string", "stop_token")
    assert free.tokens[0][:len(cut.tokens[0])] == cut.tokens[0]  # same key: same prefix


def test_a_saved_bpe_loads_directly_and_as_auto_tokenizer_loads_it(tok_dir, tmp_path, monkeypatch):
    import shutil

    import transformers

    auto = AutoTokenizer.from_pretrained(tok_dir)
    calls = []
    real = transformers.AutoTokenizer.from_pretrained
    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained",
                        lambda *a, **k: calls.append(a) or real(*a, **k))
    direct = load_tokenizer(tok_dir)
    assert calls == [] and type(direct) is type(auto)  # our own directory: no AutoTokenizer
    text = "<|im_start|>user\nwhat is add of 3 and 9?<|im_end|>"
    assert direct(text)["input_ids"] == auto(text)["input_ids"]
    assert direct.chat_template == auto.chat_template and direct.pad_token_id == auto.pad_token_id
    other = tmp_path / "other"  # a checkpoint's directory names its own class: AutoTokenizer decides
    shutil.copytree(tok_dir, other)
    config = json.loads((other / "tokenizer_config.json").read_text())
    (other / "tokenizer_config.json").write_text(json.dumps({**config, "tokenizer_class": "Qwen2Tokenizer"}))
    load_tokenizer(other)
    assert len(calls) == 1

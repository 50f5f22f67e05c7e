"""The optional dense L2 ranker, with a tiny random encoder saved locally (nothing downloaded)."""


import numpy as np
import pytest

from cocoda_jax.retrieval.cascade import CascadeConfig, RetrievalIndex, retrieve
from cocoda_jax.retrieval.rankers import DenseRanker, kmeans
from cocoda_jax.retrieval.subgoals import Subgoal
from cocoda_jax.types import parse_type


@pytest.fixture(scope="module")
def encoder_dir(tmp_path_factory):
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import BertConfig, BertModel, PreTrainedTokenizerFast

    d = tmp_path_factory.mktemp("encoder")
    vocab = {w: i for i, w in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "percent", "amount", "subtract",
                                         "divide", "price", "label", "name", "sort", "prices", "the", "of", "a"])}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]",
                                   cls_token="[CLS]", sep_token="[SEP]")
    fast.save_pretrained(d)
    torch.manual_seed(0)
    BertModel(BertConfig(vocab_size=len(vocab), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                         intermediate_size=32, max_position_embeddings=64)).save_pretrained(d)
    return str(d)


def test_dense_scores_are_cosines_of_mean_pooled_embeddings(encoder_dir):
    r = DenseRanker(encoder_dir, ["a", "b", "c"], ["percent of amount", "sort prices", "label name"])
    assert np.allclose(np.linalg.norm(r.matrix, axis=1), 1.0, atol=1e-5)
    q = r.embed(["percent of amount"])[0]
    assert np.allclose(r.scores("percent of amount"), r.matrix @ q, atol=1e-6)
    assert r.rank("percent of amount")[0][0] == "a"  # identical text: cosine 1


def test_cascade_with_dense_ranker(shop, encoder_dir):
    snap, _ = shop
    index = RetrievalIndex.build(snap, dense_model_dir=encoder_dir)
    sg = Subgoal("percent of the amount", (parse_type("float"),) * 2, parse_type("float"))
    cfg = CascadeConfig(k=3, dense_weight=1.0)
    a, b = retrieve(index, sg, cfg), retrieve(index, sg, cfg)
    assert a.selected == b.selected
    assert set(a.stage("L4").survivors) <= set(a.stage("L3").survivors) <= set(a.stage("L2").survivors)
    with pytest.raises(ValueError):
        retrieve(shop[1], sg, cfg)  # that index has no dense ranker


def test_balanced_kmeans_respects_capacity():
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.normal(0, 0.01, (90, 4)), rng.normal(5, 0.01, (10, 4))]).astype(np.float32)
    balanced = kmeans(x, 4, seed=1, slack=1.0)
    assert np.bincount(balanced, minlength=4).max() <= 25
    assert np.array_equal(balanced, kmeans(x, 4, seed=1, slack=1.0))

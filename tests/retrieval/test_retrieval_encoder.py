"""The dual encoder: deterministic from its seed, learns its pairs, ranks alike for every method."""

import dataclasses

import chex
import numpy as np
import pytest

from cocoda_jax.retrieval import baselines
from cocoda_jax.retrieval.encoder import (
    EncoderConfig, EncoderError, EncoderRanker, HashedFeaturizer, SumRanker, card_views, train_encoder,
)
from cocoda_jax.retrieval.subgoals import extract_subgoal

NAMES = ("add_tax", "count_words", "days_between", "mean_of", "to_upper", "loan_payment")
TEXTS = ("add tax: Adds a sales tax rate to a price.", "count words: Number of words in a text.",
         "days between: Days from one date to another.", "mean of: The average of a list of numbers.",
         "to upper: Upper-case a string.", "loan payment: Monthly payment of a loan at a yearly rate.")
PAIRS = (("how much is the bill after sales tax", "add_tax"), ("average score of the class", "mean_of"),
         ("how long until my birthday", "days_between"), ("what do I pay each month on my mortgage", "loan_payment"))
TINY = EncoderConfig(buckets=512, max_len=24, width=8, steps=40, batch=16, learning_rate=3e-2, seed=3)


@pytest.fixture(scope="module")
def trained():
    return train_encoder(NAMES, TEXTS, PAIRS, TINY)


def test_featurizer_is_deterministic_and_padded():
    f = HashedFeaturizer(64, 10)
    ids, mask = f(["Adds a tax", ""])
    chex.assert_shape(ids, (2, 10))
    assert ids.dtype == np.int32 and mask[1].sum() == 0 and mask[0].sum() > 0
    assert (ids[0] < 64).all() and (ids[0][mask[0] > 0] > 0).all()
    np.testing.assert_array_equal(ids, HashedFeaturizer(64, 10)(["Adds a tax", ""])[0])


def test_value_shapes_are_features_only_when_asked():
    plain, shaped = HashedFeaturizer(1 << 12, 64), HashedFeaturizer(1 << 12, 64, value_shapes=True)
    a, b = "split it with proportions 7:6", "split it with proportions"
    assert plain.features(a) == plain.features(b)  # the words drop the digits and the colon
    extra = set(shaped.features(a)) - set(shaped.features(b))
    assert extra == {shaped._hash("v:colon_pair"), shaped._hash("v:numbers_2")}
    cfg = dataclasses.replace(TINY, value_shapes=True)
    enc = train_encoder(NAMES, TEXTS, PAIRS + (("split 3:4", "mean_of"),), cfg)
    assert enc.featurizer.value_shapes and np.isfinite(enc.losses).all()
    with pytest.raises(EncoderError):
        EncoderConfig(value_shapes=1)


def test_training_is_deterministic_from_the_seed_and_lowers_the_loss(trained):
    again = train_encoder(NAMES, TEXTS, PAIRS, TINY)
    chex.assert_trees_all_close(trained.losses, again.losses)
    chex.assert_trees_all_close(trained.embed_tools(TEXTS), again.embed_tools(TEXTS))
    assert np.mean(trained.losses[-5:]) < np.mean(trained.losses[:5])
    other = train_encoder(NAMES, TEXTS, PAIRS, EncoderConfig(**{**TINY.__dict__, "seed": 4}))
    assert not np.allclose(trained.embed_tools(TEXTS), other.embed_tools(TEXTS))


def test_ranker_scores_align_with_names_and_find_trained_pairs(trained):
    rk = EncoderRanker(trained, NAMES, TEXTS)
    s = rk.scores("how much is the bill after sales tax")
    chex.assert_shape(s, (len(NAMES),))
    assert rk.rank("how much is the bill after sales tax", limit=2)[0][0] == "add_tax"
    vecs = rk.embed(TEXTS)
    chex.assert_trees_all_close(np.linalg.norm(vecs, axis=1), np.ones(len(NAMES)), atol=1e-5)


def test_every_method_ranks_with_the_registered_ranker(trained, shop):
    snap, index = shop
    enc = train_encoder(index.names, index.texts, (), TINY)
    rk = EncoderRanker(enc, index.names, index.texts)
    index.add_ranker("encoder_t", rk)
    sg = extract_subgoal("upper-case the label of a product", "str")
    top = rk.rank(sg.description, limit=3)
    assert [n for n, _ in top] == list(baselines.flat(index, sg, 3, ranker="encoder_t").selected)
    with pytest.raises(ValueError):
        baselines.flat(index, sg, 3, ranker="nope")
    with pytest.raises(ValueError):
        index.add_ranker("bad", EncoderRanker(trained, NAMES, TEXTS))


def test_bad_input_raises_typed_errors(trained):
    with pytest.raises(EncoderError):
        EncoderConfig(width=0)
    with pytest.raises(EncoderError):
        EncoderConfig(temperature=0.0)
    with pytest.raises(EncoderError):
        train_encoder(NAMES, TEXTS[:2], (), TINY)
    with pytest.raises(EncoderError):
        SumRanker([])
    a = EncoderRanker(trained, NAMES, TEXTS)
    b = EncoderRanker(trained, NAMES[:2], TEXTS[:2])
    with pytest.raises(EncoderError):
        SumRanker([(a, 1.0), (b, 1.0)])


def test_card_views_are_seeded():
    v1 = card_views("add_tax", TEXTS[0] + " Parameters: price: the price", np.random.default_rng(0), 5)
    v2 = card_views("add_tax", TEXTS[0] + " Parameters: price: the price", np.random.default_rng(0), 5)
    assert v1 == v2 and v1[0] == "add tax" and len(v1) == 5


def test_texts_without_features_train_to_finite_weights():
    """A view made only of stop words has no features; its unit-norm vector must not poison training."""
    enc = train_encoder(NAMES + ("empty",), TEXTS + ("the of a",), PAIRS + (("of the", "empty"),), TINY)
    assert np.isfinite(enc.losses).all()
    assert np.isfinite(enc.embed_queries(["", "the"])).all()


def test_an_ensemble_averages_members_with_seeds_derived_from_one_seed():
    from cocoda_jax.retrieval.encoder import member_seeds, train_ensemble

    assert member_seeds(3, 2) == member_seeds(3, 2) and len(set(member_seeds(3, 4))) == 4
    ens = train_ensemble(NAMES, TEXTS, PAIRS, TINY, members=2)
    again = train_ensemble(NAMES, TEXTS, PAIRS, TINY, members=2)
    assert len(ens.parts) == 2 and all(w == 0.5 for _, w in ens.parts)
    chex.assert_trees_all_close(ens.scores("monthly mortgage"), again.scores("monthly mortgage"))
    with pytest.raises(EncoderError):
        train_ensemble(NAMES, TEXTS, PAIRS, TINY, members=0)


def test_usage_votes_can_find_neighbours_by_vectors():
    from cocoda_jax.retrieval.usage import UsageIndex, UsageRecord

    def embed(texts):  # a stand-in encoder: one axis per topic, by a few known words
        out = np.zeros((len(texts), 2), dtype=np.float32)
        for i, t in enumerate(texts):
            out[i, 0] = any(w in t for w in ("bill", "cash", "price"))
            out[i, 1] = any(w in t for w in ("days", "hours", "clock"))
            out[i] /= max(1.0, float(np.linalg.norm(out[i])))
        return out

    records = [UsageRecord("a", "the bill with tax", frozenset({"add_tax"})),
               UsageRecord("b", "days until friday", frozenset({"days_between"}))]
    assert UsageIndex(records).votes("what cash price overall") == {}  # no shared words: BM25 finds nothing
    votes = UsageIndex(records, embed=embed).votes("what cash price overall")
    assert votes == {"add_tax": 1.0}


def test_feature_dropout_is_seeded_and_checked():
    cfg = EncoderConfig(**{**TINY.__dict__, "feature_dropout": 0.3, "usage_views": 1})
    a, b = train_encoder(NAMES, TEXTS, PAIRS, cfg), train_encoder(NAMES, TEXTS, PAIRS, cfg)
    chex.assert_trees_all_close(a.losses, b.losses)
    assert a.pairs == train_encoder(NAMES, TEXTS, PAIRS, TINY).pairs + len(PAIRS)
    with pytest.raises(EncoderError):
        EncoderConfig(feature_dropout=1.0)


def test_a_diverged_encoder_is_refused(trained, monkeypatch):
    monkeypatch.setattr(trained, "embed_tools", lambda texts: np.full((len(texts), TINY.width), np.nan, np.float32))
    with pytest.raises(EncoderError):
        EncoderRanker(trained, NAMES, TEXTS)


def test_usage_rankers_train_once_per_distinct_input(shop):
    """``add_usage_rankers`` memoises the trained encoder on its inputs: a second index over the same
    cards and records gets the same ranker without training (``cached``); another seed or other
    records train anew; and a retrained encoder (cache cleared) scores exactly as the memoised one."""
    from cocoda_jax.retrieval.cascade import RetrievalIndex
    from cocoda_jax.retrieval.encoder import _usage_encoder, add_usage_rankers
    from cocoda_jax.retrieval.usage import UsageIndex, UsageRecord

    snap, _ = shop
    usage = UsageIndex([UsageRecord("q0", "what is the price after the discount", frozenset({"subtract"})),
                        UsageRecord("q1", "sort these prices", frozenset({"sort_prices"}))])
    _usage_encoder.cache_clear()
    first, second = RetrievalIndex.build(snap), RetrievalIndex.build(snap)
    a = add_usage_rankers(first, usage, "hybrid", config=TINY)
    b = add_usage_rankers(second, usage, "hybrid", config=TINY)
    assert not a["cached"] and b["cached"] and a["pairs"] == b["pairs"] > 0
    assert second.rankers["encoder"] is first.rankers["encoder"]
    other_seed = add_usage_rankers(RetrievalIndex.build(snap), usage, "hybrid",
                                   config=dataclasses.replace(TINY, seed=4))
    fewer = UsageIndex(usage.records[:1])
    other_records = add_usage_rankers(RetrievalIndex.build(snap), fewer, "hybrid", config=TINY)
    assert not other_seed["cached"] and not other_records["cached"]
    _usage_encoder.cache_clear()
    third = RetrievalIndex.build(snap)
    assert not add_usage_rankers(third, usage, "hybrid", config=TINY)["cached"]
    query = "the price after a discount"
    np.testing.assert_array_equal(third.rankers["hybrid"].scores(query), first.rankers["hybrid"].scores(query))

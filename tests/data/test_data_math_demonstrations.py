"""The faithful setting of synthetic math: programs for the demonstrated structures only."""

import ml_collections
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cocoda_jax.data import synthetic_math as sm
from cocoda_jax.data.domain import DomainConfigError
from cocoda_jax.rods.tasks import task_from_dict, task_to_dict


def _section(**kw):
    base = dict(name="synthetic_math", seed=3, max_depth=2, n_train=120, n_val=24, n_test=24, heldout="instances",
                data_dir="", grow_library_to=0, module="", demos="seen_pairs", n_dev=12)
    return ml_collections.ConfigDict({**base, **kw})


@pytest.fixture(scope="module")
def splits(sandbox):
    return sm.SyntheticMath().build(_section(), sandbox)


def test_only_demonstrated_structures_have_usable_programs(splits):
    shown = splits.demonstrated
    assert shown is not None and 0 < len(shown) < len(splits.train)
    for t in splits.train:
        assert (str(t.id) in shown) == sm.structure_demonstrated(t.motifs) == t.seen_structure
        if t.depth == 1:
            assert t.seen_structure  # a one-motif chain has no pair to hide
    # both sides of the split occur at depth 2, in training and in the held-out splits
    for part in (splits.train, splits.test):
        assert {t.seen_structure for t in part if t.depth == 2} == {True, False}


def test_categories_name_depth_and_unseen_structure(splits):
    cats = {sm.SyntheticMath.categories(t) for t in splits.test}
    assert cats == {"depth_1", "depth_2", "depth_2_unseen"}


def test_the_dev_split_is_apart_from_validation_and_test(splits):
    assert len(splits.dev) == 12
    ids = lambda part: {str(t.id) for t in part}  # noqa: E731
    assert not ids(splits.dev) & (ids(splits.val) | ids(splits.test) | ids(splits.train))


def test_all_keeps_every_task_demonstrated_and_the_old_categories(sandbox):
    out = sm.SyntheticMath().build(_section(demos="all", n_dev=0), sandbox)
    assert out.demonstrated is None and out.dev == ()
    assert all(t.seen_structure for t in (*out.train, *out.test))
    assert {sm.SyntheticMath.categories(t) for t in out.test} == {"depth_1", "depth_2"}


@pytest.mark.parametrize("bad", [dict(demos="some"), dict(n_dev=-1)])
def test_bad_options_are_config_errors(sandbox, bad):
    with pytest.raises(DomainConfigError, match="demos|n_dev"):
        sm.SyntheticMath().build(_section(**bad), sandbox)


def test_a_variant_keeps_its_parents_structure_flag_and_records_round_trip(splits):
    parent = next(t for t in splits.train if not t.seen_structure)
    variant = sm.SyntheticMath().propose_variant(parent, stream_seed=5, draw=1)
    assert variant.motifs == parent.motifs and variant.seen_structure is False
    assert task_from_dict(task_to_dict(variant)) == variant
    shown = next(t for t in splits.train if t.seen_structure)
    assert "seen_structure" not in task_to_dict(shown)  # the default is not written: old records are unchanged


@settings(max_examples=40, deadline=None)
@given(st.sampled_from([m.name for m in sm.MOTIFS]), st.sampled_from([m.name for m in sm.MOTIFS]))
def test_pair_side_is_stable_and_a_chain_is_seen_iff_all_pairs_are(a, b):
    assert sm.pair_demonstrated(a, b) == sm.pair_demonstrated(a, b)
    assert sm.structure_demonstrated((a,))
    assert sm.structure_demonstrated((a, b)) == sm.pair_demonstrated(a, b)
    assert sm.structure_demonstrated((a, b, a)) == (sm.pair_demonstrated(a, b) and sm.pair_demonstrated(b, a))

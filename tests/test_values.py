"""The value codec: exact round-trips, stable bytes, and no code execution on decode."""

import decimal
import fractions
import math

from hypothesis import given, settings, strategies as st

from cocoda_jax import values

scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=8),
                    st.floats(allow_nan=False), st.fractions(max_denominator=50))
hashables = st.recursive(scalars, lambda inner: st.tuples(inner, inner), max_leaves=4)
plain = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.tuples(inner, inner),
                            st.dictionaries(st.text(max_size=4), inner, max_size=3),
                            st.dictionaries(hashables, inner, max_size=3)),
    max_leaves=12)


@settings(max_examples=200, deadline=None)
@given(plain)
def test_round_trip_is_exact(value):
    back = values.loads(values.dumps(value))
    assert back == value
    assert values.dumps(back) == values.dumps(value)


def test_tags_and_special_values():
    assert values.loads(values.dumps((1, 2))) == (1, 2)
    assert math.isnan(values.loads(values.dumps(float("nan"))))
    assert values.loads(values.dumps(float("-inf"))) == float("-inf")
    assert values.loads(values.dumps({1: "a"})) == {1: "a"}
    assert values.loads(values.dumps({"__tuple__": 1})) == {"__tuple__": 1}  # a plain dict that looks like a tag
    assert values.loads(values.dumps(frozenset({3, 1}))) == frozenset({1, 3})
    assert values.loads(values.dumps(decimal.Decimal("1.10"))) == decimal.Decimal("1.10")
    assert values.loads(values.dumps(fractions.Fraction(1, 3))) == fractions.Fraction(1, 3)


def test_unknown_objects_are_lossy_text_never_code():
    class Weird:
        def __repr__(self):
            return "Weird()"

    assert values.loads(values.dumps(Weird())) == "Weird()"
    try:
        values.dumps(Weird(), lossy=False)
    except values.UnencodableValue as err:
        assert "Weird" in str(err)
    else:
        raise AssertionError("lossy=False must refuse an unknown object")


def test_values_equal_is_numeric_tolerant_but_shape_strict():
    assert values.values_equal(3, 3.0)
    assert values.values_equal(0.1 + 0.2, 0.3)
    assert not values.values_equal(1.0, 1.001)
    assert not values.values_equal(True, 1)
    assert not values.values_equal([1, 2], (1, 2))
    assert values.values_equal({"a": [1, 2.0]}, {"a": [1.0, 2]})
    assert not values.values_equal({"a": 1}, {"b": 1})
    assert values.values_equal(float("nan"), float("nan"))

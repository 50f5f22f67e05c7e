"""fit: optional parameters, union readings and word-supplied types; properties of the assignment."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cocoda_jax.types import (
    ANY, BOOL, FLOAT, INT, STR, Arg, Evidence, EvidenceCosts, EvidenceError, Param, Signature, fit, list_of, match,
    optional, parse_signature,
)
from tests.types.strategies import signatures, types

S = parse_signature
ground = types(with_vars=False, with_any=False, max_leaves=4)


def test_optional_parameters_cost_nothing_when_unfed():
    sig = S("(radius: int, unit: Optional[str]) -> Any")
    f = fit(Evidence.of_types([INT]), sig, required=1)
    assert f.cost == 0.0 and f.sources == (0, None)
    # the same signature read as all-required charges the unfed unit as missing
    assert fit(Evidence.of_types([INT]), sig).cost == pytest.approx(1.0)
    assert match(Signature((Param("", INT),), ANY), sig).cost == pytest.approx(1.0)


def test_words_supply_strings_and_flags_but_not_numbers():
    sig = S("(location: str, days: int) -> Any")
    plain = fit(Evidence(()), sig)
    assert plain.inferred == (True, False) and plain.cost == pytest.approx(0.2 + 1.0)
    assert fit(Evidence.of_types([INT], free=(STR,)), sig).cost == pytest.approx(0.2)
    assert fit(Evidence.of_types([], free=()), sig).cost == pytest.approx(2.0)
    assert fit(Evidence(()), S("(flag: bool) -> Any")).cost == pytest.approx(0.2)


def test_union_readings_take_the_cheapest_that_fits():
    ticket = Arg((INT, STR), (0.0, 0.1))
    assert fit(Evidence((ticket,), free=()), S("(ticket_id: str) -> Any")).cost == pytest.approx(0.1)
    assert fit(Evidence((ticket,), free=()), S("(n: int) -> Any")).cost == 0.0
    assert fit(Evidence((ticket,), free=()), S("(x: float) -> Any")).cost == pytest.approx(0.3)  # coercion


def test_result_must_fit_and_bad_input_is_refused():
    assert fit(Evidence((), result=INT), S("() -> str")) is None
    with pytest.raises(EvidenceError):
        fit(Evidence(()), S("(a: int) -> int"), required=2)
    with pytest.raises(EvidenceError):
        fit("int", S("(a: int) -> int"))
    with pytest.raises(EvidenceError):
        Arg(())
    with pytest.raises(EvidenceError):
        EvidenceCosts(inferred=-1.0)


@settings(max_examples=150, deadline=None)
@given(sig=signatures(type_strategy=ground), data=st.data())
def test_supplying_every_required_parameter_always_fits(sig, data):
    required = data.draw(st.integers(0, sig.arity))
    ev = Evidence.of_types(sig.param_types[:required])
    f = fit(ev, sig, required)
    assert f is not None and f.cost == 0.0
    assert all(s is not None for s in f.sources[:required])


@settings(max_examples=150, deadline=None)
@given(sig=signatures(type_strategy=ground), extra=ground, args=st.lists(ground, max_size=3),
       free=st.sampled_from([(), (STR,), (STR, BOOL)]), data=st.data())
def test_adding_an_optional_parameter_never_removes_a_fit_or_raises_its_cost(sig, extra, args, free, data):
    required = data.draw(st.integers(0, sig.arity))
    ev = Evidence.of_types(args, free)
    before = fit(ev, sig, required)
    after = fit(ev, Signature(sig.params + (Param("opt", extra),), sig.result), required)
    assert (before is None) == (after is None)
    if before is not None:
        assert after.cost <= before.cost + 1e-9


@settings(max_examples=100, deadline=None)
@given(sig=signatures(type_strategy=ground), args=st.lists(ground, max_size=3), data=st.data())
def test_fewer_required_parameters_never_cost_more(sig, args, data):
    r = data.draw(st.integers(0, sig.arity))
    ev = Evidence.of_types(args)
    full, part = fit(ev, sig), fit(ev, sig, r)
    assert (full is None) == (part is None)
    if full is not None:
        assert part.cost <= full.cost + 1e-9


def test_a_list_argument_feeds_a_list_parameter_in_any_position():
    sig = S("(a: float, xs: list[float]) -> Any")
    f = fit(Evidence.of_types([list_of(FLOAT), FLOAT], free=()), sig)
    assert f.sources == (1, 0) and f.cost == 0.0
    assert fit(Evidence.of_types([optional(INT)], free=()), S("(a: int) -> Any")).sources == (None,)

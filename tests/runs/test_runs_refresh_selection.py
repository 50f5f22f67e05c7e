"""The refresh's choice of demonstrations: what teaches something new comes first (repeated up to a bound), never more than
half the budget while other demonstrations remain, and the choice is a function of the generator."""

import numpy as np
from hypothesis import given, settings, strategies as st

from cocoda_jax.runs.coevolve import refresh_selection


def _programs(n_plain, n_calls, n_fresh):
    plain = [(f"p{i}", "x0 = add(n0, n1)\nanswer = x0") for i in range(n_plain)]
    calls = [(f"c{i}", "x0 = add_divide(n0, n1, n2)\nanswer = x0") for i in range(n_calls)]
    fresh = [(f"f{i}", "x0 = subtract(n0, n1)\nanswer = x0") for i in range(n_fresh)]
    return plain + calls + fresh, {t for t, _ in fresh}


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 40), st.integers(0, 40), st.integers(0, 10), st.integers(0, 32), st.integers(0, 2**31))
def test_new_demonstrations_first_at_most_half(n_plain, n_calls, n_fresh, budget, seed):
    programs, fresh = _programs(n_plain, n_calls, n_fresh)
    chosen = refresh_selection(programs, fresh, ["add_divide"], budget, np.random.default_rng(seed))
    assert chosen == sorted(set(chosen)) and all(0 <= i < len(programs) for i in chosen)
    assert len(chosen) == min(budget, len(programs))
    new = [i for i in chosen if programs[i][0][0] in "cf"]
    plain = len(chosen) - len(new)
    # the new ones fill what the plain ones leave, and take at least half the budget when there are enough
    assert len(new) == min(n_calls + n_fresh, budget - min(n_plain, budget // 2))
    assert plain == min(n_plain, budget - len(new))
    assert chosen == refresh_selection(programs, fresh, ["add_divide"], budget, np.random.default_rng(seed))


def test_a_name_that_only_prefixes_a_call_does_not_count():
    programs = [("a", "x0 = add_divide_more(n0)\nanswer = x0"), ("b", "x0 = add_divide(n0, n1, n2)\nanswer = x0")]
    # "b" alone teaches; with "a" counted as well, some of these seeds would pick "a"
    assert all(refresh_selection(programs, set(), ["add_divide"], 1, np.random.default_rng(s)) == [1] for s in range(10))


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 40), st.integers(0, 10), st.integers(0, 64), st.integers(1, 8), st.integers(0, 2**31))
def test_new_demonstrations_repeat_at_most_repeats_times_within_half(n_plain, n_fresh, budget, repeats, seed):
    programs, fresh = _programs(n_plain, 0, n_fresh)
    chosen = refresh_selection(programs, fresh, [], budget, np.random.default_rng(seed), repeats=repeats)
    counts = np.bincount(chosen, minlength=len(programs)) if chosen else np.zeros(len(programs), int)
    assert chosen == sorted(chosen)
    assert counts[:n_plain].max(initial=0) <= 1 and counts[n_plain:].max(initial=0) <= repeats
    new = int(counts[n_plain:].sum())
    assert new == min(n_fresh * repeats, budget - min(n_plain, budget // 2))
    assert int(counts[:n_plain].sum()) == min(n_plain, budget - new)


def test_learned_from_reward_is_what_the_domain_gave_no_program_for():
    from types import SimpleNamespace

    from cocoda_jax.runs.coevolve import learned_from_reward

    programs = (("t1", "answer = n0"), ("t2", "answer = n1"), ("t3", "answer = n2"))
    assert learned_from_reward(SimpleNamespace(demonstrated=frozenset({"t1"})), programs) == {"t2", "t3"}
    assert learned_from_reward(SimpleNamespace(demonstrated=None), programs) == set()

"""cocoda_jax.study.arms: the registry and the cells' configs."""

import pytest

from cocoda_jax.errors import ConfigError
from cocoda_jax.coevolve.acceptance import AcceptanceConfig, Proposal, decide, initial
from cocoda_jax.models.config import PRESETS, tiny
from cocoda_jax.rl import rewards
from cocoda_jax.study import arms as A
from configs import default


def test_registry_names_and_availability():
    assert A.names() == ("cocoda", "sft_only", "frozen_library", "no_tdr", "no_gar", "no_acceptance", "rods_off",
                         "large_frozen", "direct", "no_ctd", "rods_random")
    assert A.select(None) == tuple(A.get(n) for n in A.names())
    # the diagnostic arms, run only when named
    assert [a.name for a in A.ARMS if not a.in_presets] == ["sft_matched", "growth_tolerant", "search_cards",
                                                             "no_search", "search_unfed", "found_later",
                                                             "rods_focus", "hot_rollouts", "rods_answer_only",
                                                             "short_refresh", "rods_supply", "cocoda_replicate"]
    # the SFT budget of the default main job in all: stage 2's steps and every round's refresh
    co = default.get_config().coevolve
    matched = default.get_config().sft.steps + co.rounds * co.refresh_sft_steps
    assert A.get("sft_matched").overrides["sft.steps"] == matched
    assert A.prefix_key(A.get("sft_matched")) != ()  # its own stages 1-2
    assert A.select(["growth_tolerant"]) == (A.get("growth_tolerant"),)
    assert A.prefix_key(A.get("growth_tolerant")) == ()  # stage 3 only: shares cocoda's prefix
    assert A.prefix_key(A.get("no_gar")) == ()  # the reward: round 0 restated on resume
    assert A.prefix_key(A.get("sft_only")) == ()  # no rounds: cocoda's stages 1-2, then the test
    assert A.prefix_key(A.get("no_search")) == ()  # the rounds' search: cocoda's stages 1-2
    assert A.prefix_key(A.get("search_unfed")) == A.prefix_key(A.get("found_later")) == ()  # RODS's pool
    assert A.prefix_key(A.get("rods_focus")) == ()  # RODS's draw weights: cocoda's stages 1-2
    assert A.prefix_key(A.get("hot_rollouts")) == ()  # sampling temperature: only the rounds sample
    assert A.prefix_key(A.get("rods_answer_only")) == ()  # GRPO's seed tasks: cocoda's stages 1-2
    assert A.prefix_key(A.get("short_refresh")) == ()  # the rounds' refresh: cocoda's stages 1-2
    assert A.prefix_key(A.get("rods_supply")) == ()  # RODS's synthesis: cocoda's stages 1-2
    assert A.prefix_key(A.get("cocoda_replicate")) == ()  # the null arm: cocoda's stages 1-2, other rounds' chance
    assert A.prefix_key(A.get("search_cards")) == (("retrieval.cards", "search"),)  # its demonstrations differ
    assert all(a.available for a in A.ARMS)  # every arm of the issue has its knob now
    for a in A.ARMS:
        assert bool(a.reason) != a.available
    assert A.get("cocoda").overrides == {}


def test_every_override_names_an_existing_key():
    base = default.get_config()
    for arm in A.ARMS:
        if arm.available:
            cfg = A.cell_config(base, arm, 42)
            for dotted, value in arm.overrides.items():
                node = cfg
                for part in dotted.split("."):
                    node = node[part]
                assert node == value
            assert cfg.seed == 42 and cfg.domain.seed == 42


def test_cell_config_leaves_the_base_alone_and_keeps_the_test_split():
    base = default.get_config()
    a = A.cell_config(base, A.get("frozen_library"), 13)
    b = A.cell_config(base, A.get("no_gar"), 13)
    assert base.coevolve.frozen_library is False and base.seed == 0
    assert a.domain.to_dict() == b.domain.to_dict()  # same test tasks for every arm of a seed


def test_unavailable_cells_and_unknown_keys_are_refused():
    with pytest.raises(ValueError, match="unavailable"):
        A.cell_config(default.get_config(), A.Arm("imaginary", "no knob yet", available=False, reason="none"), 1)
    with pytest.raises(ValueError, match="must say why"):
        A.Arm("imaginary", "no knob yet", available=False)
    with pytest.raises(KeyError):
        A.apply_overrides(default.get_config(), {"coevolve.no_such_knob": 1})
    with pytest.raises(KeyError):
        A.select(["cocoda", "nope"])


def test_no_acceptance_accepts_every_round():
    over = A.get("no_acceptance").overrides
    cfg = AcceptanceConfig(tolerance=over["coevolve.acceptance.tolerance"],
                           growth_must_pay=over["coevolve.acceptance.growth_must_pay"])
    inc = initial("p0", ["f"], 1.0, ["f"])
    for r, acc in enumerate((0.0, 1.0, 0.0, 0.5), 1):  # even below the round's planner alone (0.9)
        inc, d = decide(inc, Proposal(r, f"p{r}", ["f", f"g{r}"], acc, {"f"}, planner_only_reward=0.9), cfg)
        assert d.outcome == "accept"


def test_no_gar_is_result_only():
    assert "result" in rewards.registered_rewards()
    assert A.get("no_gar").overrides == {"reward.name": "result"}


def test_large_frozen_is_four_times_the_planner():
    def non_embedding(c):
        attn = c.d_model * c.head_dim * (2 * c.n_heads + 2 * c.n_kv_heads)
        return c.n_layers * (attn + 3 * c.d_model * c.ffn_dim)
    assert non_embedding(PRESETS["tiny_x4"]()) == 4 * non_embedding(tiny())
    assert A.get("large_frozen").overrides == {"model.preset": "tiny_x4", "coevolve.frozen_library": True}



def test_the_direct_arm_is_a_valid_run_config():
    from cocoda_jax.runs.settings import RunSettings

    cfg = A.cell_config(default.get_config(), A.get("direct"), 13)
    settings = RunSettings.of(cfg)
    assert settings.coevolve.direct_answer and settings.coevolve.frozen_library
    assert settings.rollout.max_steps == 1 and settings.retrieval.mode == "none"


def test_stream_counts_default_to_streams_except_the_arms_named():
    assert A.stream_counts(2, "", ["cocoda", "no_tdr"]) == {"cocoda": 2, "no_tdr": 2}
    assert A.stream_counts(2, " no_tdr = 1 ,cocoda=3,", ["cocoda", "no_tdr", "no_gar"]) == {
        "cocoda": 3, "no_tdr": 1, "no_gar": 2}
    assert A.stream_counts(1, "no_tdr=2", ["cocoda"]) == {"cocoda": 1}  # an arm not in this study: ignored


def test_streams_are_the_arm_reseeded_in_its_rounds_only():
    run = default.get_config()
    no_ctd = A.get("no_ctd")
    one, two, three = (A.streams(no_ctd, n, run) for n in (1, 2, 3))
    assert one == (no_ctd,) and two[0] is no_ctd and [a.name for a in three] == ["no_ctd", "no_ctd@1", "no_ctd@2"]
    assert three[2].overrides == {**no_ctd.overrides, "coevolve.replicate": 2}
    assert all(A.prefix_key(a) == A.prefix_key(no_ctd) for a in three)  # the same stages 1-2: one shared prefix
    assert {A.base_name(a.name) for a in three} == {"no_ctd"} and A.base_name("no_ctd") == "no_ctd"
    assert A.cell_config(run, three[1], 13).coevolve.replicate == 1
    assert A.streams(A.get("sft_only"), 3, run) == (A.get("sft_only"),)  # no rounds: nothing to reseed
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ConfigError, match="streams must be"):
            A.streams(no_ctd, bad, run)
    with pytest.raises(ConfigError, match="replicate itself"):
        A.streams(A.get("cocoda_replicate"), 2, run)

"""The main job end to end on tiny budgets: stages 1-3 with RODS, report.json and its plots, a
library JSON per round, the frozen-library baseline. (Resume after a stop or a kill ends where the
uninterrupted run ends: test_runs_chaos.py.)"""

import json

import pytest

from cocoda_jax.library import LibrarySnapshot
from cocoda_jax.report import read_metrics
from cocoda_jax.errors import ConfigError
from cocoda_jax.runs import coevolve
from tests.runs.conftest import tiny_config

pytestmark = pytest.mark.filterwarnings("ignore:Some donated buffers were not usable")

REQUIRED = ("rounds", "library", "accuracy", "tool_calls_per_solved", "composite_share",
            "retrieval_tokens_per_query", "accepted_rounds", "rejected_rounds", "wall_s")


@pytest.fixture(scope="module")
def full(tiny_run):
    wd, report, _ = tiny_run
    return wd, report


def test_report_has_the_required_keys_and_files(full):
    wd, report = full
    assert report == json.loads((wd / "report.json").read_text())
    for key in REQUIRED:
        assert key in report, key
    assert report["rounds"] == 2 and len(report["accuracy"]["per_round"]) == 3
    assert set(report["library"]) >= {"primitives", "composites", "max_depth"}
    assert report["accepted_rounds"] + report["rejected_rounds"] == 2
    assert report["library"]["primitives"] == 30
    # configs/chaos.py has no stage-1 mining: round 1 mines a composite from GRPO's successes
    assert report["per_round"][0]["composites"] == 0 and report["per_round"][1]["inserted"]
    assert report["library"]["composites"] >= 1 and report["library"]["max_depth"] >= 1
    # the composites' calls in the test rollouts: only the final library's composites, counted
    names = {c["name"] for c in report["composites"]}
    uses = report["test_composite_uses"]
    assert set(uses) <= names and all(isinstance(n, int) and n > 0 for n in uses.values())
    for name in ("library.png", "accuracy.png", "tool_calls.png", "composite_share.png", "retrieval_tokens.png",
                 "library_dag.svg"):
        assert (wd / "plots" / name).stat().st_size > 0, name
    for r in range(3):
        LibrarySnapshot.from_json((wd / "library" / f"round_{r:03d}.json").read_text())
    assert len(report["rods_per_epoch"]) == 2
    for m in report["rods_per_epoch"]:
        assert {"region_sizes", "region_variance", "boundary_variance_ratio", "synthesis",
                "injected_mean_reward"} <= set(m)
    rods_records = [r for r in read_metrics(wd / "metrics.jsonl") if "rods/live" in r]
    assert len(rods_records) == 2 and all("rods/size/boundary" in r for r in rods_records)
    # the prompts showed the cascade's candidate sets, and the report says what they cost and found
    r = report["retrieval"]
    assert r["mode"] == "cascade" and r["k"] == 8 and r["tasks"] == 6
    assert 0.0 <= r["all_gold_found"] <= r["gold_recall"] <= 1.0
    assert r["prompt_tokens_per_episode"] > 0 and r["overflow_episodes"] == 0


def test_round_records_hold_validation_accuracy_per_depth(full):
    wd, report = full
    for rec in report["per_round"]:
        per = rec["val_per_category"]
        assert per and all(c.startswith("depth_") for c in per)
        n = sum(v["n"] for v in per.values())
        assert abs(sum(v["n"] * v["accuracy"] for v in per.values()) / n - rec["val_accuracy"]) < 1e-9


def test_round_records_say_where_the_time_went(full):
    """Each record's ``stage_s``: the stages' wall seconds, within the round's own wall time."""
    _, report = full
    first, *rounds = report["per_round"]
    assert set(first["stage_s"]) == {"warm_library", "play_demos", "sft", "evaluate", "dev"}
    for rec in rounds:
        assert set(rec["stage_s"]) == {"grpo", "explore", "mine", "refactor_and_refresh", "probation", "decide",
                                       "incumbent_state", "curriculum", "dev"}
        assert all(s >= 0.0 for s in rec["stage_s"].values())
        assert sum(rec["stage_s"].values()) <= rec["wall_s"] + 1e-6
    assert 0.0 < report["test_eval_s"] <= report["wall_s_this_process"]
    assert report["host_malloc"].startswith(("system: ", "GLIBC_TUNABLES="))  # what the times ran under
    assert {"setting", "jax", "jaxlib", "numpy"} <= set(report["numerics"])  # what the floats ran under


def test_round_records_say_what_the_learning_did(full):
    """``mechanism``: uniform groups, entropy, update norm, draws per curriculum region and the round's
    composites; ``dev_accuracy``: the kept pair on tasks no decision read."""
    _, report = full
    first, *rounds = report["per_round"]
    assert 0.0 <= first["dev_accuracy"] <= 1.0 and "mechanism" not in first
    signal_before = False  # whether an earlier round trained an informative group
    for rec in rounds:
        m = rec["mechanism"]
        assert 0.0 <= m["uniform_group_share"] <= 1.0 and m["entropy"] >= 0.0 and m["update_norm"] >= 0.0
        # beta = 0: a round with an informative group moves the params; a round whose groups are all uniform
        # trains no row, so it moves them only through Adam's moments, which a kept round's state carries into
        # the next: never before the first informative group (which rounds have a signal depends on the host's
        # floats, e.g. the fake devices' mesh)
        if m["uniform_group_share"] < 1.0:
            assert m["update_norm"] > 0.0, m
        elif not signal_before:
            assert m["update_norm"] == 0.0, m
        signal_before = signal_before or m["uniform_group_share"] < 1.0
        # configs/chaos.py: 8 tasks an iteration, 2 iterations a round, every draw counted once
        assert sum(m["rods_draws_by_region"].values()) == 16
        assert set(m["rods_draws_by_region"]) <= {"boundary", "mastered", "hard", "unobserved", "variant"}
        c = m["composites"]
        assert c["proposed"] >= c["validated"] >= c["accepted"] >= 0 and c["called_on_validation"] >= 0
        assert c["accepted"] == (len(rec["inserted"]) if rec["outcome"] == "accept" else 0)
        assert 0.0 <= rec["dev_accuracy"] <= 1.0 and rec["dev_per_category"]
    assert any(rec["mechanism"]["update_norm"] > 0.0 for rec in rounds)  # the rounds learned something
    # round 1 mines from its first iteration's successes; the second iteration is their probation
    assert rounds[0]["mechanism"]["composites"]["validated"] >= 1


def test_probation_must_leave_iterations_before_the_mining(tmp_path):
    with pytest.raises(ConfigError, match="probation_iterations"):
        coevolve.run(tiny_config(coevolve__probation_iterations=1), tmp_path / "run", progress=False)
    assert not (tmp_path / "run" / "checkpoints").exists()  # refused before anything was written


@pytest.mark.slow
def test_rods_seeds_start_where_the_config_says(tmp_path):
    """``rods.seed_start``: GRPO's seed tasks are ``n_seeds`` training tasks from that index on (past
    SFT's demonstrations, instances it never trained on); past the training tasks it is refused before
    anything is written."""
    config = tiny_config(rods__seed_start=24, coevolve__rounds=1)
    coevolve.run(config, tmp_path / "run", progress=False)
    pools = sorted((tmp_path / "run" / "rods").glob("pool_*.json"))
    seeds = [i["task_id"] for i in json.loads(pools[-1].read_text())["items"] if i["origin"] == "seed"]
    train = coevolve.domains.build_domain(config, None).train
    assert seeds == [str(t.id) for t in train[24:24 + config.rods.n_seeds]]
    with pytest.raises(ConfigError, match="rods.seed_start=48 is past the domain's 48 training tasks"):
        coevolve.run(tiny_config(rods__seed_start=48), tmp_path / "past", progress=False)
    assert not (tmp_path / "past" / "checkpoints").exists()
    with pytest.raises(ConfigError, match="seed_start"):
        coevolve.run(tiny_config(rods__seed_start=-1), tmp_path / "negative", progress=False)


def test_a_replicate_reruns_the_rounds_under_other_chance_after_the_same_stages(tmp_path):
    """``coevolve.replicate``: stages 1-2 are the run's own (round 0's record is the same), the rounds
    draw their tasks and samples from another stream; a negative value is refused before training."""
    reports = [coevolve.run(tiny_config(coevolve__rounds=1, coevolve__replicate=r), tmp_path / f"r{r}",
                            progress=False) for r in (0, 1)]
    def round0(report):
        return {k: v for k, v in report["per_round"][0].items() if k not in ("wall_s", "stage_s")}

    assert round0(reports[0]) == round0(reports[1])
    assert reports[0]["accuracy"]["per_round"][0] == reports[1]["accuracy"]["per_round"][0]
    pools = [json.loads(sorted((tmp_path / f"r{r}" / "rods").glob("pool_*.json"))[-1].read_text()) for r in (0, 1)]
    assert pools[0] != pools[1]  # RODS drew and tracked other tasks
    with pytest.raises(ConfigError, match="replicate"):
        coevolve.run(tiny_config(coevolve__replicate=-1), tmp_path / "negative", progress=False)
    assert not (tmp_path / "negative" / "checkpoints").exists()


def test_the_frozen_baseline_keeps_the_primitives(tmp_path):
    report = coevolve.run(tiny_config(coevolve__frozen_library=True, rods__enabled=False, coevolve__rounds=1),
                          tmp_path, progress=False)
    assert report["library"]["composites"] == 0 and report["library"]["primitives"] == 30
    assert report["frozen_library"] is True and report["rods_per_epoch"] is None


def test_an_unknown_rods_signal_is_a_config_error(tmp_path):
    from cocoda_jax.errors import ConfigError

    with pytest.raises(ConfigError, match="rods.signal"):
        coevolve.run(tiny_config(rods__signal="vibes"), tmp_path, progress=False)


def test_the_direct_baseline_states_answers_in_one_step(tmp_path):
    from cocoda_jax.data import direct_answer

    config = tiny_config(coevolve__frozen_library=True, coevolve__direct_answer=True, rollout__max_steps=1,
                         retrieval__mode="none", rods__enabled=False, coevolve__rounds=1)
    report = coevolve.run(config, tmp_path, progress=False)
    library = LibrarySnapshot.from_json((tmp_path / "library" / "round_001.json").read_text())
    assert library.names() == (direct_answer.TOOL_NAME,)
    assert report["library"]["composites"] == 0 and report["frozen_library"] is True
    assert set(report["test_outcomes"].values()) <= {0, 1} and len(report["test_outcomes"]) == config.domain.n_test
    # every demonstrated training task's gold answer, stated in one step, was played and verified as an SFT
    # demonstration (the faithful setting: the answer-only tasks are GRPO's)
    shown = coevolve.domains.build_domain(config, None).demonstrations
    assert 0 < len(shown) < config.domain.n_train
    assert report["warm"]["demos"] == min(len(shown), config.sft.n_demos)
    assert report["warm"]["rounds"] == []


def test_the_direct_baseline_needs_the_frozen_library(tmp_path):
    from cocoda_jax.errors import ConfigError

    with pytest.raises(ConfigError, match="direct_answer"):
        coevolve.run(tiny_config(coevolve__direct_answer=True), tmp_path, progress=False)

"""The arms of the study: a name, the config overrides (dotted keys into the run config) that turn
the main job (``cocoda``) into the arm, and whether the arm can run at all.

An arm that needs a knob the job does not have is registered ``available=False`` with the exact
reason, never approximated by a nearby knob: a study row must mean what its name says.

Why each available arm's overrides do what the name says (read from the code, not assumed):

* ``frozen_library``: ``coevolve.frozen_library=True``: no warm library, no mining, no refresh
  (``runs/coevolve.py`` ``_warm_start`` returns the primitives; the rounds mine nothing).
* ``no_tdr``: ``retrieval.mode="full"``: the prompt lists the whole library instead of the typed
  DAG retrieval cascade (``configs/default.py``: "full" = the -TDR ablation).
* ``no_gar``: ``reward.name="result"``: ``rl/rewards.py`` ``result_reward`` is ``dag_reward`` with
  ``lam=0``: R_res minus the step penalties, which are 0 in the default config
  (``malformed_penalty = ill_typed_penalty = 0``), so R_res alone.
* ``no_acceptance``: ``coevolve.acceptance.tolerance=1.0`` and ``growth_must_pay=False``.
  ``coevolve.decide`` weighs the round's validation *accuracy* (in [0, 1]) against
  ``reference - tolerance``; with tolerance 1 the threshold is <= 0, so the reward test always
  passes, and without ``growth_must_pay`` a pair is never weighed against the planner alone. The other refusals of
  ``acceptance._check`` cannot fire: the accuracy is finite, the proposal's used tools come from
  rollouts with the proposal's own library, and the job never removes a tool from a library
  (no ``LibrarySnapshot.remove`` in ``coevolve/`` or ``runs/coevolve.py``: mining only inserts),
  so no accepted tool is ever dropped. Every round is therefore accepted as a pair.
* ``rods_off``: ``rods.enabled=False``: GRPO's tasks are a static seeded draw from the same
  ``rods.n_seeds`` seed tasks (``rods.source.TaskSource.sample`` -> ``loop.sample_tasks``).
* ``rods_random``: ``rods.selection="uniform"``: ``Curriculum.sample`` takes a seeded uniform
  permutation of the live pool instead of boundary-first priority order; the pool, synthesis and
  retirement are RODS's.
* ``sft_only``: ``coevolve.rounds=0``: stages 1-2 exactly as ``cocoda`` runs them (the study shares
  that prefix at a seed), then the test evaluation of the SFT planner with the warm library.
* ``no_ctd``: ``coevolve.mine_in_rounds=False``: the warm library and its refactored
  demonstrations, then ``mine_and_validate`` mines nothing in the rounds.
* ``direct``: ``coevolve.direct_answer=True`` (with ``frozen_library``): the library is one tool,
  ``state_answer(value)``, that returns its argument (``cocoda_jax/data/direct_answer.py``: the action
  format has no literal answer step), the SFT demonstrations are ``answer = state_answer(<gold>)``,
  ``rollout.max_steps=1`` and no cards (``retrieval.mode="none"``): the planner must write the answer's
  digits itself, through the same checker, sandbox, verifier, GRPO and RODS as every other arm.
* ``sft_matched`` (diagnostic, run only when named): ``sft.steps=1280`` and ``coevolve.rounds=0``: the
  stage-2 planner given the SFT steps the default main job takes in all (stage 2's 560 and three rounds'
  240-step refreshes), on its own cosine schedule; what the rounds add beyond more SFT.
* ``growth_tolerant`` (diagnostic, run only when named): ``coevolve.acceptance.growth_must_pay=False``:
  the main job without the rule that a grown library must score at least the round's planner
  alone; it measures what that rule changes. (Not quite the rule before it: a refused pair now falls
  back to the planner before the refresh, where it used to fall back to the refreshed planner.)
* ``search_cards`` (diagnostic, run only when named): ``retrieval.cards="search"``: no question-level
  cards in the prompt; the planner's ``search(...)`` step is its only way to the library
  (``docs/actions.md``), in the demonstrations, GRPO's rollouts and the evaluations alike. Stages 1-2
  differ from ``cocoda``'s (the demonstrations show the step), so the arm runs its own prefix.
* ``no_search`` (diagnostic, run only when named): ``coevolve.explore_tasks=0``: the main job without the
  rounds' best-of-N search (``runs/coevolve.py`` ``explore``: 16 samples on each of 64 answer-only training
  tasks without a stored demonstration, after each round's GRPO iterations), so RODS has nothing to admit
  either: the default before the search fed the curriculum.
* ``search_unfed`` (diagnostic, run only when named): ``rods.admit_explored=False``: the search runs and its
  successes are mined and kept as demonstrations, but the tasks it solved now and then do not join RODS's
  live pool (drawn at the variant weight in the round's probation iterations, synthesis parents at its end).
* ``found_later`` (diagnostic, run only when named): ``rods.thresholds.found_variants=0``: the variants of a
  found task are planned at the round's end (it is the first synthesis parent) and injected at the next round's
  end, instead of the default's four synthesised when it is admitted and drawn in the same round.
* ``rods_answer_only`` (diagnostic, run only when named): ``rods.seed_pool="answer_only"``: RODS's seeds,
  the tasks GRPO draws, are training tasks the domain gives no program for. With the seeds taken from all
  training tasks most are demonstrated ones the SFT planner always solves and the rest ones it never
  solves, so nearly every GRPO group is uniform; once a round learns a motif pair from reward, the
  answer-only tasks of that pair are solved about half the time (docs/experiments.md, section Y).
* ``cocoda_replicate`` (diagnostic, run only when named): ``coevolve.replicate=1``: the main job's
  stages 1-2 (shared with ``cocoda`` at a seed) and rounds with the same settings drawing their
  randomness from another seed (``runs/coevolve.py`` ``rounds_seed``). Nothing about the method
  differs, so its delta to ``cocoda`` is what the rounds' chance alone gives: a delta of another
  arm no larger than this one's says nothing about the arm.
* ``large_frozen``: ``model.preset="tiny_x4"`` (``models/config.py``: tiny at twice the width,
  4.0x its non-embedding parameters) with ``coevolve.frozen_library=True``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import ml_collections

from cocoda_jax.errors import ConfigError


@dataclasses.dataclass(frozen=True)
class Arm:
    """One row of the study. ``overrides``: dotted key -> value, applied to a copy of the run
    config; ``reason``: why the arm is unavailable (empty when it is available); ``in_presets``:
    whether the study's presets run it (False: a diagnostic arm, run only when named); ``weight``: its
    cell's time relative to ``cocoda``'s at the default preset (measured: means over three seeds,
    docs/experiments.md section I), used only to start the heaviest cells first when cells run in
    parallel (a long cell started last runs alone at the end while the other cores idle) and to price
    the cells left in the printed ETA."""

    name: str
    description: str
    overrides: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    available: bool = True
    reason: str = ""
    in_presets: bool = True
    weight: float = 1.0

    def __post_init__(self) -> None:
        if self.available and self.reason:
            raise ValueError(f"arm {self.name!r}: an available arm has no reason")
        if not self.available and not self.reason:
            raise ValueError(f"arm {self.name!r}: an unavailable arm must say why")
        if not self.available and self.overrides:
            raise ValueError(f"arm {self.name!r}: an unavailable arm has no overrides")


ARMS: tuple[Arm, ...] = (
    Arm("cocoda", "the main job: co-evolved library, TDR, graph-aware reward, acceptance, RODS"),
    Arm("sft_only", "the stage-2 planner with the warm library, no co-evolution round (what the rounds must beat)",
        {"coevolve.rounds": 0}, weight=0.2),
    Arm("frozen_library", "the library frozen at its primitives (no warm library, no mining)",
        {"coevolve.frozen_library": True}, weight=1.4),
    Arm("no_tdr", "-TDR: the whole library in the prompt instead of the retrieval cascade",
        {"retrieval.mode": "full"}, weight=2.0),
    Arm("no_gar", "-GAR: reward R_res only (no composite credit)", {"reward.name": "result"}),
    Arm("no_acceptance", "every round's (planner, library) pair accepted (tolerance 1 on an accuracy in [0, 1])",
        {"coevolve.acceptance.tolerance": 1.0, "coevolve.acceptance.growth_must_pay": False}),
    Arm("rods_off", "RODS off: a static seeded draw from the seed tasks", {"rods.enabled": False}),
    Arm("large_frozen", "a 4x larger planner (tiny_x4: 4x the non-embedding parameters) with the library frozen",
        {"model.preset": "tiny_x4", "coevolve.frozen_library": True}, weight=3.6),
    Arm("direct", "the planner states the answer in one step, no computing tool (the CoT-free baseline)",
        {"coevolve.frozen_library": True, "coevolve.direct_answer": True, "rollout.max_steps": 1,
         "retrieval.mode": "none"}, weight=0.6),
    Arm("no_ctd", "-CTD: the library frozen after the warm stage (warm library kept, no growth in the rounds)",
        {"coevolve.mine_in_rounds": False}, weight=0.8),
    Arm("rods_random", "RODS's pool, synthesis and retirement, but tasks drawn uniformly from the live pool",
        {"rods.selection": "uniform"}),
    # diagnostic (not in the presets): the SFT planner trained for as many SFT steps as the main job takes in
    # all (560 + 3 rounds x 240 refresh steps at the default preset): is what the rounds add more than SFT?
    Arm("sft_matched", "sft_only with the main job's whole SFT budget (1,280 steps: stage 2's 560 and the three "
        "rounds' 240-step refreshes), no round", {"sft.steps": 1280, "coevolve.rounds": 0}, in_presets=False,
        weight=0.4),
    # diagnostic (not in the presets): the main job with ``growth_must_pay`` off
    Arm("growth_tolerant", "cocoda, but a grown library is accepted inside the tolerance even when the round's "
        "planner alone scores higher (growth_must_pay off; a refused pair still falls back to the pre-refresh planner)",
        {"coevolve.acceptance.growth_must_pay": False}, in_presets=False),
    # diagnostic (not in the presets): planner-issued retrieval instead of question-level cards
    Arm("search_cards", "cocoda, but the planner asks for its tools with search(...) instead of reading "
        "question-level cards", {"retrieval.cards": "search"}, in_presets=False, weight=1.2),
    # diagnostic (not in the presets): the rounds' search, and its feed into the curriculum, taken out
    Arm("no_search", "cocoda without the rounds' best-of-N search on the answer-only training tasks (and so "
        "nothing for RODS to admit)", {"coevolve.explore_tasks": 0}, in_presets=False, weight=0.9),
    Arm("search_unfed", "cocoda, but the tasks the search solved now and then do not join RODS's pool (the search's "
        "successes are still mined and kept)", {"rods.admit_explored": False}, in_presets=False),
    # diagnostic (not in the presets): the found tasks' variants made at the round's end, not at once
    Arm("found_later", "cocoda, but the variants of a task the search found are planned at the round's end like a "
        "boundary task's, not made when it is admitted", {"rods.thresholds.found_variants": 0}, in_presets=False),
    # diagnostic (not in the presets): RODS's draw with the unobserved seeds and the settled tasks light, so that the
    # boundary and the new tasks are not outweighed by the hundreds of seeds no group has observed yet
    Arm("rods_focus", "cocoda, but in RODS's draw an unobserved seed weighs 0.02 (not 0.5) and a mastered or hard "
        "task 0.005 (not 0.05) of a boundary task at phi = 1: GRPO's slots go to the tasks the tracker found "
        "informative first", {"rods.thresholds.explore_weight": 0.02, "rods.thresholds.recheck_weight": 0.005},
        in_presets=False),
    # diagnostic (not in the presets): GRPO's groups sampled hotter. The SFT planner solves a task in all of a group's
    # rollouts or in none at 1.0, so most groups carry no advantage; the loss scores the policy at the same
    # temperature (the rollouts' is GRPO's), so the update is on-policy
    Arm("hot_rollouts", "cocoda, but GRPO's rollouts and the rounds' search sample at temperature 1.5 (not 1.0), and "
        "GRPO's loss scores the policy at 1.5: groups with both outcomes where the planner is near-deterministic",
        {"rollout.temperature": 1.5}, in_presets=False),
    # diagnostic (not in the presets): GRPO's seed tasks are the answer-only training tasks
    Arm("rods_answer_only", "cocoda, but RODS's seeds (the tasks GRPO draws) are training tasks without a "
        "demonstration: the reinforcement learning practises where SFT showed nothing",
        {"rods.seed_pool": "answer_only"}, in_presets=False),
    # diagnostic (not in the presets): the rounds' refresh in half the steps at twice the rate (the same summed
    # learning rate): the refresh is a third to a half of a round's time on the CPU default
    Arm("short_refresh", "cocoda, but each round's SFT refresh takes 120 steps at 6e-4 (not 240 at 3e-4): the same "
        "summed learning rate in half the steps", {"coevolve.refresh_sft_steps": 120,
                                                    "coevolve.refresh_learning_rate": 6e-4}, in_presets=False,
        weight=0.8),
    # diagnostic (not in the presets): more variants of each task found informative. The default's pool gains 4-16
    # variants an epoch, too few for the steered draw to fill GRPO's groups with tasks at the boundary
    Arm("rods_supply", "cocoda, but RODS synthesizes 8 variants (not 2) of each boundary parent and 16 (not 4) of each "
        "task the search found: more tasks of the structures the planner is learning",
        {"rods.thresholds.variants_per_seed": 8, "rods.thresholds.found_variants": 16}, in_presets=False),
    # diagnostic (not in the presets): the null arm. Its delta to cocoda is what run-to-run chance alone
    # gives an arm, the yardstick for every other arm's delta
    Arm("cocoda_replicate", "cocoda again from the same stages 1-2, its rounds under another random stream "
        "(GRPO's sampling, RODS's draw, the refresh's batches): what chance alone moves", {"coevolve.replicate": 1},
        in_presets=False),
)

_BY_NAME = {a.name: a for a in ARMS}

#: Override keys (prefixes) that only stage 3 reads: arms that differ only in these have the same
#: stages 1-2 (warm library, SFT, round 0's evaluation) at a seed, so the study runs that prefix once.
#: ``reward.*`` is among them: stages 1-2 never read the reward, and round 0's record, which reports the
#: validation reward, is measured again under the cell's own reward when a cell resumes from a prefix
#: saved under another (``runs/coevolve.py``, ``_round0_under_this_reward``). ``rollout.temperature``: only
#: sampled rollouts read it (the rounds' GRPO and search); stages 1-2 and every evaluation are greedy.
#: ``coevolve.refresh_*``: the SFT refresh runs inside a round, after its mining.
STAGE3_ONLY = ("coevolve.acceptance.", "coevolve.mine_in_rounds", "coevolve.rounds", "coevolve.replicate", "rods.",
               "reward.", "coevolve.explore_", "rollout.temperature", "coevolve.refresh_")


def prefix_key(arm: Arm) -> tuple[tuple[str, Any], ...]:
    """The overrides of ``arm`` that stages 1-2 read; equal keys at a seed share a prefix."""
    return tuple(sorted((k, v) for k, v in arm.overrides.items() if not k.startswith(STAGE3_ONLY)))


def names() -> tuple[str, ...]:
    """The arms the study's presets run (every arm not marked diagnostic)."""
    return tuple(a.name for a in ARMS if a.in_presets)


def get(name: str) -> Arm:
    try:
        return _BY_NAME[name]
    except KeyError:
        raise KeyError(f"unknown arm {name!r}; known: {list(_BY_NAME)}") from None


def select(wanted: Sequence[str] | None) -> tuple[Arm, ...]:
    """The arms named in ``wanted`` in registry order (the presets' arms when ``None`` or empty)."""
    if not wanted:
        return tuple(_BY_NAME[n] for n in names())
    unknown = [n for n in wanted if n not in _BY_NAME]
    if unknown:
        raise KeyError(f"unknown arm(s) {unknown}; known: {list(_BY_NAME)}")
    return tuple(a for a in ARMS if a.name in set(wanted))


def apply_overrides(config: ml_collections.ConfigDict, overrides: Mapping[str, Any]) -> ml_collections.ConfigDict:
    """A copy of ``config`` with each dotted key set; a key the config lacks is a KeyError (an
    override must not create a knob the job would ignore)."""
    out = config.copy_and_resolve_references()
    out.unlock()
    for dotted, value in overrides.items():
        *parents, leaf = dotted.split(".")
        node = out
        for p in parents:
            if p not in node:
                raise KeyError(f"override {dotted!r}: the config has no section {p!r}")
            node = node[p]
        if leaf not in node:
            raise KeyError(f"override {dotted!r}: the config has no key {leaf!r}")
        node[leaf] = value
    return out


def has_rounds(arm: Arm, run_config: ml_collections.ConfigDict) -> bool:
    """Whether ``arm`` runs co-evolution rounds under ``run_config`` (its overrides applied)."""
    return int(apply_overrides(run_config, arm.overrides).coevolve.rounds) > 0


#: Separates an arm's name from its stream number in a stream's cell name (``cocoda@1``).
STREAM_MARK = "@"


def base_name(cell_arm: str) -> str:
    """The arm a cell belongs to: ``cocoda@1`` -> ``cocoda`` (a name without a stream is itself)."""
    return cell_arm.split(STREAM_MARK, 1)[0]


def streams(arm: Arm, n: int, run_config: ml_collections.ConfigDict) -> tuple[Arm, ...]:
    """The cells of ``arm`` at a seed when the study runs ``n`` streams of every arm's rounds: the arm
    itself (stream 0) and, for r = 1..n-1, ``ARM@r``: the arm with ``coevolve.replicate = r``, the same
    stages 1-2 and rounds drawing their randomness (GRPO's sampling, RODS's draw, the refresh's
    batches) from another seed. Averaging an arm's test outcomes over its streams takes the rounds'
    own chance out of its delta, which a single run cannot (the null arm ``cocoda_replicate`` measures
    that chance as large as most arms' deltas).

    An arm without rounds (``coevolve.rounds = 0`` under ``run_config`` and its overrides) has one
    stream: nothing ``replicate`` reseeds runs. An arm that sets ``coevolve.replicate`` itself (the
    null arm) is refused with ``n > 1``: its streams would be other arms' streams."""
    if isinstance(n, bool) or int(n) != n or n < 1:
        raise ConfigError(f"streams must be an integer >= 1, got {n!r}")
    if n == 1 or not arm.available:
        return (arm,)
    if "coevolve.replicate" in arm.overrides:
        raise ConfigError(f"arm {arm.name!r} sets coevolve.replicate itself: with streams={n} every arm has its own "
                          "replicate streams, so leave it out (its delta is what the streams average away)")
    if not has_rounds(arm, run_config):
        return (arm,)
    return (arm,) + tuple(_stream(arm, r) for r in range(1, int(n)))


def stream_counts(default: int, spec: str, arm_names: Sequence[str]) -> dict[str, int]:
    """How many streams each arm in ``arm_names`` runs: ``default`` (the study's ``streams``) except the
    arms ``spec`` names (the study's ``arm_streams``, ``"no_tdr=1,cocoda=3"``): so the reference can
    run more streams than an arm whose cell costs twice as much, in one study whose table holds both.
    An arm ``spec`` names that is not in ``arm_names`` is ignored (the same config serves a study of fewer
    arms); an unknown arm, a repeated one or a count that is not an integer >= 1 is a ConfigError."""
    counts = {name: default for name in arm_names}
    seen: set[str] = set()
    for item in filter(None, (part.strip() for part in str(spec or "").split(","))):
        name, eq, value = (x.strip() for x in item.partition("="))
        if not eq or not value.isdigit() or int(value) < 1:
            raise ConfigError(f"arm_streams: {item!r} is not ARM=N with an integer N >= 1")
        if name not in _BY_NAME:
            raise ConfigError(f"arm_streams: unknown arm {name!r}; known: {', '.join(_BY_NAME)}")
        if name in seen:
            raise ConfigError(f"arm_streams: {name!r} is given twice")
        seen.add(name)
        if name in counts:
            counts[name] = int(value)
    return counts


def comparisons(spec: str, arm_names: Sequence[str]) -> dict[str, tuple[str, ...]]:
    """The paired comparisons the study's ``compare`` names besides the reference and ``sft_only``
    (``"explore_rods=explore,explore_rods_variants=explore_rods"``: arm -> the arms it is measured
    against, on the same (seed, task) pairs). Both arms of a pair must be among ``arm_names`` (the
    study's runnable arms); a malformed pair, an unknown arm or one left out of the study is a ConfigError."""
    out: dict[str, tuple[str, ...]] = {}
    for item in filter(None, (part.strip() for part in str(spec or "").split(","))):
        name, eq, other = (x.strip() for x in item.partition("="))
        if not eq or not name or not other or name == other:
            raise ConfigError(f"compare: {item!r} is not ARM=OTHER with two different arms")
        for n in (name, other):
            if n not in _BY_NAME:
                raise ConfigError(f"compare: unknown arm {n!r}; known: {', '.join(_BY_NAME)}")
            if n not in arm_names:
                raise ConfigError(f"compare: {n!r} is not among the study's arms ({', '.join(arm_names)})")
        if other not in out.get(name, ()):
            out[name] = out.get(name, ()) + (other,)
    return out


def _stream(arm: Arm, r: int) -> Arm:
    return dataclasses.replace(arm, name=f"{arm.name}{STREAM_MARK}{r}",
                               description=f"{arm.description} (stream {r}: coevolve.replicate={r})",
                               overrides={**arm.overrides, "coevolve.replicate": r}, in_presets=False)


def cell_arm(name: str) -> Arm:
    """The arm of a cell name: a registered arm, or ``ARM@r``, stream r of one (:func:`streams`)."""
    base, mark, r = name.partition(STREAM_MARK)
    if not mark:
        return get(name)
    if not r.isdigit() or int(r) < 1:
        raise KeyError(f"cell name {name!r}: a stream is ARM{STREAM_MARK}r with an integer r >= 1")
    return _stream(get(base), int(r))


def cell_dir(workdir: str | Path, arm: str, seed: int) -> Path:
    """Where one cell (``arm`` x ``seed``) of a study in ``workdir`` runs and keeps its report."""
    return Path(workdir) / arm / f"seed_{int(seed)}"


def cell_config(run_config: ml_collections.ConfigDict, arm: Arm, seed: int) -> ml_collections.ConfigDict:
    """The run config of one (arm, seed) cell: the arm's overrides, ``seed`` (parameters, sampling,
    batches) and ``domain.seed`` (the task draw: every arm of a seed gets the same test tasks, so
    arms are compared on the same (seed, task) pairs)."""
    if not arm.available:
        raise ValueError(f"arm {arm.name!r} is unavailable: {arm.reason}")
    return apply_overrides(run_config, {**arm.overrides, "seed": int(seed), "domain.seed": int(seed)})


__all__ = ["ARMS", "Arm", "STAGE3_ONLY", "STREAM_MARK", "apply_overrides", "base_name", "cell_arm", "cell_config",
           "cell_dir", "get", "names", "prefix_key", "select", "stream_counts", "streams"]

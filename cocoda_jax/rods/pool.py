"""The replay pool's lifecycle as pure functions over an immutable :class:`PoolState`.

The pool holds task ids, not tasks (the tasks live in the domain or in the generated-task files), so
its state is small, hashable and JSON-exact. One epoch boundary (:func:`advance_epoch`):

1. burn-in: an item injected ``burn_in_epochs`` ago is promoted if its mean reward lies in
   ``[burn_in_low, burn_in_high]``, else retired (``burn_in``);
2. retirement of live items: ``mastered`` (mean > ``retire_mastered`` over >= ``min_groups``
   groups), ``hard`` (the last ``hard_patience`` group means all below ``hard``), ``stale`` (not
   observed for ``stale_epochs``);
3. injection from the candidate queue (queued first, then new ones by descending prior phi), skipping duplicates (by id or content key,
   retired items included), at most ``floor(beta * live)`` items; the rest wait in the queue
   (bounded by ``queue_capacity``, the oldest dropped);
4. cap: when live generated items exceed ``p_max``, those with the lowest phi are evicted (phi of
   the tracked mean; before any observation, the parent's phi at injection).

Between boundaries, tasks found outside GRPO's draw (the rounds' best-of-N search: solved at least
once, not every time) join the live pool as ``found`` items (:func:`admit_found`); at the next
boundary they are synthesis parents first (:func:`plan_synthesis`), unless their variants were made
when they were admitted (``found_variants``: :func:`add_found_variants`).

Every decision is appended to ``state.log`` as a :class:`Decision`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from cocoda_jax.rods.config import RodsConfig
from cocoda_jax.rods.errors import RodsStateError
from cocoda_jax.rods.tasks import content_keys
from cocoda_jax.rods.tracker import Tracker

FORMAT = "cocoda-rods-pool/v1"
STATUSES = ("burn_in", "active", "retired")
ORIGINS = ("seed", "generated", "found")


@dataclasses.dataclass(frozen=True)
class PoolItem:
    task_id: str
    origin: str
    parent_id: str | None
    keys: tuple[str, ...]
    added_epoch: int
    status: str
    prior_phi: float
    retired_epoch: int | None = None
    reason: str | None = None

    def __post_init__(self) -> None:
        if self.origin not in ORIGINS:
            raise RodsStateError(f"pool item {self.task_id}", f"origin {self.origin!r} not in {ORIGINS}")
        if self.status not in STATUSES:
            raise RodsStateError(f"pool item {self.task_id}", f"status {self.status!r} not in {STATUSES}")

    @property
    def live(self) -> bool:
        return self.status != "retired"


@dataclasses.dataclass(frozen=True)
class Candidate:
    """A critiqued variant waiting for injection (its task is stored with the generated tasks)."""

    task_id: str
    parent_id: str
    keys: tuple[str, ...]
    prior_phi: float


@dataclasses.dataclass(frozen=True)
class Decision:
    """One logged decision: ``action`` on ``task_id`` at ``epoch`` and why (``detail``: sorted pairs)."""

    epoch: int
    action: str
    task_id: str
    reason: str
    detail: tuple[tuple[str, Any], ...] = ()

    def to_dict(self) -> dict:
        return {"epoch": self.epoch, "action": self.action, "task_id": self.task_id, "reason": self.reason,
                "detail": dict(self.detail)}


@dataclasses.dataclass(frozen=True)
class PoolState:
    """The pool at the start of ``epoch``: items in insertion order, the candidate queue, the next
    synthesis attempt per parent, and the decision log."""

    epoch: int
    items: tuple[PoolItem, ...]
    queue: tuple[Candidate, ...] = ()
    attempts: tuple[tuple[str, int], ...] = ()
    log: tuple[Decision, ...] = ()

    def item(self, task_id: str) -> PoolItem | None:
        for it in self.items:
            if it.task_id == task_id:
                return it
        return None

    def live_ids(self) -> tuple[str, ...]:
        """The active pool (burn-in items included: they are trained on), in insertion order."""
        return tuple(it.task_id for it in self.items if it.live)

    def live_generated(self) -> tuple[PoolItem, ...]:
        return tuple(it for it in self.items if it.live and it.origin == "generated")

    def all_keys(self) -> frozenset[str]:
        return frozenset(k for it in self.items for k in it.keys) | frozenset(k for c in self.queue for k in c.keys)

    def next_attempt(self, parent_id: str) -> int:
        return dict(self.attempts).get(parent_id, 0)

    # -- JSON ----------------------------------------------------------------------------------------
    def to_dict(self) -> dict:
        return {
            "format": FORMAT,
            "epoch": self.epoch,
            "items": [dataclasses.asdict(it) | {"keys": list(it.keys)} for it in self.items],
            "queue": [dataclasses.asdict(c) | {"keys": list(c.keys)} for c in self.queue],
            "attempts": [list(a) for a in self.attempts],
            "log": [d.to_dict() for d in self.log],
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True, allow_nan=False)

    @classmethod
    def from_dict(cls, d: Any) -> "PoolState":
        if not isinstance(d, dict) or d.get("format") != FORMAT:
            raise RodsStateError("pool.format", f"expected {FORMAT!r}")
        try:
            items = tuple(PoolItem(**(x | {"keys": tuple(x["keys"])})) for x in d["items"])
            queue = tuple(Candidate(**(c | {"keys": tuple(c["keys"])})) for c in d["queue"])
            attempts = tuple((str(p), int(n)) for p, n in d["attempts"])
            log = tuple(Decision(x["epoch"], x["action"], x["task_id"], x["reason"], tuple(sorted(x["detail"].items())))
                        for x in d["log"])
            state = cls(int(d["epoch"]), items, queue, attempts, log)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise RodsStateError("pool", f"malformed state: {exc!r}") from None
        check_invariants(state)
        return state

    @classmethod
    def from_json(cls, text: str | bytes) -> "PoolState":
        try:
            d = json.loads(text)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise RodsStateError("pool", f"not valid JSON: {exc}") from None
        return cls.from_dict(d)


def pool_hash(state: PoolState) -> str:
    """A digest of the whole state (items, queue, attempts, log): equal runs give equal hashes."""
    return hashlib.sha256(state.to_json().encode()).hexdigest()


def check_invariants(state: PoolState, config: RodsConfig | None = None) -> None:
    """Raises RodsStateError when ids or content keys repeat, or (with ``config``) the cap is broken."""
    ids = [it.task_id for it in state.items] + [c.task_id for c in state.queue]
    if len(ids) != len(set(ids)):
        raise RodsStateError("pool.items", "a task id occurs twice")
    keys = [k for it in state.items for k in it.keys] + [k for c in state.queue for k in c.keys]
    if len(keys) != len(set(keys)):
        raise RodsStateError("pool.items", "a content key occurs twice (duplicate task)")
    if config is not None and len(state.live_generated()) > config.p_max:
        raise RodsStateError("pool.items", f"{len(state.live_generated())} live generated items > p_max {config.p_max}")


def _d(epoch: int, action: str, task_id: str, reason: str, **detail: Any) -> Decision:
    clean = {k: (round(v, 12) if isinstance(v, float) else v) for k, v in detail.items()}
    return Decision(epoch, action, task_id, reason, tuple(sorted(clean.items())))


def initial_pool(seed_tasks: Iterable[Any], config: RodsConfig) -> PoolState:
    """The pool of epoch 0: every seed task active (a duplicate seed is skipped and logged)."""
    items: list[PoolItem] = []
    log: list[Decision] = []
    seen_ids: set[str] = set()
    seen_keys: set[str] = set()
    for t in seed_tasks:
        keys = content_keys(t)
        if t.id in seen_ids or seen_keys & set(keys):
            log.append(_d(0, "skip", t.id, "duplicate_seed"))
            continue
        seen_ids.add(t.id)
        seen_keys.update(keys)
        items.append(PoolItem(t.id, "seed", None, keys, 0, "active", 1.0))
        log.append(_d(0, "add", t.id, "seed"))
    return PoolState(0, tuple(items), (), (), tuple(log))


def admit_found(state: PoolState, tasks: Iterable[Any]) -> PoolState:
    """``state`` with ``tasks`` (found at the boundary outside GRPO's draw) live as ``found`` items of
    this epoch, unobserved; a task whose id or content is already in the pool (retired items and the
    queue included) is skipped and logged."""
    items, log = list(state.items), []
    ids = {it.task_id for it in items} | {c.task_id for c in state.queue}
    keys = set(state.all_keys())
    for t in tasks:
        task_keys = content_keys(t)
        if t.id in ids or keys & set(task_keys):
            log.append(_d(state.epoch, "skip", t.id, "duplicate_found"))
            continue
        ids.add(t.id)
        keys.update(task_keys)
        items.append(PoolItem(t.id, "found", None, task_keys, state.epoch, "active", 1.0))
        log.append(_d(state.epoch, "add", t.id, "found"))
    return dataclasses.replace(state, items=tuple(items), log=state.log + tuple(log))


def add_found_variants(state: PoolState, candidates: Sequence[Candidate], attempts: Mapping[str, int],
                       config: RodsConfig) -> PoolState:
    """``state`` with the variants made of found tasks when they were admitted live at once (in burn-in,
    judged at this epoch's end like an injected variant; a duplicate is skipped and logged) and each
    parent's next synthesis attempt set to ``attempts``."""
    items, log = list(state.items), []
    ids = {it.task_id for it in items} | {c.task_id for c in state.queue}
    keys = set(state.all_keys())
    for c in candidates:
        if c.task_id in ids or keys & set(c.keys):
            log.append(_d(state.epoch, "skip", c.task_id, "duplicate", parent=c.parent_id))
            continue
        ids.add(c.task_id)
        keys.update(c.keys)
        status = "burn_in" if config.burn_in_epochs > 0 else "active"
        items.append(PoolItem(c.task_id, "generated", c.parent_id, c.keys, state.epoch, status, c.prior_phi))
        log.append(_d(state.epoch, "add", c.task_id, "found_variant", parent=c.parent_id))
    merged = dict(state.attempts) | dict(attempts)
    return dataclasses.replace(state, items=tuple(items), attempts=tuple(sorted(merged.items())),
                               log=state.log + tuple(log))


def candidate_of(task: Any, parent_id: str, tracker: Tracker) -> Candidate:
    """A candidate for ``task`` whose prior phi is its parent's tracked phi (1.0 if untracked)."""
    stats = tracker.get(parent_id)
    return Candidate(task.id, parent_id, content_keys(task), 1.0 if stats is None else stats.phi)


def plan_synthesis(state: PoolState, tracker: Tracker, config: RodsConfig) -> tuple[PoolState, tuple[tuple[str, int], ...]]:
    """Up to ``synth_per_epoch`` parents, ``variants_per_seed`` jobs each: ``(parent_id, attempt)`` pairs
    with fresh attempt numbers (kept in the returned state). The live found items no variant was made of
    yet come first (in the order found), whatever GRPO then saw on them: each is a structure the planner
    solved for the first time, and its variants are that structure on new instances, where GRPO's groups
    carry signal; then the boundary items, highest phi first."""
    live = state.live_ids()
    made = dict(state.attempts)
    found = [it.task_id for it in state.items if it.live and it.origin == "found" and it.task_id not in made]
    parents = list(dict.fromkeys(found + list(tracker.boundary(live))))[: config.synth_per_epoch]
    attempts = dict(state.attempts)
    jobs, log = [], []
    for p in parents:
        start = attempts.get(p, 0)
        for a in range(start, start + config.variants_per_seed):
            jobs.append((p, a))
        attempts[p] = start + config.variants_per_seed
        stats = tracker.get(p)
        seen = {} if stats is None else {"mean": stats.mean, "phi": stats.phi}
        log.append(_d(state.epoch, "synthesize", p, "found" if p in found else "boundary", **seen,
                      variants=config.variants_per_seed))
    new = dataclasses.replace(state, attempts=tuple(sorted(attempts.items())), log=state.log + tuple(log))
    return new, tuple(jobs)


def _score(it: PoolItem, tracker: Tracker) -> float:
    s = tracker.get(it.task_id)
    return it.prior_phi if s is None else s.phi


def advance_epoch(state: PoolState, tracker: Tracker, new_candidates: Sequence[Candidate],
                  config: RodsConfig) -> PoolState:
    """The pool after the boundary that ends ``state.epoch`` (see the module docstring)."""
    e = state.epoch
    nxt = e + 1
    log: list[Decision] = []
    items = list(state.items)

    def retire(i: int, reason: str, **detail: Any) -> None:
        items[i] = dataclasses.replace(items[i], status="retired", retired_epoch=e, reason=reason)
        log.append(_d(e, "retire", items[i].task_id, reason, **detail))

    for i, it in enumerate(items):
        if not it.live:
            continue
        s = tracker.get(it.task_id)
        last_seen = s.last_epoch if s is not None else it.added_epoch - 1
        if e - last_seen >= config.stale_epochs and (it.origin != "seed" or config.retire_seeds):
            retire(i, "stale", last_seen=last_seen)
            continue
        if s is None:
            continue
        if it.status == "burn_in":
            if e - it.added_epoch + 1 >= config.burn_in_epochs:
                if config.burn_in_low <= s.mean <= config.burn_in_high:
                    items[i] = dataclasses.replace(it, status="active")
                    log.append(_d(e, "promote", it.task_id, "burn_in_passed", mean=s.mean))
                else:
                    retire(i, "burn_in", mean=s.mean)
            continue
        if it.origin == "seed" and not config.retire_seeds:
            continue
        if len(s.groups) >= config.min_groups and s.mean > config.retire_mastered:
            retire(i, "mastered", mean=s.mean)
        elif (len(s.groups) >= config.hard_patience
              and all(g.mean < config.hard for g in s.groups[-config.hard_patience:])):
            retire(i, "hard", mean=s.mean)

    # Injection.
    live = sum(it.live for it in items)
    cap = math.floor(config.beta * live + 1e-9)
    ids = {it.task_id for it in items}
    keys = {k for it in items for k in it.keys}
    queue: list[Candidate] = []
    injected = 0
    # New candidates in a canonical order (highest prior phi first), so that the order in which
    # background jobs finished never matters; older queued candidates go first.
    fresh = sorted(new_candidates, key=lambda c: (-round(c.prior_phi, 12), c.parent_id, c.task_id))
    for c in tuple(state.queue) + tuple(fresh):
        if c.task_id in ids or keys & set(c.keys):
            log.append(_d(e, "skip", c.task_id, "duplicate", parent=c.parent_id))
            continue
        if injected < cap:
            status = "burn_in" if config.burn_in_epochs > 0 else "active"
            items.append(PoolItem(c.task_id, "generated", c.parent_id, c.keys, nxt, status, c.prior_phi))
            log.append(_d(e, "inject", c.task_id, "variant", parent=c.parent_id, prior_phi=c.prior_phi))
            injected += 1
        else:
            queue.append(c)
        ids.add(c.task_id)
        keys.update(c.keys)
    while len(queue) > config.queue_capacity:
        dropped = queue.pop(0)
        log.append(_d(e, "drop", dropped.task_id, "queue_full"))

    # Cap on generated items.
    gen = [i for i, it in enumerate(items) if it.live and it.origin == "generated"]
    if len(gen) > config.p_max:
        order = sorted(gen, key=lambda i: (_score(items[i], tracker), items[i].added_epoch, items[i].task_id))
        for i in order[: len(gen) - config.p_max]:
            items[i] = dataclasses.replace(items[i], status="retired", retired_epoch=e, reason="p_max")
            log.append(_d(e, "evict", items[i].task_id, "p_max", phi=_score(items[i], tracker)))
    return PoolState(nxt, tuple(items), tuple(queue), state.attempts, state.log + tuple(log))


def decisions_at(state: PoolState, epoch: int) -> tuple[Decision, ...]:
    return tuple(d for d in state.log if d.epoch == epoch)


def epoch_metrics(state: PoolState, tracker: Tracker, epoch: int) -> dict[str, Any]:
    """What the issue asks per epoch: pool size per region and status, variance per region, the
    boundary variance ratio, the mean first-epoch reward of the variants injected at the previous
    boundary (the paper sees 0.25 to 0.75) and the share of them that landed in the boundary."""
    live = state.live_ids()
    regions = tracker.by_region(live)
    injected = [d.task_id for d in decisions_at(state, epoch) if d.action == "inject"]
    # Variants injected at the previous boundary had their first rollouts in this epoch.
    first = [g.mean for d in decisions_at(state, epoch - 1) if d.action == "inject"
             for g in (tracker.get(d.task_id).groups if tracker.get(d.task_id) else ()) if g.epoch == epoch]
    actions: dict[str, int] = {}
    for d in decisions_at(state, epoch):
        key = f"{d.action}:{d.reason}"
        actions[key] = actions.get(key, 0) + 1
    return {
        "epoch": epoch,
        "live": len(live),
        "live_generated": len(state.live_generated()),
        "region_sizes": {r: len(v) for r, v in regions.items()},
        "unobserved": len(live) - sum(len(v) for v in regions.values()),
        "region_variance": tracker.region_variances(live),
        "boundary_variance_ratio": tracker.boundary_variance_ratio(live),
        "injected": len(injected),
        "injected_first_reward": (sum(first) / len(first)) if first else None,
        "injected_first_in_boundary": (sum(tracker.config.hard <= m <= tracker.config.mastered for m in first)
                                       / len(first)) if first else None,
        "queue": len(state.queue),
        "decisions": dict(sorted(actions.items())),
    }

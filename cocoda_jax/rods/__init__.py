"""RODS: reward-driven online task synthesis (the RODS paper, Part B of the paper digest) — tracker, variants, replay pool.

Pure functions and frozen values throughout; :mod:`.simulate` drives them with a simulated policy
until the GRPO learner loop is wired in.
"""

from cocoda_jax.rods.config import RodsConfig
from cocoda_jax.rods.curriculum import Curriculum
from cocoda_jax.rods.errors import CorruptStateError, RodsStateError
from cocoda_jax.rods.persistence import GeneratedRecord, Restored, atomic_write, load, save
from cocoda_jax.rods.pool import (Candidate, Decision, PoolItem, PoolState, advance_epoch, candidate_of,
                                  check_invariants, epoch_metrics, initial_pool, plan_synthesis, pool_hash)
from cocoda_jax.rods.synthesis import (ERROR_TYPES, BackgroundSynthesizer, CritiqueError, Job, Outcome,
                                       Synthesizer, acceptance_rate, check_rules, propose, rejection_counts)
from cocoda_jax.rods.tasks import CallGraph, call_graph, content_keys, task_from_dict, task_to_dict
from cocoda_jax.rods.tracker import Tracker, phi, region, tracking_reward

__all__ = [
    "RodsConfig", "CorruptStateError", "RodsStateError", "GeneratedRecord", "Restored", "atomic_write", "load",
    "save", "Candidate", "Decision", "PoolItem", "PoolState", "advance_epoch", "candidate_of", "check_invariants",
    "epoch_metrics", "initial_pool", "plan_synthesis", "pool_hash", "ERROR_TYPES", "BackgroundSynthesizer",
    "CritiqueError", "Job", "Outcome", "Synthesizer", "acceptance_rate", "check_rules", "propose",
    "rejection_counts", "CallGraph", "call_graph", "content_keys", "task_from_dict", "task_to_dict", "Tracker",
    "phi", "region", "tracking_reward",
    "Curriculum",
]

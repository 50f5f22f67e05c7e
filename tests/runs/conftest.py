"""Tiny budgets of the real launchers' configs: every stage runs, in seconds."""

import pytest

from configs import tiny

TIMING_KEYS = ("rollout_s", "update_s", "rollout_tokens_per_s", "train_tokens_per_s")


def tiny_config(**over):
    """configs/tiny.py (every stage in seconds) with ``section__key=value`` overrides."""
    c = tiny.get_config()
    for k, v in over.items():
        section, key = k.split("__")
        c[section][key] = v
    return c


def comparable(records):
    """Metrics records without wall-clock fields (they differ between any two runs)."""
    return [{k: v for k, v in r.items() if k not in TIMING_KEYS and not k.endswith("wall_s")} for r in records]


@pytest.fixture
def config():
    return tiny_config()

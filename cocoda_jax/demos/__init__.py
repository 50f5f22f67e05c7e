"""Stage 0: demonstrations (gold programs) collected from a teacher or the student for benchmarks
that carry only answers. :mod:`.collect` asks, plays and verifies; :mod:`.store` keeps the JSONL."""

from cocoda_jax.demos.collect import (CollectConfig, CollectSummary, DemoEndpointError, attach, collect,
                                      messages_for, needs_demonstrations, parse_program, request_seed)
from cocoda_jax.demos.store import DemoRecord, DemoStore, DemoStoreError, read_records

__all__ = ["CollectConfig", "CollectSummary", "DemoEndpointError", "DemoRecord", "DemoStore", "DemoStoreError",
           "attach", "collect", "messages_for", "needs_demonstrations", "parse_program", "read_records",
           "request_seed"]

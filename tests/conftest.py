"""Test-wide setup: 8 fake CPU devices for the sharding tests.

XLA reads XLA_FLAGS once, when jax is first imported, so this must run before
any test module imports jax.
"""

import os

os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8").strip()
os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("MPLBACKEND", "Agg")

"""Test-wide setup: 8 fake CPU devices for the sharding tests.

XLA reads XLA_FLAGS once, when jax is first imported, so this must run before
any test module imports jax.
"""

import os

os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8").strip()
os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("MPLBACKEND", "Agg")

# The end-to-end launcher tests build the same jitted programs in several runs (each Learner and
# Sampler jits its own closures): one compilation cache per test session lets later runs reuse them.
import tempfile  # noqa: E402

os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", tempfile.mkdtemp(prefix="cocoda_jax_cache_"))
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "0")

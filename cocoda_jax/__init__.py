"""cocoda_jax: CoCoDA tool-library co-evolution with the RODS curriculum, in JAX.

The package root stays import-light (no jax here) so that sandbox workers and
command-line tools can import its pure-Python parts quickly.
"""

__version__ = "0.1.0"

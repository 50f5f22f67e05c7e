"""The absl launchers. ``python -m launch.<name>`` imports this package first, which re-executes the
process once with glibc's huge-page tunables for large host blocks (:mod:`cocoda_jax.runs.host_memory`):
XLA:CPU's per-execution buffers are then not faulted in 4 KiB at a time on every step."""

from cocoda_jax.runs.host_memory import reexec_with_huge_pages

reexec_with_huge_pages()

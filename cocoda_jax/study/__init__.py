"""The study: every arm (an ablation or baseline of the main job) x seeds, with
bootstrap confidence intervals over seeds and test tasks (docs/study.md).

``arms``: the registry of arms (config overrides, or why an arm cannot run yet); ``stats``: pure
numpy estimates (accuracy and paired deltas with bootstrap intervals, accuracy per depth);
``table``: study.md and the plots; ``run``: the resumable arm x seed loop over
:func:`cocoda_jax.runs.coevolve.run`.
"""

"""Benchmark launchers: each prints one JSON result, runs its peer (TRL, tunix, transformers, a linear
scan, a fresh interpreter) in the same run where one exists, and gives the ratio. Run them as
``python -m launch.bench.<name>``; the package ``launch`` keeps the entry points of a run."""

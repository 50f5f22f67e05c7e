"""Run reporting: per-step metrics (JSONL and TensorBoard) and PNG plots of them.

    from cocoda_jax.report import MetricsWriter, plot_metrics, read_metrics
    with MetricsWriter(workdir, resume_step=restored_step) as w:   # None for a fresh run
        w.write(step, {"reward_mean": 0.4, "kl": 0.01})
    plot_metrics(workdir / "metrics.jsonl", ["reward_mean", "kl"], workdir / "plots" / "train.png")
"""

from cocoda_jax.report.metrics import (
    JSONL_NAME, TB_DIR, MetricsError, MetricsFormatError, MetricsWriter, iter_series, read_event_scalars, read_metrics,
)
from cocoda_jax.report.plots import metrics_figure, plot_metrics, series
from cocoda_jax.report.coevolution import (
    ReportError, build_report, draw_library, plot_coevolution, retrieval_tokens_per_query, validate_rounds,
    write_report,
)
from cocoda_jax.report.html import render_html_report, write_html_report
from cocoda_jax.report.rounds import Outcome, RoundRecord, read_rounds

__all__ = [
    "JSONL_NAME", "MetricsError", "MetricsFormatError", "MetricsWriter", "TB_DIR", "iter_series", "metrics_figure",
    "plot_metrics", "read_event_scalars", "read_metrics", "series",
]
__all__ += [
    "ReportError", "build_report", "draw_library", "plot_coevolution", "retrieval_tokens_per_query",
    "validate_rounds", "write_report",
]
__all__ += ["render_html_report", "write_html_report", "Outcome", "RoundRecord", "read_rounds"]

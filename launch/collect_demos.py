r"""Stage 0 on its own: demonstrations for a benchmark that has only answers (GSM8K, MATH).

    python -m launch.serve --checkpoint=TEACHER_DIR --port=8000 &        # or vLLM / SGLang
    python -m launch.collect_demos --config=configs/qwen3_0p6b_gsm8k.py:node8 --workdir=DIR \
        --config.domain.data_dir=GSM8K_DIR --config.demos.base_url=http://127.0.0.1:8000

Asks ``config.demos``'s endpoint for ``k`` programs a training question, plays each in the sandbox
and keeps the first the benchmark's verifier accepts, in ``DIR/demos/demonstrations.jsonl`` (or
``config.demos.path``), one JSON line a question, with provenance (``cocoda_jax/demos``). Resumes:
questions already in the file are not asked again. Prints a JSON summary last (asked, requests,
solved, failure kinds, seconds). ``launch.coevolve`` with the same config and workdir then starts
from the file (its stage 0 finds nothing left to ask). The endpoint failing after the client's
retries ends the job with the reason (exit status 1); nothing decided is lost.
"""

from __future__ import annotations

import json

from absl import app, flags
from ml_collections import config_flags


def _define_flags():
    """Defined only when run as a program (``--config``/``--workdir`` are other launchers' flags too,
    and tests import several launchers into one process)."""
    config_flags.DEFINE_config_file("config", None, "Run config (ml_collections file) with a 'demos' section.",
                                    lock_config=True)
    flags.DEFINE_string("workdir", None, "The run's work directory (the file goes to DIR/demos/ unless "
                        "config.demos.path is set).")
    flags.DEFINE_bool("progress", True, "A progress bar.")


def collect(config, workdir, *, show_progress: bool = True) -> dict:
    """Stage 0 for ``config``'s training tasks into ``workdir``; the summary as a dict."""
    from cocoda_jax.runs import domains, rundir, stage0
    from cocoda_jax.runs.settings import RunSettings

    settings = RunSettings.of(config)
    demos = settings.required("demos")
    workdir = rundir.local_workdir(workdir)
    with domains.sandbox_for(settings) as sandbox:
        domain = domains.build_domain(settings, sandbox)
        path = stage0.demos_path(demos, workdir)
        summary = stage0.collect_for(settings, domain, sandbox, path, show_progress=show_progress)
    return {"path": str(path), "train_tasks": len(domain.train), **summary.to_dict()}


def main(argv) -> None:
    del argv
    F = flags.FLAGS
    if F.config is None or F.workdir is None:
        raise app.UsageError("--config and --workdir are required")
    summary = collect(F.config, F.workdir, show_progress=F.progress)  # an endpoint failure: exit 1, its reason
    print(json.dumps(summary, sort_keys=True))


if __name__ == "__main__":
    from cocoda_jax.runs.settings import exit_on_config_error

    _define_flags()
    app.run(exit_on_config_error(main))

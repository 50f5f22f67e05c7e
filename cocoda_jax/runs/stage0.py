"""Stage 0 of the jobs: gold programs for a domain whose training tasks have only answers.

``demonstrated(settings, workdir, sandbox, domain)`` returns the domain unchanged when every training
task has a program (the embedded domains); otherwise it collects (or reads) the demonstrations of
``config.demos`` (:mod:`cocoda_jax.demos`) and returns the domain whose training split is the tasks
with a verified program, each given it. Validation and test tasks never need one.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from pathlib import Path
from typing import Any

from cocoda_jax import demos as DM
from cocoda_jax.errors import ConfigError
from cocoda_jax.runs import hosts
from cocoda_jax.runs.settings import DemosSettings, RunSettings

log = logging.getLogger(__name__)

DEMOS_FILE = "demos/demonstrations.jsonl"
SUMMARY_FILE = "demos/summary.json"


def demos_path(settings: DemosSettings, workdir: Path) -> Path:
    return Path(settings.path) if settings.path else Path(workdir) / DEMOS_FILE


def collect_for(settings: RunSettings, domain: Any, sandbox: Any, path: Path, *, show_progress: bool = False,
                complete: Any = None) -> DM.CollectSummary:
    """Asks ``config.demos``'s endpoint for every training task of ``domain`` not yet in ``path``
    (``complete``: a stand-in for the HTTP client, for tests). Raises DemoEndpointError when the
    endpoint fails; what was decided is on disk."""
    from third_party.teacher import ChatClient, TeacherError

    demos = settings.required("demos")
    endpoint = demos.endpoint()
    if complete is None:
        client = ChatClient(endpoint)
        complete = lambda messages, extra: client.complete(messages, extra)  # noqa: E731
    store = DM.DemoStore(path)
    config = DM.CollectConfig(k=demos.k, concurrency=demos.concurrency, chunk=demos.chunk,
                              max_steps=settings.rollout.max_steps, seed=settings.seed)
    provenance = {"source": demos.source, "base_url": endpoint.base_url, "model": endpoint.model,
                  "temperature": endpoint.temperature}
    from tqdm import tqdm
    pending = sum(str(t.id) not in store.records for t in domain.train)
    with tqdm(total=pending, desc="stage 0: demonstrations", disable=not show_progress, dynamic_ncols=True,
              leave=False) as bar:
        return DM.collect(domain.train, domain.library, sandbox, complete, store, verify=domain.spec.verify,
                          config=config, provenance=provenance, endpoint_errors=(TeacherError,), progress=bar)


def demonstrated(settings: RunSettings, workdir: Path, sandbox: Any, domain: Any, *,
                 show_progress: bool = False) -> Any:
    """``domain`` with programs on its training tasks (see the module docstring). A config without
    a ``demos`` section for such a domain, or no verified program at all, is a ConfigError."""
    if not DM.needs_demonstrations(domain.train):
        return domain
    if settings.demos is None:
        raise ConfigError(f"config.domain.name {domain.name!r}: its training tasks have answers but no programs, "
                          "so stage 0 must collect demonstrations: add a 'demos' section (an OpenAI-compatible "
                          "endpoint; see docs/real_scale.md)")
    path = demos_path(settings.demos, workdir)
    if settings.demos.collect and hosts.is_primary():  # one process asks; the others wait and read the file
        summary = collect_for(settings, domain, sandbox, path, show_progress=show_progress)
        log.info("stage 0: %s", json.dumps(summary.to_dict()))
        summary_path = Path(workdir) / SUMMARY_FILE
        summary_path.parent.mkdir(parents=True, exist_ok=True)
        summary_path.write_text(json.dumps(summary.to_dict(), indent=1) + "\n")
    hosts.sync("stage 0")
    if not path.exists():
        raise ConfigError(f"stage 0: no demonstrations file at {str(path)!r}" + (
            "" if settings.demos.collect else " (config.demos.collect is False: give a collected file as config.demos.path)"))
    records = DM.read_records(path)
    train = DM.attach(domain.train, records)
    if not train:
        raise ConfigError(f"stage 0: none of the {len(domain.train)} training tasks has a verified demonstration "
                          f"in {path}; stages 1-3 need some")
    log.info("stage 0: %d of %d training tasks have a verified program", len(train), len(domain.train))
    return dataclasses.replace(domain, train=train)


__all__ = ["DEMOS_FILE", "SUMMARY_FILE", "collect_for", "demonstrated", "demos_path"]

"""The study loop: every available arm x seed cell as one in-process
:func:`cocoda_jax.runs.coevolve.run` in ``workdir/ARM/seed_S``, then study.json, study.md and the
plots (``launch/study.py`` is its command line).

Streams (the study config's ``streams``, default 1): with N > 1 every arm that has rounds also runs
N - 1 more cells at each seed, ``workdir/ARM@r/seed_S`` (:func:`~cocoda_jax.study.arms.streams`: the
same stages 1-2, the rounds' randomness from another seed), and the arm's outcome on a task is the
mean over its N streams. ``arm_streams`` (``"no_tdr=1"``) gives named arms another count
(:func:`~cocoda_jax.study.arms.stream_counts`). The cells run stream by stream (every arm's first
stream first).

Resumable: a cell whose ``report.json`` exists is read, not rerun; an interrupted cell resumes
from its own checkpoints (coevolve.run resumes from its workdir). The measured seconds of each cell
are kept in ``workdir/cell_times.json`` so that the ETA and ``wall_s`` survive a restart.

Shared prefixes: at a seed, the arms whose overrides differ only in what stage 3 reads
(:data:`~cocoda_jax.study.arms.STAGE3_ONLY`: acceptance, in-round mining, RODS) have the same stages
1-2. When two or more of them still have to start, the prefix runs once (``stop_after_round=0``) in
``workdir/_prefix/GROUP/seed_S``; each of those cells starts from a copy of it and resumes into its
own stage 3 (the job's resume is exact, docs/resume.md). Its seconds are the group's cells' share.
A cell added later (another stream, another stage-3 arm) starts from such a prefix once it is finished,
when the prefix ran under the config the study gives it now; it is charged nothing for it.
Each copy holds ``prefix.json`` (where it came from): its checkpoint was saved under the first arm's
config, so the cell runs with ``allow_config_change`` until it has its report, also when it resumes
in a later invocation.

Workers: ``run_study(..., workers=N)`` runs the prefixes, then the cells, N at a time, each in its
own spawned process (a fresh interpreter per cell: JAX is not fork-safe, and a finished cell's
memory goes back to the system). Every cell is deterministic from its config, so only the wall time
changes; ``workers=1`` runs everything in this process, in order.

The study config (``configs/study.py``): ``run`` (the run config every cell starts from),
``seeds``, ``arms``, ``streams``, ``arm_streams``, ``compare``, ``bootstrap`` (replicates), ``bootstrap_seed``.
"""

from __future__ import annotations

import concurrent.futures as futures
import contextlib
import ctypes
import json
import multiprocessing
import os
import pickle
import shutil
import signal
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import ml_collections
import numpy as np

from cocoda_jax.errors import ConfigError
from cocoda_jax.runs import numerics as numerics_lib
from cocoda_jax.runs import xla_cache as xla_cache_lib
from cocoda_jax.study import arms as A
from cocoda_jax.study import gather as gather_lib
from cocoda_jax.study import rounds as rounds_lib
from cocoda_jax.study import stats, table
from cocoda_jax.study.arms import cell_dir

REFERENCE = "cocoda"
#: What the rounds must beat (the stage-2 planner, no round): each arm's ``vs_sft_only`` delta
BASELINE = "sft_only"

Runner = Callable[[ml_collections.ConfigDict, Path], Mapping[str, Any]]
DepthFn = Callable[[ml_collections.ConfigDict], Mapping[str, int]]


def _coevolve_runner(config: ml_collections.ConfigDict, workdir: Path, **kwargs: Any) -> Mapping[str, Any]:
    """``coevolve.run`` (``kwargs``: ``stop_after_round``, ``allow_config_change``)."""
    from cocoda_jax.runs import coevolve
    return coevolve.run(config, workdir, progress=False, **kwargs)


def _started(cdir: Path) -> bool:
    return (cdir / "report.json").exists() or (cdir / "checkpoints").is_dir()


def _prefix_groups(run_config: ml_collections.ConfigDict, workdir: Path, cells: Sequence[tuple[A.Arm, int]]
                   ) -> list[tuple[int, list[A.Arm], Path]]:
    """The shared prefixes to run: ``(seed, member arms, prefix directory)`` for each group of two or
    more cells that have not started and share stages 1-2 (module docstring), in the cells' order.
    The prefix runs as the group's first member with rounds (moved to the front; the directory is named
    after it): ``stop_after_round=0`` stops such a run after stages 1-2, where an arm without rounds
    (``sft_only``) would go on to its test evaluation and report, and a copy of that would be a finished
    cell of the wrong arm. A group of arms without rounds only is not shared."""
    groups: dict[tuple[Any, int], list[A.Arm]] = {}
    for arm, seed in cells:
        if not _started(cell_dir(workdir, arm.name, seed)):
            groups.setdefault((A.prefix_key(arm), seed), []).append(arm)
    out = []
    for (_, seed), members in groups.items():
        with_rounds = [a for a in members if A.has_rounds(a, run_config)]
        if len(members) >= 2 and with_rounds:
            members = [with_rounds[0]] + [a for a in members if a is not with_rounds[0]]
            out.append((seed, members, workdir / "_prefix" / members[0].name / f"seed_{seed}"))
    return out


PREFIX_MARK = "prefix.json"


def _copy_prefix(workdir: Path, seed: int, members: Sequence[A.Arm], pdir: Path, seconds: float,
                 saved_under: str | None = None) -> dict[str, float]:
    """Copies a finished prefix into its cells (each with :data:`PREFIX_MARK`); returns the seconds
    charged to each cell. ``saved_under``: the arm the prefix ran as (default: the first member)."""
    share = seconds / len(members)
    charged: dict[str, float] = {}
    for arm in members:
        cdir = cell_dir(workdir, arm.name, seed)
        # never a report: a copy holding one would read as a finished cell
        shutil.copytree(pdir, cdir, ignore=shutil.ignore_patterns("logs", "report.json", "report.html"),
                        dirs_exist_ok=True)
        _write_json(cdir / PREFIX_MARK, {"prefix": str(pdir.relative_to(workdir)),
                                         "saved_under": saved_under or members[0].name})
        charged[f"{arm.name}/seed_{seed}"] = share
    return charged


def _finished_prefixes(workdir: Path, seed: int) -> list[Path]:
    """The prefix directories at ``seed`` that finished stages 1-2 in an earlier invocation: those a
    cell was copied from (its :data:`PREFIX_MARK` names them; a copy is made only once its prefix is done)."""
    found: set[Path] = set()
    for mark in workdir.glob(f"*/seed_{int(seed)}/{PREFIX_MARK}"):
        rel = json.loads(mark.read_text()).get("prefix")
        if rel and not Path(rel).is_absolute() and ".." not in Path(rel).parts and (workdir / rel).is_dir():
            found.add(workdir / rel)  # only this study's own prefixes
    return sorted(found)


def _reuse_finished_prefixes(study_config: ml_collections.ConfigDict, workdir: Path,
                             cells: Sequence[tuple[A.Arm, int]], log: Callable[[str], None]) -> list[str]:
    """Starts each cell that has not started from a prefix an earlier invocation finished, when that
    prefix's stages 1-2 are the cell's: its arm shares the cell's :func:`~cocoda_jax.study.arms.prefix_key`
    and it ran under exactly the config this study gives that arm now, under this process's numerics
    (``numerics.json``: the portable setting, jax/jaxlib/numpy versions). A stream or an arm added to a
    finished study then computes only its stage 3. Returns the cells started so (``ARM/seed_S``)."""
    from cocoda_jax import checkpoint as ckpt  # here: the study's own process stays light
    from cocoda_jax.runs import rundir

    started: list[str] = []
    finished: dict[int, list[Path]] = {}  # per seed: the scan reads every cell's prefix.json
    numerics_now = numerics_lib.status()
    for arm, seed in cells:
        if _started(cell_dir(workdir, arm.name, seed)):
            continue
        if seed not in finished:
            finished[seed] = list(_finished_prefixes(workdir, seed))
        for pdir in finished[seed]:
            try:
                owner = A.cell_arm(pdir.parent.name)
            except KeyError:  # an arm no longer defined
                continue
            saved = pdir / rundir.RUN_CONFIG
            if A.prefix_key(owner) != A.prefix_key(arm) or not saved.exists():
                continue
            current = ckpt.to_jsonable(A.cell_config(study_config.run, owner, seed).to_dict(), "config")
            changed = rundir.run_identity_changes(json.loads(saved.read_text()), current)
            if (pdir / rundir.RUN_NUMERICS).exists():  # jax/jaxlib/numpy as the prefix ran: else not its float path
                changed += numerics_lib.resume_differences(json.loads((pdir / rundir.RUN_NUMERICS).read_text()),
                                                           numerics_now)
            if changed:
                log(f"{arm.name}/seed_{seed}: the finished prefix {pdir.relative_to(workdir)} ran under another "
                    f"config ({'; '.join(changed[:3])}), not reused")
                continue
            _copy_prefix(workdir, seed, [arm], pdir, 0.0, saved_under=owner.name)
            log(f"{arm.name}/seed_{seed}: starts from the finished prefix {pdir.relative_to(workdir)}")
            started.append(f"{arm.name}/seed_{seed}")
            break
    return started


def _from_prefix(cdir: Path) -> bool:
    """Whether a cell without its report started from a copy of a shared prefix (then its
    checkpoint may still be the prefix's, saved under another arm's config)."""
    return (cdir / PREFIX_MARK).exists() and not (cdir / "report.json").exists()


def _share_prefixes(study_config: ml_collections.ConfigDict, workdir: Path, cells: Sequence[tuple[A.Arm, int]],
                    runner: Runner, log: Callable[[str], None]) -> dict[str, float]:
    """Runs each shared prefix once and copies it into the cells that have not started (module
    docstring); returns the prefix seconds charged to each cell (``ARM/seed_S`` -> s)."""
    charged: dict[str, float] = {}
    for seed, members, pdir in _prefix_groups(study_config.run, workdir, cells):
        name = "+".join(a.name for a in members)
        log(f"seed {seed}: stages 1-2 once for {name} ...")
        t0 = time.perf_counter()
        runner(A.cell_config(study_config.run, members[0], seed), pdir, stop_after_round=0)
        charged.update(_copy_prefix(workdir, seed, members, pdir, time.perf_counter() - t0))
    return charged


def task_depths(config: ml_collections.ConfigDict) -> dict[str, int]:
    """Test task id -> depth for a cell's config: the domain is built without a sandbox (the
    synthetic-math generator is pure and takes well under a second for thousands of tasks; the
    primitive library needs no worker to be described). A domain whose tasks have no ``depth``
    gives ``{}``."""
    from cocoda_jax.runs import domains
    domain = domains.build_domain(config, None)
    return {str(t.id): int(t.depth) for t in domain.test if getattr(t, "depth", None) is not None}


def task_structures(config: ml_collections.ConfigDict) -> dict[str, str]:
    """Test task id -> ``"seen"`` or ``"unseen"``: whether the run's demonstrations showed the task's
    structure (tasks without a ``seen_structure`` flag are left out)."""
    from cocoda_jax.runs import domains
    domain = domains.build_domain(config, None)
    return {str(t.id): "seen" if t.seen_structure else "unseen" for t in domain.test
            if getattr(t, "seen_structure", None) is not None}


def _write_json(path: Path, data: Any) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=False) + "\n")
    os.replace(tmp, path)


def _read_json(path: Path, default: Any) -> Any:
    return json.loads(path.read_text()) if path.exists() else default


def _fmt_s(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def eta_s(done: Sequence[tuple[float, float]], left: Sequence[float], workers: int = 1) -> float:
    """Seconds until the cells left end: ``done`` holds each finished cell's (seconds, ``Arm.weight``),
    ``left`` the weights of the cells not finished (running ones included). Each left cell is priced at
    the finished cells' seconds per unit of weight, ``workers`` run at once, and the heaviest left cell
    cannot be shared. Why weights: the parallel study starts the heaviest cells first, so a plain mean
    over the first finished cells overstated what was left 2.5x (5.0 h printed, ~2 h run)."""
    if not left:
        return 0.0
    weight = sum(w for _, w in done)
    if weight <= 0:
        raise ValueError("eta_s needs at least one finished cell of positive weight")
    rate = sum(s for s, _ in done) / weight
    return max(sum(left) * rate / workers, max(left) * rate)


def _weighted(times: Mapping[str, float]) -> list[tuple[float, float]]:
    """``times`` ("arm/seed" -> seconds) as (seconds, the arm's weight) pairs for ``eta_s``; a cell of
    an arm no longer defined (an older workdir) is left out of the price, not guessed."""
    names = {a.name for a in A.ARMS}
    return [(seconds, A.get(A.base_name(key.split("/")[0])).weight) for key, seconds in times.items()
            if A.base_name(key.split("/")[0]) in names]


#: Added to ``XLA_FLAGS`` in the children with ``threads_per_worker=1``: XLA's CPU ops on one thread
#: (the second token is not an XLA flag and XLA ignores it; it is the usual spelling of the recipe).
SINGLE_THREAD_XLA = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
_THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def core_slots(available: Sequence[int], workers: int) -> list[frozenset[int]]:
    """``workers`` disjoint sets of the ``available`` cores, as equal as the count allows (the cores
    left over go unused), one per worker slot of ``pin_cores``; fewer cores than workers is an error."""
    cores = sorted(int(c) for c in available)
    if workers > len(cores):
        raise ValueError(f"pin_cores needs a core per worker: {workers} workers, {len(cores)} cores ({cores})")
    k = len(cores) // workers
    return [frozenset(cores[j * k:(j + 1) * k]) for j in range(workers)]


def _check_workers(workers: int, threads_per_worker: int | None, runner: Runner | None) -> int:
    """``workers`` as an int >= 1; a runner that cannot reach a spawned child is refused here,
    before anything runs."""
    if isinstance(workers, bool) or int(workers) != workers or workers < 1:
        raise ValueError(f"workers must be an integer >= 1, got {workers!r}")
    if threads_per_worker is not None and (isinstance(threads_per_worker, bool)
                                           or int(threads_per_worker) != threads_per_worker or threads_per_worker < 1):
        raise ValueError(f"threads_per_worker must be None or an integer >= 1, got {threads_per_worker!r}")
    workers = int(workers)
    if workers > 1 and runner is not None:
        try:
            pickle.dumps(runner)
        except Exception as e:  # pickle raises PicklingError, AttributeError or TypeError, depending on the object
            raise TypeError(f"workers={workers} runs each cell in a spawned process, so the runner must be picklable "
                            f"(a module-level function, or a functools.partial of one); {runner!r} is not: "
                            f"{type(e).__name__}: {e}") from e
    return workers


@contextlib.contextmanager
def _worker_env(threads_per_worker: int | None) -> Iterator[None]:
    """The children's thread settings (``run_study``'s docstring), in this process's environment
    while the block runs: a spawned child inherits it from its start, before it imports jax."""
    if threads_per_worker is None:
        yield
        return
    updates = {name: str(int(threads_per_worker)) for name in _THREAD_VARS}
    if threads_per_worker == 1:
        flags = os.environ.get("XLA_FLAGS", "")
        updates["XLA_FLAGS"] = flags if SINGLE_THREAD_XLA in flags else f"{flags} {SINGLE_THREAD_XLA}".strip()
    saved = {name: os.environ.get(name) for name in updates}
    os.environ.update(updates)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


_PR_SET_PDEATHSIG = 1  # linux/prctl.h


def end_with_parent(parent_pid: int) -> bool:
    """Asks Linux to send this process SIGTERM when its parent ends (``prctl(PR_SET_PDEATHSIG)``), and
    ends it now if ``parent_pid`` is already gone: a study stopped by Ctrl-C, ``kill`` or a job
    scheduler leaves no cell computing on its cores. What the cell had checkpointed stays (a rerun
    resumes it). Returns whether the link is set (False off Linux or without prctl). The kernel
    signals on the exit of the parent *thread* that started the child: the pool's threads live as
    long as the study's pool does."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return False
    if prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0) != 0:
        return False
    if os.getppid() != parent_pid:  # the parent ended before the link was set
        os.kill(os.getpid(), signal.SIGTERM)
    return True


def _in_child(runner: Runner, config: ml_collections.ConfigDict, workdir: Path, kwargs: Mapping[str, Any],
              study_dir: Path, cpus: frozenset[int] | None = None, xla_cache: str | None = None,
              parent_pid: int | None = None) -> tuple[dict[str, Any], float]:
    """One prefix or cell in a spawned child: ``(the runner's report, its seconds)``. ``cpus``: the
    child keeps to these cores; set before its first JAX computation, so XLA sizes its CPU thread
    pool to them. ``xla_cache``: the study's persistent compilation cache (:mod:`cocoda_jax.runs.xla_cache`).
    ``parent_pid``: the study process; the child ends with it (:func:`end_with_parent`)."""
    if parent_pid is not None:
        end_with_parent(parent_pid)
    if cpus:
        os.sched_setaffinity(0, cpus)
    if xla_cache:
        xla_cache_lib.enable(xla_cache)
    from cocoda_jax.runs.logs import route_logs
    route_logs(study_dir)
    t0 = time.perf_counter()
    report = dict(runner(config, workdir, **kwargs))
    return report, time.perf_counter() - t0


def finished_report(study_config: ml_collections.ConfigDict, workdir: Path, arm: A.Arm, seed: int
                    ) -> dict[str, Any] | None:
    """The report of a cell that finished in an earlier invocation, or ``None``. A cell finished under
    another config (the study's config file or configs/default.py changed since) is a ConfigError naming
    the changed keys: reusing it would put two settings in one table."""
    from cocoda_jax import checkpoint as ckpt  # here: the study's own process stays light
    from cocoda_jax.runs import rundir

    cdir = cell_dir(workdir, arm.name, seed)
    if not (cdir / "report.json").exists():
        return None
    saved_path = cdir / rundir.RUN_CONFIG
    if saved_path.exists():
        current = ckpt.to_jsonable(A.cell_config(study_config.run, arm, seed).to_dict(), "config")
        changed = rundir.run_identity_changes(json.loads(saved_path.read_text()), current)
        if changed:
            raise ConfigError(f"{cdir} finished under another config than the study's now: " + "; ".join(changed)
                              + ". Use a fresh --workdir (or move the cell away to run it again)")
    return json.loads((cdir / "report.json").read_text())


def _run_parallel(study_config: ml_collections.ConfigDict, workdir: Path, cells: Sequence[tuple[A.Arm, int]],
                  runner: Runner, log: Callable[[str], None], workers: int, threads_per_worker: int | None,
                  times: dict[str, float], reports: dict[tuple[str, int], Mapping[str, Any]],
                  pin_cores: bool = False, xla_cache: str | None = None) -> None:
    """``run_study``'s cells with ``workers`` > 1 (its docstring): fills ``times`` (and
    cell_times.json) and ``reports``; raises the first failure once nothing runs any more."""
    n = len(cells)
    times_path = workdir / "cell_times.json"
    todo: list[tuple[int, A.Arm, int]] = []
    for i, (arm, seed) in enumerate(cells, 1):
        report = finished_report(study_config, workdir, arm, seed)
        if report is not None:
            reports[(arm.name, seed)] = report
            log(f"[{i}/{n}] {arm.name}/seed_{seed}: done before (test_acc={report['test_accuracy']:.3f})")
        else:
            todo.append((i, arm, seed))
    groups = _prefix_groups(study_config.run, workdir, cells)
    group_of = {f"{arm.name}/seed_{seed}": g for g, (seed, members, _) in enumerate(groups) for arm in members}
    # the heaviest cells first (Arm.weight; stable, so the arms' order among equals): a long cell started
    # last would run alone at the end while the other workers idle
    pending_prefixes, pending_cells = list(range(len(groups))), sorted(todo, key=lambda c: -c[1].weight)
    copied: set[int] = set()
    prefix_s: dict[str, float] = {}
    running: dict[futures.Future, tuple[str, Any]] = {}
    left, failure = len(todo), None
    # each running child's cores (pin_cores), handed back when it ends
    free_slots: list[frozenset[int] | None] = (core_slots(os.sched_getaffinity(0), workers) if pin_cores
                                               else [None] * workers)
    slot_of: dict[futures.Future, frozenset[int] | None] = {}

    def submit(pool: futures.ProcessPoolExecutor) -> bool:
        if pending_prefixes:
            g = pending_prefixes.pop(0)
            seed, members, pdir = groups[g]
            log(f"seed {seed}: stages 1-2 once for {'+'.join(a.name for a in members)} ...")
            config = A.cell_config(study_config.run, members[0], seed)
            cpus = free_slots.pop(0)
            fut = pool.submit(_in_child, runner, config, pdir, {"stop_after_round": 0}, workdir, cpus, xla_cache,
                              os.getpid())
            running[fut], slot_of[fut] = ("prefix", g), cpus
            return True
        for k, (i, arm, seed) in enumerate(pending_cells):
            key = f"{arm.name}/seed_{seed}"
            if key in group_of and group_of[key] not in copied:
                continue  # its prefix is still running
            del pending_cells[k]
            cdir = cell_dir(workdir, arm.name, seed)
            kwargs = {"allow_config_change": True} if _from_prefix(cdir) else {}
            log(f"[{i}/{n}] {key}: running ...")
            config = A.cell_config(study_config.run, arm, seed)
            cpus = free_slots.pop(0)
            fut = pool.submit(_in_child, runner, config, cdir, kwargs, workdir, cpus, xla_cache, os.getpid())
            running[fut], slot_of[fut] = ("cell", (i, arm, seed)), cpus
            return True
        return False

    context = multiprocessing.get_context("spawn")
    with _worker_env(threads_per_worker), \
            futures.ProcessPoolExecutor(max_workers=workers, mp_context=context, max_tasks_per_child=1) as pool:
        while True:
            while failure is None and len(running) < workers and submit(pool):
                pass
            if not running:
                break
            done, _ = futures.wait(running, return_when=futures.FIRST_COMPLETED)
            order = list(running)  # submission order
            for fut in sorted(done, key=order.index):
                kind, what = running.pop(fut)
                free_slots.append(slot_of.pop(fut))
                try:
                    report, seconds = fut.result()
                except BaseException as e:  # the others still finish; the first failure is raised at the end
                    name = (f"seed {groups[what][0]}: stages 1-2 for {'+'.join(a.name for a in groups[what][1])}"
                            if kind == "prefix" else f"[{what[0]}/{n}] {what[1].name}/seed_{what[2]}")
                    log(f"{name}: failed ({type(e).__name__}: {e}); "
                        + ("waiting for the running cells" if running else "stopping"))
                    if failure is None:
                        failure = e
                    continue
                if kind == "prefix":
                    seed, members, pdir = groups[what]
                    prefix_s.update(_copy_prefix(workdir, seed, members, pdir, seconds))
                    copied.add(what)
                    log(f"seed {seed}: stages 1-2 for {'+'.join(a.name for a in members)} done in {_fmt_s(seconds)}")
                    continue
                i, arm, seed = what
                key = f"{arm.name}/seed_{seed}"
                reports[(arm.name, seed)] = report
                times[key] = seconds + prefix_s.get(key, 0.0)
                _write_json(times_path, times)
                left -= 1
                weights_left = ([a.weight for _, a, _ in pending_cells]
                                + [w[1].weight for k, w in running.values() if k == "cell"])
                eta = eta_s(_weighted(times), weights_left, workers)
                log(f"[{i}/{n}] {key}: test_acc={report['test_accuracy']:.3f} in {_fmt_s(times[key])}; {left} cell(s) "
                    f"left, ETA {_fmt_s(eta)} (cells priced by arm weight, {workers} workers)")
    if failure is not None:
        raise failure
    if pending_cells:  # only a failed prefix leaves cells behind, and that failure is raised above
        raise RuntimeError(f"cells not run: {[f'{a.name}/seed_{s}' for _, a, s in pending_cells]}")


def _cells(study_config: ml_collections.ConfigDict, arms: Sequence[str] | None, seeds: Sequence[int] | None
           ) -> tuple[tuple[A.Arm, ...], list[int], dict[str, tuple[A.Arm, ...]], list[tuple[A.Arm, int]]]:
    """The study's arms (as selected), seeds, each available arm's streams and the (cell arm, seed)
    cells in the order they run: stream-major, the first stream of every arm first, so a study stopped
    early is a whole one-stream study."""
    selected = A.select(list(arms) if arms else list(study_config.arms))
    seeds = [int(s) for s in (seeds if seeds else study_config.seeds)]
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"seeds repeat: {seeds}")
    runnable = [a for a in selected if a.available]
    counts = A.stream_counts(study_config.get("streams", 1), study_config.get("arm_streams", ""),
                             [a.name for a in runnable])
    stream_arms = {a.name: A.streams(a, counts[a.name], study_config.run) for a in runnable}
    n_streams = max((len(arms_of) for arms_of in stream_arms.values()), default=1)
    cells = [(arms_of[r], s) for r in range(n_streams) for arms_of in stream_arms.values() if r < len(arms_of)
             for s in seeds]
    return selected, seeds, stream_arms, cells


def plan_study(study_config: ml_collections.ConfigDict, workdir: str | Path, *, arms: Sequence[str] | None = None,
               seeds: Sequence[int] | None = None, workers: int = 1) -> dict[str, Any]:
    """What :func:`run_study` would do in ``workdir`` now, without doing any of it (nothing is run,
    copied or written): each cell in the order it runs with its ``state``, ``finished`` (its report is
    read back; one finished under another config is the ConfigError the run would raise), ``resumes``
    (from its own checkpoints), ``from_prefix`` (a copy of a shared prefix: its stage 3 is left) or
    ``new``; how many are left, and their ETA at ``workers`` from the seconds the finished cells took
    (``cell_times.json``, priced by arm weight; None before any cell has finished). A study of hours
    on a shared machine is then sized before it starts. Cells that another study holds (``--gather``)
    or that a finished prefix could start are counted as ``new``."""
    workdir = Path(workdir)
    _, _, _, cells = _cells(study_config, arms, seeds)
    out = []
    for arm, seed in cells:
        cdir = cell_dir(workdir, arm.name, seed)
        if finished_report(study_config, workdir, arm, seed) is not None:
            state = "finished"
        elif _from_prefix(cdir):
            state = "from_prefix"
        elif _started(cdir):
            state = "resumes"
        else:
            state = "new"
        out.append({"cell": f"{arm.name}/seed_{seed}", "state": state, "weight": arm.weight})
    left = [c["weight"] for c in out if c["state"] != "finished"]
    done = _weighted(_read_json(workdir / "cell_times.json", {}))
    priced = any(w > 0 for _, w in done)  # eta_s needs a finished cell to price the rest by
    eta = eta_s(done, left, workers) if priced or not left else None
    return {"cells": out, "left": len(left), "eta_s": eta, "workers": int(workers)}


def run_study(study_config: ml_collections.ConfigDict, workdir: str | Path, *, arms: Sequence[str] | None = None,
              seeds: Sequence[int] | None = None, runner: Runner | None = None, depth_fn: DepthFn | None = None,
              log: Callable[[str], None] = print, workers: int = 1,
              threads_per_worker: int | None = None, pin_cores: bool = False,
              xla_cache: str | Path | None = None, gather_from: Sequence[str | Path] = ()) -> dict[str, Any]:
    """Runs (or reads back) every cell, writes ``study.json``, ``study.md`` and ``plots/`` under
    ``workdir`` and returns study.json's dict. ``arms``/``seeds`` default to the config's;
    ``runner``/``depth_fn`` default to coevolve.run / :func:`task_depths` (tests pass fakes).

    ``workers``: how many cells run at a time. 1 (the default): every prefix and cell in this
    process, in order. N > 1: the shared prefixes first, then the cells (a cell as soon as its
    prefix, if any, is copied), up to N at a time, each in its own *spawned* process (one process
    per cell); ``runner`` must then be picklable, i.e. a module-level function (the default is),
    else a TypeError before anything runs. The reports come back to this process, which alone
    writes ``cell_times.json`` (a cell's seconds: its own run in its process plus its prefix
    share) and logs. A cell that raises: no cell is started after it, the running ones finish (their
    reports are kept, so a rerun resumes), then its exception is raised here. The children send
    their log records to ``workdir/logs/run.log`` (as ``launch/study.py`` does for this process).

    ``threads_per_worker`` (only with N > 1; None: the environment is left alone): each child
    starts with ``OMP_NUM_THREADS``, ``MKL_NUM_THREADS`` and ``OPENBLAS_NUM_THREADS`` set to it and,
    when it is 1, ``--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1`` added to
    ``XLA_FLAGS`` (XLA's CPU backend has no flag for a thread count above 1, so N > 1 leaves XLA at
    its default). These are set in this process's environment while the children are started (a
    child may import jax before any code of ours runs in it) and restored after.

    ``pin_cores`` (only with N > 1): the cores this process may use are split into N disjoint sets
    (:func:`core_slots`) and each child keeps to one (``os.sched_setaffinity``), so N cells never
    share a core and XLA sizes each child's thread pool to its own cores; fewer cores than N is a
    ValueError before anything runs.

    ``xla_cache``: a directory for a persistent XLA compilation cache shared by the cells (and this
    process with one worker): a program compiled by one cell is loaded by the next instead of compiled
    again (:mod:`cocoda_jax.runs.xla_cache`); None compiles in every process.

    ``gather_from``: other study directories whose finished cells this study lacks are copied in
    first, each only if it ran under the config this study gives it (:mod:`cocoda_jax.study.gather`),
    with its seconds; the cells still missing then run as usual."""
    t_start = time.perf_counter()
    workers = _check_workers(workers, threads_per_worker, runner)
    if pin_cores and workers > 1:
        core_slots(os.sched_getaffinity(0), workers)  # enough cores, checked before anything runs
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    xla_cache = str(Path(xla_cache).expanduser().resolve()) if xla_cache else None
    runner = runner or _coevolve_runner
    depth_fn = depth_fn or task_depths
    selected, seeds, stream_arms, cells = _cells(study_config, arms, seeds)
    runnable = [a for a in selected if a.available]
    for a in selected:
        if not a.available:
            log(f"arm {a.name}: unavailable ({a.reason})")
    if gather_from:
        gather_lib.gather(study_config, workdir, cells, gather_from, log)
    _reuse_finished_prefixes(study_config, workdir, cells, log)

    times_path = workdir / "cell_times.json"
    times: dict[str, float] = _read_json(times_path, {})
    reports: dict[tuple[str, int], Mapping[str, Any]] = {}
    if workers > 1:
        _run_parallel(study_config, workdir, cells, runner, log, workers, threads_per_worker, times, reports,
                      pin_cores=pin_cores, xla_cache=xla_cache)
    else:
        if xla_cache:
            xla_cache_lib.enable(xla_cache)
        if threads_per_worker is not None or pin_cores:
            log("threads_per_worker and pin_cores apply with workers > 1 only (one worker runs the cells in this "
                "process)")
        prefix_s = _share_prefixes(study_config, workdir, cells, runner, log)
        for i, (arm, seed) in enumerate(cells, 1):
            key = f"{arm.name}/seed_{seed}"
            cdir = cell_dir(workdir, arm.name, seed)
            report = finished_report(study_config, workdir, arm, seed)
            if report is not None:
                reports[(arm.name, seed)] = report
                log(f"[{i}/{len(cells)}] {key}: done before (test_acc={report['test_accuracy']:.3f})")
                continue
            config = A.cell_config(study_config.run, arm, seed)
            log(f"[{i}/{len(cells)}] {key}: running ...")
            t0 = time.perf_counter()
            # a copy of the shared prefix (now or in an earlier invocation), saved under the first arm's config
            if key in prefix_s or _from_prefix(cdir):
                reports[(arm.name, seed)] = dict(runner(config, cdir, allow_config_change=True))
            else:
                reports[(arm.name, seed)] = dict(runner(config, cdir))
            times[key] = time.perf_counter() - t0 + prefix_s.get(key, 0.0)
            _write_json(times_path, times)
            weights_left = [a.weight for a, s in cells[i:]
                            if not (cell_dir(workdir, a.name, s) / "report.json").exists()]
            log(f"[{i}/{len(cells)}] {key}: test_acc={reports[(arm.name, seed)]['test_accuracy']:.3f} in "
                f"{_fmt_s(times[key])}; {len(weights_left)} cell(s) left, "
                f"ETA {_fmt_s(eta_s(_weighted(times), weights_left))} (cells priced by arm weight)")

    depths: dict[int, Mapping[str, int]] = {}
    for seed in seeds:
        try:
            depths[seed] = depth_fn(A.cell_config(study_config.run, A.get(REFERENCE), seed))
        except Exception as e:  # depths are a breakdown, not the result: say so and go on
            log(f"seed {seed}: no task depths ({type(e).__name__}: {e})")
            depths[seed] = {}

    structures: dict[int, Mapping[str, str]] = {}
    for seed in seeds:
        try:
            structures[seed] = task_structures(A.cell_config(study_config.run, A.get(REFERENCE), seed))
        except Exception as e:  # a breakdown, like the depths
            log(f"seed {seed}: no task structures ({type(e).__name__}: {e})")
            structures[seed] = {}

    study = summarize(selected, seeds, reports, depths, structures=structures,
                      streams={name: [a.name for a in arms_of] for name, arms_of in stream_arms.items()},
                      compare=A.comparisons(study_config.get("compare", ""), list(stream_arms)),
                      n_test=int(study_config.run.domain.n_test),
                      wall_s=float(sum(times.get(f"{a.name}/seed_{s}", 0.0) for a, s in cells)),
                      b=int(study_config.get("bootstrap", stats.DEFAULT_B)),
                      boot_seed=int(study_config.get("bootstrap_seed", 0)))
    _write_json(workdir / "study.json", study)
    curves = {a.name: [list(reports[(a.name, s)].get("per_round") or []) for s in seeds] for a in runnable}
    table.write_all(study, workdir, curves)
    log(f"wrote {workdir / 'study.json'}, {workdir / 'study.md'} and {workdir / 'plots'}")
    # wall_s is the cells' time (a core each, across invocations); the budget is this, the clock
    log(f"this invocation: {_fmt_s(time.perf_counter() - t_start)} elapsed with {workers} worker(s); "
        f"the cells' time: {_fmt_s(study['wall_s'])}")
    return study


def _outcomes(reports: Mapping[tuple[str, int], Mapping[str, Any]], names: Sequence[str], seed: int
              ) -> dict[str, float]:
    """One arm's test outcome per task at ``seed``: its one cell's 0/1, or the mean over its streams'
    cells (``names``), which must have scored the same tasks."""
    per = [{str(k): int(v) for k, v in reports[(n, seed)]["test_outcomes"].items()} for n in names]
    if len(per) == 1:
        return per[0]
    for n, p in zip(names[1:], per[1:]):
        if set(p) != set(per[0]):
            raise ValueError(f"seed {seed}: {n} scored other test tasks than {names[0]}; its streams cannot be averaged")
    return {t: float(np.mean([p[t] for p in per])) for t in sorted(per[0])}


def _stream_figures(reports: Mapping[tuple[str, int], Mapping[str, Any]], names: Sequence[str], seeds: Sequence[int]
                    ) -> dict[str, Any]:
    """``per_stream``: each stream's accuracy per seed; ``stream_sd``: per seed, the standard deviation
    of the streams' accuracies (what one run's chance moves the arm by)."""
    acc = np.array([[np.mean([int(v) for v in reports[(n, s)]["test_outcomes"].values()]) for s in seeds]
                    for n in names], dtype=np.float64)
    return {"per_stream": acc.tolist(), "stream_sd": acc.std(axis=0, ddof=1).tolist()}


def summarize(selected: Sequence[A.Arm], seeds: Sequence[int], reports: Mapping[tuple[str, int], Mapping[str, Any]],
              depths: Mapping[int, Mapping[str, int]], *, n_test: int, wall_s: float, b: int = stats.DEFAULT_B,
              boot_seed: int = 0, structures: Mapping[int, Mapping[str, str]] | None = None,
              streams: Mapping[str, Sequence[str]] | None = None,
              compare: Mapping[str, Sequence[str]] | None = None) -> dict[str, Any]:
    """study.json's dict from the cells' reports (pure: no file is read). ``structures``: seed -> test
    task id -> ``seen``/``unseen`` (their accuracy and paired deltas are added when any task has one).
    ``streams``: arm -> the names of its cells at a seed (:func:`~cocoda_jax.study.arms.streams`; default:
    the arm alone); with more than one, a task's outcome is the mean over them, every interval is taken
    over those means, and the arm's entry adds ``per_stream`` and ``stream_sd``. An arm whose cells have
    round records adds ``rounds`` (:func:`cocoda_jax.study.rounds.summary`: what its rounds did).
    ``compare``: arm -> other arms (:func:`~cocoda_jax.study.arms.comparisons`); the arm's entry adds
    ``vs`` = {other: the paired delta, its bootstrap interval and the seeds-as-units interval}.
    ``float_paths``: each float path the cells' reports say they ran on (:func:`cocoda_jax.runs.numerics.float_path`)
    -> the cells on it; more than one means some pairs also compare machines (their stages 1-2 differ)."""
    streams = streams or {}
    names_of = {a.name: list(streams.get(a.name) or [a.name]) for a in selected if a.available}
    outcomes = {name: {s: _outcomes(reports, names, s) for s in seeds} for name, names in names_of.items()}
    sizes = {len(o) for per in outcomes.values() for o in per.values()}
    if len(sizes) == 1:
        n_test = sizes.pop()
    out_arms: dict[str, Any] = {}
    for a in selected:
        if not a.available:
            out_arms[a.name] = {"test_acc": None, "ci95": None, "per_seed": None, "per_depth": None,
                                "delta_vs_cocoda": None, "delta_ci95": None, "available": False, "reason": a.reason}
            continue
        acc = stats.accuracy_ci(outcomes[a.name], seeds, b=b, seed=boot_seed)
        entry: dict[str, Any] = {"test_acc": acc.point, "ci95": acc.ci, "per_seed": list(acc.per_seed),
                                 "per_depth": stats.per_depth(outcomes[a.name], depths),
                                 "delta_vs_cocoda": None, "delta_ci95": None, "delta_seed_t95": None,
                                 "per_depth_delta": None, "available": True, "streams": len(names_of[a.name])}
        if len(names_of[a.name]) > 1:
            entry.update(_stream_figures(reports, names_of[a.name], seeds))
        did = rounds_lib.summary(reports, names_of[a.name], seeds)
        if did is not None:
            entry["rounds"] = did
        if REFERENCE in outcomes:
            delta = stats.paired_delta(outcomes[a.name], outcomes[REFERENCE], seeds, b=b, seed=boot_seed)
            entry["delta_vs_cocoda"], entry["delta_ci95"] = delta.point, delta.ci
            entry["delta_seed_t95"] = stats.seed_t_interval(delta.per_seed)
            entry["per_depth_delta"] = stats.per_depth_delta(outcomes[a.name], outcomes[REFERENCE], depths, seeds,
                                                             b=b, seed=boot_seed)
        if BASELINE in outcomes and a.name != BASELINE:  # the goal of the rounds is stated against it
            base = stats.paired_delta(outcomes[a.name], outcomes[BASELINE], seeds, b=b, seed=boot_seed)
            entry["vs_sft_only"] = {"delta": base.point, "ci95": base.ci,
                                    "seed_t95": stats.seed_t_interval(base.per_seed)}
        versus = {}
        for other in (compare or {}).get(a.name, ()):
            d = stats.paired_delta(outcomes[a.name], outcomes[other], seeds, b=b, seed=boot_seed)
            versus[other] = {"delta": d.point, "ci95": d.ci, "seed_t95": stats.seed_t_interval(d.per_seed)}
        if versus:
            entry["vs"] = versus
        if structures and stats.per_group(outcomes[a.name], structures):
            entry["per_structure"] = stats.per_group(outcomes[a.name], structures)
            if REFERENCE in outcomes:
                entry["per_structure_delta"] = stats.per_group_delta(outcomes[a.name], outcomes[REFERENCE],
                                                                     structures, seeds, b=b, seed=boot_seed)
        out_arms[a.name] = entry
    n_streams = max((len(v) for v in names_of.values()), default=1)
    float_paths: dict[str, list[str]] = {}
    for cell in sorted({(n, s) for names in names_of.values() for n in names for s in seeds}):
        path = numerics_lib.float_path(reports[cell].get("numerics"))
        float_paths.setdefault(path, []).append(f"{cell[0]}/seed_{cell[1]}")
    return {"seeds": list(seeds), "n_test": int(n_test), "streams": n_streams, "arms": out_arms,
            "wall_s": float(wall_s), "float_paths": float_paths}


__all__ = ["REFERENCE", "cell_dir", "core_slots", "end_with_parent", "finished_report", "plan_study", "run_study", "summarize", "task_depths",
           "task_structures"]

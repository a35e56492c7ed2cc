"""Run one or many (task, algorithm, config, seed) through an executor, reusing stored runs.

``plan`` turns what the user asked for into :class:`RunSpec` s (validated up front, so bad input fails
before anything runs); ``execute`` runs one spec in whatever process it lands in and never raises (a
failure becomes a ``failed`` :class:`RunResult`); ``run_specs`` skips specs already stored as ``ok``
(unless ``force``), runs the rest serially or in a process pool, and has the driver -- only the driver --
write each result the moment it arrives.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import functools
import importlib
import math
import os
import re
import resource
import sys
import time
import traceback
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from iclrbench.core import catalog, interrupt
from iclrbench.core import config as cfg
from iclrbench.core.artifact import ArtifactBelowFloor, provenance_entry
from iclrbench.core.errors import UserError
from iclrbench.core.registry import did_you_mean
from iclrbench.core.result import RunResult, provenance, run_provenance
from iclrbench.core.seeding import rng_for
from iclrbench.core.store import ResultStore
from iclrbench.core.task import Task
from iclrbench.executors import ChunkFailure, Executor, child_context, make_executor

MAX_SEEDS = 10_000
#: seeds are stored as SQLite integers (signed 64-bit)
SEED_LIMIT = 2**63


@dataclasses.dataclass(frozen=True)
class RunSpec:
    """One run to do: everything needed to execute it in another process (plain data only)."""

    task: str
    task_version: int
    algorithm: str
    role: str
    config: Mapping[str, Any]
    params: Mapping[str, Any]
    seed: int
    budget: str

    @property
    def config_hash(self) -> str:
        return cfg.stable_hash(self.config)

    @property
    def params_hash(self) -> str:
        return cfg.stable_hash(self.params)

    @property
    def key(self) -> str:
        from iclrbench.core.result import run_key

        return run_key(
            self.task, self.task_version, self.config_hash, self.algorithm, self.params_hash, self.seed
        )

    def label(self) -> str:
        return f"{self.task} {self.algorithm} seed={self.seed}"


def parse_seeds(text: str) -> list[int]:
    """``0-4`` -> [0..4]; ``0,3,7`` -> [0, 3, 7]; ``0-2,9`` -> [0, 1, 2, 9]. At most :data:`MAX_SEEDS`
    seeds in all (counted before any list is built), each below :data:`SEED_LIMIT`."""
    short = text if len(text) <= 60 else text[:57] + "..."
    ranges: list[tuple[int, int]] = []
    for part in text.split(","):
        match = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", part)
        if match is None or (match[2] is not None and int(match[2]) < int(match[1])):
            raise UserError(f"--seeds '{short}': expected e.g. 0-4 or 0,3,7 (non-negative integers)")
        low, high = int(match[1]), int(match[2] or match[1])
        if high >= SEED_LIMIT:
            raise UserError(
                f"--seeds '{short}': a seed must be below 2^63 (the store's integers); got {high}"
            )
        ranges.append((low, high))
        if sum(h - lo + 1 for lo, h in ranges) > MAX_SEEDS:
            raise UserError(f"--seeds '{short}': more than {MAX_SEEDS} seeds in all")
    seeds = [s for low, high in ranges for s in range(low, high + 1)]
    if not seeds:
        raise UserError(f"--seeds '{short}': no seeds")
    return list(dict.fromkeys(seeds))


def parse_sets(items: Iterable[str]) -> dict[str, str]:
    """``["d=8", "horizon=1e5"]`` -> {"d": "8", "horizon": "1e5"}; values are typed later, per key."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise UserError(f"--set '{item}': expected KEY=VALUE")
        out[key.strip()] = value.strip()
    return out


def split_sets(
    task_id: str, algorithms: Sequence[str], sets: Mapping[str, str]
) -> tuple[dict[str, str], dict[str, dict[str, str]]]:
    """Route each ``--set`` to the task config, or to the algorithm(s) whose params have that key.

    ``ALGO.key=value`` targets one algorithm. A key no target knows is an error with a suggestion.
    """
    task = catalog.get_task(task_id)
    config_keys = [f.name for f in dataclasses.fields(task.Config)]
    per_algo: dict[str, dict[str, str]] = {a: {} for a in algorithms}
    config: dict[str, str] = {}
    for key, value in sets.items():
        if "." in key and key.partition(".")[0] not in config_keys:
            algo, _, name = key.partition(".")
            catalog.get_algorithm(task_id, algo)
            if algo not in per_algo:
                raise UserError(
                    f"--set {key}: {algo} is not among the algorithms of this run "
                    f"({', '.join(algorithms) or 'none'}); add it or drop the setting"
                )
            per_algo[algo][name] = value
            continue
        if key in config_keys:
            config[key] = value
            continue
        owners = [
            a
            for a in algorithms
            if key in {f.name for f in dataclasses.fields(catalog.get_algorithm(task_id, a).Params)}
        ]
        if not owners:
            known = config_keys + sorted(
                {
                    f.name
                    for a in algorithms
                    for f in dataclasses.fields(catalog.get_algorithm(task_id, a).Params)
                }
            )
            raise UserError(
                f"--set {key}: not a config key of {task_id} nor a parameter of the chosen "
                f"algorithms{did_you_mean(key, known)}"
            )
        for a in owners:
            per_algo[a][key] = value
    return config, per_algo


def plan(
    task_id: str,
    algorithms: Sequence[str],
    seeds: Sequence[int],
    budget: str = "small",
    sets: Mapping[str, str] | None = None,
    *,
    skip_unsupported: bool = False,
    on_skip: Callable[[str, str], None] | None = None,
) -> list[RunSpec]:
    """Validated run specs: the task's budget config with ``sets`` applied, per algorithm and seed."""
    task = catalog.get_task(task_id)
    for a in algorithms:
        catalog.get_algorithm(task_id, a)
    config_sets, algo_sets = split_sets(task_id, algorithms, sets or {})
    config = task.make_config(budget, config_sets)
    specs = []
    for name in algorithms:
        algo = catalog.get_algorithm(task_id, name)
        reason = algo.supports(config)
        if reason is not None:
            if skip_unsupported:
                if on_skip is not None:
                    on_skip(name, reason)
                continue
            raise UserError(f"{name} cannot run on this config of {task_id}: {reason}")
        params = cfg.build(algo.Params, algo_sets[name], what=f"{name} parameter")
        clash = algo.incompatible(params, config)
        if clash is not None:
            raise UserError(f"{name} cannot run with these parameters on {task_id}: {clash}")
        for seed in seeds:
            specs.append(
                RunSpec(
                    task.id,
                    task.version,
                    name,
                    algo.role,
                    cfg.as_dict(config),
                    cfg.as_dict(params),
                    int(seed),
                    budget,
                )
            )
    return specs


def _blank_result(spec: RunSpec) -> RunResult:
    return RunResult(
        task=spec.task,
        task_version=spec.task_version,
        config=dict(spec.config),
        config_hash=spec.config_hash,
        algorithm=spec.algorithm,
        role=spec.role,
        params=dict(spec.params),
        params_hash=spec.params_hash,
        seed=spec.seed,
        budget=spec.budget,
        status="ok",
        provenance=dict(provenance()),
    )


def _peak_mem_mb() -> float:
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss / (1024 * 1024) if sys.platform == "darwin" else rss / 1024


def _stamp(results: Sequence[RunResult], wall: float, cpu: float) -> None:
    now = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    gpu = run_provenance().get("accelerator")  # after the run: its code has imported torch if it uses it
    for r in results:
        if gpu is not None:
            r.provenance["accelerator"] = gpu
        r.wall_s, r.cpu_s = wall / len(results), cpu / len(results)
        r.peak_mem_mb = _peak_mem_mb()
        r.created_at = now
        r.provenance["batch"] = len(results)


def execute(spec: RunSpec) -> RunResult:
    """Run one spec here and now. Never raises for a failing algorithm: the error is in the result."""
    return execute_batch([spec])[0]


def _import_requirements(task_id: str) -> None:
    """Import the task's declared heavy packages (``Task.requires.modules``: torch, botorch, ...) before
    the clock starts, so the first run in a process does not pay the process's import start-up in its
    ``seconds`` or ``wall_s`` (nearly a second for torch). A failure is left to the run to report."""
    with contextlib.suppress(Exception):
        for module in catalog.get_task(task_id).requires.modules:
            importlib.import_module(module)


def execute_batch(specs: Sequence[RunSpec]) -> list[RunResult]:
    """Run specs that differ only in their seed, as one ``Task.evaluate_many`` call.

    If the batch fails, each spec is retried alone so that the failure is pinned to its seed. For a
    batch, ``wall_s`` and ``cpu_s`` are the batch's divided by its runs. Never raises for a failing run.
    """
    _import_requirements(specs[0].task)
    wall0, cpu0 = time.perf_counter(), time.process_time()
    results = [_blank_result(s) for s in specs]
    first = specs[0]
    try:
        task = catalog.get_task(first.task)
        algo_cls = catalog.get_algorithm(first.task, first.algorithm)
        config = cfg.build(task.Config, first.config)
        params = cfg.build(algo_cls.Params, first.params)
        algorithms = [algo_cls(params, config, rng_for(s.seed, s.task, s.algorithm)) for s in specs]
        outcomes = task.evaluate_many(algorithms, config, [s.seed for s in specs])
        for result, outcome in zip(results, outcomes, strict=True):
            result.metrics = {k: float(v) for k, v in outcome.metrics.items()}
            result.curves = {k: dataclasses.asdict(c) for k, c in outcome.curves.items()}
            result.notes = outcome.notes
            if outcome.artifacts:
                result.provenance["artifacts"] = provenance_entry(outcome.artifacts)
            bad = [k for k, v in result.metrics.items() if not math.isfinite(v)]
            if bad:  # a NaN regret is not a result: it would poison every mean it enters
                result.status = "failed"
                result.error = "NonFiniteMetric: " + ", ".join(f"{k}={result.metrics[k]}" for k in bad)
    except KeyboardInterrupt:
        raise
    except Exception as exc:  # a failed run is data, not a crash of the sweep
        if len(specs) > 1:
            return [r for s in specs for r in execute_batch([s])]
        results[0].status = "failed"
        results[0].error = f"{type(exc).__name__}: {exc}"
        if isinstance(exc, ArtifactBelowFloor):  # the figures that failed it, kept with the failure
            results[0].provenance["artifacts"] = provenance_entry([exc.quality])
        results[0].notes = traceback.format_exc(limit=8)
    _stamp(results, time.perf_counter() - wall0, time.process_time() - cpu0)
    return results


def prepare(specs: Sequence[RunSpec], on_prepare: Callable[[str], None] | None = None) -> None:
    """:meth:`Task.prepare` once per distinct (task, config) of ``specs``, so that workers share what it
    builds (through the task's cache) instead of all building it at once. Errors are left to the runs,
    which meet them again and store them as their failures."""
    seen: set[tuple[str, str]] = set()
    for spec in specs:
        if (spec.task, spec.config_hash) in seen:
            continue
        seen.add((spec.task, spec.config_hash))
        try:
            task = catalog.get_task(spec.task)
            if type(task).prepare is Task.prepare:
                continue  # nothing to prepare, nothing to announce
            if on_prepare:
                on_prepare(spec.task)
            task.prepare(cfg.build(task.Config, spec.config))
        except Exception:  # an optimisation only: the runs meet the error again and report it
            continue


def batches(specs: Sequence[RunSpec], jobs: int = 1) -> list[list[RunSpec]]:
    """Group specs that differ only in seed, in chunks of the task's ``batch_size`` -- smaller when
    needed so that ``jobs`` workers all get work."""
    groups: dict[tuple[str, int, str, str, str], list[RunSpec]] = {}
    for s in specs:
        groups.setdefault((s.task, s.task_version, s.config_hash, s.algorithm, s.params_hash), []).append(s)
    out = []
    per_group = max(1, -(-len(specs) // max(jobs, 1)) if jobs > 1 else len(specs))
    for group in groups.values():
        first = group[0]
        task = catalog.get_task(first.task)
        size = max(1, min(task.batch_size(cfg.build(task.Config, first.config)), per_group))
        out += [group[i : i + size] for i in range(0, len(group), size)]
    return out


def execute_chunk(specs: Sequence[RunSpec], timeout: float | None = None) -> list[RunResult]:
    """The worker entry point of every executor: :func:`execute_batch`, here, or -- with a ``timeout``
    in seconds per run -- in a child process that is killed when it overruns, so that a run stuck in C
    code is stopped too. An overrunning batch is retried seed by seed to pin the slow run."""
    if timeout is None:
        return execute_batch(specs)
    results = _in_child(specs, timeout * len(specs))
    if results is not None:
        return results
    if len(specs) > 1:
        return [r for s in specs for r in execute_chunk([s], timeout)]
    return [failed_result(specs[0], f"TimeoutError: exceeded --timeout {timeout:g} s", wall=timeout)]


#: the most a --timeout child may spend importing its task's modules before its clock starts
IMPORT_LIMIT_S = 600.0


def _child(conn: Any, specs: Sequence[RunSpec], path: list[str], requester: int) -> None:
    from iclrbench.executors import die_with_parent

    die_with_parent(watch=requester)
    try:
        sys.path[:] = path  # the parent's (a plugin on a path added at run time)
        # import the task's and algorithm's modules first and say so: the time limit starts after
        with contextlib.suppress(Exception):  # an unknown name: the run reports it as its failure
            catalog.get_algorithm(specs[0].task, specs[0].algorithm)
        conn.send("ready")
        conn.send(execute_batch(specs))
    except (KeyboardInterrupt, BrokenPipeError):
        # Ctrl-C reaches the whole process group: the driver reports it and keeps every finished run; a
        # child's own traceback (or its pipe to a driver already gone) would only bury that one line
        os._exit(130)
    finally:
        with contextlib.suppress(OSError):
            conn.close()


def _in_child(specs: Sequence[RunSpec], limit: float) -> list[RunResult] | None:
    """Results of a child process, None if it ran past ``limit`` seconds (then it is killed). The limit
    counts from the moment the child has imported what the run needs. Our own child's results come
    back through a pipe (pickle between our processes, never from a file)."""
    ctx = child_context()
    receive, send = ctx.Pipe(duplex=False)
    child = ctx.Process(target=_child, args=(send, specs, list(sys.path), os.getpid()), daemon=False)
    child.start()
    send.close()
    try:
        if not receive.poll(IMPORT_LIMIT_S) or receive.recv() != "ready":
            return [failed_result(s, "WorkerDied: the run's modules did not import") for s in specs]
        if not receive.poll(limit):
            return None
        return receive.recv()  # type: ignore[no-any-return]
    except EOFError:  # died without an answer: segfault, out of memory, killed
        child.join()
        return [failed_result(s, f"WorkerDied: exit code {child.exitcode}") for s in specs]
    finally:
        if child.is_alive():
            child.kill()
        child.join()
        receive.close()


def failed_result(spec: RunSpec, error: str, wall: float = 0.0) -> RunResult:
    """A failed run recorded without its evaluation having returned (timeout, dead worker)."""
    result = _blank_result(spec)
    result.status, result.error = "failed", error
    _stamp([result], wall, 0.0)
    return result


def _config_of(spec: RunSpec) -> tuple[str, str]:
    return spec.task, spec.config_hash


def _weights(chunks: Sequence[Sequence[RunSpec]]) -> dict[tuple[str, str], int]:
    """Process slots one run of each (task, config) occupies: ``Task.resources(config).processes``.
    Asking is cheap (no data is built); a task that cannot answer weighs 1 and reports its error when
    it runs."""
    out: dict[tuple[str, str], int] = {}
    for chunk in chunks:
        key = _config_of(chunk[0])
        if key in out:
            continue
        try:
            task = catalog.get_task(chunk[0].task)
            out[key] = task.resources(cfg.build(task.Config, chunk[0].config)).processes
        except Exception:
            out[key] = 1
    return out


def _store(store: ResultStore, result: RunResult) -> None:
    """Store ``result``, except a failure over a finished run: a ``--force`` redo that fails (a timeout
    too short, a crash) must never delete the good result, so the ok row stays and the failure says so."""
    if result.status != "ok":
        stored = store.get(result.key)
        if stored is not None and stored.status == "ok":
            result.error = f"{result.error} (not stored: the finished run {stored.run_id} is kept)"
            return
    store.put(result)


@dataclasses.dataclass
class SweepReport:
    results: list[RunResult]
    reused: int = 0
    ran: int = 0
    failed: int = 0


def run_specs(
    specs: Sequence[RunSpec],
    store: ResultStore,
    *,
    force: bool = False,
    jobs: int = 1,
    executor: str | Executor | None = None,
    scheduler: str | None = None,
    timeout: float | None = None,
    retries: int = 0,
    on_result: Callable[[RunResult, bool], None] | None = None,
    on_prepare: Callable[[str], None] | None = None,
) -> SweepReport:
    """Reuse stored ``ok`` runs (unless ``force``), run the others, store each as it finishes.

    ``executor`` is a name (``serial`` / ``process`` / ``dask``; by default serial for one job, a
    process pool for more) or an :class:`~iclrbench.executors.Executor` the caller manages. A failed
    run -- an exception, a ``timeout`` overrun, a dead worker -- is stored with its error at once and
    retried up to ``retries`` more times; a later success replaces it. ``on_result(result, reused)`` is
    called once per spec with its final result, in completion order (progress bars, printing).
    Before any run, :meth:`Task.prepare` builds each distinct config's shared data here, in the driver
    (``on_prepare(task_id)`` announces it). A KeyboardInterrupt stops the sweep; every run stored before
    it stays stored.
    """
    if timeout is not None and timeout <= 0:
        raise UserError("--timeout must be a positive number of seconds")
    if retries < 0:
        raise UserError("--retries must be 0 or more")
    report = SweepReport(results=[])
    for task_id in dict.fromkeys(spec.task for spec in specs):
        for old, new in catalog.get_task(task_id).renamed_algorithms.items():
            store.rename_algorithm(task_id, old, new)
    todo: list[RunSpec] = []
    for spec in specs:
        stored = None if force else store.get(spec.key)
        if stored is not None and stored.status == "ok":
            report.results.append(stored)
            report.reused += 1
            if on_result:
                on_result(stored, True)
        else:
            todo.append(spec)
    if not todo:
        return report
    prepare(todo, on_prepare)
    chunks = batches(todo, jobs)
    if executor is None and scheduler is None and len(chunks) <= 1 and retries == 0:
        executor = "serial"  # one chunk: a pool would only add its start-up
    weight = _weights(chunks)
    owned = not isinstance(executor, Executor)
    pool = (
        make_executor(executor, jobs, scheduler, max(weight.values(), default=1))  # type: ignore[arg-type]
        if owned
        else executor
    )
    work = functools.partial(execute_chunk, timeout=timeout)
    try:
        for attempt in range(1, retries + 2):
            again: list[list[RunSpec]] = []
            weights = [weight[_config_of(c[0])] for c in chunks]
            for chunk, outcome in pool.map(work, chunks, weights):
                results = (
                    [failed_result(s, f"ExecutorError: {outcome.error}") for s in chunk]
                    if isinstance(outcome, ChunkFailure)
                    else outcome
                )
                for spec, result in zip(chunk, results, strict=True):
                    result.provenance["attempt"] = attempt
                    result.provenance["executor"] = pool.name
                    _store(store, result)
                    if result.status != "ok" and attempt <= retries:
                        again.append([spec])
                        continue
                    report.results.append(result)
                    report.ran += 1
                    report.failed += result.status != "ok"
                    if on_result:
                        on_result(result, False)
                interrupt.check()
            if not again:
                break
            chunks = again
    finally:
        if owned:
            pool.close()
    return report

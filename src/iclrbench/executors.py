"""Where runs execute. Every executor takes chunks of run specs and a picklable worker function, and
yields each chunk's results in completion order; the driver alone writes them to the store.

- ``serial``: here, one chunk after another.
- ``process``: a local pool with ``jobs`` process slots (``-j N``).
- ``dask``: dask.distributed -- a LocalCluster on 127.0.0.1 with ``jobs`` process slots in all, or an
  existing cluster given by ``--scheduler tcp://HOST:PORT`` (whose workers need iclrbench installed;
  dask-jobqueue starts such workers on SLURM / PBS).

Every chunk has a weight: the processes one of its runs occupies (``Task.resources(config).processes``;
a run of distributed training with 4 workers weighs 4). The process pool never runs chunks whose weights
add up to more than ``jobs`` at once (a chunk heavier than ``jobs`` runs alone); dask receives the weight
as the worker resource ``processes``, which its workers declare (``dask worker --resources
processes=N``; the LocalCluster does it itself).

Pool workers die with their driver: on Linux they ask the kernel for SIGKILL when their parent dies
(``PR_SET_PDEATHSIG``), elsewhere a watchdog thread polls the parent's pid. Closing a pool after an
interrupt kills its workers instead of waiting for their runs to end.

A chunk whose worker dies or cannot be reached does not stop the sweep: its runs come back ``failed`` with
the executor's error, like any other failure.
"""

from __future__ import annotations

import abc
import ctypes
import dataclasses
import logging
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Any, TypeVar

from iclrbench.core.errors import UserError
from iclrbench.core.registry import did_you_mean

Chunk = TypeVar("Chunk")
# The resource tracker (a process of its own) unlinks the semaphores a killed driver's pool leaves and
# warns that it did. kill -9 of a sweep is a supported way to stop one (nothing stored is lost), so the
# tracker, which takes its warning options from this interpreter's, starts with that warning off.
_TRACKER_QUIET = "ignore:resource_tracker:UserWarning"
if _TRACKER_QUIET not in sys.warnoptions:
    sys.warnoptions.append(_TRACKER_QUIET)

EXECUTORS = ("serial", "process", "dask")


@dataclasses.dataclass
class ChunkFailure:
    """A chunk the executor could not run (worker died, cluster gone): its error, to record per run."""

    error: str


def usable_cores() -> int:
    """The cores this process may run on: its CPU affinity (``taskset``, a cgroup's cpuset), not every
    core of the machine."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):  # no affinity API (macOS)
        return os.cpu_count() or 1


def max_jobs() -> int:
    """The most ``-j`` a local executor accepts: a few processes per usable core. More only thrashes: two
    runs on 10,000 processes once drove the load average to 488."""
    return 4 * usable_cores()


def _alive(pid: int) -> bool:
    """Whether ``pid`` still runs. A zombie does not: a driver killed with -9 whose parent has not reaped
    it yet (a script that started it and now waits to read its output) still answers signal 0, and its
    workers, watching for it, would run on and hold that output open forever."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else (a reused pid): treat as gone
        return False
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            state = fh.read().rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):  # no /proc (macOS): signal 0 is all there is
        return True
    return state not in (b"Z", b"X")


def die_with_parent(watch: int | None = None) -> None:
    """Make this process exit when the process that started it dies (``kill -9`` of the driver).

    Linux: ``prctl(PR_SET_PDEATHSIG, SIGKILL)``; then, and on other systems, a daemon thread that polls
    every second (the kernel signal fires when the creating *thread* exits, so the poll also covers a
    parent that was already gone before the call). ``watch`` names another process to outlive no
    longer than: a ``--timeout`` child's parent is a forkserver, which itself lives as long as that
    child does, so the child watches the process that asked for it instead."""
    parent = os.getppid()
    if sys.platform.startswith("linux") and watch is None:
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, int(signal.SIGKILL), 0, 0, 0)  # 1 = PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass

    def gone() -> bool:
        return not _alive(watch) if watch is not None else os.getppid() != parent

    def poll() -> None:
        while not gone():
            time.sleep(1.0)
        os._exit(1)

    threading.Thread(target=poll, name="iclrbench-parent-watchdog", daemon=True).start()


class Executor(abc.ABC):
    name: str = ""

    @abc.abstractmethod
    def map(
        self,
        fn: Callable[[Chunk], Any],
        chunks: Sequence[Chunk],
        weights: Sequence[int] | None = None,
    ) -> Iterator[tuple[Chunk, Any]]:
        """Yield (chunk, fn(chunk)) -- or (chunk, ChunkFailure) -- as chunks complete. ``weights[i]`` is
        the number of process slots chunk ``i`` occupies while it runs (default 1 each)."""

    def close(self) -> None:  # noqa: B027  (nothing to release by default)
        """Release workers; called on success and on interruption alike."""

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class SerialExecutor(Executor):
    name = "serial"

    def map(
        self,
        fn: Callable[[Chunk], Any],
        chunks: Sequence[Chunk],
        weights: Sequence[int] | None = None,
    ) -> Iterator[tuple[Chunk, Any]]:
        for chunk in chunks:
            yield chunk, fn(chunk)


def child_context() -> Any:
    """A start method safe for threaded and accelerator code: ``forkserver`` (children fork from a
    clean single-threaded server that has iclrbench's core imported), ``spawn`` where it is missing.
    A bare ``fork`` of a process running threads (BLAS, torch, CUDA, dask) can deadlock the child."""
    if "forkserver" in multiprocessing.get_all_start_methods():
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(["iclrbench.runner"])
        return ctx
    return multiprocessing.get_context("spawn")


class ProcessExecutor(Executor):
    """A local process pool with ``jobs`` slots; one pool serves every wave of a sweep (retries too).

    Chunks are submitted only while their weights fit in the free slots, so ``-j 4`` runs four
    single-process runs at once, or one run of four processes, never more."""

    name = "process"

    def __init__(self, jobs: int) -> None:
        self.jobs = jobs
        self._pool: ProcessPoolExecutor | None = None

    def map(
        self,
        fn: Callable[[Chunk], Any],
        chunks: Sequence[Chunk],
        weights: Sequence[int] | None = None,
    ) -> Iterator[tuple[Chunk, Any]]:
        # a chunk heavier than the whole pool still runs, alone
        sizes = [min(max(1, w), self.jobs) for w in (weights or [1] * len(chunks))]
        queue = list(range(len(chunks)))
        running: dict[Future[Any], int] = {}
        free = self.jobs
        while queue or running:
            # submit in order while the next chunk fits: first come, first served (no starvation)
            while queue and sizes[queue[0]] <= free:
                i = queue[0]
                try:
                    future = self._live_pool().submit(fn, chunks[i])
                except BrokenProcessPool:  # a worker died since the last submit: a fresh pool
                    self._discard_pool()
                    continue
                queue.pop(0)
                running[future] = i
                free -= sizes[i]
            done, _ = wait(set(running), return_when=FIRST_COMPLETED)
            for fut in done:
                i = running.pop(fut)
                free += sizes[i]
                try:
                    yield chunks[i], fut.result()
                except Exception as exc:  # BrokenProcessPool: a worker was killed
                    yield chunks[i], ChunkFailure(f"{type(exc).__name__}: {exc}")

    def _live_pool(self) -> ProcessPoolExecutor:
        if self._pool is None:
            # never a bare fork: a driver that has run OpenMP code (a task's prepare() fitting
            # scikit-learn's gradient boosting) leaves forked workers deadlocked in their first OpenMP loop
            # a worker's parent is then the forkserver: it watches this driver instead (kill -9 of it)
            self._pool = ProcessPoolExecutor(
                max_workers=self.jobs,
                initializer=die_with_parent,
                initargs=(os.getpid(),),
                mp_context=child_context(),
            )
        return self._pool

    def _discard_pool(self) -> None:
        """Drop a broken pool (its runs in hand have failed already); the next submit starts afresh."""
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None

    def close(self) -> None:
        if self._pool is None:
            return
        pool, self._pool = self._pool, None
        # after Ctrl-C nothing new begins, and the runs in hand are abandoned at once: kill the workers
        # rather than wait minutes for them (finished runs are already stored). On a normal end no
        # worker is busy and this only releases them.
        workers = list(getattr(pool, "_processes", {}).values())
        pool.shutdown(wait=False, cancel_futures=True)
        for worker in workers:
            if worker.is_alive():
                worker.kill()
        for worker in workers:
            worker.join(timeout=5)


class DaskExecutor(Executor):
    """dask.distributed. Results travel back to the driver; workers never open the store."""

    name = "dask"

    def __init__(self, jobs: int, scheduler: str | None = None, heaviest: int = 1) -> None:
        try:
            import dask
            from distributed import Client, LocalCluster
        except ImportError:
            raise UserError(
                "--executor dask needs dask.distributed: pip install 'iclrbench[cluster]'"
            ) from None
        self._cluster = None
        self.jobs = jobs
        # worker processes may start a child per run to enforce --timeout; daemonic ones may not
        dask.config.set({"distributed.worker.daemon": False})
        try:
            if scheduler:
                self._client = Client(scheduler, timeout="10s")
            else:
                # dask's resources are per worker: with workers of `heaviest` slots each and at most
                # `jobs` slots in all, the sweep's heaviest run fits in a worker and no mix of runs
                # exceeds -j (light runs then use fewer than -j processes: never more)
                slots = max(1, heaviest)
                self._cluster = LocalCluster(
                    n_workers=max(1, jobs // slots),
                    threads_per_worker=1,
                    processes=True,
                    host="127.0.0.1",
                    dashboard_address=None,
                    resources={"processes": slots},
                    # a run's own errors come back in its result; what is left in the workers' logs is
                    # shutdown chatter (heartbeats to a scheduler that has just closed)
                    silence_logs=logging.CRITICAL,
                )
                self._client = Client(self._cluster)
        except (OSError, TimeoutError) as exc:
            if self._cluster is not None:
                self._cluster.close()
            raise UserError(
                f"--scheduler {scheduler or 'local'}: cannot reach the dask scheduler ({exc})"
            ) from None

    @property
    def address(self) -> str:
        return str(self._client.scheduler.address)

    def _largest_worker_slots(self) -> int | None:
        """The most ``processes`` any worker declares; None when no worker declares the resource."""
        workers = self._client.scheduler_info().get("workers", {}).values()
        declared = [w.get("resources", {}).get("processes") for w in workers]
        declared = [int(d) for d in declared if d]
        return max(declared) if declared else None

    def map(
        self,
        fn: Callable[[Chunk], Any],
        chunks: Sequence[Chunk],
        weights: Sequence[int] | None = None,
    ) -> Iterator[tuple[Chunk, Any]]:
        from distributed import as_completed

        weights = list(weights or [1] * len(chunks))
        largest = self._largest_worker_slots()
        if largest is None:  # an external cluster whose workers declare no slots: nothing to honour
            options: list[dict[str, Any]] = [{} for _ in chunks]
        else:
            # a run heavier than every worker would wait forever: it takes a whole worker instead
            options = [{"resources": {"processes": min(max(1, w), largest)}} for w in weights]
        futures = {
            self._client.submit(fn, c, pure=False, **opt): c for c, opt in zip(chunks, options, strict=True)
        }
        for fut in as_completed(list(futures)):
            try:
                yield futures[fut], fut.result()
            except Exception as exc:  # KilledWorker, CommClosedError, ...
                yield futures[fut], ChunkFailure(f"{type(exc).__name__}: {exc}")

    def close(self) -> None:
        self._client.close()
        if self._cluster is not None:
            self._cluster.close()


def check_jobs(jobs: int, scheduler: str | None = None, executor: str | None = None) -> None:
    """Refuse a ``-j`` below 1, or above what the cores this process may use can run (a cluster may take
    more), and a ``--scheduler`` with an executor other than dask: before any store is opened."""
    if jobs < 1:
        raise UserError("--jobs must be at least 1")
    if jobs > max_jobs() and not scheduler:
        raise UserError(
            f"--jobs {jobs}: more than {max_jobs()} (4 per core this process may use: {usable_cores()}) "
            "only thrashes; use a cluster (--scheduler) for more"
        )
    if scheduler and executor not in (None, "dask"):
        raise UserError(f"--scheduler needs --executor dask (got --executor {executor})")


def make_executor(
    name: str | None, jobs: int = 1, scheduler: str | None = None, heaviest: int = 1
) -> Executor:
    """By name; None picks ``serial`` for one job, ``process`` for more, ``dask`` given a scheduler.
    ``heaviest`` is the largest weight (process slots) among the chunks to come, for dask's workers."""
    check_jobs(jobs, scheduler)
    if name is None:
        name = "dask" if scheduler else ("process" if jobs > 1 else "serial")
    if scheduler and name != "dask":
        raise UserError(f"--scheduler needs --executor dask (got --executor {name})")
    if name == "serial":
        return SerialExecutor()
    if name == "process":
        return ProcessExecutor(jobs)
    if name == "dask":
        return DaskExecutor(jobs, scheduler, heaviest)
    raise UserError(f"unknown executor '{name}'{did_you_mean(name, list(EXECUTORS))}")

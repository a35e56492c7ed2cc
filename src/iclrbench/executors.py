"""Where runs execute. Every executor takes chunks of run specs and a picklable worker function, and
yields each chunk's results in completion order; the driver alone writes them to the store.

- ``serial``: here, one chunk after another.
- ``process``: a local pool of ``jobs`` worker processes (``-j N``).
- ``dask``: dask.distributed -- a LocalCluster of ``jobs`` single-threaded worker processes on 127.0.0.1,
  or an existing cluster given by ``--scheduler tcp://HOST:PORT`` (whose workers need iclrbench
  installed; dask-jobqueue starts such workers on SLURM / PBS).

A chunk whose worker dies or cannot be reached does not stop the sweep: its runs come back ``failed`` with
the executor's error, like any other failure.
"""

from __future__ import annotations

import abc
import dataclasses
import logging
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from typing import Any, TypeVar

from iclrbench.core.errors import UserError
from iclrbench.core.registry import did_you_mean

Chunk = TypeVar("Chunk")
EXECUTORS = ("serial", "process", "dask")


@dataclasses.dataclass
class ChunkFailure:
    """A chunk the executor could not run (worker died, cluster gone): its error, to record per run."""

    error: str


class Executor(abc.ABC):
    name: str = ""

    @abc.abstractmethod
    def map(self, fn: Callable[[Chunk], Any], chunks: Sequence[Chunk]) -> Iterator[tuple[Chunk, Any]]:
        """Yield (chunk, fn(chunk)) -- or (chunk, ChunkFailure) -- as chunks complete."""

    def close(self) -> None:  # noqa: B027  (nothing to release by default)
        """Release workers; called on success and on interruption alike."""

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class SerialExecutor(Executor):
    name = "serial"

    def map(self, fn: Callable[[Chunk], Any], chunks: Sequence[Chunk]) -> Iterator[tuple[Chunk, Any]]:
        for chunk in chunks:
            yield chunk, fn(chunk)


class ProcessExecutor(Executor):
    """A local process pool; one pool serves every wave of a sweep (retries included)."""

    name = "process"

    def __init__(self, jobs: int) -> None:
        self.jobs = jobs
        self._pool: ProcessPoolExecutor | None = None

    def map(self, fn: Callable[[Chunk], Any], chunks: Sequence[Chunk]) -> Iterator[tuple[Chunk, Any]]:
        if self._pool is None:
            self._pool = ProcessPoolExecutor(max_workers=self.jobs)
        futures: dict[Future[Any], Chunk] = {self._pool.submit(fn, c): c for c in chunks}
        pending = set(futures)
        while pending:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            for fut in done:
                try:
                    yield futures[fut], fut.result()
                except Exception as exc:  # BrokenProcessPool: a worker was killed
                    yield futures[fut], ChunkFailure(f"{type(exc).__name__}: {exc}")

    def close(self) -> None:
        if self._pool is not None:
            # cancel what has not started: after Ctrl-C nothing new begins; finished runs are stored
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None


class DaskExecutor(Executor):
    """dask.distributed. Results travel back to the driver; workers never open the store."""

    name = "dask"

    def __init__(self, jobs: int, scheduler: str | None = None) -> None:
        try:
            import dask
            from distributed import Client, LocalCluster
        except ImportError:
            raise UserError(
                "--executor dask needs dask.distributed: pip install 'iclrbench[cluster]'"
            ) from None
        self._cluster = None
        # worker processes may fork a child per run to enforce --timeout; daemonic ones may not
        dask.config.set({"distributed.worker.daemon": False})
        try:
            if scheduler:
                self._client = Client(scheduler, timeout="10s")
            else:
                self._cluster = LocalCluster(
                    n_workers=jobs,
                    threads_per_worker=1,
                    processes=True,
                    host="127.0.0.1",
                    dashboard_address=None,
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

    def map(self, fn: Callable[[Chunk], Any], chunks: Sequence[Chunk]) -> Iterator[tuple[Chunk, Any]]:
        from distributed import as_completed

        futures = {self._client.submit(fn, c, pure=False): c for c in chunks}
        for fut in as_completed(list(futures)):
            try:
                yield futures[fut], fut.result()
            except Exception as exc:  # KilledWorker, CommClosedError, ...
                yield futures[fut], ChunkFailure(f"{type(exc).__name__}: {exc}")

    def close(self) -> None:
        self._client.close()
        if self._cluster is not None:
            self._cluster.close()


def make_executor(name: str | None, jobs: int = 1, scheduler: str | None = None) -> Executor:
    """By name; None picks ``serial`` for one job, ``process`` for more, ``dask`` given a scheduler."""
    if jobs < 1:
        raise UserError("--jobs must be at least 1")
    if name is None:
        name = "dask" if scheduler else ("process" if jobs > 1 else "serial")
    if scheduler and name != "dask":
        raise UserError(f"--scheduler needs --executor dask (got --executor {name})")
    if name == "serial":
        return SerialExecutor()
    if name == "process":
        return ProcessExecutor(jobs)
    if name == "dask":
        return DaskExecutor(jobs, scheduler)
    raise UserError(f"unknown executor '{name}'{did_you_mean(name, list(EXECUTORS))}")

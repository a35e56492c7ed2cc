"""Doubles for tests: :class:`RunResult` s built without running anything (for judges, aggregation, the
store and the page), with hashes consistent with their config and params."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from iclrbench.core import config as cfg
from iclrbench.core.result import RunResult


def fake_run(
    task: str = "t",
    algorithm: str = "a",
    seed: int = 0,
    metrics: Mapping[str, float] | None = None,
    *,
    role: str = "baseline",
    status: str = "ok",
    config: Mapping[str, Any] | None = None,
    params: Mapping[str, Any] | None = None,
    budget: str = "smoke",
    version: int = 1,
    curves: Mapping[str, Mapping[str, Any]] | None = None,
    **fields: Any,
) -> RunResult:
    """A :class:`RunResult` as the runner would store it, without running anything. ``config_hash`` and
    ``params_hash`` are those of ``config`` and ``params`` (so run keys behave as real ones); a failed
    run gets an error unless given; any other field (``wall_s``, ``provenance``, ``notes``, ...) through
    ``fields``. Each call copies its mappings, so a test may mutate one run without touching another."""
    config = dict(config or {})
    params = dict(params or {})
    values: dict[str, Any] = {
        "task": task,
        "task_version": version,
        "config": config,
        "config_hash": cfg.stable_hash(config),
        "algorithm": algorithm,
        "role": role,
        "params": params,
        "params_hash": cfg.stable_hash(params),
        "seed": seed,
        "budget": budget,
        "status": status,
        "error": "" if status == "ok" else "RuntimeError: fake failure",
        "metrics": {k: float(v) for k, v in (metrics or {}).items()},
        "curves": {k: dict(v) for k, v in (curves or {}).items()},
        "created_at": "2026-01-01T00:00:00+00:00",
    }
    values.update(fields)
    return RunResult(**values)


def fake_runs(
    task: str = "t",
    algorithm: str = "a",
    seeds: Iterable[int] = (0, 1),
    metrics: Mapping[str, float] | None = None,
    **kwargs: Any,
) -> list[RunResult]:
    """One :func:`fake_run` per seed, all with the same metrics and keyword arguments."""
    return [fake_run(task, algorithm, seed, metrics, **kwargs) for seed in seeds]

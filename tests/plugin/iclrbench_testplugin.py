"""A third-party plugin, as the tests install it (a dist-info with entry points on ``sys.path``): a task
whose evaluation costs only what its config asks for (nothing, sleep, CPU work), and algorithms --
one that fails on its first attempt per seed, one named like an HTML injection."""

from __future__ import annotations

import dataclasses
import html
import os
import time
from pathlib import Path

from iclrbench.core.algorithm import Algorithm, register_algorithm
from iclrbench.core.config import param
from iclrbench.core.task import Budget, Metric, Outcome, Paper, Resources, Task

HOSTILE = "<img src=x onerror=alert(1)>"
# the hostile name is only a test of escaping if it contains markup that escaping changes
assert html.escape(HOSTILE) != HOSTILE


@dataclasses.dataclass(frozen=True)
class NoopConfig:
    sleep: float = param(0.0, "seconds each run sleeps", low=0.0)
    work: int = param(0, "iterations of pure-Python CPU work per run", low=0)
    fail: bool = param(False, "every run raises")
    processes: int = param(1, "process slots a run declares it occupies (Task.resources)", low=1)


class NoopTask(Task):
    id = "noop"
    version = 1
    paper = Paper(title="No-op", authors="The tests", arxiv="0000.00000")
    summary = "Costs nothing unless asked: runner overhead, timeouts, faults."
    Config = NoopConfig
    budgets = {  # noqa: RUF012
        "smoke": Budget("smoke", {}, "nothing"),
        "small": Budget("small", {}, "nothing"),
        "paper": Budget("paper", {}, "nothing"),
    }
    metrics = (Metric("score", True, "", "the algorithm's score"), Metric("busy", True))
    algorithm_modules = ("iclrbench_testplugin",)

    def resources(self, config: NoopConfig) -> Resources:
        return Resources(processes=config.processes)

    def evaluate(self, algorithm: Algorithm, config: NoopConfig, seed: int) -> Outcome:
        if config.fail:
            raise RuntimeError("asked to fail")
        if config.sleep:
            time.sleep(config.sleep)
        busy = 0
        for i in range(config.work):
            busy = (busy + i * i) % 1_000_003
        return Outcome(metrics={"score": algorithm.score(seed), "busy": float(busy)})


class _Scored(Algorithm):
    def score(self, seed: int) -> float:
        return float(self.rng.random())


@register_algorithm(task="noop", name="constant", role="reference")
class Constant(_Scored):
    """Scores 1."""

    def score(self, seed: int) -> float:
        return 1.0


@register_algorithm(task="noop", name="uniform", role="baseline")
class Uniform(_Scored):
    """Scores a uniform draw."""


@register_algorithm(task="noop", name=HOSTILE, role="baseline")
class Hostile(_Scored):
    """<script>alert('summary')</script>"""


@register_algorithm(task="noop", name="flaky", role="baseline")
class Flaky(_Scored):
    """Fails on its first attempt per seed (a marker file in $FLAKY_DIR), then scores 0.5."""

    def score(self, seed: int) -> float:
        marker = Path(os.environ["FLAKY_DIR"]) / f"seed-{seed}"
        if not marker.exists():
            marker.touch()
            raise OSError("transient failure")
        return 0.5

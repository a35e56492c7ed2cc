"""The task contract: what a paper becomes in the suite (docs/architecture.md, "The contract").

A :class:`Task` names its paper, its frozen-dataclass ``Config``, its budgets, its metrics (the first is
primary), its claims, and implements ``evaluate(algorithm, config, seed) -> Outcome``.
"""

from __future__ import annotations

import abc
import dataclasses
import importlib.util
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from iclrbench.core import config as cfg
from iclrbench.core.artifact import ArtifactQuality
from iclrbench.core.errors import UserError
from iclrbench.core.registry import did_you_mean

if TYPE_CHECKING:
    from iclrbench.core.algorithm import Algorithm
    from iclrbench.core.result import RunResult

BUDGETS = ("smoke", "small", "paper")
Verdict = Literal["reproduced", "not_reproduced", "inconclusive"]


@dataclasses.dataclass(frozen=True)
class Paper:
    title: str
    authors: str
    arxiv: str
    venue: str = "ICLR 2025"


@dataclasses.dataclass(frozen=True)
class Metric:
    """A reported number. ``higher_is_better`` orients ranks; the task's first metric is primary.
    ``measured`` marks a measurement of the machine (latency, throughput, resident memory, energy) that
    differs between two runs of the same seed by nature; wall-time metrics (unit ``s``) are so too."""

    name: str
    higher_is_better: bool
    unit: str = ""
    description: str = ""
    measured: bool = False


@dataclasses.dataclass(frozen=True)
class Budget:
    """A named scale: config overrides on top of the defaults, and what it costs, in words (``cost``) and,
    where measured on 2 cores, in wall minutes:

    - ``claims_minutes``: ``bench claims TASK --budget NAME -j 2`` from an empty store;
      ``tests/test_claims_small.py`` leaves a task whose claims take longer than the suite can afford to
      ``bench claims`` (or to ``ICLRBENCH_LONG_CLAIMS=1``);
    - ``check_minutes``: ``check_task(TASK, NAME)``, the contract check; ``tests/test_contract.py`` marks a
      task's check ``long`` when it takes over a minute (``make test`` leaves it to CI, which sets
      ``ICLRBENCH_LONG_TESTS=1``).

    ``claim_seeds`` are the seeds a claim's runs take at this budget (:meth:`Task.claim_seeds`): a claim is
    judged on intervals over seeds, so how many it gets is part of what the budget costs.
    """

    name: str
    overrides: Mapping[str, Any]
    cost: str
    claims_minutes: float | None = None
    check_minutes: float | None = None
    claim_seeds: tuple[int, ...] = (0, 1, 2, 3, 4)


@dataclasses.dataclass(frozen=True)
class Requirement:
    """What a task needs beyond the core: the pip extra that installs it and the modules it imports.

    ``missing()`` looks the modules up without importing them (``bench list`` stays fast).
    """

    extra: str = ""
    modules: tuple[str, ...] = ()
    #: the install line when a plain ``pip install 'iclrbench[extra]'`` is not it (a build flag)
    hint: str = ""

    def missing(self) -> list[str]:
        """The required top-level modules that cannot be found in this environment."""
        out = []
        for name in self.modules:
            try:
                found = importlib.util.find_spec(name) is not None
            except (ImportError, ValueError):
                found = False
            if not found:
                out.append(name)
        return out

    @property
    def install_hint(self) -> str:
        """The one line that installs what is missing."""
        if self.hint:
            return self.hint
        return f"pip install 'iclrbench[{self.extra}]'" if self.extra else "pip install iclrbench"


@dataclasses.dataclass(frozen=True)
class Resources:
    """What one run of a config occupies. ``processes`` counts CPU slots: ``-j N`` never runs more than N
    at once, and dask receives them as the worker resource ``processes``. ``memory_gb`` is an estimate of
    the peak (informative); ``accelerator`` is e.g. ``"cuda"`` when a run needs one."""

    processes: int = 1
    memory_gb: float | None = None
    accelerator: str | None = None

    def __post_init__(self) -> None:
        if self.processes < 1:
            raise ValueError(f"a run needs at least one process, not {self.processes}")


@dataclasses.dataclass
class Curve:
    """A curve over a shared x grid (e.g. regret over rounds t); one per run, aggregated over seeds."""

    x: list[float]
    y: list[float]
    x_label: str = "t"
    y_label: str = ""


@dataclasses.dataclass
class Outcome:
    """What ``Task.evaluate`` returns for one (algorithm, config, seed)."""

    metrics: dict[str, float]
    curves: dict[str, Curve] = dataclasses.field(default_factory=dict)
    notes: str = ""
    #: the trained models the run's figures rest on, with their quality (stored in the run's provenance and
    #: shown beside every verdict judged on the run; :mod:`iclrbench.core.artifact`)
    artifacts: tuple[ArtifactQuality, ...] = ()


@dataclasses.dataclass(frozen=True)
class RunRequest:
    """Runs a claim needs: one algorithm at config overrides (on top of the budget's), over seeds."""

    algorithm: str
    overrides: Mapping[str, Any]
    seeds: tuple[int, ...]


#: the version of the core decision rule (:mod:`iclrbench.core.decision`) verdicts are judged by. 1: Student-t
#: everywhere; 2: a one-sample quantity whose values are all positive also holds the log-normal mean's
#: generalized interval (skewed metrics: Student-t alone called a mean on its bound below it 16-18% of the
#: time on log-normal(0, 1) data)
DECISION_RULE = 2


@dataclasses.dataclass(frozen=True)
class ClaimResult:
    """One verdict as stored: which claim (and which version of its rule), judged at which budget, on
    runs of which task version and base config (the budget's config, before the claim's overrides)."""

    task: str
    id: str
    statement: str
    verdict: Verdict
    measured: dict[str, Any]
    budget: str
    task_version: int = 0
    config_hash: str = ""
    claim_version: int = 1


@dataclasses.dataclass(frozen=True)
class Claim:
    """A checkable statement from the paper.

    ``requests(budget)`` lists the runs it needs; ``judge(groups)`` receives, per request (same order),
    the list of finished :class:`RunResult` and returns the verdict and the measured figures.
    """

    id: str
    statement: str
    requests: Callable[[str], Sequence[RunRequest]]
    judge: Callable[[list[list[RunResult]]], tuple[Verdict, dict[str, Any]]]
    #: bump when the claim's judge changes, so that verdicts of the old judge are told apart (a change of
    #: the core decision rule is :data:`DECISION_RULE`, which every claim's stored version carries)
    version: int = 1
    #: the budget the claim is defined at; verdicts from other budgets are shown as "not checked"
    budget: str = "small"
    #: the verdict this suite measured at ``budget`` on 2 CPU cores, reproduced or not (the task's docs/tasks
    #: page section has the figures); ``tests/test_claims_small.py`` checks it from real runs. None where the
    #: claim's runs are too long for the test suite (then ``bench claims`` is the check)
    expected: Verdict | None = None

    @property
    def stored_version(self) -> int:
        """The version stored with a verdict: the claim's ``version`` under the core decision rule
        :data:`DECISION_RULE`, as ``1000 * (rule - 1) + version`` (rule 1's verdicts, stored before rules
        had versions, carry ``version`` alone), so a new rule supersedes every verdict of the old one."""
        return 1000 * (DECISION_RULE - 1) + self.version


def ok_runs(runs: Sequence[RunResult]) -> list[RunResult]:
    """The successful runs: claim judges never average failures in."""
    return [r for r in runs if r.status == "ok"]


def runs_where(groups: Sequence[Sequence[RunResult]], algorithm: str, **config: Any) -> list[RunResult]:
    """The successful runs of ``algorithm``, from any of a claim's request groups, whose config has every
    ``key=value`` of ``config`` (e.g. ``layers="upper"``): how a judge picks its arms."""
    return [
        r
        for runs in groups
        for r in ok_runs(runs)
        if r.algorithm == algorithm and all(r.config.get(k) == v for k, v in config.items())
    ]


def mean_of_ok_runs(runs: Sequence[RunResult], metric: str) -> float:
    """The mean of ``metric`` over the successful runs among ``runs``: NaN where such a run lacks it, and
    NaN when none succeeded (failures are never averaged in)."""
    values = [float(r.metrics.get(metric, float("nan"))) for r in ok_runs(runs)]
    return sum(values) / len(values) if values else float("nan")


class Task(abc.ABC):
    """Base class of every task. Subclasses fill in the class attributes and ``evaluate``."""

    id: ClassVar[str]
    version: ClassVar[int]
    paper: ClassVar[Paper]
    summary: ClassVar[str]
    Config: ClassVar[type]
    budgets: ClassVar[Mapping[str, Budget]]
    metrics: ClassVar[tuple[Metric, ...]]
    claims: ClassVar[tuple[Claim, ...]] = ()
    protocol: ClassVar[str] = ""
    #: modules whose import registers this task's algorithms (explicit, not a side effect of the task's)
    algorithm_modules: ClassVar[tuple[str, ...]] = ()
    #: former name -> current name of each renamed algorithm: the runner renames stored runs (and their
    #: run keys) before looking for them, so a rename redoes no finished run
    renamed_algorithms: ClassVar[Mapping[str, str]] = {}
    #: the task's page (what it measures, how to run it, its verdicts): a path or URL; built-in tasks leave
    #: it empty and have docs/tasks/<stem>.md in the repository (see :meth:`docs_page`)
    docs: ClassVar[str] = ""
    #: config overrides that ``make demo`` runs, one leaderboard table each
    demo_settings: ClassVar[tuple[Mapping[str, Any], ...]] = ({},)
    #: the extra and modules the task needs; a task whose modules are missing is listed as unavailable
    requires: ClassVar[Requirement] = Requirement()
    #: gymnasium ids the task's environments register under -> "module:Class" (imported only on make())
    gym_envs: ClassVar[Mapping[str, str]] = {}

    @classmethod
    def docs_page(cls) -> str:
        """Where the task is documented: ``docs``, else a built-in task's ``docs/tasks/<stem>.md`` (its id
        with underscores), else nothing."""
        if cls.docs:
            return cls.docs
        if cls.__module__.split(".")[0] == "iclrbench":
            return f"docs/tasks/{cls.id.replace('-', '_')}.md"
        return ""

    @classmethod
    def unavailable(cls) -> str | None:
        """``None`` when the task can run here, else one line naming what is missing and its pip line."""
        missing = cls.requires.missing()
        if not missing:
            return None
        return f"{cls.id} needs {', '.join(missing)}: {cls.requires.install_hint}"

    def resources(self, config: Any) -> Resources:
        """What one run of ``config`` occupies (processes, memory, accelerator). Default: one process."""
        return Resources()

    @property
    def primary_metric(self) -> Metric:
        return self.metrics[0]

    def metrics_for(self, config: Any) -> tuple[Metric, ...]:
        """The metrics a run of ``config`` reports: all of :attr:`metrics` unless the task says some do
        not apply to this config (a regret without a known optimum, coverage that a budget skips).
        The primary metric always applies. The contract checker holds runs to exactly this set."""
        return self.metrics

    def metric(self, name: str) -> Metric:
        for m in self.metrics:
            if m.name == name:
                return m
        raise KeyError(name)

    @classmethod
    def budget(cls, name: str) -> Budget:
        """The budget called ``name``; a :class:`UserError` with a did-you-mean when there is none."""
        if name not in cls.budgets:
            raise UserError(f"unknown budget '{name}'{did_you_mean(name, list(cls.budgets))}")
        return cls.budgets[name]

    @classmethod
    def claim_seeds(cls, budget: str) -> tuple[int, ...]:
        """The seeds a claim's runs take at ``budget`` (that budget's ``claim_seeds``)."""
        return cls.budget(budget).claim_seeds

    def make_config(self, budget: str = "small", overrides: Mapping[str, Any] | None = None) -> Any:
        """The validated Config for a budget, with ``overrides`` (strings or values) applied on top."""
        merged = {**self.budget(budget).overrides, **(overrides or {})}
        return cfg.build(self.Config, merged, what=f"{self.id} config")

    def claim(self, claim_id: str) -> Claim:
        for c in self.claims:
            if c.id == claim_id:
                return c
        raise UserError(f"unknown claim '{claim_id}'{did_you_mean(claim_id, [c.id for c in self.claims])}")

    @abc.abstractmethod
    def evaluate(self, algorithm: Algorithm, config: Any, seed: int) -> Outcome:
        """Run ``algorithm`` on the task instance ``config`` drawn with ``seed``; return its metrics."""

    def evaluate_many(
        self, algorithms: Sequence[Algorithm], config: Any, seeds: Sequence[int]
    ) -> list[Outcome]:
        """Evaluate one (algorithm, params, config) on several seeds; ``algorithms[i]`` plays ``seeds[i]``.

        The default runs them one by one. A task whose algorithms can advance many seeds as one batched
        computation overrides this; it must return, seed by seed, exactly what ``evaluate`` returns.
        """
        return [self.evaluate(a, config, s) for a, s in zip(algorithms, seeds, strict=True)]

    def prepare(self, config: Any) -> None:
        """Build once what every run of ``config`` shares -- a data set, reference statistics -- before the
        runs are dispatched. The runner calls it in the driver, once per distinct config of a sweep, so
        that parallel workers read a cache instead of each building the same thing. It must be an
        optimisation only: a run still works (builds what it needs) when ``prepare`` was not called, and a
        failure here is left to the runs to report. The default prepares nothing."""
        return None

    def batch_size(self, config: Any) -> int:
        """How many seeds the runner may hand to ``evaluate_many`` at once (memory permitting)."""
        return 1

"""The task contract checker catches real defects, each under the check that owns it, and passes a good
task; ``evaluate_once`` runs as ``bench run`` would; the fake-run builder keeps its hashes consistent.

A tiny numpy task (estimate the mean of seeded normal draws) is registered with the catalog for one test
and removed after; each defect is a subclass that breaks one rule of the contract.
"""

from __future__ import annotations

import dataclasses
import itertools
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import gymnasium
import numpy as np
import pytest

from iclrbench import runner
from iclrbench.core import catalog
from iclrbench.core.algorithm import Algorithm, register_algorithm
from iclrbench.core.config import param, stable_hash
from iclrbench.core.errors import UserError
from iclrbench.core.result import RunResult
from iclrbench.core.seeding import rng_for
from iclrbench.core.task import (
    Budget,
    Claim,
    Curve,
    Metric,
    Outcome,
    Paper,
    Requirement,
    RunRequest,
    Task,
    Verdict,
    ok_runs,
)
from iclrbench.testing import (
    RunFailed,
    TaskContractError,
    check_claims,
    check_metadata,
    check_task,
    evaluate_once,
    fake_run,
    fake_runs,
)

GYM_ID = "iclrbench-test/ToyMean-v0"


@dataclasses.dataclass(frozen=True)
class ToyConfig:
    n: int = param(16, "draws per instance", low=1)
    mean: float = param(0.5, "the mean to estimate", low=-10.0, high=10.0)


@dataclasses.dataclass(frozen=True)
class ShrinkParams:
    shrink: float = param(0.0, "weight of the prior guess 0", low=0.0, high=1.0)


class Estimator(Algorithm):
    def estimate(self, draws: np.ndarray) -> float:
        raise NotImplementedError


class SampleMean(Estimator):
    """The sample mean, shrunk toward 0."""

    Params = ShrinkParams

    def estimate(self, draws: np.ndarray) -> float:
        return float((1 - self.params.shrink) * draws.mean())


class Zero(Estimator):
    """Always 0."""

    def estimate(self, draws: np.ndarray) -> float:
        return 0.0


def judge_mean_beats_zero(groups: list[list[RunResult]]) -> tuple[Verdict, dict[str, Any]]:
    mean, zero = (ok_runs(g) for g in groups)
    if not mean or not zero:
        return "inconclusive", {"reason": "no runs"}
    better = np.mean([r.metrics["error"] for r in mean]) < np.mean([r.metrics["error"] for r in zero])
    return ("reproduced" if better else "not_reproduced"), {}


def _requests(budget: str) -> list[RunRequest]:
    return [RunRequest("sample-mean", {"n": 32}, (0, 1)), RunRequest("zero", {"n": 32}, (0, 1))]


class ToyTask(Task):
    """A good task: every check passes, with a batched path and a gymnasium env to check too."""

    id = "toy-mean"
    version = 1
    paper = Paper(title="Toy", authors="The tests", arxiv="0000.00000")
    summary = "Estimate the mean of seeded normal draws."
    Config = ToyConfig
    budgets = {  # noqa: RUF012
        "smoke": Budget("smoke", {"n": 8}, "nothing"),
        "small": Budget("small", {"n": 64}, "nothing"),
        "paper": Budget("paper", {"n": 1024}, "nothing"),
    }
    metrics = (
        Metric("error", False, "", "absolute error of the estimate"),
        Metric("estimate", True),
        Metric("seconds", False, "s"),
    )
    claims = (Claim("mean-beats-zero", "The sample mean beats 0.", _requests, judge_mean_beats_zero),)
    gym_envs = {GYM_ID: f"{__name__}:ToyEnv"}  # noqa: RUF012

    def evaluate(self, algorithm: Algorithm, config: ToyConfig, seed: int) -> Outcome:
        assert isinstance(algorithm, Estimator)
        start = time.perf_counter()
        draws = rng_for(seed, self.id, "env").normal(config.mean, 1.0, config.n)
        estimate = algorithm.estimate(draws)
        running = np.cumsum(draws) / np.arange(1, config.n + 1)
        return Outcome(
            metrics={
                "error": abs(estimate - config.mean),
                "estimate": estimate,
                "seconds": time.perf_counter() - start,
            },
            curves={"running_mean": Curve(list(range(1, config.n + 1)), running.tolist(), "n", "mean")},
        )

    def evaluate_many(
        self, algorithms: Sequence[Algorithm], config: ToyConfig, seeds: Sequence[int]
    ) -> list[Outcome]:
        """A faithful batched path (one call per seed, the same numbers)."""
        return [self.evaluate(a, config, s) for a, s in zip(algorithms, seeds, strict=True)]

    def batch_size(self, config: ToyConfig) -> int:
        return 4


class ToyEnv(gymnasium.Env[np.ndarray, int]):
    """Guess whether the next draw is above 0; a well-behaved env."""

    observation_space = gymnasium.spaces.Box(-np.inf, np.inf, (1,), np.float64)
    action_space = gymnasium.spaces.Discrete(2)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        super().reset(seed=seed)
        return np.zeros(1), {}

    def step(self, action: int) -> Any:
        draw = self.np_random.normal(0.5, 1.0, 1)
        return draw, float((draw[0] > 0) == bool(action)), False, False, {}


class BrokenEnv(ToyEnv):
    """Returns an observation outside its observation space."""

    observation_space = gymnasium.spaces.Box(0.0, 1.0, (1,), np.float64)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        super().reset(seed=seed)
        return np.full(1, 5.0), {}


# ------------------------------------------------------------------------------------------- defects
class MissingMetric(ToyTask):
    id = "toy-missing-metric"

    def evaluate(self, algorithm: Algorithm, config: ToyConfig, seed: int) -> Outcome:
        outcome = super().evaluate(algorithm, config, seed)
        del outcome.metrics["estimate"]
        return outcome


class UndeclaredMetric(ToyTask):
    id = "toy-undeclared-metric"

    def evaluate(self, algorithm: Algorithm, config: ToyConfig, seed: int) -> Outcome:
        outcome = super().evaluate(algorithm, config, seed)
        outcome.metrics["bonus"] = 1.0
        return outcome


class NanMetric(ToyTask):
    id = "toy-nan-metric"

    def evaluate(self, algorithm: Algorithm, config: ToyConfig, seed: int) -> Outcome:
        outcome = super().evaluate(algorithm, config, seed)
        outcome.metrics["error"] = float("nan")
        return outcome


class RaggedCurve(ToyTask):
    id = "toy-ragged-curve"

    def evaluate(self, algorithm: Algorithm, config: ToyConfig, seed: int) -> Outcome:
        outcome = super().evaluate(algorithm, config, seed)
        outcome.curves["running_mean"].y.pop()
        return outcome


_calls = itertools.count()


class Nondeterministic(ToyTask):
    """Reads state outside the seed: a second run of the same seed differs."""

    id = "toy-nondeterministic"

    def evaluate(self, algorithm: Algorithm, config: ToyConfig, seed: int) -> Outcome:
        outcome = super().evaluate(algorithm, config, seed)
        outcome.metrics["estimate"] += next(_calls)
        return outcome

    def batch_size(self, config: ToyConfig) -> int:
        return 1  # no batched path, so that only check_determinism sees the defect


class BatchedDiffers(ToyTask):
    """The batched path plays every seed on the first seed's data."""

    id = "toy-batched-differs"

    def evaluate_many(
        self, algorithms: Sequence[Algorithm], config: ToyConfig, seeds: Sequence[int]
    ) -> list[Outcome]:
        return [self.evaluate(a, config, seeds[0]) for a in algorithms]


class BatchedCrashes(ToyTask):
    """The batched path raises on more than one seed (the runner then retries seed by seed)."""

    id = "toy-batched-crashes"

    def evaluate_many(
        self, algorithms: Sequence[Algorithm], config: ToyConfig, seeds: Sequence[int]
    ) -> list[Outcome]:
        if len(seeds) > 1:
            raise MemoryError("batch too large")
        return super().evaluate_many(algorithms, config, seeds)


class JudgeWithoutEvidence(ToyTask):
    id = "toy-judge-without-evidence"
    claims = (Claim("always", "Always reproduced.", _requests, lambda groups: ("reproduced", {})),)


class ClaimUnknownAlgorithm(ToyTask):
    id = "toy-claim-unknown-algorithm"
    claims = (
        Claim(
            "typo",
            "Names an algorithm that does not exist.",
            lambda budget: [RunRequest("sample-meen", {}, (0, 1)), RunRequest("zero", {}, (0, 1))],
            judge_mean_beats_zero,
        ),
    )


class ClaimBadOverride(ToyTask):
    id = "toy-claim-bad-override"
    claims = (
        Claim(
            "bad-key",
            "Overrides a config key that does not exist.",
            lambda budget: [RunRequest("sample-mean", {"size": 3}, (0,)), RunRequest("zero", {}, (0,))],
            judge_mean_beats_zero,
        ),
        Claim("bad-key", "A second claim with the same id.", _requests, judge_mean_beats_zero),
    )


class BadBudget(ToyTask):
    id = "toy-bad-budget"
    budgets = {**ToyTask.budgets, "paper": Budget("paper", {"n": 0}, "below the bound")}  # noqa: RUF012


class BadMetadata(ToyTask):
    id = "Toy_Metadata"
    version = 0
    metrics = (Metric("error", False), Metric("error", True))
    budgets = {"smoke": ToyTask.budgets["smoke"]}  # noqa: RUF012


class BrokenGym(ToyTask):
    id = "toy-broken-gym"
    gym_envs = {"iclrbench-test/Broken-v0": f"{__name__}:BrokenEnv"}  # noqa: RUF012


class UndeclaredExtra(ToyTask):
    id = "toy-undeclared-extra"
    requires = Requirement("no-such-extra", ())


class Unavailable(ToyTask):
    id = "toy-unavailable"
    requires = Requirement("no-such-extra", ("iclrbench_no_such_module",))


@dataclasses.dataclass(frozen=True)
class OutOfBoundsParams:
    shrink: float = param(2.0, "weight of the prior guess 0", low=0.0, high=1.0)


# -------------------------------------------------------------------------------------------- fixture
Install = Callable[..., str]


@pytest.fixture
def install() -> Iterator[Install]:
    """``install(TaskClass, params=ShrinkParams)`` registers the task and its two algorithms with the
    catalog (as entry points would) and returns its id; the registries and gymnasium are restored after."""
    for task_cls in catalog.task_classes():  # everything built in, loaded before the state is saved
        if task_cls.unavailable() is None:
            catalog.algorithms(task_cls.id)
    saved_tasks = dict(catalog._tasks._items)
    saved_algorithms = {k: dict(v._items) for k, v in catalog._algorithms.items()}
    saved_gym = set(gymnasium.registry)

    def add(task_cls: type[Task], params: type = ShrinkParams) -> str:
        catalog._tasks.add(task_cls.id, task_cls)
        mean = type("SampleMean", (SampleMean,), {"Params": params, "__doc__": SampleMean.__doc__})
        register_algorithm(task=task_cls.id, name="sample-mean", role="reference")(mean)
        register_algorithm(task=task_cls.id, name="zero", role="baseline")(type("Zero", (Zero,), {}))
        return task_cls.id

    yield add
    catalog._tasks._items.clear()
    catalog._tasks._items.update(saved_tasks)
    for name in list(catalog._algorithms):
        if name not in saved_algorithms:
            del catalog._algorithms[name]
    for name in set(gymnasium.registry) - saved_gym:
        del gymnasium.registry[name]


def _failures(task_id: str) -> dict[str, list[str]]:
    """Check name -> problems, of every failed check."""
    with pytest.raises(TaskContractError) as caught:
        check_task(task_id)
    report = caught.value.report
    assert report is not None
    failed = {c.name: c.problems for c in report.checks if c.problems}
    assert str(caught.value).count("\n") == sum(map(len, failed.values()))  # every problem listed
    return failed


# ---------------------------------------------------------------------------------------------- tests
def test_a_good_task_passes_every_check(install: Install) -> None:
    report = check_task(install(ToyTask))
    assert report.ok and report.task == "toy-mean"
    assert [c.name for c in report.checks] == [
        "check_metadata",
        "check_requirements",
        "check_budgets_build",
        "check_params_defaults",
        "check_claims",
        "check_gym_envs",
        "check_runs",
        "check_determinism",
        "check_batched",
    ]
    assert not [c.name for c in report.checks if c.skipped]  # the batched path and the env were checked
    # two algorithms, each: seeds 0 and 1 in one batch (check_runs), seed 1 alone (determinism's and the
    # batch check's comparison); nothing run twice over
    assert report.runs == 2 * 3
    assert set(report.timings()) == {c.name for c in report.checks} and report.seconds >= 0
    assert "check_batched" in str(report)


@pytest.mark.parametrize(
    ("task_cls", "check", "says"),
    [
        (MissingMetric, "check_runs", "does not report declared metric(s) ['estimate']"),
        (UndeclaredMetric, "check_runs", "reports undeclared metric(s) ['bonus']"),
        (NanMetric, "check_runs", "nan"),
        (RaggedCurve, "check_runs", "curve 'running_mean'"),
        (Nondeterministic, "check_determinism", "gives different metrics on a second run"),
        (BatchedDiffers, "check_batched", "batched metrics differ from one run at a time"),
        (BatchedCrashes, "check_batched", "fell back to one run at a time"),
        (JudgeWithoutEvidence, "check_claims", "judge says 'reproduced' on empty groups"),
        (ClaimUnknownAlgorithm, "check_claims", "names unknown algorithm 'sample-meen'"),
        (ClaimBadOverride, "check_claims", "the runner refuses sample-mean with {'size': 3}"),
        (ClaimBadOverride, "check_claims", "claim ids repeat: ['bad-key']"),
        (BadBudget, "check_budgets_build", "budget 'paper' does not build"),
        (BrokenGym, "check_gym_envs", "fails gymnasium's check_env"),
        (UndeclaredExtra, "check_requirements", "extra 'no-such-extra'"),
    ],
    ids=lambda v: v.__name__ if isinstance(v, type) else None,
)
def test_each_defect_is_reported_by_its_own_check(
    install: Install, task_cls: type[Task], check: str, says: str
) -> None:
    failed = _failures(install(task_cls))
    assert list(failed) == [check], failed
    assert any(says in problem for problem in failed[check]), failed[check]


def test_bad_metadata_is_reported_in_full(install: Install) -> None:
    problems = _failures(install(BadMetadata))["check_metadata"]
    for says in ("not kebab-case", "version must be an int >= 1", "metric names repeat", "budgets lack"):
        assert any(says in p for p in problems), problems


def test_a_params_default_out_of_bounds_is_named(install: Install) -> None:
    failed = _failures(install(ToyTask, params=OutOfBoundsParams))
    assert any(
        "sample-mean Params" in p and "shrink" in p and "maximum" in p
        for p in failed["check_params_defaults"]
    ), failed
    # the runs cannot even be planned with those defaults; that is reported too, not hidden
    assert "check_runs" in failed


def test_an_unavailable_task_fails_its_requirements_and_skips_the_runs(install: Install) -> None:
    with pytest.raises(TaskContractError) as caught:
        check_task(install(Unavailable))
    report = caught.value.report
    assert report is not None and report.runs == 0
    by_name = {c.name: c for c in report.checks}
    assert any("iclrbench_no_such_module" in p for p in by_name["check_requirements"].problems)
    assert (
        by_name["check_runs"].skipped
        and "pip install 'iclrbench[no-such-extra]'" in by_name["check_runs"].skipped
    )


def test_single_checks_are_usable_alone(install: Install) -> None:
    check_metadata(catalog.get_task(install(ToyTask)))
    task = catalog.get_task(install(JudgeWithoutEvidence))
    with pytest.raises(TaskContractError, match="check_claims"):
        check_claims(task)


def test_check_task_needs_two_distinct_seeds(install: Install) -> None:
    with pytest.raises(ValueError, match="two distinct seeds"):
        check_task(install(ToyTask), seeds=(0, 0))


# ------------------------------------------------------------------------------------- evaluate_once
def test_evaluate_once_is_the_run_bench_run_makes(install: Install) -> None:
    task = install(ToyTask)
    result = evaluate_once(task, "sample-mean", seed=3)
    (spec,) = runner.plan(task, ["sample-mean"], [3], "smoke")
    assert result.status == "ok" and result.key == spec.key and result.budget == "smoke"
    assert result.metrics["estimate"] == runner.execute(spec).metrics["estimate"]  # the runner's seeding
    assert set(result.curves["running_mean"]) >= {"x", "y"}  # curves as stored
    # each keyword is a --set: a config key, else a parameter of the algorithm; a value or its text
    shrunk = evaluate_once(task, "sample-mean", 3, "small", n="8", shrink=1.0)
    assert shrunk.config["n"] == 8 and shrunk.params == {"shrink": 1.0} and shrunk.metrics["estimate"] == 0.0


@pytest.mark.parametrize(
    ("settings", "says"),
    [({"n": 0}, "n"), ({"shrink": 2.0}, "shrink"), ({"nn": 3}, "did you mean")],
)
def test_evaluate_once_refuses_what_the_cli_refuses(
    install: Install, settings: dict[str, object], says: str
) -> None:
    with pytest.raises(UserError, match=says):
        evaluate_once(install(ToyTask), "sample-mean", **settings)


def test_a_failed_run_raises_with_its_error(install: Install) -> None:
    with pytest.raises(RunFailed, match="sample-mean seed=0 failed: NonFiniteMetric") as caught:
        evaluate_once(install(NanMetric), "sample-mean")
    assert caught.value.result.status == "failed"


# ------------------------------------------------------------------------------------------ fake runs
def test_fake_run_hashes_follow_config_and_params() -> None:
    run = fake_run("t", "a", 3, {"regret": 1}, config={"d": 2}, params={"lr": 0.1})
    assert run.config_hash == stable_hash({"d": 2}) and run.params_hash == stable_hash({"lr": 0.1})
    assert run.metrics == {"regret": 1.0} and isinstance(run.metrics["regret"], float)
    assert run.key == f"t|v1|{stable_hash({'d': 2})}|a|{stable_hash({'lr': 0.1})}|3"
    assert fake_run(config={"d": 3}).key != fake_run(config={"d": 2}).key


def test_fake_runs_are_independent_copies() -> None:
    config = {"runs": 1000}
    runs = fake_runs("t", "a", (0, 1, 2), {"x": 1.0}, config=config, role="reference", wall_s=0.5)
    assert [r.seed for r in runs] == [0, 1, 2] and all(
        r.wall_s == 0.5 and r.role == "reference" for r in runs
    )
    runs[0].config["runs"] = 200
    runs[0].metrics["x"] = 9.0
    assert runs[1].config == config == {"runs": 1000} and runs[1].metrics == {"x": 1.0}


def test_a_failed_fake_run_carries_an_error(make_run: Callable[..., RunResult]) -> None:
    failed = make_run(status="failed")
    assert failed.status == "failed" and failed.error
    assert make_run(status="failed", error="ValueError: boom").error == "ValueError: boom"
    assert make_run().error == ""

"""Test helpers for tasks and plugins: the task contract checker and a builder of fake run results.

:func:`check_task` is to a task what gymnasium's ``utils.env_checker.check_env`` is to an environment: it
runs every check of the contract (ARCHITECTURE.md, "The contract") on one registered task and raises
:class:`TaskContractError` listing every check that failed. A plugin author calls it in their own tests::

    from iclrbench.testing import check_task

    def test_my_task_keeps_the_contract() -> None:
        check_task("my-task")

Each check is also a function of its own (``check_metadata``, ``check_runs``, ...) taking the task
instance, so a failing one can be rerun alone. The checks that run algorithms share a :class:`RunCache`:
``check_runs`` runs every algorithm on every seed once, ``check_determinism`` adds one more run of the first
seed, ``check_batched`` one batched call per algorithm where the task has a batched path.

:func:`fake_run` / :func:`fake_runs` build :class:`RunResult` s without running anything (for judges,
aggregation, the store and the page), with hashes consistent with their config and params.
"""

from __future__ import annotations

import dataclasses
import math
import re
import time
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from importlib import metadata
from typing import Any

from iclrbench import runner
from iclrbench.core import catalog
from iclrbench.core import config as cfg
from iclrbench.core.result import RunResult
from iclrbench.core.task import BUDGETS, Metric, Paper, Resources, Task

__all__ = [
    "CheckOutcome",
    "CheckReport",
    "RunCache",
    "TaskContractError",
    "check_batched",
    "check_budgets_build",
    "check_claims",
    "check_determinism",
    "check_gym_envs",
    "check_metadata",
    "check_params_defaults",
    "check_requirements",
    "check_runs",
    "check_task",
    "fake_run",
    "fake_runs",
]

KEBAB = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
#: the budgets a claim's requests are planned at by the checker (``paper`` would only cost time to plan)
CLAIM_BUDGETS = ("smoke", "small")


class TaskContractError(AssertionError):
    """A task breaks its contract. ``problems`` lists ``(check name, message)``; ``report`` is the full
    :class:`CheckReport` when raised by :func:`check_task`. An AssertionError, so that pytest shows it as
    a test failure with its message."""

    def __init__(self, problems: Sequence[tuple[str, str]], report: CheckReport | None = None) -> None:
        self.problems = list(problems)
        self.report = report
        task = f"task '{report.task}' " if report is not None else ""
        checks = sorted({name for name, _ in self.problems})
        lines = [f"{task}fails {len(checks)} contract check(s): {', '.join(checks)}"]
        lines += [f"  {name}: {message}" for name, message in self.problems]
        super().__init__("\n".join(lines))


@dataclasses.dataclass
class CheckOutcome:
    """One check's result: ``problems`` empty when it passed; ``skipped`` the reason it did not apply."""

    name: str
    seconds: float
    problems: list[str] = dataclasses.field(default_factory=list)
    skipped: str = ""
    notes: list[str] = dataclasses.field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


@dataclasses.dataclass
class CheckReport:
    """Every check of one :func:`check_task` call, in order, with its wall time."""

    task: str
    budget: str
    seeds: tuple[int, ...]
    checks: list[CheckOutcome] = dataclasses.field(default_factory=list)
    runs: int = 0

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    @property
    def seconds(self) -> float:
        return sum(c.seconds for c in self.checks)

    @property
    def problems(self) -> list[tuple[str, str]]:
        return [(c.name, p) for c in self.checks for p in c.problems]

    def timings(self) -> dict[str, float]:
        """Check name -> seconds."""
        return {c.name: round(c.seconds, 3) for c in self.checks}

    def __str__(self) -> str:
        lines = [
            f"{self.task} at {self.budget}, seeds {list(self.seeds)}: {self.runs} runs, {self.seconds:.1f} s"
        ]
        for c in self.checks:
            state = "FAIL" if c.problems else ("skip" if c.skipped else "ok")
            extra = f" ({c.skipped})" if c.skipped else ""
            lines.append(f"  {state:4} {c.name:24} {c.seconds:8.2f} s{extra}")
            lines += [f"       {p}" for p in c.problems]
        return "\n".join(lines)


class _Failures:
    """Collects a check's problems; ``raise_if_any`` raises them as one TaskContractError."""

    def __init__(self, check: str) -> None:
        self.check = check
        self.problems: list[str] = []

    def add(self, message: str) -> None:
        self.problems.append(message)

    def raise_if_any(self) -> None:
        if self.problems:
            raise TaskContractError([(self.check, p) for p in self.problems])


class _Skip(Exception):
    """A check that does not apply to this task (no gym env, no batched path): the reason."""


def _timing_metrics(task: Task) -> set[str]:
    """Metrics that measure wall time or the machine: they differ between two runs of the same seed."""
    return {m.name for m in task.metrics if m.unit == "s" or m.name == "seconds" or m.measured}


#: relative tolerance of "the same metrics": a seeding bug changes a metric in its leading digits, while
#: the same computation can differ in the last bit (BLAS reductions scheduled over other threads after
#: another task ran in the process: a crystal density 0.6600665537148097 vs ...096)
SAME_RTOL = 1e-9


def _same(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=SAME_RTOL, abs_tol=1e-12) or (math.isnan(a) and math.isnan(b))


def _one_line(result: RunResult) -> str:
    return f"{result.algorithm} seed={result.seed}"


# ------------------------------------------------------------------------------------------------ runs
class RunCache:
    """Runs through the runner's :func:`~iclrbench.runner.execute` (the path ``bench run`` takes), each
    (algorithm, seed, repetition) at most once, so that the checks share them."""

    def __init__(self, task: Task, budget: str) -> None:
        self.task = task
        self.budget = budget
        self._results: dict[tuple[str, int, int], RunResult] = {}
        self._batches: dict[tuple[str, tuple[int, ...]], list[RunResult]] = {}
        self._specs: dict[tuple[str, int], Any] = {}

    @property
    def count(self) -> int:
        return len(self._results) + sum(len(b) for b in self._batches.values())

    def spec(self, algorithm: str, seed: int) -> Any:
        key = (algorithm, seed)
        if key not in self._specs:
            self._specs[key] = runner.plan(self.task.id, [algorithm], [seed], self.budget)[0]
        return self._specs[key]

    def run(self, algorithm: str, seed: int, repetition: int = 0) -> RunResult:
        key = (algorithm, seed, repetition)
        if key not in self._results:
            self._results[key] = runner.execute(self.spec(algorithm, seed))
        return self._results[key]

    def batch(self, algorithm: str, seeds: Sequence[int]) -> list[RunResult]:
        """One ``execute_batch`` of the algorithm over ``seeds`` (the task's batched path), at most once."""
        key = (algorithm, tuple(seeds))
        if key not in self._batches:
            self._batches[key] = runner.execute_batch([self.spec(algorithm, s) for s in seeds])
        return self._batches[key]

    def again(self, algorithm: str, seed: int, seeds: Sequence[int]) -> tuple[RunResult, str]:
        """A second run of (algorithm, seed) for the determinism check, and how it ran: where the task has
        a batched path over ``seeds`` (which includes ``seed``), that batch's run -- one computation less
        per algorithm, and a batched run that matches is the same seed run again; else a plain rerun."""
        if seed in seeds and has_batched_path(self.task, self.task.make_config(self.budget)):
            return self.batch(algorithm, seeds)[list(seeds).index(seed)], "in a batch"
        return self.run(algorithm, seed, 1), "again"

    def supported(self) -> tuple[list[str], dict[str, str]]:
        """(algorithms that support the budget's config, {algorithm: reason} for the others)."""
        config = self.task.make_config(self.budget)
        names, skipped = [], {}
        for name, algo in catalog.algorithms(self.task.id).items():
            reason = algo.supports(config)
            if reason is None:
                names.append(name)
            else:
                skipped[name] = reason
        return names, skipped


# ---------------------------------------------------------------------------------------------- checks
def check_metadata(task: Task) -> None:
    """id kebab-case and the name the catalog knows the task by; version an int >= 1; a paper; metrics
    non-empty, unique by name; budgets smoke, small and paper, each named as its key; Config a dataclass."""
    fail = _Failures("check_metadata")
    cls = type(task)
    task_id = getattr(cls, "id", None)
    if not isinstance(task_id, str) or not KEBAB.fullmatch(task_id):
        fail.add(f"id {task_id!r} is not kebab-case (lower-case letters and digits joined by '-')")
    registered = [name for name in catalog.task_ids() if catalog._tasks.get(name) is cls]
    if registered != [task_id]:
        fail.add(f"the catalog registers this class as {registered} but its id is {task_id!r}")
    version = getattr(cls, "version", None)
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        fail.add(f"version must be an int >= 1, not {version!r}")
    paper = getattr(cls, "paper", None)
    if not isinstance(paper, Paper) or not (paper.title and paper.authors and paper.arxiv):
        fail.add(f"paper must be a Paper with title, authors and arxiv id, not {paper!r}")
    metrics = getattr(cls, "metrics", ())
    if not metrics:
        fail.add("metrics is empty: a task reports at least one metric (the first is primary)")
    bad = [m for m in metrics if not isinstance(m, Metric)]
    if bad:
        fail.add(f"metrics must be Metric instances: {bad!r}")
    names = [m.name for m in metrics if isinstance(m, Metric)]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        fail.add(f"metric names repeat: {duplicates}")
    budgets = getattr(cls, "budgets", {})
    missing = [b for b in BUDGETS if b not in budgets]
    if missing:
        fail.add(f"budgets lack {missing} (every task has {list(BUDGETS)})")
    misnamed = [key for key, b in budgets.items() if getattr(b, "name", None) != key]
    if misnamed:
        fail.add(f"budgets whose name differs from their key: {misnamed}")
    if not dataclasses.is_dataclass(getattr(cls, "Config", None)):
        fail.add("Config must be a (frozen) dataclass")
    fail.raise_if_any()


def check_budgets_build(task: Task) -> None:
    """Every budget's config builds (``make_config``) and ``resources(config)`` gives a Resources."""
    fail = _Failures("check_budgets_build")
    for budget in task.budgets:
        try:
            config = task.make_config(budget)
        except Exception as exc:
            fail.add(f"budget '{budget}' does not build: {type(exc).__name__}: {exc}")
            continue
        try:
            resources = task.resources(config)
        except Exception as exc:
            fail.add(f"resources() of budget '{budget}' raises {type(exc).__name__}: {exc}")
            continue
        if not isinstance(resources, Resources):
            fail.add(f"resources() of budget '{budget}' returns {resources!r}, not a Resources")
    fail.raise_if_any()


def _check_defaults(cls: type, what: str, fail: _Failures) -> None:
    try:
        instance = cls()
    except Exception as exc:
        fail.add(f"{what} defaults do not build: {type(exc).__name__}: {exc}")
        return
    try:
        cfg.check(instance)
    except Exception as exc:
        fail.add(f"{what} default out of its declared range: {exc}")


def check_params_defaults(task: Task) -> None:
    """The task Config's defaults and every algorithm's Params defaults lie within their declared bounds
    and choices (``param(low=, high=, choices=)``)."""
    fail = _Failures("check_params_defaults")
    _check_defaults(task.Config, f"{task.id} Config", fail)
    for name, algo in catalog.algorithms(task.id).items():
        _check_defaults(algo.Params, f"{name} Params", fail)
    fail.raise_if_any()


def _check_result(task: Task, result: RunResult, fail: _Failures) -> None:
    """One run: ok, exactly the declared metrics, finite; curves of equal-length finite x and y."""
    where = _one_line(result)
    if result.status != "ok":
        fail.add(f"{where} failed: {result.error}")
        return
    declared = [m.name for m in task.metrics_for(cfg.build(task.Config, result.config))]
    missing = [n for n in declared if n not in result.metrics]
    extra = sorted(set(result.metrics) - set(declared))
    if missing:
        fail.add(f"{where} does not report declared metric(s) {missing}")
    if extra:
        fail.add(f"{where} reports undeclared metric(s) {extra}")
    bad = {k: v for k, v in result.metrics.items() if not math.isfinite(v)}
    if bad:
        fail.add(f"{where} reports non-finite metric(s) {bad}")
    for name, curve in result.curves.items():
        x, y = curve.get("x"), curve.get("y")
        if not isinstance(x, list) or not isinstance(y, list) or len(x) != len(y) or not x:
            lengths = (len(x) if isinstance(x, list) else x, len(y) if isinstance(y, list) else y)
            fail.add(f"{where} curve '{name}': x and y must be non-empty lists of one length, got {lengths}")
            continue
        if not all(isinstance(v, (int, float)) and math.isfinite(v) for v in (*x, *y)):
            fail.add(f"{where} curve '{name}' has non-finite or non-numeric points")


def check_runs(
    task: Task, budget: str = "smoke", seeds: Sequence[int] = (0, 1), *, runs: RunCache | None = None
) -> list[str]:
    """Every algorithm that supports the budget's config runs through the runner on every seed: status
    ok, exactly the task's declared metrics, all finite; curves well-formed. Where the task has a batched
    path the seeds run as one batch, as a sweep runs them (a federation's runtime starts once, not once
    per seed). Returns the algorithms it skipped, with the reason they gave."""
    fail = _Failures("check_runs")
    runs = runs or RunCache(task, budget)
    names, skipped = runs.supported()
    if not names:
        fail.add(f"no algorithm supports the '{budget}' config")
    batched = has_batched_path(task, task.make_config(budget))
    for name in names:
        for result in runs.batch(name, seeds) if batched else [runs.run(name, s) for s in seeds]:
            _check_result(task, result, fail)
    fail.raise_if_any()
    return [f"{name} skipped: {reason}" for name, reason in skipped.items()]


def check_determinism(
    task: Task,
    budget: str = "smoke",
    seed: int = 0,
    *,
    runs: RunCache | None = None,
    seeds: Sequence[int] = (),
) -> None:
    """The same seed twice gives the same metrics (to :data:`SAME_RTOL`), timing metrics excepted. The
    second run is the seed's run in a batch over ``seeds`` where the task has a batched path (see
    :meth:`RunCache.again`). Algorithms whose first run failed are left to :func:`check_runs`."""
    fail = _Failures("check_determinism")
    runs = runs or RunCache(task, budget)
    timing = _timing_metrics(task)
    for name in runs.supported()[0]:
        first = runs.run(name, seed, 0)
        if first.status != "ok":
            continue  # a failing run is check_runs's to report; there is nothing to compare
        second, how = runs.again(name, seed, seeds)
        if second.status != "ok":
            if how == "in a batch":
                continue  # check_batched reports a batch that fails
            fail.add(f"{name} seed={seed} ran ok once, then failed on a second run: {second.error}")
            continue
        differ = {
            k: (first.metrics[k], second.metrics.get(k, math.nan))
            for k in first.metrics
            if k not in timing and not _same(first.metrics[k], second.metrics.get(k, math.nan))
        }
        if differ and how == "in a batch":
            continue  # the very pair check_batched compares: it reports the difference, once
        if differ:
            fail.add(f"{name} seed={seed} gives different metrics on a second run ({how}): {differ}")
    fail.raise_if_any()


def has_batched_path(task: Task, config: Any) -> bool:
    """The task overrides ``evaluate_many`` and lets the runner batch more than one seed."""
    return type(task).evaluate_many is not Task.evaluate_many and task.batch_size(config) > 1


def check_batched(
    task: Task, budget: str = "smoke", seeds: Sequence[int] = (0, 1), *, runs: RunCache | None = None
) -> None:
    """Where the task has a batched path, one ``execute_batch`` over the seeds does not fall back to single
    runs, and gives for the last seed the metrics of that seed run alone (timing excepted). The last,
    because a batch that mixes its seeds up (every seed played on the first one's data, an index off by
    one) shows there; the same single run is the determinism check's, so the comparison costs one run per
    algorithm, not one per seed."""
    fail = _Failures("check_batched")
    runs = runs or RunCache(task, budget)
    if not has_batched_path(task, task.make_config(budget)):
        raise _Skip("no batched path (evaluate_many not overridden or batch_size 1)")
    timing = _timing_metrics(task)
    for name in runs.supported()[0]:
        batch = runs.batch(name, seeds)
        for single_seed, batched in zip(seeds[-1:], batch[-1:], strict=True):
            single = runs.run(name, single_seed)
            where = f"{name} seed={single_seed}"
            if single.status != "ok":
                continue  # check_runs reports it
            if batched.status != "ok":
                fail.add(f"{where} runs ok alone but fails in a batch: {batched.error}")
                continue
            if batched.provenance.get("batch") != len(seeds):
                fail.add(f"{where}: the batched call failed and the runner fell back to one run at a time")
            differ = {
                k: (single.metrics[k], batched.metrics.get(k, math.nan))
                for k in single.metrics
                if k not in timing and not _same(single.metrics[k], batched.metrics.get(k, math.nan))
            }
            if differ or set(single.metrics) != set(batched.metrics):
                fail.add(
                    f"{where}: batched metrics differ from one run at a time (single, batched): {differ} "
                    "(a leak between the batch's seeds, or a run that is not deterministic)"
                )
    fail.raise_if_any()


def check_claims(task: Task, budgets: Sequence[str] = CLAIM_BUDGETS) -> None:
    """Claim ids unique; each claim's budget is one of the task's; at each of ``budgets`` its requests
    name registered algorithms with config and params overrides the runner's ``plan`` accepts; its judge
    says ``inconclusive`` when every group is empty (no evidence is not a verdict)."""
    fail = _Failures("check_claims")
    ids = [c.id for c in task.claims]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        fail.add(f"claim ids repeat: {duplicates}")
    known = catalog.algorithms(task.id)
    for claim in task.claims:
        if claim.budget not in task.budgets:
            fail.add(f"claim '{claim.id}' is defined at budget '{claim.budget}', not one of the task's")
        for budget in budgets:
            try:
                requests = list(claim.requests(budget))
            except Exception as exc:
                fail.add(f"claim '{claim.id}' requests({budget!r}) raises {type(exc).__name__}: {exc}")
                continue
            if not requests:
                fail.add(f"claim '{claim.id}' requests no runs at '{budget}'")
            for request in requests:
                if request.algorithm not in known:
                    fail.add(
                        f"claim '{claim.id}' at '{budget}' names unknown algorithm '{request.algorithm}'"
                    )
                    continue
                if not request.seeds:
                    fail.add(f"claim '{claim.id}' at '{budget}' requests {request.algorithm} on no seeds")
                try:
                    runner.plan(task.id, [request.algorithm], request.seeds, budget, dict(request.overrides))
                except Exception as exc:
                    fail.add(
                        f"claim '{claim.id}' at '{budget}': the runner refuses {request.algorithm} with "
                        f"{dict(request.overrides)}: {exc}"
                    )
            try:
                verdict = claim.judge([[] for _ in requests])
            except Exception as exc:
                fail.add(f"claim '{claim.id}' judge raises on empty groups: {type(exc).__name__}: {exc}")
                continue
            if not (isinstance(verdict, tuple) and len(verdict) == 2 and isinstance(verdict[1], dict)):
                fail.add(f"claim '{claim.id}' judge must return (verdict, measured dict), got {verdict!r}")
            elif verdict[0] != "inconclusive":
                fail.add(
                    f"claim '{claim.id}' judge says '{verdict[0]}' on empty groups (want 'inconclusive')"
                )
    fail.raise_if_any()


def check_gym_envs(task: Task) -> list[str]:
    """Each of ``Task.gym_envs`` is registered with gymnasium (``import iclrbench`` registers them) and
    ``gymnasium.make(id)`` passes ``gymnasium.utils.env_checker.check_env``. Returns its warnings."""
    if not task.gym_envs:
        raise _Skip("the task declares no gymnasium env")
    import gymnasium
    from gymnasium.utils.env_checker import check_env

    from iclrbench.envs import register_envs

    fail = _Failures("check_gym_envs")
    notes: list[str] = []
    register_envs()  # idempotent; a plugin's task registered after `import iclrbench` is added here
    for env_id in task.gym_envs:
        if env_id not in gymnasium.registry:
            fail.add(f"gym id '{env_id}' is not registered with gymnasium")
            continue
        try:
            env = gymnasium.make(env_id)
        except Exception as exc:
            fail.add(f"gymnasium.make('{env_id}') raises {type(exc).__name__}: {exc}")
            continue
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                check_env(env.unwrapped, skip_render_check=True)
            notes += [f"{env_id}: {w.message}" for w in caught]
        except Exception as exc:
            fail.add(f"'{env_id}' fails gymnasium's check_env: {type(exc).__name__}: {exc}")
        finally:
            env.close()
    fail.raise_if_any()
    return notes


def _declared_extras(task: Task) -> set[str] | None:
    """The extras of the distribution that provides the task: the one whose ``iclrbench.tasks`` entry
    point names it, else the one owning the task's top-level module; None when no distribution does."""
    dists: list[Any] = [
        ep.dist for ep in metadata.entry_points(group=catalog.TASK_GROUP) if ep.name == task.id and ep.dist
    ]
    if not dists:
        top = type(task).__module__.split(".")[0]
        dists = [metadata.distribution(d) for d in metadata.packages_distributions().get(top, [])]
    if not dists:
        return None
    return {extra for d in dists for extra in (d.metadata.get_all("Provides-Extra") or [])}


def check_requirements(task: Task) -> None:
    """``Task.requires`` names an extra its distribution declares (when it needs modules beyond the core)
    and ``unavailable()`` is None here (the modules are installed)."""
    fail = _Failures("check_requirements")
    requires = task.requires
    if requires.modules and not requires.extra:
        fail.add(f"requires modules {list(requires.modules)} but names no extra that installs them")
    if requires.extra:
        extras = _declared_extras(task)
        if extras is None:
            fail.add(
                f"no installed distribution provides task '{task.id}' to declare extra '{requires.extra}'"
            )
        elif requires.extra not in extras:
            fail.add(
                f"extra '{requires.extra}' is not declared by its distribution (it has {sorted(extras)})"
            )
    reason = type(task).unavailable()
    if reason is not None:
        fail.add(f"unavailable here: {reason}")
    fail.raise_if_any()


# ----------------------------------------------------------------------------------------------- driver
def _timed(name: str, check: Callable[[], Any]) -> CheckOutcome:
    start = time.perf_counter()
    outcome = CheckOutcome(name, 0.0)
    try:
        notes = check()
        outcome.notes = list(notes or [])
    except _Skip as skip:
        outcome.skipped = str(skip)
    except TaskContractError as exc:
        outcome.problems = [message for _, message in exc.problems]
    except Exception as exc:  # a check that crashes is a failure of the task, reported with the rest
        outcome.problems = [f"the check itself raised {type(exc).__name__}: {exc}"]
    outcome.seconds = time.perf_counter() - start
    return outcome


def check_task(task_id: str, budget: str = "smoke", *, seeds: Sequence[int] = (0, 1)) -> CheckReport:
    """Check a registered task against the contract; return the :class:`CheckReport` (per-check times),
    or raise :class:`TaskContractError` listing every failed check.

    Runs each supporting algorithm at ``budget``: where the task has a batched path, one batch over
    ``seeds`` and the last seed alone (determinism and batch equivalence in one comparison); else every
    seed once and the last one twice (determinism).
    """
    seeds = tuple(int(s) for s in seeds)
    if len(seeds) < 2 or len(set(seeds)) != len(seeds):
        raise ValueError(f"check_task needs at least two distinct seeds, not {seeds}")
    task = catalog.get_task(task_id)
    report = CheckReport(task.id, budget, seeds)
    runs = RunCache(task, budget)
    steps: list[tuple[str, Callable[[], Any]]] = [
        ("check_metadata", lambda: check_metadata(task)),
        ("check_requirements", lambda: check_requirements(task)),
    ]
    report.checks += [_timed(name, step) for name, step in steps]
    if type(task).unavailable() is not None:  # nothing below can import the task's algorithms
        reason = type(task).unavailable() or ""
        report.checks += [CheckOutcome(name, 0.0, skipped=reason) for name in _RUNNING_CHECKS]
    else:
        steps = [
            ("check_budgets_build", lambda: check_budgets_build(task)),
            ("check_params_defaults", lambda: check_params_defaults(task)),
            ("check_claims", lambda: check_claims(task)),
            ("check_gym_envs", lambda: check_gym_envs(task)),
            ("check_runs", lambda: check_runs(task, budget, seeds, runs=runs)),
            ("check_determinism", lambda: check_determinism(task, budget, seeds[-1], runs=runs, seeds=seeds)),
            ("check_batched", lambda: check_batched(task, budget, seeds, runs=runs)),
        ]
        report.checks += [_timed(name, step) for name, step in steps]
    report.runs = runs.count
    if not report.ok:
        raise TaskContractError(report.problems, report)
    return report


_RUNNING_CHECKS = (
    "check_budgets_build",
    "check_params_defaults",
    "check_claims",
    "check_gym_envs",
    "check_runs",
    "check_determinism",
    "check_batched",
)


# ----------------------------------------------------------------------------------------- fake runs
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

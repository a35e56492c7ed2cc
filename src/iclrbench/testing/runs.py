"""Run checks of a task: what needs its code to run -- every algorithm through the runner (well-formed
results, determinism, the batched path), the claims' requests planned and their judges fed no evidence,
the gymnasium envs stepped -- and :func:`evaluate_once`, the one-run helper of task tests.

The checks that run algorithms share a :class:`RunCache`: ``check_runs`` runs every algorithm on every
seed once, ``check_determinism`` adds one more run of a seed, ``check_batched`` one batched call per
algorithm where the task has a batched path.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import Any

from iclrbench import runner
from iclrbench.core import catalog
from iclrbench.core import config as cfg
from iclrbench.core.result import RunResult
from iclrbench.core.task import Task
from iclrbench.testing.report import Failures, Skip

#: the budgets a claim's requests are planned at by the checker (``paper`` would only cost time to plan)
CLAIM_BUDGETS = ("smoke", "small")

#: relative tolerance of "the same metrics": a seeding bug changes a metric in its leading digits, while
#: the same computation can differ in the last bit (BLAS reductions scheduled over other threads after
#: another task ran in the process: a crystal density 0.6600665537148097 vs ...096)
SAME_RTOL = 1e-9


class RunFailed(AssertionError):
    """A run of :func:`evaluate_once` ended ``failed``: the message is its error and the traceback the
    runner kept; ``result`` is the failed :class:`RunResult`. An AssertionError, so that pytest shows it
    as the test's failure."""

    def __init__(self, result: RunResult) -> None:
        self.result = result
        super().__init__(f"{_one_line(result)} failed: {result.error}\n{result.notes}")


def evaluate_once(
    task: str, algorithm: str, seed: int = 0, budget: str = "smoke", **config: Any
) -> RunResult:
    """One run, as ``bench run TASK ALGORITHM --seeds SEED --budget BUDGET --set KEY=VALUE ...`` makes
    it, without a store: :func:`iclrbench.runner.plan` validates the settings (each keyword a ``--set``:
    a key of the task's Config, else a parameter of the algorithm; a value or its text) and
    :func:`iclrbench.runner.execute` runs it here, with the seeds a sweep would give the algorithm.

    Going through the runner rather than calling ``Task.evaluate`` is why a test sees what a user sees:
    the same checks of the settings (a bad one raises :class:`~iclrbench.core.errors.UserError`), the
    same seeding, metrics as floats and curves as stored. Raises :class:`RunFailed` if the run fails.
    """
    (spec,) = runner.plan(task, [algorithm], [seed], budget, config)
    result = runner.execute(spec)
    if result.status != "ok":
        raise RunFailed(result)
    return result


def _timing_metrics(task: Task) -> set[str]:
    """Metrics that measure wall time or the machine: they differ between two runs of the same seed."""
    return {m.name for m in task.metrics if m.unit == "s" or m.name == "seconds" or m.measured}


def _same(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=SAME_RTOL, abs_tol=1e-12) or (math.isnan(a) and math.isnan(b))


def _one_line(result: RunResult) -> str:
    return f"{result.algorithm} seed={result.seed}"


def has_batched_path(task: Task, config: Any) -> bool:
    """The task overrides ``evaluate_many`` and lets the runner batch more than one seed."""
    return type(task).evaluate_many is not Task.evaluate_many and task.batch_size(config) > 1


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


def _check_result(task: Task, result: RunResult, fail: Failures) -> None:
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
    fail = Failures("check_runs")
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
    fail = Failures("check_determinism")
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


def check_batched(
    task: Task, budget: str = "smoke", seeds: Sequence[int] = (0, 1), *, runs: RunCache | None = None
) -> None:
    """Where the task has a batched path, one ``execute_batch`` over the seeds does not fall back to single
    runs, and gives for the last seed the metrics of that seed run alone (timing excepted). The last,
    because a batch that mixes its seeds up (every seed played on the first one's data, an index off by
    one) shows there; the same single run is the determinism check's, so the comparison costs one run per
    algorithm, not one per seed."""
    fail = Failures("check_batched")
    runs = runs or RunCache(task, budget)
    if not has_batched_path(task, task.make_config(budget)):
        raise Skip("no batched path (evaluate_many not overridden or batch_size 1)")
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
    fail = Failures("check_claims")
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
        raise Skip("the task declares no gymnasium env")
    import gymnasium
    from gymnasium.utils.env_checker import check_env

    from iclrbench.envs import register_envs

    fail = Failures("check_gym_envs")
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

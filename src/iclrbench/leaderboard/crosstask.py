"""Comparisons across tasks and between algorithms, for the index page.

Scores of different tasks are in different units, so they are compared only after normalising each
leaderboard table ("problem") to [0, 1] on its primary metric. Where tasks share an algorithm (same name),
its normalised mean scores are shown side by side (1 for the best algorithm's mean, 0 for the worst).

Performance profiles (:func:`profiles`) are rliable's score distributions over *runs* (Agarwal et al.,
NeurIPS 2021): every run is normalised within its problem (0 = the worst run of any algorithm there,
1 = the best), and an algorithm's profile at tau is the fraction of its runs within tau of the best,
averaged over the problems it appears on. A family (every task has ``reference`` and ``baseline``
algorithms) is the average of its members' profiles on each problem, so its size does not matter:
scoring a family by its best member made three identical baselines beat one identical reference
0.75 to 0.25 at tau = 0. Bands are percentile stratified bootstrap intervals (runs resampled within each
problem and algorithm, the normalisation held fixed, as rliable does), pointwise in tau.
Probability of improvement between two algorithms of one table is rliable's P(X > Y) over pairs of runs.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Sequence

import numpy as np

from iclrbench.core import stats
from iclrbench.core.task import ClaimResult
from iclrbench.leaderboard.aggregate import Row, Table, by_task

FAMILIES = ("reference", "baseline", "oracle")
TAUS = tuple(float(t) for t in np.linspace(0.0, 1.0, 21))
PROFILE_REPS = 1000
PROFILE_BAND = "pointwise 95% percentile stratified bootstrap over runs"


@dataclasses.dataclass
class Profile:
    """A performance profile over runs: ``fraction[i]`` of the runs lie within ``taus[i]`` of the best;
    ``low``/``high`` are the band ``band`` names; ``problems`` and ``runs`` say what it rests on."""

    taus: list[float]
    fraction: list[float]
    low: list[float]
    high: list[float]
    problems: int
    runs: int
    band: str = PROFILE_BAND


@dataclasses.dataclass
class TaskSummary:
    task: str
    primary: str
    higher_is_better: bool
    leader: str
    leader_value: float
    configs: int
    claims_reproduced: int
    claims_checked: int
    runs: int
    failed: int
    seconds: float


def main_table(tables: Sequence[Table]) -> Table | None:
    """The task's headline table: the one with the most algorithms, then the most runs."""
    if not tables:
        return None
    return max(tables, key=lambda t: (len(t.rows), sum(r.n for r in t.rows)))


def task_summaries(tables: Sequence[Table], claims: Sequence[ClaimResult]) -> list[TaskSummary]:
    grouped = by_task(tables)
    claims_by_task: dict[str, list[ClaimResult]] = defaultdict(list)
    for c in claims:
        claims_by_task[c.task].append(c)
    out = []
    for task in sorted({*grouped, *claims_by_task}):
        here = grouped.get(task, [])
        head = main_table(here)
        leader = next((r for r in head.rows if r.rank == 1), None) if head else None
        checked = claims_by_task.get(task, [])
        out.append(
            TaskSummary(
                task=task,
                primary=head.primary.name if head else "",
                higher_is_better=head.primary.higher_is_better if head else True,
                leader=leader.algorithm if leader else "",
                leader_value=leader.metrics[head.primary.name].mean if leader and head else float("nan"),
                configs=len(here),
                claims_reproduced=sum(c.verdict == "reproduced" for c in checked),
                claims_checked=len(checked),
                runs=sum(r.n + r.failed for t in here for r in t.rows),
                failed=sum(r.failed for t in here for r in t.rows),
                seconds=sum(r.wall_s for t in here for r in t.rows),
            )
        )
    return out


def normalised_scores(table: Table) -> dict[str, float]:
    """Algorithm -> (mean - worst) / (best - worst) on the primary metric, best = 1; ties all 1."""
    name = table.primary.name
    means = {r.algorithm: r.metrics[name].mean for r in table.rows if name in r.metrics}
    if len(means) < 2:
        return {}
    values = np.array(list(means.values()))
    best, worst = (
        (values.max(), values.min()) if table.primary.higher_is_better else (values.min(), values.max())
    )
    span = best - worst
    with np.errstate(invalid="ignore", divide="ignore"):  # an infinite mean: no normalised score (nan)
        return {a: 1.0 if span == 0 else float((v - worst) / span) for a, v in means.items()}


def problems(tables: Sequence[Table]) -> list[Table]:
    """Tables that compare at least two algorithms: the problems cross-task views are made of."""
    return [t for t in tables if len(normalised_scores(t)) >= 2]


def family_scores(tables: Sequence[Table]) -> dict[str, list[float]]:
    """Per family (role), the mean of its members' normalised scores on each problem where it appears
    (the mean, not the best member: a family's size must not raise its score)."""
    out: dict[str, list[float]] = {f: [] for f in FAMILIES}
    for t in problems(tables):
        scores = normalised_scores(t)
        roles = {r.algorithm: r.role for r in t.rows}
        for family in FAMILIES:
            members = [s for a, s in scores.items() if roles.get(a) == family]
            if members:
                out[family].append(float(np.mean(members)))
    return {f: v for f, v in out.items() if v}


def run_scores(table: Table) -> dict[str, np.ndarray]:
    """Row label -> its runs' primary values normalised within the table: 1 = the best run of any row,
    0 = the worst (all 1 when every run scored the same). Rows without finite values are left out."""
    higher = table.primary.higher_is_better
    values = {
        _label(r): np.asarray(r.primary_values, dtype=float)
        for r in table.rows
        if r.primary_values and np.isfinite(r.primary_values).all()
    }
    if not values:
        return {}
    pooled = np.concatenate(list(values.values()))
    best, worst = (pooled.max(), pooled.min()) if higher else (pooled.min(), pooled.max())
    span = best - worst
    return {k: np.ones_like(v) if span == 0 else (v - worst) / span for k, v in values.items()}


def _label(row: Row) -> str:
    return row.algorithm if not row.params_diff else f"{row.algorithm} {row.params_hash}"


def profiles(
    tables: Sequence[Table],
    by: str = "role",
    *,
    taus: Sequence[float] = TAUS,
    reps: int = PROFILE_REPS,
    seed: int = 0,
) -> dict[str, Profile]:
    """Performance profiles over runs with bootstrap bands, per family (``by="role"``) or per algorithm
    (``by="algorithm"``). Each problem where a group appears weighs the same; within a problem, each
    member of a family weighs the same, whatever its number of runs."""
    tau = np.asarray(taus, dtype=float)
    rng = np.random.default_rng(seed)
    # group -> list of (problem index, member weight, runs' scores)
    cells: dict[str, list[tuple[int, float, np.ndarray]]] = defaultdict(list)
    for p, table in enumerate(problems(tables)):
        scores = run_scores(table)
        groups: dict[str, list[np.ndarray]] = defaultdict(list)
        for row in table.rows:
            key = row.role if by == "role" else row.algorithm
            if _label(row) in scores:
                groups[key].append(scores[_label(row)])
        for key, members in groups.items():
            cells[key] += [(p, 1.0 / len(members), m) for m in members]
    out = {}
    for key in sorted(cells, key=lambda k: (FAMILIES.index(k) if k in FAMILIES else len(FAMILIES), k)):
        n_problems = len({p for p, _, _ in cells[key]})
        point = np.zeros(tau.size)
        boot = np.zeros((reps, tau.size))
        for _, weight, x in cells[key]:
            within = (1.0 - x)[:, None] <= tau[None, :] + 1e-12  # (runs, taus)
            point += weight * within.mean(axis=0)
            idx = rng.integers(0, x.size, size=(reps, x.size))
            boot += weight * within[idx].mean(axis=1)
        point /= n_problems
        boot /= n_problems
        low, high = np.quantile(boot, [0.025, 0.975], axis=0)
        out[key] = Profile(
            taus=tau.tolist(),
            fraction=point.tolist(),
            low=low.tolist(),
            high=high.tolist(),
            problems=n_problems,
            runs=sum(x.size for _, _, x in cells[key]),
        )
    return out


def performance_profile(scores: Sequence[float], taus: Sequence[float] = TAUS) -> list[float]:
    """Fraction of problems on which the shortfall from the best, 1 - score, is at most tau."""
    shortfall = 1.0 - np.asarray(scores, dtype=float)
    return [float((shortfall <= tau + 1e-12).mean()) for tau in taus]


def shared_algorithms(tables: Sequence[Table]) -> dict[str, dict[str, float]]:
    """Algorithm names that appear in two or more tasks -> task -> normalised score (main table)."""
    scores: dict[str, dict[str, float]] = defaultdict(dict)
    for task, here in by_task(problems(tables)).items():
        head = main_table(here)
        if head is not None:
            for algorithm, score in normalised_scores(head).items():
                scores[algorithm][task] = score
    return {a: s for a, s in sorted(scores.items()) if len(s) >= 2}


def ranks(tables: Sequence[Table]) -> dict[str, dict[str, int]]:
    """Task -> algorithm -> rank in the task's main table."""
    out = {}
    for task, here in sorted(by_task(tables).items()):
        head = main_table(here)
        if head is not None:
            out[task] = {r.algorithm: r.rank for r in head.rows if r.rank}
    return out


def improvement_matrix(table: Table) -> tuple[list[str], np.ndarray]:
    """Algorithms (ranked) and P(row improves on column) on the primary metric, over pairs of runs."""
    rows = [r for r in table.rows if r.primary_values]
    names = [r.algorithm for r in rows]
    matrix = np.full((len(rows), len(rows)), np.nan)
    for i, a in enumerate(rows):
        for j, b in enumerate(rows):
            if i != j:
                matrix[i, j] = stats.probability_of_improvement(
                    np.array(a.primary_values), np.array(b.primary_values), table.primary.higher_is_better
                )
    return names, matrix

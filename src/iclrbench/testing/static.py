"""Static checks of a task: what its class declares, checked without evaluating anything (ids, paper,
metrics, budgets, the defaults of its Config and of its algorithms' Params, its extra).

Each check takes the task instance and raises :class:`~iclrbench.testing.TaskContractError` naming every
problem it found, each saying what to change.
"""

from __future__ import annotations

import dataclasses
import re
from importlib import metadata
from typing import Any

from iclrbench.core import catalog
from iclrbench.core import config as cfg
from iclrbench.core.task import BUDGETS, Metric, Paper, Resources, Task
from iclrbench.testing.report import Failures

KEBAB = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")


def check_metadata(task: Task) -> None:
    """id kebab-case and the name the catalog knows the task by; version an int >= 1; a paper; metrics
    non-empty, unique by name; budgets smoke, small and paper, each named as its key; Config a dataclass."""
    fail = Failures("check_metadata")
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
    fail = Failures("check_budgets_build")
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


def _check_defaults(cls: type, what: str, fail: Failures) -> None:
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
    fail = Failures("check_params_defaults")
    _check_defaults(task.Config, f"{task.id} Config", fail)
    for name, algo in catalog.algorithms(task.id).items():
        _check_defaults(algo.Params, f"{name} Params", fail)
    fail.raise_if_any()


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
    fail = Failures("check_requirements")
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

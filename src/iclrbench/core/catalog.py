"""Where tasks and algorithms are found: the entry points of installed distributions -- this package's
own built-in tasks exactly as a plugin's.

A distribution adds a task with an entry point in group ``iclrbench.tasks`` (``task-id =
"pkg.module:TaskClass"``; the name must equal the class's ``id``) and algorithms with group
``iclrbench.algorithms`` (``name = "pkg.module"``, a module whose classes use
:func:`iclrbench.core.algorithm.register_algorithm`, or ``"pkg.module:Class"``). Nothing is registered
by importing a module as a side effect; the built-in tasks are the ``[project.entry-points]`` of
iclrbench's own ``pyproject.toml``.
"""

from __future__ import annotations

import importlib
import warnings
from importlib import metadata
from typing import TYPE_CHECKING

from iclrbench.core.algorithm import REGISTERED, Algorithm
from iclrbench.core.errors import UserError
from iclrbench.core.registry import Registry, did_you_mean

if TYPE_CHECKING:
    from iclrbench.core.task import Task

TASK_GROUP = "iclrbench.tasks"
ALGORITHM_GROUP = "iclrbench.algorithms"

_tasks: Registry[type[Task]] = Registry("task")
_algorithms: dict[str, Registry[type[Algorithm]]] = REGISTERED  # filled by register_algorithm
_state = {"tasks_loaded": False, "plugins_loaded": False}


class CatalogError(UserError):
    """iclrbench's own distribution declares a task inconsistently (a packaging bug): one line, exit 2."""


def _entry_points(group: str) -> list[metadata.EntryPoint]:
    # one entry per name: an editable install next to a stale copy of the same package lists both
    unique: dict[tuple[str, str], metadata.EntryPoint] = {}
    for ep in metadata.entry_points(group=group):
        unique.setdefault((ep.name, ep.value), ep)
    # the package's own tasks first, in their declared order; then plugins
    return sorted(unique.values(), key=lambda ep: ep.value.split(".")[0] != "iclrbench")


def _load_task(ep: metadata.EntryPoint) -> type[Task]:
    cls = ep.load()
    task_id = getattr(cls, "id", None)
    if task_id != ep.name:
        raise CatalogError(
            f"entry point '{ep.name} = {ep.value}' (group {TASK_GROUP}) names a task whose id is "
            f"{task_id!r}: the entry point's name must be the task's id"
        )
    return cls  # type: ignore[no-any-return]


def _ensure_tasks() -> None:
    if _state["tasks_loaded"]:
        return
    for ep in _entry_points(TASK_GROUP):
        if ep.value.split(".")[0] == "iclrbench":  # our own: a failure is ours, and loud
            cls = _load_task(ep)
        else:  # a third party's broken plugin must not take every command down with it
            try:
                cls = _load_task(ep)
            except Exception as exc:
                warnings.warn(f"iclrbench: plugin task '{ep.name}' skipped: {exc}", stacklevel=2)
                continue
        if cls.id not in _tasks:
            _tasks.add(cls.id, cls)
    _state["tasks_loaded"] = True  # only once every entry point was read


def _ensure_algorithms(task_cls: type[Task]) -> None:
    reason = task_cls.unavailable()
    if reason is not None:
        raise UserError(reason)
    for module in task_cls.algorithm_modules:
        importlib.import_module(module)
    if not _state["plugins_loaded"]:
        _state["plugins_loaded"] = True
        for ep in _entry_points(ALGORITHM_GROUP):
            ep.load()  # a module import or a class whose decorator registers it


def refresh() -> None:
    """Scan the entry points again, e.g. after installing a plugin into a running notebook."""
    _state["tasks_loaded"] = False
    _state["plugins_loaded"] = False
    _ensure_tasks()


def task_ids() -> list[str]:
    _ensure_tasks()
    return _tasks.names()


def available_task_ids() -> list[str]:
    """Ids of the tasks whose packages are installed here (the others are listed with their pip line)."""
    return [cls.id for cls in task_classes() if cls.unavailable() is None]


def get_task(task_id: str) -> Task:
    _ensure_tasks()
    if task_id not in _tasks.names():
        # a plugin installed after the entry points were read: a run's worker forks from a forkserver
        # whose catalog was read when it started, possibly before the plugin was on the path
        refresh()
    return _tasks.get(task_id)()


def task_classes() -> list[type[Task]]:
    """Every registered task class, built-ins first (no instance is made, nothing heavy imported)."""
    _ensure_tasks()
    return [_tasks.get(name) for name in _tasks.names()]


def algorithms(task_id: str) -> dict[str, type[Algorithm]]:
    """The task's algorithms by name, references first, then baselines, then oracles."""
    task = get_task(task_id)
    _ensure_algorithms(type(task))
    registry = _algorithms.get(task.id)
    if registry is None:
        return {}
    order = {"reference": 0, "baseline": 1, "oracle": 2}
    names = sorted(registry.names(), key=lambda n: (order[registry.get(n).role], registry.names().index(n)))
    return {name: registry.get(name) for name in names}


def get_algorithm(task_id: str, name: str) -> type[Algorithm]:
    known = algorithms(task_id)
    if name not in known:
        raise UserError(f"unknown algorithm '{name}' for task {task_id}{did_you_mean(name, list(known))}")
    return known[name]

"""Where tasks and algorithms are found: the built-in list, then the entry points of installed plugins.

Built-in tasks are named here explicitly (no registration by import side effect). A third-party package
adds a task with an entry point in group ``iclrbench.tasks`` (``name = "pkg.module:TaskClass"``) and
algorithms with group ``iclrbench.algorithms`` (``name = "pkg.module"``, a module whose classes use
:func:`iclrbench.core.algorithm.register_algorithm`, or ``"pkg.module:Class"``).
"""

from __future__ import annotations

import importlib
from importlib import metadata
from typing import TYPE_CHECKING

from iclrbench.core.errors import UserError
from iclrbench.core.registry import Registry, did_you_mean

if TYPE_CHECKING:
    from iclrbench.core.algorithm import Algorithm
    from iclrbench.core.task import Task

#: built-in tasks: id -> "module:Class"; modules import only numpy-level dependencies at top level
BUILTIN_TASKS: dict[str, str] = {
    "contextual-bilateral-trade": "iclrbench.benchmarks.bilateral_trade:BilateralTradeTask",
    "protein-combinatorial-bo": "iclrbench.benchmarks.protein:ProteinTask",
    "dp-hidden-state-audit": "iclrbench.benchmarks.dp_audit:DpAuditTask",
    "symmetric-crystal-generation": "iclrbench.benchmarks.crystals:CrystalTask",
}

_tasks: Registry[type[Task]] = Registry("task")
_algorithms: dict[str, Registry[type[Algorithm]]] = {}
_state = {"tasks_loaded": False, "plugins_loaded": False}


def _load(target: str) -> object:
    module_name, _, attr = target.partition(":")
    module = importlib.import_module(module_name)
    return getattr(module, attr) if attr else module


def _entry_points(group: str) -> list[metadata.EntryPoint]:
    return list(metadata.entry_points(group=group))


def _ensure_tasks() -> None:
    if _state["tasks_loaded"]:
        return
    _state["tasks_loaded"] = True
    for task_id, target in BUILTIN_TASKS.items():
        _tasks.add(task_id, _load(target))  # type: ignore[arg-type]
    for ep in _entry_points("iclrbench.tasks"):
        cls = ep.load()
        if cls.id not in _tasks:
            _tasks.add(cls.id, cls)


def _ensure_algorithms(task_cls: type[Task]) -> None:
    for module in task_cls.algorithm_modules:
        importlib.import_module(module)
    if not _state["plugins_loaded"]:
        _state["plugins_loaded"] = True
        for ep in _entry_points("iclrbench.algorithms"):
            ep.load()  # a module import or a class whose decorator registers it


def refresh() -> None:
    """Scan the entry points again, e.g. after installing a plugin into a running notebook."""
    _state["tasks_loaded"] = False
    _state["plugins_loaded"] = False
    _ensure_tasks()


def add_algorithm(cls: type[Algorithm]) -> None:
    _algorithms.setdefault(cls.task, Registry(f"algorithm of {cls.task}")).add(cls.name, cls)


def task_ids() -> list[str]:
    _ensure_tasks()
    return _tasks.names()


def get_task(task_id: str) -> Task:
    _ensure_tasks()
    return _tasks.get(task_id)()


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

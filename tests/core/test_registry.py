from __future__ import annotations

import dataclasses
from importlib import metadata

import pytest

from iclrbench.core import catalog
from iclrbench.core.algorithm import Algorithm, register_algorithm
from iclrbench.core.errors import UserError
from iclrbench.core.registry import Registry, did_you_mean

TASK = "contextual-bilateral-trade"


def test_registry_suggests_the_closest_name() -> None:
    reg: Registry[int] = Registry("widget")
    reg.add("horizon", 1)
    reg.add("noise", 2)
    with pytest.raises(UserError, match="unknown widget 'horizn'; did you mean 'horizon'"):
        reg.get("horizn")


def test_registry_lists_choices_when_nothing_is_close() -> None:
    assert did_you_mean("zzz", ["alpha", "beta"]) == "; choose from alpha, beta"


def test_registry_refuses_a_silent_overwrite() -> None:
    reg: Registry[object] = Registry("thing")
    reg.add("a", object())
    with pytest.raises(ValueError, match="already registered"):
        reg.add("a", object())


def test_unknown_task_and_algorithm_get_suggestions() -> None:
    with pytest.raises(UserError, match="did you mean 'contextual-bilateral-trade'"):
        catalog.get_task("contextual-bilateral-trad")
    with pytest.raises(UserError, match="did you mean 'ellipsoid-sbb'"):
        catalog.get_algorithm(TASK, "ellipsoid-sb")


def test_every_role_is_represented_and_references_come_first() -> None:
    algos = catalog.algorithms(TASK)
    roles = [a.role for a in algos.values()]
    assert roles == sorted(roles, key=["reference", "baseline", "oracle"].index)
    assert {"reference", "baseline", "oracle"} <= set(roles)


def test_a_plugin_algorithm_arrives_through_the_entry_point(monkeypatch: pytest.MonkeyPatch) -> None:
    """A third-party package registers an algorithm through the ``iclrbench.algorithms`` group."""

    def plugin_loader() -> None:
        @register_algorithm(task=TASK, name="plugin-constant", role="baseline")
        class Constant(Algorithm):
            """Always 0.5."""

    ep = metadata.EntryPoint(name="plugin", value="x:y", group="iclrbench.algorithms")
    monkeypatch.setattr(metadata.EntryPoint, "load", lambda self: plugin_loader())
    monkeypatch.setattr(
        catalog, "_entry_points", lambda group: [ep] if group == "iclrbench.algorithms" else []
    )
    monkeypatch.setitem(catalog._state, "plugins_loaded", False)
    try:
        assert catalog.algorithms(TASK)["plugin-constant"].summary() == "Always 0.5."
    finally:
        catalog._algorithms[TASK]._items.pop("plugin-constant", None)


def test_roles_are_checked() -> None:
    with pytest.raises(ValueError, match="role must be one of"):
        register_algorithm(task=TASK, name="x", role="champion")


def test_params_are_frozen_dataclasses() -> None:
    for algo in catalog.algorithms(TASK).values():
        assert dataclasses.is_dataclass(algo.Params)


def test_built_in_tasks_are_entry_points_named_by_their_id() -> None:
    """No central list: the package's own tasks are found exactly as plugins are."""
    eps = {ep.name: ep.value for ep in metadata.entry_points(group=catalog.TASK_GROUP)}
    for task_id in catalog.task_ids():
        if task_id == "noop":  # the test plugin, when a test has it on the path
            continue
        assert task_id in eps and eps[task_id].startswith("iclrbench.benchmarks.")


def test_an_entry_point_whose_name_is_not_the_task_id_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    ep = metadata.EntryPoint(
        name="bilateral",
        value="iclrbench.benchmarks.contextual_bilateral_trade:BilateralTradeTask",
        group="x",
    )
    monkeypatch.setattr(catalog, "_entry_points", lambda group: [ep] if group == catalog.TASK_GROUP else [])
    monkeypatch.setattr(catalog, "_tasks", Registry("task"))
    monkeypatch.setitem(catalog._state, "tasks_loaded", False)
    with pytest.raises(catalog.CatalogError, match=r"'bilateral = .*' .* id is 'contextual-bilateral-trade'"):
        catalog.task_ids()
    monkeypatch.setitem(catalog._state, "tasks_loaded", False)  # the next test scans afresh


def test_a_broken_plugin_task_is_skipped_with_a_warning_and_the_rest_still_load(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    good = metadata.EntryPoint(
        name=TASK, value="iclrbench.benchmarks.contextual_bilateral_trade:BilateralTradeTask", group="x"
    )
    broken = metadata.EntryPoint(name="their-task", value="no_such_plugin_module:Task", group="x")
    monkeypatch.setattr(
        catalog, "_entry_points", lambda group: [good, broken] if group == catalog.TASK_GROUP else []
    )
    monkeypatch.setattr(catalog, "_tasks", Registry("task"))
    monkeypatch.setitem(catalog._state, "tasks_loaded", False)
    with pytest.warns(UserWarning, match="plugin task 'their-task' skipped"):
        assert catalog.task_ids() == [TASK]
    monkeypatch.setitem(catalog._state, "tasks_loaded", False)

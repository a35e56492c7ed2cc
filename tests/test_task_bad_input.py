"""Every available task refuses bad input as the contract says -- one line on stderr, exit code 2, nothing
stored (the ``refused`` fixture) -- for the mistakes any task can be given: a misspelt algorithm, a
``--set`` that is not KEY=VALUE, a key the task does not have, a value of the wrong type, and a value
outside its field's declared bounds or choices.

Written once over the catalogue, so a new task is held to it the day its entry point lands; a task's own
tests keep only the refusals that are its own (its cross-field checks, its data's limits, an algorithm that
does not support a config).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from iclrbench.core import catalog
from iclrbench.core.task import Task
from tests.conftest import Refused

MISTAKES = ("misspelt-algorithm", "not-key-value", "unknown-key", "wrong-type", "out-of-bounds")
#: (task, mistake) -> why that task still fails that case: a strict xfail, so the fix is noticed
KNOWN_BUGS: dict[tuple[str, str], str] = {}


def _algorithm(task: Task) -> str:
    """The first algorithm (references come first) that supports the task's smoke config: a refusal must
    be the mistake's, not the algorithm's."""
    config = task.make_config("smoke")
    names = [name for name, cls in catalog.algorithms(task.id).items() if cls.supports(config) is None]
    assert names, f"no algorithm of {task.id} supports its smoke config"
    return names[0]


def _scalars(task: Task) -> list[dataclasses.Field[Any]]:
    """The Config's fields whose default is a plain number or string (not a flag, tuple or nested
    config): those a one-word wrong value is unambiguous for."""
    return [
        f
        for f in dataclasses.fields(task.Config)
        if isinstance(f.default, (int, float, str)) and not isinstance(f.default, bool)
    ]


def _out_of_bounds(field: dataclasses.Field[Any]) -> str | None:
    """A ``--set`` value that breaks the field's declared choices or bounds, or None if it declares none."""
    choices, low, high = (field.metadata.get(k) for k in ("choices", "low", "high"))
    integer = isinstance(field.default, int)
    if choices:
        numbers = [c for c in choices if isinstance(c, (int, float)) and not isinstance(c, bool)]
        return str(max(numbers) + 1) if len(numbers) == len(choices) else "not-one-of-the-choices"
    if low is not None:
        return str(int(low) - 1 if integer else low - 1.0)
    if high is not None:
        return str(int(high) + 1 if integer else high + 1.0)
    return None


def _mistake(task: Task, algorithm: str, mistake: str) -> tuple[list[str], str]:
    """(the ``bench run`` arguments after TASK, what the error line must say) for one mistake."""
    scalars = _scalars(task)
    first = scalars[0].name if scalars else dataclasses.fields(task.Config)[0].name
    if mistake == "misspelt-algorithm":
        return [f"{algorithm}x"], f"did you mean '{algorithm}'"
    if mistake == "not-key-value":
        return [algorithm, "--set", first], "expected KEY=VALUE"
    if mistake == "unknown-key":
        return [algorithm, "--set", "no_such_key=1"], f"not a config key of {task.id}"
    numeric = [f for f in scalars if isinstance(f.default, (int, float))]
    if mistake == "wrong-type":
        if not numeric:
            pytest.skip(f"{task.id}'s Config has no plain number to give a word")
        return [algorithm, "--set", f"{numeric[0].name}=not-a-number"], f"{numeric[0].name}: expected"
    bounded = [(f, value) for f in scalars if (value := _out_of_bounds(f)) is not None]
    if not bounded:
        pytest.skip(f"{task.id}'s Config declares no bounds or choices")
    field, value = bounded[0]
    return [algorithm, "--set", f"{field.name}={value}"], field.name


@pytest.mark.parametrize("mistake", MISTAKES)
@pytest.mark.parametrize("task_id", catalog.available_task_ids())
def test_bad_input_is_one_line_exit_2_nothing_stored(
    refused: Refused, request: pytest.FixtureRequest, task_id: str, mistake: str
) -> None:
    if (task_id, mistake) in KNOWN_BUGS:
        request.applymarker(pytest.mark.xfail(reason=KNOWN_BUGS[task_id, mistake], strict=True))
    task = catalog.get_task(task_id)
    args, says = _mistake(task, _algorithm(task), mistake)
    error = refused("run", task_id, *args, "--budget", "smoke", "--seeds", "0", "--quiet")
    assert says in error, error

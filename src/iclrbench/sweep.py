"""Sweep files: a grid of tasks x algorithms x config values x seeds at one budget, as YAML.

.. code-block:: yaml

    budget: smoke            # smoke | small | paper (default small)
    seeds: 0-4               # as --seeds: 0-4, 0,3,7
    tasks:
      contextual-bilateral-trade:
        algorithms: [ellipsoid-sbb, random-price]   # or "all" (the default)
        set: {noise: 0.0}                           # fixed --set values for every grid point
        grid:                                       # every combination of these values
          d: [4, 8]
          horizon: [1000, 10000]

A task may also be a list of such blocks (several grids for one task). Each grid point becomes
``runner.plan(task, algorithms, seeds, budget, set + point)``, so keys are checked exactly like ``--set``
(config key, algorithm parameter, or ``ALGO.key``). The plan's order is deterministic; ``--shard i/n``
takes the i-th of n contiguous, equal slices of it (0-based, as ``$SLURM_ARRAY_TASK_ID`` with
``--array=0-(n-1)``): contiguous so that a slice keeps the seeds of one algorithm together, which the
runner batches.
"""

from __future__ import annotations

import itertools
import json
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from iclrbench import runner
from iclrbench.core import catalog
from iclrbench.core.errors import UserError
from iclrbench.core.registry import did_you_mean
from iclrbench.core.task import BUDGETS

TOP_KEYS = ("budget", "seeds", "tasks")
BLOCK_KEYS = ("algorithms", "set", "grid")
#: the most runs one sweep file may describe (a 40 M-point grid once hung while planning)
MAX_SWEEP_RUNS = 100_000


def load_sweep(path: str | Path) -> dict[str, Any]:
    """The parsed sweep file (``yaml.safe_load``: data only, never objects)."""
    import yaml

    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise UserError(f"sweep file {path}: cannot read ({exc.strerror})") from None
    except UnicodeDecodeError as exc:
        raise UserError(f"sweep file {path}: not UTF-8 text (byte {exc.start}); save it as UTF-8") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        line = f" at line {where.line + 1}" if where is not None else ""
        raise UserError(f"sweep file {path}: not valid YAML{line}") from None
    if not isinstance(data, dict):
        raise UserError(f"sweep file {path}: expected a mapping with keys {', '.join(TOP_KEYS)}")
    for key in data:
        if key not in TOP_KEYS:
            raise UserError(f"sweep file {path}: unknown key '{key}'{did_you_mean(str(key), list(TOP_KEYS))}")
    if not isinstance(data.get("tasks"), dict) or not data["tasks"]:
        raise UserError(f"sweep file {path}: 'tasks' must map task ids to their grids")
    return data


def _as_text(value: Any) -> str:
    """A YAML value as the string ``--set`` would have received: scalars as written, lists and mappings
    (a ``tuple[int, ...]`` or a nested-dataclass field) as JSON, which the config parser reads."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float, str)):
        return str(value)
    if isinstance(value, (list, dict)):
        try:
            return json.dumps(value)
        except (TypeError, ValueError):  # a YAML date or timestamp inside
            raise UserError(
                f"sweep value {value!r}: lists and mappings may hold numbers, strings and booleans"
            ) from None
    raise UserError(f"sweep value {value!r}: expected a number, string, boolean, list or mapping")


def _grid_axes(grid: Any, where: str) -> tuple[list[str], list[list[str]]]:
    """The grid's keys and, per key, its values as text (a scalar is a one-value axis)."""
    if grid is None:
        return [], []
    if not isinstance(grid, dict):
        raise UserError(f"{where}: 'grid' must map keys to lists of values")
    keys = list(grid)
    values = []
    for k in keys:
        v = grid[k]
        v = v if isinstance(v, list) else [v]
        if not v:
            raise UserError(f"{where}: grid key '{k}' has no values")
        values.append([_as_text(x) for x in v])
    return keys, values


def _blocks(data: Mapping[str, Any]) -> Iterator[tuple[str, str, list[str], bool, dict[str, Any], Any]]:
    """Each block of the sweep, validated: (task id, where, algorithm names, all?, fixed sets, grid)."""
    for task_id, blocks in data["tasks"].items():
        catalog.get_task(str(task_id))
        for i, block in enumerate(blocks if isinstance(blocks, list) else [blocks or {}]):
            where = f"sweep task {task_id}" + (f" block {i + 1}" if isinstance(blocks, list) else "")
            if not isinstance(block, dict):
                raise UserError(f"{where}: expected a mapping with keys {', '.join(BLOCK_KEYS)}")
            for key in block:
                if key not in BLOCK_KEYS:
                    raise UserError(f"{where}: unknown key '{key}'{did_you_mean(str(key), list(BLOCK_KEYS))}")
            names = block.get("algorithms", "all")
            everything = names == "all"
            names = list(catalog.algorithms(task_id)) if everything else names
            if not isinstance(names, list) or not names:
                raise UserError(f"{where}: 'algorithms' must be 'all' or a list of names")
            fixed = block.get("set") or {}
            if not isinstance(fixed, dict):
                raise UserError(f"{where}: 'set' must map keys to values")
            yield str(task_id), where, [str(n) for n in names], everything, fixed, block.get("grid")


def plan_sweep(data: Mapping[str, Any]) -> list[runner.RunSpec]:
    """Every run the sweep describes, validated before anything runs, duplicates removed. The size of the
    whole grid (points x algorithms x seeds) is counted from its axes first, and a sweep of more than
    :data:`MAX_SWEEP_RUNS` runs is refused before a single point is expanded."""
    budget = str(data.get("budget", "small"))
    if budget not in BUDGETS:
        raise UserError(f"sweep budget '{budget}': expected one of {', '.join(BUDGETS)}")
    seeds = runner.parse_seeds(_as_text(data.get("seeds", "0-4")))
    blocks = list(_blocks(data))
    total = 0
    for _task, where, names, _every, _fixed, grid in blocks:
        _keys, values = _grid_axes(grid, where)
        total += math.prod(len(v) for v in values) * len(names) * len(seeds)
        if total > MAX_SWEEP_RUNS:
            raise UserError(
                f"the sweep has more than {MAX_SWEEP_RUNS:,} runs (at {where}); "
                "split it into several sweep files"
            )
    specs: dict[str, runner.RunSpec] = {}
    for task_id, where, names, everything, fixed, grid in blocks:
        keys, values = _grid_axes(grid, where)
        for combo in itertools.product(*values):
            sets = {**{k: _as_text(v) for k, v in fixed.items()}, **dict(zip(keys, combo, strict=True))}
            for spec in runner.plan(task_id, names, seeds, budget, sets, skip_unsupported=everything):
                specs.setdefault(spec.key, spec)
    return list(specs.values())


def parse_shard(text: str) -> tuple[int, int]:
    """``"2/8"`` -> (2, 8): the third of eight slices (0-based index)."""
    match = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text)
    if match is None or int(match[2]) < 1 or int(match[1]) >= int(match[2]):
        raise UserError(f"--shard '{text}': expected i/n with 0 <= i < n, e.g. 0/4")
    return int(match[1]), int(match[2])


def shard(specs: Sequence[runner.RunSpec], index: int, count: int) -> list[runner.RunSpec]:
    """The ``index``-th of ``count`` contiguous slices, sizes differing by at most one: disjoint, and
    together the whole sweep."""
    start, stop = (len(specs) * index) // count, (len(specs) * (index + 1)) // count
    return list(specs[start:stop])

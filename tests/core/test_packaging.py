"""What ``make setup`` installs is derived from the registered tasks: each task's extra exists and the
``all`` extra (the Makefile's) includes it; each task's gym ids are registered on ``import iclrbench``."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import gymnasium
import tomllib

import iclrbench  # noqa: F401  (registers the gym ids)
from iclrbench.core import catalog

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def _builtin_tasks() -> list[type]:
    return [t for t in catalog.task_classes() if t.__module__.startswith("iclrbench.")]


def test_every_task_extra_is_declared_and_in_the_all_extra() -> None:
    extras = PYPROJECT["project"]["optional-dependencies"]
    in_all = set(re.findall(r"\[([^\]]+)\]", " ".join(extras["all"]))[0].split(","))
    for task in _builtin_tasks():
        extra = task.requires.extra
        if extra:
            assert extra in extras, f"{task.id}: extra '{extra}' is not declared in pyproject.toml"
            assert extra in in_all, f"{task.id}: extra '{extra}' is missing from the 'all' extra"


def test_the_makefile_installs_the_all_extra_not_a_list_per_task() -> None:
    makefile = (ROOT / "Makefile").read_text()
    assert "EXTRAS := dev,all" in makefile and "-e '.[$(EXTRAS)]'" in makefile
    for task in _builtin_tasks():
        if task.requires.extra:
            assert f",{task.requires.extra}" not in makefile


def test_every_task_gym_id_is_registered_on_import() -> None:
    for task in catalog.task_classes():
        for env_id in task.gym_envs:
            assert env_id in gymnasium.registry


def test_import_iclrbench_loads_no_heavy_library() -> None:
    """``bench list`` stays fast: importing the package (and so every task module) imports no torch."""
    heavy = "('torch', 'botorch', 'pymatgen', 'opacus', 'pyxtal')"
    code = f"import sys, iclrbench; print(sorted(m for m in {heavy} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_task_modules_and_the_core_never_import_the_leaderboard() -> None:
    """Persistence and statistics are core; presentation depends on them, never the other way."""
    src = ROOT / "src" / "iclrbench"
    folders = ("core", "benchmarks", "envs", "algorithms", "baselines", "models")
    offenders = [
        str(path.relative_to(src))
        for folder in folders
        for path in (src / folder).glob("*.py")
        if "iclrbench.leaderboard" in path.read_text()
    ]
    assert offenders == []

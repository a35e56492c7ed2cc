"""The layout of docs/architecture.md, held by the code: one stem per task across the parts, imports only
down the floors, no task importing another's modules, no import circle in core, no file over 600 lines.

Every ``import`` counts, a late one inside a function too (a circle broken by a late import is still a
circle); imports under ``if TYPE_CHECKING:`` never run, so the floors leave them out, but core's circle
test counts them: a circle of type hints is still two modules that cannot be read apart.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import tomllib

from iclrbench.core import catalog

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "iclrbench"
#: the floors, lowest first: a module imports only from lower floors, or from its own part
FLOORS = {
    "core": 0,
    "executors": 1,
    "leaderboard": 1,
    "models": 2,
    "envs": 3,
    "algorithms": 4,
    "baselines": 5,
    "benchmarks": 6,
    "results": 7,
    "runner": 8,
    "claims": 9,
    "sweep": 9,
    "testing": 10,
    "cli": 11,
    "__init__": 12,
}
TASK_PARTS = ("envs", "algorithms", "baselines", "benchmarks")
MAX_LINES = 600


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    if parts[-1] == "__init__" and len(parts) > 2:
        parts.pop()
    return ".".join(parts)


def _type_checking_block(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def imports_of(path: Path, *, typing: bool = False) -> set[str]:
    """The iclrbench modules ``path`` imports (``from X import y`` counts ``X.y`` when that is a module);
    ``typing`` includes those under ``if TYPE_CHECKING:``. The package root itself is not counted."""
    tree = ast.parse(path.read_text())
    skipped = (
        set()
        if typing
        else {id(n) for node in ast.walk(tree) if _type_checking_block(node) for n in ast.walk(node)}
    )
    out: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith("iclrbench"))
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("iclrbench"):
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                out.add(sub if sub in MODULES else node.module)
    out.discard("iclrbench")
    return out


def _sources() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(SRC.rglob("*.py"))}


MODULES = _sources()


def part_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def stem_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[1] in TASK_PARTS else None


def test_every_module_has_a_floor() -> None:
    unknown = sorted({part_of(m) for m in MODULES} - set(FLOORS))
    assert not unknown, f"parts without a floor in this test: {unknown}"


def test_imports_go_down_the_floors() -> None:
    climbing = []
    for module, path in MODULES.items():
        mine = part_of(module)
        for target in imports_of(path):
            theirs = part_of(target)
            if theirs != mine and FLOORS[theirs] >= FLOORS[mine]:
                climbing.append(f"{module} -> {target}")
    assert not climbing, "imports that climb a floor:\n" + "\n".join(climbing)


def test_no_task_imports_another_tasks_modules() -> None:
    crossing = []
    for module, path in MODULES.items():
        stem = stem_of(module)
        for target in imports_of(path):
            theirs = stem_of(target)
            if theirs is not None and stem is not None and theirs != stem:
                crossing.append(f"{module} -> {target}")
            if theirs is not None and part_of(module) in ("core", "models", "leaderboard", "executors"):
                crossing.append(f"{module} -> {target} (a shared part imports a task)")
    assert not crossing, "\n".join(crossing)


def test_core_has_no_circle() -> None:
    core = {
        m: {t for t in imports_of(p, typing=True) if part_of(t) == "core" and t != m}
        for m, p in MODULES.items()
    }
    core = {m: deps for m, deps in core.items() if part_of(m) == "core"}
    state: dict[str, int] = {}

    def visit(node: str, path: list[str]) -> list[str] | None:
        state[node] = 1
        for dep in sorted(core.get(node, ())):
            if state.get(dep) == 1:
                return [*path, node, dep]
            if dep not in state and (found := visit(dep, [*path, node])):
                return found
        state[node] = 2
        return None

    for module in sorted(core):
        if module not in state and (cycle := visit(module, [])):
            pytest.fail("import circle in core: " + " -> ".join(cycle))


def test_one_stem_per_task() -> None:
    """Each built-in task's modules carry its id with underscores, in every part that has one."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    entry_points = project["project"]["entry-points"]["iclrbench.tasks"]
    stems = set()
    for task_id, target in entry_points.items():
        stem = task_id.replace("-", "_")
        stems.add(stem)
        assert target.split(":")[0] == f"iclrbench.benchmarks.{stem}", (
            f"{task_id}'s task is not under its stem"
        )
        assert (ROOT / "tests" / stem).is_dir(), f"{task_id} has no tests/{stem}/"
        assert (ROOT / "docs" / "tasks" / f"{stem}.md").is_file(), f"{task_id} has no docs/tasks/{stem}.md"
        assert catalog.get_task(task_id).docs_page() == f"docs/tasks/{stem}.md", (
            "bench info names another page"
        )
    strays = sorted(
        m for m in MODULES if stem_of(m) is not None and stem_of(m) != "__init__" and stem_of(m) not in stems
    )
    assert not strays, f"task modules whose name is no task's stem: {strays}"


def test_no_source_file_over_the_limit() -> None:
    long = {
        str(p.relative_to(ROOT)): n
        for p in SRC.rglob("*.py")
        if (n := len(p.read_text().splitlines())) > MAX_LINES
    }
    assert not long, f"over {MAX_LINES} lines (make the part a package of the same name): {long}"

"""What a contract check reports: the error a failing task raises, and the per-check record of one
:func:`~iclrbench.testing.check_task` call. Shared by the static and the run checks."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence


class TaskContractError(AssertionError):
    """A task breaks its contract. ``problems`` lists ``(check name, message)``; ``report`` is the full
    :class:`CheckReport` when raised by :func:`~iclrbench.testing.check_task`. An AssertionError, so that
    pytest shows it as a test failure with its message."""

    def __init__(self, problems: Sequence[tuple[str, str]], report: CheckReport | None = None) -> None:
        self.problems = list(problems)
        self.report = report
        task = f"task '{report.task}' " if report is not None else ""
        checks = sorted({name for name, _ in self.problems})
        lines = [f"{task}fails {len(checks)} contract check(s): {', '.join(checks)}"]
        lines += [f"  {name}: {message}" for name, message in self.problems]
        super().__init__("\n".join(lines))


@dataclasses.dataclass
class CheckOutcome:
    """One check's result: ``problems`` empty when it passed; ``skipped`` the reason it did not apply."""

    name: str
    seconds: float
    problems: list[str] = dataclasses.field(default_factory=list)
    skipped: str = ""
    notes: list[str] = dataclasses.field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


@dataclasses.dataclass
class CheckReport:
    """Every check of one :func:`~iclrbench.testing.check_task` call, in order, with its wall time."""

    task: str
    budget: str
    seeds: tuple[int, ...]
    checks: list[CheckOutcome] = dataclasses.field(default_factory=list)
    runs: int = 0

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    @property
    def seconds(self) -> float:
        return sum(c.seconds for c in self.checks)

    @property
    def problems(self) -> list[tuple[str, str]]:
        return [(c.name, p) for c in self.checks for p in c.problems]

    def timings(self) -> dict[str, float]:
        """Check name -> seconds."""
        return {c.name: round(c.seconds, 3) for c in self.checks}

    def __str__(self) -> str:
        lines = [
            f"{self.task} at {self.budget}, seeds {list(self.seeds)}: {self.runs} runs, {self.seconds:.1f} s"
        ]
        for c in self.checks:
            state = "FAIL" if c.problems else ("skip" if c.skipped else "ok")
            extra = f" ({c.skipped})" if c.skipped else ""
            lines.append(f"  {state:4} {c.name:24} {c.seconds:8.2f} s{extra}")
            lines += [f"       {p}" for p in c.problems]
        return "\n".join(lines)


class Failures:
    """Collects one check's problems, so that a check reports all of them rather than the first;
    ``raise_if_any`` raises them as one :class:`TaskContractError`."""

    def __init__(self, check: str) -> None:
        self.check = check
        self.problems: list[str] = []

    def add(self, message: str) -> None:
        self.problems.append(message)

    def raise_if_any(self) -> None:
        if self.problems:
            raise TaskContractError([(self.check, p) for p in self.problems])


class Skip(Exception):
    """Raised by a check that does not apply to this task (no gym env, no batched path), with the
    reason; :func:`~iclrbench.testing.check_task` records it as skipped, not failed."""

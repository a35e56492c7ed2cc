"""Trained artifacts a verdict rests on, and how good each one is.

A task that trains a model once and analyses it (icl-circuit's tiny subject, latent-perceptual-loss's
autoencoder and evaluator, the vision-language image tower, ...) reports each such model's quality with every
run: the figures it reached on held-out data when it was trained, the floors it was checked against before
any analysis ran, the tolerance within which the same seed lands on another machine, and how long it
trained. The runner stores them in the run's provenance (``provenance["artifacts"]``); ``bench claims`` and
the claims panel show them beside each verdict, so a verdict always says what subject it was measured on.

Why: a model trained for a fixed number of steps near a phase transition can come out formed on one machine
and not on another (float sums in another order), and the verdict flips with it. A floor turns that into a
failed run that says so, instead of a silent change of verdict.
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Mapping, Sequence
from typing import Any

_OPS = {">=": operator.ge, "<=": operator.le}
#: the key of a verdict's measured figures under which the artifacts' quality is stored and shown
ARTIFACTS_KEY = "artifacts"


class ArtifactBelowFloor(RuntimeError):
    """A trained artifact missed one of its floors: the analyses built on it would say nothing. Carries the
    artifact's ``quality``, which the runner stores in the failed run's provenance."""

    def __init__(self, message: str, quality: ArtifactQuality) -> None:
        super().__init__(message)
        self.quality = quality


@dataclasses.dataclass(frozen=True)
class Floor:
    """``figure op bound``, e.g. ``Floor("accuracy", ">=", 0.95)``."""

    figure: str
    op: str
    bound: float

    def __post_init__(self) -> None:
        if self.op not in _OPS:
            raise ValueError(f"floor op: one of {', '.join(_OPS)}, not {self.op!r}")

    def holds(self, value: float) -> bool:
        return bool(_OPS[self.op](value, self.bound))

    def __str__(self) -> str:
        return f"{self.figure} {self.op} {self.bound:g}"


@dataclasses.dataclass(frozen=True)
class ArtifactQuality:
    """One trained artifact's quality, as measured when it was trained.

    ``figures``: quality on held-out data (accuracy, reconstruction error, loss); ``floors``: what each
    figure must reach before an analysis may rest on it; ``tolerance``: how far each figure may move on
    another machine or thread count for the same seed (the artifact's test checks it); ``trained``: how it
    was trained, e.g. "2,750 steps, converged (stopped at the second check above the floors)".
    """

    name: str
    figures: Mapping[str, float]
    floors: tuple[Floor, ...] = ()
    tolerance: Mapping[str, float] = dataclasses.field(default_factory=dict)
    trained: str = ""

    def shortfalls(self) -> list[str]:
        """The floors missed, each as ``figure value (needs op bound)``; empty when all hold."""
        return [
            f"{f.figure} {self.figures.get(f.figure, float('nan')):.4g} (needs {f.op} {f.bound:g})"
            for f in self.floors
            if not f.holds(float(self.figures.get(f.figure, float("nan"))))
        ]

    def check(self, hint: str = "") -> ArtifactQuality:
        """``self`` when every floor holds; else :class:`ArtifactBelowFloor` naming what missed and how to
        fix it (``hint``, e.g. "train longer: --set train_steps=...")."""
        missed = self.shortfalls()
        if missed:
            after = self.trained or "training"
            message = f"the {self.name} did not reach its floors ({'; '.join(missed)}) after {after}" + (
                f": {hint}" if hint else ""
            )
            raise ArtifactBelowFloor(" ".join(message.split()), self)  # one line, whatever the names hold
        return self

    def as_json(self) -> dict[str, Any]:
        """Plain JSON for a run's provenance (:meth:`from_json` reads it back)."""
        return {
            "figures": {k: float(v) for k, v in self.figures.items()},
            "floors": [str(f) for f in self.floors],
            "tolerance": {k: float(v) for k, v in self.tolerance.items()},
            "trained": self.trained,
        }

    @classmethod
    def from_json(cls, name: str, data: Mapping[str, Any]) -> ArtifactQuality:
        floors = []
        for text in data.get("floors", ()):
            figure, op, bound = str(text).rsplit(" ", 2)
            floors.append(Floor(figure, op, float(bound)))
        return cls(
            name,
            {k: float(v) for k, v in data.get("figures", {}).items()},
            tuple(floors),
            {k: float(v) for k, v in data.get("tolerance", {}).items()},
            str(data.get("trained", "")),
        )


def provenance_entry(artifacts: Sequence[ArtifactQuality]) -> dict[str, Any]:
    """``provenance["artifacts"]`` of a run: each artifact's JSON by name."""
    return {a.name: a.as_json() for a in artifacts}


def _span(values: Sequence[float]) -> str:
    lo, hi = min(values), max(values)
    return f"{lo:.4g}" if lo == hi else f"{lo:.4g} to {hi:.4g}"


def summarise(provenances: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """One line per artifact over the runs' provenances (a claim's runs): each figure's value, or its range
    where runs rested on different copies, then the floors and how it was trained. Runs without
    artifacts add nothing; an empty dict when none had any."""
    seen: dict[str, list[ArtifactQuality]] = {}
    for prov in provenances:
        for name, data in (prov.get("artifacts") or {}).items():
            if isinstance(data, Mapping):
                seen.setdefault(name, []).append(ArtifactQuality.from_json(name, data))
    out = {}
    for name, copies in seen.items():
        figures = list(dict.fromkeys(k for a in copies for k in a.figures))
        parts = [f"{k} {_span([a.figures[k] for a in copies if k in a.figures])}" for k in figures]
        floors = list(dict.fromkeys(str(f) for a in copies for f in a.floors))
        trained = list(dict.fromkeys(a.trained for a in copies if a.trained))
        line = ", ".join(parts)
        if floors:
            line += f" (floors: {', '.join(floors)})"
        if trained:
            line += "; " + " / ".join(trained)
        out[name] = line
    return out

"""Typed, validated parameters: task configs and algorithm hyperparameters are frozen dataclasses.

A field is declared with :func:`param`, which records help text, allowed choices and bounds. Values given
as strings on the command line (``--set horizon=100000``) are parsed to the field's type and checked here,
so every task and algorithm gets the same errors for the same mistakes.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import typing
from collections.abc import Mapping
from typing import Any, TypeVar

from iclrbench.core.errors import UserError
from iclrbench.core.registry import did_you_mean

C = TypeVar("C")

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def param(
    default: Any,
    help: str,
    *,
    choices: tuple[Any, ...] | None = None,
    low: float | None = None,
    high: float | None = None,
) -> Any:
    """A dataclass field with a default, a help line, and optional choices or inclusive bounds."""
    return dataclasses.field(
        default=default, metadata={"help": help, "choices": choices, "low": low, "high": high}
    )


def _field_types(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def parse_value(cls: type, name: str, raw: Any) -> Any:
    """Convert ``raw`` (a string from the CLI, or a Python value) to the declared type of ``cls.name``."""
    kind = _field_types(cls)[name]
    if not isinstance(raw, str):
        if kind is float and isinstance(raw, int) and not isinstance(raw, bool):
            return float(raw)
        if (kind is bool and not isinstance(raw, bool)) or (kind is not bool and not isinstance(raw, kind)):
            raise UserError(f"{name}: expected {kind.__name__}, got {raw!r}")
        return raw
    text = raw.strip()
    try:
        if kind is bool:
            if text.lower() in _TRUE:
                return True
            if text.lower() in _FALSE:
                return False
            raise ValueError
        if kind is int:
            number = float(text.replace("_", ""))  # accepts 1e5 and 100_000
            if not number.is_integer():
                raise ValueError
            return int(number)
        if kind is float:
            return float(text)
        return kind(text)
    except ValueError:
        raise UserError(f"{name}: expected {kind.__name__}, got '{raw}'") from None


def check(instance: Any) -> None:
    """Check choices and bounds of every field; raise :class:`UserError` naming the first bad field."""
    for f in dataclasses.fields(instance):
        value = getattr(instance, f.name)
        choices, low, high = f.metadata.get("choices"), f.metadata.get("low"), f.metadata.get("high")
        if choices is not None and value not in choices:
            options = ", ".join(map(str, choices))
            raise UserError(f"{f.name}: '{value}' is not one of {options}")
        if low is not None and value < low:
            raise UserError(f"{f.name}: {value} is below the minimum {low}")
        if high is not None and value > high:
            raise UserError(f"{f.name}: {value} is above the maximum {high}")


def build(cls: type[C], overrides: Mapping[str, Any] | None = None, *, what: str = "config") -> C:
    """An instance of the dataclass ``cls`` with ``overrides`` parsed, applied and validated."""
    names = [f.name for f in dataclasses.fields(cls)]
    values: dict[str, Any] = {}
    for key, raw in (overrides or {}).items():
        if key not in names:
            raise UserError(f"unknown {what} key '{key}'{did_you_mean(key, names)}")
        values[key] = parse_value(cls, key, raw)
    try:
        instance = cls(**values)
    except ValueError as exc:  # __post_init__ cross-field checks
        raise UserError(str(exc)) from None
    check(instance)
    return instance


def as_dict(instance: Any) -> dict[str, Any]:
    return dataclasses.asdict(instance) if dataclasses.is_dataclass(instance) else {}


def stable_hash(data: Mapping[str, Any]) -> str:
    """A short hash of a JSON-able mapping, independent of key order."""
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def describe(cls: type) -> list[dict[str, Any]]:
    """One row per field: name, type, default, help, choices, bounds (for ``bench info``)."""
    rows = []
    hints = _field_types(cls)
    for f in dataclasses.fields(cls):
        rows.append(
            {
                "name": f.name,
                "type": getattr(hints[f.name], "__name__", str(hints[f.name])),
                "default": f.default,
                "help": f.metadata.get("help", ""),
                "choices": f.metadata.get("choices"),
                "low": f.metadata.get("low"),
                "high": f.metadata.get("high"),
            }
        )
    return rows


@dataclasses.dataclass(frozen=True)
class NoParams:
    """For algorithms without hyperparameters."""

"""Typed, validated parameters: task configs and algorithm hyperparameters are frozen dataclasses.

A field is declared with :func:`param`, which records help text, allowed choices and bounds. Values given
as strings on the command line (``--set horizon=100000``) or as Python values (budgets, sweep files,
the ``as_dict`` of a stored run) are parsed to the field's declared type and checked here, so every task
and algorithm gets the same one-line errors for the same mistakes: :func:`build` makes a config from
overrides, :func:`check` holds an instance to its choices and bounds, :func:`as_dict` and
:func:`stable_hash` give what run keys hash, :func:`describe` what ``bench info`` shows.

The types a field may declare and the ``--set`` text of each are :mod:`iclrbench.core.settings_text` (the
text codec); the typing of a structured value is :mod:`iclrbench.core.field_types` (pydantic v2, imported
on the first value that needs it, never at import time, so that ``bench list`` stays fast).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping
from typing import Any, TypeVar

from iclrbench.core.errors import UserError
from iclrbench.core.field_types import (
    BadValue,
    allows_none,
    field_types,
    has_nonfinite,
    nested_class,
    plain_data,
    reason,
    show,
    type_name,
    validate,
)
from iclrbench.core.registry import did_you_mean
from iclrbench.core.settings_text import from_python, from_text, is_none_text, same, short_text

C = TypeVar("C")


def param(
    default: Any,
    help: str,
    *,
    choices: tuple[Any, ...] | None = None,
    low: float | None = None,
    high: float | None = None,
    allow_nonfinite: bool = False,
) -> Any:
    """A dataclass field with a default, a help line, and optional choices or inclusive bounds.

    Bounds apply to a number and to every number of a tuple. Floats must be finite (no ``nan``, ``inf``)
    unless ``allow_nonfinite`` is true: a non-finite noise level or scale is almost always a typo that
    would otherwise be stored as a run with ``nan`` metrics.
    """
    return dataclasses.field(
        default=default,
        metadata={
            "help": help,
            "choices": choices,
            "low": low,
            "high": high,
            "allow_nonfinite": allow_nonfinite,
        },
    )


# -------------------------------------------------------------------------------------------- parsing
def _field(cls: type, name: str) -> dataclasses.Field[Any]:
    for f in dataclasses.fields(cls):
        if f.name == name:
            return f
    raise UserError(f"unknown key '{name}'{did_you_mean(name, [f.name for f in dataclasses.fields(cls)])}")


def _field_default(f: dataclasses.Field[Any]) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return dataclasses.MISSING


def parse_value(cls: type, name: str, raw: Any, *, key: str | None = None) -> Any:
    """Convert ``raw`` (a string from the CLI, or a Python value) to the declared type of ``cls.name``.

    Raises :class:`UserError` with one line naming the key (``key``, default ``name``), the expected type
    and the bad value. A nested dataclass field is built from a mapping (or JSON object text) on top of
    the field's default.
    """
    key = key or name
    f = _field(cls, name)
    kind = field_types(cls)[name]
    nested = nested_class(kind)
    if nested is not None:
        return _parse_nested(nested, f, kind, raw, key)
    try:
        value = validate(kind, from_text(kind, raw) if isinstance(raw, str) else from_python(kind, raw))
    except BadValue as exc:
        raise UserError(f"{key}: expected {type_name(kind)}, got {show(raw)}{reason(exc)}") from None
    if not f.metadata.get("allow_nonfinite", False) and has_nonfinite(value):
        raise UserError(
            f"{key}: expected a finite {type_name(kind)}, got {show(raw)} (this field takes no nan or inf)"
        )
    return value


def _parse_nested(nested: type, f: dataclasses.Field[Any], kind: Any, raw: Any, key: str) -> Any:
    if raw is None or (isinstance(raw, str) and is_none_text(raw)):
        if allows_none(kind):
            return None
        raise UserError(f"{key}: expected {type_name(kind)}, got {show(raw)}")
    if isinstance(raw, nested):
        check(raw, prefix=f"{key}.")
        return raw
    data = raw
    if isinstance(raw, str):
        try:
            data = json.loads(raw)
        except ValueError:
            data = None
    if not isinstance(data, Mapping):
        example = f'{{"{dataclasses.fields(nested)[0].name}": ...}}'
        raise UserError(
            f"{key}: expected {type_name(kind)} as a JSON object such as {example} "
            f"or dotted keys {key}.KEY=VALUE, got {show(raw)}"
        )
    default = _field_default(f)
    base = as_dict(default) if isinstance(default, nested) else {}
    return _build(nested, {**base, **data}, what="config", prefix=f"{key}.")


def check(instance: Any, *, prefix: str = "") -> None:
    """Check choices, bounds and finiteness of every field (nested too); raise :class:`UserError` naming
    the first bad field."""
    for f in dataclasses.fields(instance):
        value = getattr(instance, f.name)
        name = prefix + f.name
        if value is None:
            continue  # an Optional field left empty: nothing to bound
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            check(value, prefix=f"{name}.")
            continue
        choices, low, high = f.metadata.get("choices"), f.metadata.get("low"), f.metadata.get("high")
        if choices is not None and value not in choices:
            options = ", ".join(map(str, choices))
            raise UserError(f"{name}: {show(value)} is not one of {options}")
        if not f.metadata.get("allow_nonfinite", False) and has_nonfinite(value):
            raise UserError(f"{name}: {show(value)} is not finite (this field takes no nan or inf)")
        numbers = value if isinstance(value, (tuple, list)) else (value,)
        for number in numbers:
            if isinstance(number, bool) or not isinstance(number, (int, float)):
                continue
            if low is not None and number < low:
                raise UserError(f"{name}: {number} is below the minimum {low}")
            if high is not None and number > high:
                raise UserError(f"{name}: {number} is above the maximum {high}")


def _all_keys(cls: type, prefix: str = "") -> list[str]:
    """Every key ``build`` takes for ``cls``: field names, and dotted names of nested dataclass fields."""
    keys = []
    hints = field_types(cls)
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        keys.append(prefix + f.name)
        nested = nested_class(hints[f.name])
        if nested is not None:
            keys += _all_keys(nested, f"{prefix}{f.name}.")
    return keys


def build(cls: type[C], overrides: Mapping[str, Any] | None = None, *, what: str = "config") -> C:
    """An instance of the dataclass ``cls`` with ``overrides`` parsed, applied and validated.

    Keys are field names, or ``outer.inner`` for a field of a nested dataclass field.
    """
    return _build(cls, overrides or {}, what=what, prefix="")


def _build(cls: type[C], overrides: Mapping[str, Any], *, what: str, prefix: str) -> C:
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    hints = field_types(cls)
    whole: dict[str, Any] = {}
    dotted: dict[str, dict[str, Any]] = {}
    for key, raw in overrides.items():
        key = str(key)
        head, dot, rest = key.partition(".")
        if head not in fields or (dot and nested_class(hints[head]) is None):
            known = _all_keys(cls)
            raise UserError(
                f"unknown {what} key '{prefix}{key}'{did_you_mean(prefix + key, [prefix + k for k in known])}"
            )
        if dot:
            dotted.setdefault(head, {})[rest] = raw
        else:
            whole[head] = raw
    values: dict[str, Any] = {}
    for name, raw in whole.items():
        values[name] = parse_value(cls, name, raw, key=prefix + name)
    for name, sub in dotted.items():
        nested = nested_class(hints[name])
        assert nested is not None  # checked above
        start = values.get(name, _field_default(fields[name]))
        base = as_dict(start) if isinstance(start, nested) else {}
        values[name] = _build(nested, {**base, **sub}, what=what, prefix=f"{prefix}{name}.")
    missing = [n for n, f in fields.items() if n not in values and _field_default(f) is dataclasses.MISSING]
    if missing:
        raise UserError(f"{what} key '{prefix}{missing[0]}' is required")
    try:
        instance = cls(**values)
    except (ValueError, TypeError, AssertionError) as exc:  # __post_init__ cross-field checks
        raise UserError(str(exc)) from None
    check(instance, prefix=prefix)
    return instance


# ------------------------------------------------------------------------------------------- output
def as_dict(instance: Any) -> dict[str, Any]:
    """The fields of a config as plain JSON data (what run keys hash; ``build`` takes it back).

    Plain ``int``/``float``/``str``/``bool`` fields come out exactly as ``dataclasses.asdict`` gives them,
    so hashes of stored runs do not change.
    """
    return plain_data(instance) if dataclasses.is_dataclass(instance) else {}


def _positive_zeros(value: Any) -> Any:
    """``value`` with every -0.0 as 0.0 (they are equal, so they must hash equal)."""
    if type(value) is float:
        return value + 0.0
    if isinstance(value, dict):
        return {k: _positive_zeros(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_positive_zeros(v) for v in value]
    return value


def stable_hash(data: Mapping[str, Any]) -> str:
    """A short hash of a JSON-able mapping, independent of key order and of the sign of a zero."""
    text = json.dumps(_positive_zeros(dict(data)), sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def format_value(cls: type, name: str, value: Any) -> str:
    """The ``--set`` text of ``value`` for the field ``cls.name``: ``parse_value`` reads it back equal.

    The short form (``3,4``, ``true``, ``none``) where it reads back; JSON otherwise (strings with commas
    in a tuple, a nested dataclass).
    """
    kind = field_types(cls)[name]
    text = short_text(value)
    if _reads_back(cls, name, text, value):
        return text
    text = json.dumps(plain_data(value))
    if _reads_back(cls, name, text, value):
        return text
    raise UserError(f"{name}: {show(value)} has no --set text of type {type_name(kind)}")


def _reads_back(cls: type, name: str, text: str, value: Any) -> bool:
    f = _field(cls, name)
    kind = field_types(cls)[name]
    nested = nested_class(kind)
    try:
        if nested is not None:
            back = _parse_nested(nested, f, kind, text, name)
        else:  # without the finiteness check: a nan that is refused is still written faithfully
            back = validate(kind, from_text(kind, text))
    except (BadValue, UserError):
        return False
    return same(back, value)


def describe(cls: type) -> list[dict[str, Any]]:
    """One row per field: name, type, default, help, choices, bounds (for ``bench info``)."""
    rows = []
    hints = field_types(cls)
    for f in dataclasses.fields(cls):
        default = _field_default(f)
        rows.append(
            {
                "name": f.name,
                "type": type_name(hints[f.name]),
                "default": None if default is dataclasses.MISSING else plain_data(default),
                "help": f.metadata.get("help", ""),
                "choices": f.metadata.get("choices"),
                "low": f.metadata.get("low"),
                "high": f.metadata.get("high"),
                "allow_nonfinite": f.metadata.get("allow_nonfinite", False),
            }
        )
    return rows


@dataclasses.dataclass(frozen=True)
class NoParams:
    """For algorithms without hyperparameters."""

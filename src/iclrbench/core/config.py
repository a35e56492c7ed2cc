"""Typed, validated parameters: task configs and algorithm hyperparameters are frozen dataclasses.

A field is declared with :func:`param`, which records help text, allowed choices and bounds. Values given
as strings on the command line (``--set horizon=100000``) or as Python values (budgets, sweep files,
the ``as_dict`` of a stored run) are parsed to the field's declared type and checked here, so every task
and algorithm gets the same one-line errors for the same mistakes.

Types a field may declare, and how ``--set KEY=TEXT`` writes them (:func:`format_value` is the inverse):

==============================  ==============================================================
``int``                         ``3``, ``1e5``, ``100_000`` (a float text with no fraction)
``float``                       ``0.25``, ``1e-3``; ``nan``/``inf`` only with ``allow_nonfinite``
``bool``                        ``true/false``, ``yes/no``, ``on/off``, ``1/0`` (any case)
``str``, ``pathlib.Path``       the text as it is
``Literal['a', 'b']``           one of the choices, with a did-you-mean otherwise
``X | None``                    ``none`` or ``null`` (any case) for ``None``, else as ``X``
``tuple[int, ...]``, ``list``   ``3,4``, ``(3,4)``, ``[3, 4]``, a single ``3``, ``()`` for empty, or a JSON
                                array (needed for strings that hold commas or brackets)
``dict[str, X]``                a JSON object
a frozen dataclass              a JSON object of the keys to change, or dotted keys ``outer.inner=3``
==============================  ==============================================================

A nested dataclass is set *on top of the field's default*: ``outer={"a": 1}`` and ``outer.a=1`` both
change ``a`` and keep the other fields of the default; a whole-object value is applied before dotted
keys of the same field. Strings: ``str`` and ``Path`` fields keep the text exactly as given, so a ``str |
None`` field cannot hold the text ``none`` from the command line.

The typing itself (tuples, ``Literal``, unions, ``Path``, Python values from YAML) is pydantic v2's
``TypeAdapter``; this module only splits command-line text into the structure the type asks for and adds
the project's checks (bounds, choices, finiteness). pydantic is imported on the first value that needs it,
never at import time, so that ``bench list`` stays fast.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import math
import pathlib
import types
import typing
from collections.abc import Mapping
from typing import Any, Literal, TypeVar

from iclrbench.core.errors import UserError
from iclrbench.core.registry import did_you_mean

C = TypeVar("C")

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}
_NONE = {"none", "null"}
_SEQUENCES = (tuple, list, set, frozenset)


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


class _Bad(Exception):
    """A value that does not fit its type; ``detail`` says why (without the key, added by the caller)."""

    def __init__(self, detail: str = "") -> None:
        super().__init__(detail)
        self.detail = detail


# ---------------------------------------------------------------------------------------- type helpers
@functools.cache
def _field_types(cls: type) -> dict[str, Any]:
    # get_type_hints resolves the string annotations that ``from __future__ import annotations`` leaves
    return typing.get_type_hints(cls)


def _is_union(tp: Any) -> bool:
    return typing.get_origin(tp) in (typing.Union, types.UnionType)


def _strip_annotated(tp: Any) -> Any:
    while typing.get_origin(tp) is typing.Annotated:
        tp = typing.get_args(tp)[0]
    return tp


def _is_dataclass_type(tp: Any) -> bool:
    return isinstance(tp, type) and dataclasses.is_dataclass(tp)


def _nested_class(tp: Any) -> type | None:
    """The dataclass of a field typed ``D`` or ``D | None``, else ``None``."""
    tp = _strip_annotated(tp)
    if _is_dataclass_type(tp):
        return tp
    if _is_union(tp):
        arms = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(arms) == 1 and _is_dataclass_type(_strip_annotated(arms[0])):
            return _strip_annotated(arms[0])
    return None


def _allows_none(tp: Any) -> bool:
    tp = _strip_annotated(tp)
    return (
        tp is type(None) or tp is Any or (_is_union(tp) and any(_allows_none(a) for a in typing.get_args(tp)))
    )


def type_name(tp: Any) -> str:
    """A readable name of a type: ``int``, ``tuple[int, ...]``, ``Literal['a', 'b']``, ``int | None``."""
    tp = _strip_annotated(tp)
    if tp is type(None):
        return "None"
    if tp is Any:
        return "Any"
    if _is_union(tp):
        return " | ".join(type_name(a) for a in typing.get_args(tp))
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is Literal:
        return f"Literal[{', '.join(map(repr, args))}]"
    if origin is not None:
        name = getattr(origin, "__name__", str(origin))
        if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
            return f"tuple[{type_name(args[0])}, ...]"
        return f"{name}[{', '.join(type_name(a) for a in args)}]" if args else name
    return getattr(tp, "__name__", str(tp))


# ------------------------------------------------------------------------------------ text -> structure
def _int_from_text(text: str) -> int:
    s = text.strip()
    try:
        return int(s)  # exact for big numbers; accepts 100_000
    except ValueError:
        pass
    try:
        number = float(s.replace("_", ""))  # 1e5
    except ValueError:
        raise _Bad() from None
    if not math.isfinite(number) or not number.is_integer():
        raise _Bad()
    return int(number)


def _float_from_text(text: str) -> float:
    try:
        return float(text.strip())
    except ValueError:
        raise _Bad() from None


def _bool_from_text(text: str) -> bool:
    s = text.strip().lower()
    if s in _TRUE:
        return True
    if s in _FALSE:
        return False
    raise _Bad()


def _split_items(text: str) -> list[Any]:
    """``3,4`` / ``(3,4)`` / ``[3, 4]`` / ``3`` / ``()`` -> the items as text; a JSON array -> its items."""
    s = text.strip()
    if s.startswith("["):
        try:
            data = json.loads(s)
        except ValueError:
            data = None
        if isinstance(data, list):
            return data
    if len(s) >= 2 and (s[0], s[-1]) in {("(", ")"), ("[", "]")}:
        s = s[1:-1]
    if not s.strip():
        return []
    items = s.split(",")
    if len(items) > 1 and not items[-1].strip():
        items = items[:-1]  # a trailing comma, as in Python's (3,)
    return [item.strip() for item in items]


def _from_text(tp: Any, text: str) -> Any:
    """Turn command-line text into the Python structure ``tp`` asks for (the typing is checked later)."""
    tp = _strip_annotated(tp)
    if tp is str or tp is Any:
        return text
    if tp is bool:
        return _bool_from_text(text)
    if tp is int:
        return _int_from_text(text)
    if tp is float:
        return _float_from_text(text)
    if tp is type(None):
        if text.strip().lower() in _NONE:
            return None
        raise _Bad()
    if _is_union(tp):
        arms = typing.get_args(tp)
        if type(None) in arms and text.strip().lower() in _NONE:
            return None
        real = [arm for arm in arms if arm is not type(None)]
        if len(real) == 1:  # X | None: the error of X (a did-you-mean of a Literal) is the useful one
            return _from_text(real[0], text)
        for arm in arms:  # the first arm the text fits, in declared order (so `int | str` tries int)
            if arm is type(None):
                continue
            try:
                return _validate(arm, _from_text(arm, text))
            except _Bad:
                continue
        raise _Bad()
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is Literal:
        for choice in args:
            try:
                if isinstance(choice, str) and choice in (text, text.strip()):
                    return choice
                if isinstance(choice, bool) and _bool_from_text(text) is choice:
                    return choice
                if (
                    isinstance(choice, int)
                    and not isinstance(choice, bool)
                    and _int_from_text(text) == choice
                ):
                    return choice
            except _Bad:
                continue
        raise _Bad(did_you_mean(text.strip(), [str(c) for c in args]))
    if origin in _SEQUENCES:
        return _sequence_items(tp, _split_items(text))
    if origin is dict or _is_dataclass_type(tp):
        try:
            data = json.loads(text)
        except ValueError:
            data = None
        if not isinstance(data, dict):
            raise _Bad('expected a JSON object such as {"key": 1}')
        return data
    if tp is pathlib.Path or (isinstance(tp, type) and issubclass(tp, pathlib.PurePath)):
        return tp(text)
    if isinstance(tp, type):  # another class: its constructor takes the text, as before pydantic
        try:
            return tp(text)
        except (TypeError, ValueError):
            raise _Bad() from None
    return text


def _sequence_items(tp: Any, items: list[Any]) -> list[Any]:
    """The items of a tuple or list type, those given as text read as their item type (so that ``1e3`` is
    an int inside ``[1e3, 4]`` too, as YAML leaves it a string); other items are left to pydantic."""
    args = typing.get_args(tp)
    if typing.get_origin(tp) is tuple and args and not (len(args) == 2 and args[1] is Ellipsis):
        if len(args) != len(items):
            raise _Bad(f"{len(items)} items, expected {len(args)}")
        kinds = list(args)
    else:
        kinds = [args[0] if args else Any] * len(items)
    out = []
    for i, (kind, item) in enumerate(zip(kinds, items, strict=True)):
        try:
            out.append(_from_text(kind, item) if isinstance(item, str) else _from_python(kind, item))
        except _Bad as exc:
            raise _Bad(f"item {i + 1} {item!r} is not {type_name(kind)}{_detail(exc)}") from None
    return out


def _from_python(tp: Any, value: Any) -> Any:
    """A Python value (from YAML, a budget, ``as_dict``) with the strings inside its lists read as text."""
    tp = _strip_annotated(tp)
    if _is_union(tp):
        real = [arm for arm in typing.get_args(tp) if arm is not type(None)]
        return value if value is None or len(real) != 1 else _from_python(real[0], value)
    if typing.get_origin(tp) in _SEQUENCES and isinstance(value, (list, tuple)):
        return _sequence_items(tp, list(value))
    return value


def _detail(exc: _Bad) -> str:
    """The reason to append to an error line: ``; did you mean ...`` as it is, others in parentheses."""
    if not exc.detail or exc.detail.startswith(";"):
        return exc.detail
    return f" ({exc.detail})"


# --------------------------------------------------------------------------------- typing by pydantic
def _refuse_bool(value: Any) -> Any:
    # pydantic's lax mode reads True as 1; a bool given for a number is a mistake in a sweep file
    if isinstance(value, bool):
        raise ValueError("a boolean is not a number")
    return value


@functools.cache
def _no_bool_numbers(tp: Any) -> Any:
    """``tp`` with every ``int`` and ``float`` refusing booleans, at any depth."""
    from pydantic import BeforeValidator

    if tp is int or tp is float:
        return typing.Annotated[tp, BeforeValidator(_refuse_bool)]
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is None or origin is Literal or not args:
        return tp
    if origin is typing.Annotated:
        return typing.Annotated[(_no_bool_numbers(args[0]), *tp.__metadata__)]
    new = tuple(a if a is Ellipsis else _no_bool_numbers(a) for a in args)
    if _is_union(tp):
        return typing.Union[new]  # noqa: UP007  (a runtime union of computed arms)
    return origin[new if len(new) > 1 else new[0]]


@functools.cache
def _adapter(tp: Any) -> Any:
    from pydantic import ConfigDict, TypeAdapter
    from pydantic.errors import PydanticSchemaGenerationError

    strict_tp = _no_bool_numbers(tp)
    try:
        return TypeAdapter(strict_tp)
    except PydanticSchemaGenerationError:  # a class pydantic does not know: accept its instances
        return TypeAdapter(strict_tp, config=ConfigDict(arbitrary_types_allowed=True))


def _exact_scalar(tp: Any, value: Any) -> bool:
    """Already of the declared plain type: no need to start pydantic (the common case, kept fast)."""
    if tp in (int, str, bool):
        return type(value) is tp
    return tp is float and type(value) is float


def _validate(tp: Any, value: Any) -> Any:
    """``value`` (already structured) as the type ``tp``, by pydantic; :class:`_Bad` when it does not fit."""
    if typing.get_origin(tp) is typing.Annotated and not _has_pydantic_meta(tp):
        tp = _strip_annotated(tp)  # plain documentation metadata: nothing for pydantic to enforce
    if _exact_scalar(tp, value):
        return value
    if tp is float and type(value) is int:
        try:
            return float(value)
        except OverflowError:
            raise _Bad("too large for a float") from None
    from pydantic import ValidationError

    try:
        return _adapter(tp).validate_python(value)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ", ".join(f"item {p + 1}" if isinstance(p, int) else str(p) for p in first["loc"])
        msg = " ".join(str(first["msg"]).removeprefix("Value error, ").split())  # one line, always
        detail = msg[:1].lower() + msg[1:]
        raise _Bad(f"{where + ': ' if where else ''}{detail}") from None


def _has_pydantic_meta(tp: Any) -> bool:
    # Annotated metadata from pydantic or annotated-types (Gt, Len, ...) is pydantic's to enforce
    return any(type(m).__module__.split(".")[0] in {"pydantic", "annotated_types"} for m in tp.__metadata__)


# --------------------------------------------------------------------------------------- finiteness
def _has_nonfinite(value: Any) -> bool:
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, (tuple, list, set, frozenset)):
        return any(_has_nonfinite(v) for v in value)
    if isinstance(value, dict):
        return any(_has_nonfinite(v) for v in value.values())
    return False


def _show(raw: Any) -> str:
    text = repr(raw)
    return text if len(text) <= 80 else text[:77] + "..."


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
    kind = _field_types(cls)[name]
    nested = _nested_class(kind)
    if nested is not None:
        return _parse_nested(nested, f, kind, raw, key)
    try:
        value = _validate(kind, _from_text(kind, raw) if isinstance(raw, str) else _from_python(kind, raw))
    except _Bad as exc:
        raise UserError(f"{key}: expected {type_name(kind)}, got {_show(raw)}{_detail(exc)}") from None
    if not f.metadata.get("allow_nonfinite", False) and _has_nonfinite(value):
        raise UserError(
            f"{key}: expected a finite {type_name(kind)}, got {_show(raw)} (this field takes no nan or inf)"
        )
    return value


def _parse_nested(nested: type, f: dataclasses.Field[Any], kind: Any, raw: Any, key: str) -> Any:
    if raw is None or (isinstance(raw, str) and raw.strip().lower() in _NONE):
        if _allows_none(kind):
            return None
        raise UserError(f"{key}: expected {type_name(kind)}, got {_show(raw)}")
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
            f"or dotted keys {key}.KEY=VALUE, got {_show(raw)}"
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
            raise UserError(f"{name}: '{value}' is not one of {options}")
        if not f.metadata.get("allow_nonfinite", False) and _has_nonfinite(value):
            raise UserError(f"{name}: {_show(value)} is not finite (this field takes no nan or inf)")
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
    hints = _field_types(cls)
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        keys.append(prefix + f.name)
        nested = _nested_class(hints[f.name])
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
    hints = _field_types(cls)
    whole: dict[str, Any] = {}
    dotted: dict[str, dict[str, Any]] = {}
    for key, raw in overrides.items():
        key = str(key)
        head, dot, rest = key.partition(".")
        if head not in fields or (dot and _nested_class(hints[head]) is None):
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
        nested = _nested_class(hints[name])
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
def _jsonable(value: Any) -> Any:
    """Plain JSON data: dataclasses as dicts, tuples and sets as lists, paths as strings."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (tuple, list)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted((_jsonable(v) for v in value), key=repr)
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, pathlib.PurePath):
        return str(value)
    return value


def as_dict(instance: Any) -> dict[str, Any]:
    """The fields of a config as plain JSON data (what run keys hash; ``build`` takes it back).

    Plain ``int``/``float``/``str``/``bool`` fields come out exactly as ``dataclasses.asdict`` gives them,
    so hashes of stored runs do not change.
    """
    return _jsonable(instance) if dataclasses.is_dataclass(instance) else {}


def stable_hash(data: Mapping[str, Any]) -> str:
    """A short hash of a JSON-able mapping, independent of key order."""
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _same(a: Any, b: Any) -> bool:
    """Equality that counts nan as equal to nan (for checking that a text form reads back)."""
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return type(a) is type(b) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if dataclasses.is_dataclass(a) and dataclasses.is_dataclass(b):
        return type(a) is type(b) and _same(_jsonable(a), _jsonable(b))
    return type(a) is type(b) and a == b


def _scalar_text(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)  # the shortest text that reads back to the same float; nan, inf, -inf
    if isinstance(value, (tuple, list, set, frozenset)):
        items = ",".join(_scalar_text(v) for v in value)
        return items if items else ("()" if isinstance(value, tuple) else "[]")
    if isinstance(value, dict) or (dataclasses.is_dataclass(value) and not isinstance(value, type)):
        return json.dumps(_jsonable(value))
    return str(value)


def format_value(cls: type, name: str, value: Any) -> str:
    """The ``--set`` text of ``value`` for the field ``cls.name``: ``parse_value`` reads it back equal.

    The short form (``3,4``, ``true``, ``none``) where it reads back; JSON otherwise (strings with commas
    in a tuple, a nested dataclass).
    """
    kind = _field_types(cls)[name]
    text = _scalar_text(value)
    if _reads_back(cls, name, text, value):
        return text
    text = json.dumps(_jsonable(value))
    if _reads_back(cls, name, text, value):
        return text
    raise UserError(f"{name}: {_show(value)} has no --set text of type {type_name(kind)}")


def _reads_back(cls: type, name: str, text: str, value: Any) -> bool:
    f = _field(cls, name)
    kind = _field_types(cls)[name]
    nested = _nested_class(kind)
    try:
        if nested is not None:
            back = _parse_nested(nested, f, kind, text, name)
        else:  # without the finiteness check: a nan that is refused is still written faithfully
            back = _validate(kind, _from_text(kind, text))
    except (_Bad, UserError):
        return False
    return _same(back, value)


def describe(cls: type) -> list[dict[str, Any]]:
    """One row per field: name, type, default, help, choices, bounds (for ``bench info``)."""
    rows = []
    hints = _field_types(cls)
    for f in dataclasses.fields(cls):
        default = _field_default(f)
        rows.append(
            {
                "name": f.name,
                "type": type_name(hints[f.name]),
                "default": None if default is dataclasses.MISSING else _jsonable(default),
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

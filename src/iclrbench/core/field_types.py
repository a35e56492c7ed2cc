"""Declared field types: their readable names, and checking a structured value against one.

A config or params field declares a type (``int``, ``tuple[int, ...]``, ``Literal['a', 'b']``, ``X | None``,
a nested frozen dataclass, ...). This module names such types for error lines and ``bench info``, checks a
value that already has the right shape against its type (pydantic v2's ``TypeAdapter``, with booleans
refused where a number is declared), and writes a value as plain JSON data. Reading command-line text into
that shape is :mod:`iclrbench.core.settings_text`; declaring and building configs is
:mod:`iclrbench.core.config`. pydantic is imported on the first value that needs it, never at import time,
so that ``bench list`` stays fast.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import pathlib
import types
import typing
from typing import Any, Literal


class BadValue(Exception):
    """A value that does not fit its type; ``detail`` says why (without the key, added by the caller)."""

    def __init__(self, detail: str = "") -> None:
        super().__init__(detail)
        self.detail = detail


def reason(exc: BadValue) -> str:
    """The reason to append to an error line: ``; did you mean ...`` as it is, others in parentheses."""
    if not exc.detail or exc.detail.startswith(";"):
        return exc.detail
    return f" ({exc.detail})"


# ---------------------------------------------------------------------------------------- type helpers
@functools.cache
def field_types(cls: type) -> dict[str, Any]:
    """The declared type of each field of the dataclass ``cls``, by name."""
    # get_type_hints resolves the string annotations that ``from __future__ import annotations`` leaves
    return typing.get_type_hints(cls)


def is_union(tp: Any) -> bool:
    """Whether ``tp`` is a union (``X | Y`` or ``typing.Union``)."""
    return typing.get_origin(tp) in (typing.Union, types.UnionType)


def strip_annotated(tp: Any) -> Any:
    """``tp`` without its ``Annotated[...]`` wrappers."""
    while typing.get_origin(tp) is typing.Annotated:
        tp = typing.get_args(tp)[0]
    return tp


def is_dataclass_type(tp: Any) -> bool:
    """Whether ``tp`` is a dataclass (the class, not an instance)."""
    return isinstance(tp, type) and dataclasses.is_dataclass(tp)


def nested_class(tp: Any) -> type | None:
    """The dataclass of a field typed ``D`` or ``D | None``, else ``None``."""
    tp = strip_annotated(tp)
    if is_dataclass_type(tp):
        return tp
    if is_union(tp):
        arms = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(arms) == 1 and is_dataclass_type(strip_annotated(arms[0])):
            return strip_annotated(arms[0])
    return None


def allows_none(tp: Any) -> bool:
    """Whether ``None`` is a value of ``tp`` (``None``, ``Any``, or a union with either)."""
    tp = strip_annotated(tp)
    return (
        tp is type(None) or tp is Any or (is_union(tp) and any(allows_none(a) for a in typing.get_args(tp)))
    )


def type_name(tp: Any) -> str:
    """A readable name of a type: ``int``, ``tuple[int, ...]``, ``Literal['a', 'b']``, ``int | None``."""
    tp = strip_annotated(tp)
    if tp is type(None):
        return "None"
    if tp is Any:
        return "Any"
    if is_union(tp):
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
    if is_union(tp):
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


def _without_negative_zero(value: Any) -> Any:
    """-0.0 as 0.0, inside tuples and lists too: they compare equal, so they must hash equal (``--set
    noise=-0`` is the config ``noise=0``, and its stored runs are reused)."""
    if type(value) is float:
        return value + 0.0  # IEEE: -0.0 + 0.0 == +0.0, every other value unchanged
    if isinstance(value, tuple | list):
        return type(value)(_without_negative_zero(v) for v in value)
    return value


def validate(tp: Any, value: Any) -> Any:
    """``value`` (already structured) as the type ``tp``, by pydantic; :class:`BadValue` when it does not
    fit. A negative zero comes back as zero."""
    return _without_negative_zero(_validate(tp, value))


def _validate(tp: Any, value: Any) -> Any:
    if typing.get_origin(tp) is typing.Annotated and not _has_pydantic_meta(tp):
        tp = strip_annotated(tp)  # plain documentation metadata: nothing for pydantic to enforce
    if _exact_scalar(tp, value):
        return value
    if tp is float and type(value) is int:
        try:
            return float(value)
        except OverflowError:
            raise BadValue("too large for a float") from None
    from pydantic import ValidationError

    try:
        return _adapter(tp).validate_python(value)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ", ".join(f"item {p + 1}" if isinstance(p, int) else str(p) for p in first["loc"])
        msg = " ".join(str(first["msg"]).removeprefix("Value error, ").split())  # one line, always
        detail = msg[:1].lower() + msg[1:]
        raise BadValue(f"{where + ': ' if where else ''}{detail}") from None


def _has_pydantic_meta(tp: Any) -> bool:
    # Annotated metadata from pydantic or annotated-types (Gt, Len, ...) is pydantic's to enforce
    return any(type(m).__module__.split(".")[0] in {"pydantic", "annotated_types"} for m in tp.__metadata__)


# --------------------------------------------------------------------------------------- finiteness
def has_nonfinite(value: Any) -> bool:
    """Whether ``value`` holds a NaN or an infinity, at any depth of its tuples, lists, sets and dicts."""
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, (tuple, list, set, frozenset)):
        return any(has_nonfinite(v) for v in value)
    if isinstance(value, dict):
        return any(has_nonfinite(v) for v in value.values())
    return False


def show(raw: Any) -> str:
    """``raw`` as an error line quotes it: its ``repr``, cut to 80 characters."""
    text = repr(raw)
    return text if len(text) <= 80 else text[:77] + "..."


# ------------------------------------------------------------------------------------------ plain data
def plain_data(value: Any) -> Any:
    """Plain JSON data: dataclasses as dicts, tuples and sets as lists, paths as strings."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain_data(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (tuple, list)):
        return [plain_data(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted((plain_data(v) for v in value), key=repr)
    if isinstance(value, dict):
        return {k: plain_data(v) for k, v in value.items()}
    if isinstance(value, pathlib.PurePath):
        return str(value)
    return value

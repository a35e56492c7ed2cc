"""The ``--set KEY=TEXT`` text codec: command-line text read into the structure a declared type asks for,
and a value written back as the shortest such text.

Types a field may declare, and how ``--set KEY=TEXT`` writes them (:func:`iclrbench.core.config.format_value`
is the inverse):

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

A nested dataclass is set *on top of the field's default* (:mod:`iclrbench.core.config` builds it):
``outer={"a": 1}`` and ``outer.a=1`` both change ``a`` and keep the other fields of the default; a
whole-object value is applied before dotted keys of the same field. Strings: ``str`` and ``Path`` fields
keep the text exactly as given, so a ``str | None`` field cannot hold the text ``none`` from the command
line.

This module only splits text into the structure the type asks for (the items of a tuple, the choice of a
``Literal``, the arm of a union); the typing itself is :func:`iclrbench.core.field_types.validate`.
"""

from __future__ import annotations

import dataclasses
import json
import math
import pathlib
import typing
from typing import Any, Literal

from iclrbench.core.field_types import (
    BadValue,
    is_dataclass_type,
    is_union,
    plain_data,
    reason,
    strip_annotated,
    type_name,
    validate,
)
from iclrbench.core.registry import did_you_mean

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}
_NONE = {"none", "null"}
_SEQUENCES = (tuple, list, set, frozenset)


def is_none_text(text: str) -> bool:
    """Whether ``text`` is the command line's word for ``None`` (``none`` or ``null``, any case)."""
    return text.strip().lower() in _NONE


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
        raise BadValue() from None
    if not math.isfinite(number) or not number.is_integer():
        raise BadValue()
    return int(number)


def _float_from_text(text: str) -> float:
    try:
        return float(text.strip())
    except ValueError:
        raise BadValue() from None


def _bool_from_text(text: str) -> bool:
    s = text.strip().lower()
    if s in _TRUE:
        return True
    if s in _FALSE:
        return False
    raise BadValue()


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


def from_text(tp: Any, text: str) -> Any:
    """Turn command-line text into the Python structure ``tp`` asks for (the typing is checked later);
    :class:`BadValue` when the text cannot have that shape."""
    tp = strip_annotated(tp)
    if tp is str or tp is Any:
        return text
    if tp is bool:
        return _bool_from_text(text)
    if tp is int:
        return _int_from_text(text)
    if tp is float:
        return _float_from_text(text)
    if tp is type(None):
        if is_none_text(text):
            return None
        raise BadValue()
    if is_union(tp):
        arms = typing.get_args(tp)
        if type(None) in arms and is_none_text(text):
            return None
        real = [arm for arm in arms if arm is not type(None)]
        if len(real) == 1:  # X | None: the error of X (a did-you-mean of a Literal) is the useful one
            return from_text(real[0], text)
        for arm in arms:  # the first arm the text fits, in declared order (so `int | str` tries int)
            if arm is type(None):
                continue
            try:
                return validate(arm, from_text(arm, text))
            except BadValue:
                continue
        raise BadValue()
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
            except BadValue:
                continue
        raise BadValue(did_you_mean(text.strip(), [str(c) for c in args]))
    if origin in _SEQUENCES:
        return _sequence_items(tp, _split_items(text))
    if origin is dict or is_dataclass_type(tp):
        try:
            data = json.loads(text)
        except ValueError:
            data = None
        if not isinstance(data, dict):
            raise BadValue('expected a JSON object such as {"key": 1}')
        return data
    if tp is pathlib.Path or (isinstance(tp, type) and issubclass(tp, pathlib.PurePath)):
        return tp(text)
    if isinstance(tp, type):  # another class: its constructor takes the text, as before pydantic
        try:
            return tp(text)
        except (TypeError, ValueError):
            raise BadValue() from None
    return text


def _sequence_items(tp: Any, items: list[Any]) -> list[Any]:
    """The items of a tuple or list type, those given as text read as their item type (so that ``1e3`` is
    an int inside ``[1e3, 4]`` too, as YAML leaves it a string); other items are left to pydantic."""
    args = typing.get_args(tp)
    if typing.get_origin(tp) is tuple and args and not (len(args) == 2 and args[1] is Ellipsis):
        if len(args) != len(items):
            raise BadValue(f"{len(items)} items, expected {len(args)}")
        kinds = list(args)
    else:
        kinds = [args[0] if args else Any] * len(items)
    out = []
    for i, (kind, item) in enumerate(zip(kinds, items, strict=True)):
        try:
            out.append(from_text(kind, item) if isinstance(item, str) else from_python(kind, item))
        except BadValue as exc:
            raise BadValue(f"item {i + 1} {item!r} is not {type_name(kind)}{reason(exc)}") from None
    return out


def from_python(tp: Any, value: Any) -> Any:
    """A Python value (from YAML, a budget, ``as_dict``) with the strings inside its lists read as text."""
    tp = strip_annotated(tp)
    if is_union(tp):
        real = [arm for arm in typing.get_args(tp) if arm is not type(None)]
        return value if value is None or len(real) != 1 else from_python(real[0], value)
    if typing.get_origin(tp) in _SEQUENCES and isinstance(value, (list, tuple)):
        return _sequence_items(tp, list(value))
    return value


# ------------------------------------------------------------------------------------ value -> text
def same(a: Any, b: Any) -> bool:
    """Equality that counts nan as equal to nan (for checking that a text form reads back)."""
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return type(a) is type(b) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if dataclasses.is_dataclass(a) and dataclasses.is_dataclass(b):
        return type(a) is type(b) and same(plain_data(a), plain_data(b))
    return type(a) is type(b) and a == b


def short_text(value: Any) -> str:
    """The short ``--set`` form of ``value`` (``3,4``, ``true``, ``none``, ``0.1``; JSON for a dict or a
    dataclass). Whether it reads back as the field's type is for the caller to check."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)  # the shortest text that reads back to the same float; nan, inf, -inf
    if isinstance(value, (tuple, list, set, frozenset)):
        items = ",".join(short_text(v) for v in value)
        return items if items else ("()" if isinstance(value, tuple) else "[]")
    if isinstance(value, dict) or (dataclasses.is_dataclass(value) and not isinstance(value, type)):
        return json.dumps(plain_data(value))
    return str(value)

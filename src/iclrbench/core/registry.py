"""One generic, typed registry with "did you mean" errors (after lm-evaluation-harness's registry).

Built-in entries are listed explicitly by the package; third-party packages add entries through the entry
point groups ``iclrbench.tasks`` and ``iclrbench.algorithms`` (see :mod:`iclrbench.core.catalog`).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator
from typing import Generic, TypeVar

from iclrbench.core.errors import UserError

T = TypeVar("T")


def did_you_mean(name: str, choices: list[str] | tuple[str, ...]) -> str:
    """A suffix such as ``; did you mean 'horizon'?`` or, failing a close match, the valid names."""
    close = difflib.get_close_matches(name, list(choices), n=1, cutoff=0.5)
    if close:
        return f"; did you mean '{close[0]}'?"
    if choices and len(choices) <= 12:
        return "; choose from " + ", ".join(sorted(choices))
    return ""


class Registry(Generic[T]):
    """Name -> item, refusing silent overwrites, answering unknown names with the closest known one."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._items: dict[str, T] = {}

    def add(self, name: str, item: T) -> T:
        existing = self._items.get(name)
        if existing is not None and existing is not item:
            raise ValueError(f"{self.kind} '{name}' is already registered (by {existing!r})")
        self._items[name] = item
        return item

    def get(self, name: str) -> T:
        try:
            return self._items[name]
        except KeyError:
            raise UserError(f"unknown {self.kind} '{name}'{did_you_mean(name, self.names())}") from None

    def names(self) -> list[str]:
        return list(self._items)

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

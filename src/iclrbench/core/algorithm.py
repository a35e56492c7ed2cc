"""Algorithms: small declarative classes (after benchopt's solvers) registered against a task.

```python
@register_algorithm(task="contextual-bilateral-trade", name="random-price", role="baseline")
class RandomPrice(Algorithm):
    '''Posts a uniformly random price.'''
    Params = NoParams
    def act(self, x): ...
```
``Params`` is a frozen dataclass of typed hyperparameters (paper defaults), overridable with ``--set``.
The protocol the methods implement (policy, ask/tell optimiser, generator, ...) is the task's.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, ClassVar, TypeVar

import numpy as np

from iclrbench.core.config import NoParams
from iclrbench.core.registry import Registry

ROLES = ("reference", "baseline", "oracle")
A = TypeVar("A", bound="type[Algorithm]")


class Algorithm:
    """Base class. ``params`` are the validated hyperparameters, ``config`` the task instance's config
    (public knowledge such as the dimension or the horizon), ``rng`` the algorithm's own generator."""

    name: ClassVar[str] = ""
    task: ClassVar[str] = ""
    role: ClassVar[str] = ""
    Params: ClassVar[type] = NoParams

    def __init__(self, params: Any, config: Any, rng: np.random.Generator) -> None:
        self.params = params
        self.config = config
        self.rng = rng

    @classmethod
    def supports(cls, config: Any) -> str | None:
        """``None`` if the algorithm can run on ``config``, else the reason it cannot."""
        return None

    @classmethod
    def incompatible(cls, params: Any, config: Any) -> str | None:
        """``None`` if these hyperparameters make sense on ``config``, else why not (a pFedMoAP with more
        experts than other clients): checked with the run specs, so the mistake is one line, not N failed
        runs."""
        return None

    @classmethod
    def summary(cls) -> str:
        doc = inspect.getdoc(cls) or ""
        return doc.strip().splitlines()[0] if doc.strip() else ""


#: task id -> its registered algorithms; :mod:`iclrbench.core.catalog` reads it after importing the task's
#: ``algorithm_modules`` (the registry lives here, below the catalog, so neither imports the other back)
REGISTERED: dict[str, Registry[type[Algorithm]]] = {}


def register_algorithm(task: str, name: str, role: str) -> Callable[[A], A]:
    """Declare ``cls`` an algorithm of ``task``; the catalog finds it when the task's modules load."""
    if role not in ROLES:
        raise ValueError(f"role must be one of {ROLES}, not {role!r}")

    def decorate(cls: A) -> A:
        cls.name, cls.task, cls.role = name, task, role
        REGISTERED.setdefault(task, Registry(f"algorithm of {task}")).add(name, cls)
        return cls

    return decorate

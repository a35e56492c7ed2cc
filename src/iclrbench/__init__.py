"""iclrbench: ICLR 2025 papers as runnable, comparable benchmark tasks.

``import iclrbench`` registers the suite's gymnasium environments (``iclrbench/...-v0``);
``iclrbench.load_results(db)`` returns stored runs as a pandas DataFrame, one column per metric.
"""

from __future__ import annotations

from typing import Any

from iclrbench.envs import register_envs

__version__ = "0.1.0"

register_envs()


def load_results(db: str | None = None, task: str | None = None, **options: Any) -> Any:
    """Stored runs as a pandas DataFrame; see :func:`iclrbench.results.load_results`."""
    from iclrbench.results import load_results as load

    return load(db, task, **options)


__all__ = ["__version__", "load_results", "register_envs"]

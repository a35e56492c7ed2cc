"""iclrbench: ICLR 2025 papers as runnable, comparable benchmark tasks.

``import iclrbench`` registers the suite's gymnasium environments (``iclrbench/...-v0``).
"""

from __future__ import annotations

from iclrbench.envs import register_envs

__version__ = "0.1.0"

register_envs()

__all__ = ["__version__", "register_envs"]

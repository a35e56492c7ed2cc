"""The one place randomness is derived: every generator comes from (seed, scope...) through :func:`rng_for`.

The market/environment of a task is seeded by ``(seed, task_id, "env")`` only, so every algorithm meets
exactly the same draws for a given seed (common random numbers: paired comparisons across algorithms).
An algorithm's own randomness is seeded by ``(seed, task_id, algorithm_name)``.
"""

from __future__ import annotations

import hashlib

import numpy as np


def seed_for(seed: int, *scope: str) -> int:
    """A 128-bit integer determined by ``seed`` and the scope strings, stable across processes and runs."""
    text = "|".join([str(int(seed)), *scope])
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:16], "little")


def rng_for(seed: int, *scope: str) -> np.random.Generator:
    """A numpy Generator for ``(seed, *scope)``; the same arguments always give the same stream."""
    return np.random.default_rng(seed_for(seed, *scope))

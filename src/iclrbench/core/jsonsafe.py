"""Strict JSON (RFC 8259) for everything iclrbench writes: no ``NaN`` or ``Infinity`` tokens.

One place decides how a non-finite number is written (as ``null``), so the CLI's JSON lines, the page's
embedded data, the exports and the stored verdicts agree; numpy scalars become plain Python numbers.
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np


def finite(obj: Any) -> Any:
    """``obj`` with every NaN and infinity replaced by ``None``, recursively through dicts, lists and
    tuples; numpy booleans, integers and floats become Python ones."""
    if isinstance(obj, bool | np.bool_):
        return bool(obj)
    if isinstance(obj, int | np.integer):
        return int(obj)
    if isinstance(obj, float | np.floating):
        return float(obj) if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: finite(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [finite(v) for v in obj]
    return obj


def dumps(obj: Any, indent: int | None = None) -> str:
    """Strict JSON text of ``obj``: non-finite numbers become ``null``; unknown objects their ``str``."""
    return json.dumps(finite(obj), indent=indent, default=str, allow_nan=False)

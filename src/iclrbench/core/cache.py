"""Where tasks keep what they build once and reuse (processed data sets, pre-trained towers, trained
language models, quantised model files): ``$ICLRBENCH_CACHE``, else ``.iclrbench/cache`` under the working
folder. Everything in it can be rebuilt from seeds; deleting it costs time, never results."""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """The task cache: ``$ICLRBENCH_CACHE``, else ``.iclrbench/cache``."""
    return Path(os.environ.get("ICLRBENCH_CACHE") or Path(".iclrbench") / "cache")

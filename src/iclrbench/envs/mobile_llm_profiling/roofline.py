"""A roofline model of LLM decoding (PalmBench, Li et al., ICLR 2025, section 5: decode on phones is
memory-bound): one decoded token reads every weight once, so

    decode tokens/s <= min(bandwidth / weight bytes, peak compute / (2 x parameters)),

and for the small models here the bandwidth term binds. :func:`measured_bandwidth` gives this machine's
own figure (a single-thread streaming read, the access pattern of a matrix-vector product), so the model
can be checked against the decode rate the profiler measures.
"""

from __future__ import annotations

import json
import os
import time

import numpy as np

from iclrbench.core.cache import cache_root

STREAM_BYTES = 256 * 2**20


def measured_bandwidth(refresh: bool = False) -> float:
    """Bytes/s of one thread streaming a 256 MiB array (best of 5 sums), cached per machine."""
    path = cache_root() / "roofline-bandwidth.json"
    key = f"{os.uname().nodename}:{os.cpu_count()}"
    if path.exists() and not refresh:
        saved = json.loads(path.read_text())
        if saved.get("machine") == key:
            return float(saved["bytes_per_second"])
    data = np.ones(STREAM_BYTES // 4, dtype=np.float32)
    best = float("inf")
    for _ in range(5):
        t = time.perf_counter()
        data.sum(dtype=np.float32)
        best = min(best, time.perf_counter() - t)
    rate = STREAM_BYTES / best
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"machine": key, "bytes_per_second": rate}))
    return rate


def predicted_decode_tps(weight_bytes: float, bandwidth: float, parameters: float = 0.0,
                         flops: float = float("inf")) -> float:  # fmt: skip
    """Tokens/s the roofline allows: every weight read once per token, 2 FLOPs per parameter."""
    memory_bound = bandwidth / weight_bytes
    compute_bound = flops / (2 * parameters) if parameters else float("inf")
    return min(memory_bound, compute_bound)

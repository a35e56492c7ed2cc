"""Speed of the crystal metric suite's cheap half -- structural validity and spglib space groups -- over
1,000 structures (``make perf``; the note gives structures per second)."""

from __future__ import annotations

import numpy as np

from iclrbench.envs.symmetric_crystal_generation import generate_crystal, shipped_structures
from iclrbench.envs.symmetric_crystal_generation import metrics as cm


def test_validity_and_spacegroup_over_1000_structures(benchmark) -> None:  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(0)
    pool = shipped_structures() + [c for c in (generate_crystal(rng) for _ in range(30)) if c is not None]
    structures = [pool[i % len(pool)] for i in range(1000)]

    def suite() -> float:
        valid = cm.structurally_valid(structures)
        groups = cm.spacegroups(structures)
        return float(valid.mean() + (groups > 0).mean())

    benchmark.group = "crystal metrics, 1000 structures"
    assert benchmark.pedantic(suite, rounds=2, iterations=1) == 2.0
    benchmark.extra_info["structures"] = len(structures)

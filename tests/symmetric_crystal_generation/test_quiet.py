"""A crystal run prints nothing of pymatgen's noble-gas electronegativity warning (issue 22): SymmCD at smoke,
seed 0, samples a crystal with a noble gas, which warned before."""

from __future__ import annotations

import warnings

from iclrbench import runner


def test_a_crystal_run_raises_no_electronegativity_warning() -> None:
    (spec,) = runner.plan("symmetric-crystal-generation", ["symmcd"], [0], "smoke")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = runner.execute(spec)
    assert result.status == "ok", result.error
    assert not [w for w in caught if "Pauling" in str(w.message)]

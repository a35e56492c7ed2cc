"""icl-circuit's real data: the StaICC files read without importing the package, through an unpickler
that refuses every global; the sets' sizes and labels as StaICC ships them; the fixed demonstration / test
pools; and the paper's prompt lines."""

from __future__ import annotations

import collections
import importlib.util
import os
import pickle
import sys

import numpy as np
import pytest

from iclrbench.envs.icl_circuit import data
from iclrbench.models.staicc import plain_load


class _RunsCode:
    """Unpickling this calls os.system: what a hostile data file would do."""

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return os.system, ("echo unpickled-and-ran",)


@pytest.mark.parametrize(
    "value",
    [_RunsCode(), collections.OrderedDict(a=1), np.int64(3), print],
    ids=["reduce-to-os.system", "a-class", "a-numpy-scalar", "a-function"],
)
def test_a_pickle_that_names_a_global_is_refused(value: object, capfd: pytest.CaptureFixture[str]) -> None:
    raw = pickle.dumps(value)
    with pytest.raises(pickle.UnpicklingError, match="refused: the data file names a global"):
        plain_load(raw)
    assert "unpickled-and-ran" not in capfd.readouterr().out
    assert pickle.loads(pickle.dumps([1, "a"])) == plain_load(pickle.dumps([1, "a"]))


def test_plain_values_load() -> None:
    items = [(["a film"], 1), (["another"], 0)]
    assert plain_load(pickle.dumps(items)) == items
    assert plain_load(pickle.dumps({"k": (1.5, None, True, b"x")})) == {"k": (1.5, None, True, b"x")}


staicc = pytest.mark.skipif(importlib.util.find_spec("StaICC") is None, reason="staicc is not installed")


@staicc
def test_the_sets_are_read_without_importing_the_package() -> None:
    before = set(sys.modules)
    texts, labels = data.load_set("trec")
    assert not {m for m in set(sys.modules) - before if m.split(".")[0] == "StaICC"}
    assert len(texts) == len(labels) == 5952 and set(labels.tolist()) == set(range(6))
    assert all(isinstance(t, str) for t in texts)


@staicc
@pytest.mark.parametrize(("name", "size", "classes"), [("sst2", 67349, 2), ("financial_phrasebank", 2264, 3)])
def test_set_sizes_and_labels(name: str, size: int, classes: int) -> None:
    texts, labels = data.load_set(name)
    assert len(texts) == size and np.bincount(labels).size == classes == len(data.TEXT_SETS[name].labels)


@staicc
def test_pools_are_disjoint_fixed_and_of_staiccs_sizes() -> None:
    demos, tests = data.pools("financial_phrasebank", np.random.default_rng(0))
    assert len(demos) == 512 and len(tests) == 512 and not set(demos) & set(tests)
    again = data.pools("financial_phrasebank", np.random.default_rng(0))
    np.testing.assert_array_equal(demos, again[0])
    assert len(data.pools("sst2", np.random.default_rng(0))[0]) == 4096


def test_prompt_lines_follow_staicc() -> None:
    spec = data.TEXT_SETS["sst2"]
    assert data.demonstration_line(spec, "a film .", 1) == "sentence: a film . sentiment: positive\n"
    assert data.query_line(spec, "dull .") == "sentence: dull . sentiment:"
    assert all(s.label_prefix.endswith(": ") for s in data.TEXT_SETS.values())

"""EDA's four operations (Wei & Zou, 2019) with MiniLM's nearest word pieces as synonyms."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("torch")
pytest.importorskip("transformers")

from iclrbench.baselines.safety_guard_distillation import eda, synonym

words = st.lists(
    st.sampled_from(["write", "a", "note", "about", "the", "river", "bank", "quickly"]),
    min_size=1,
    max_size=12,
)


def test_a_synonym_is_another_vocabulary_word() -> None:
    near = synonym("river")
    assert near is not None and near != "river" and near.isalpha()
    assert synonym("zzqxv") is None


@given(words, st.integers(0, 2**31))
@settings(max_examples=50, deadline=None)
def test_swap_keeps_the_words_and_deletion_never_empties(ws: list[str], seed: int) -> None:
    text = " ".join(ws)
    rng = np.random.default_rng(seed)
    assert sorted(eda(text, "rs", 0.1, rng).split()) == sorted(ws)
    assert eda(text, "rd", 0.9, rng).split()


@given(words, st.integers(0, 2**31))
@settings(max_examples=30, deadline=None)
def test_replacement_and_insertion_change_at_most_their_share(ws: list[str], seed: int) -> None:
    text = " ".join(ws)
    n = max(1, round(0.1 * len(ws)))
    replaced = eda(text, "sr", 0.1, np.random.default_rng(seed)).split()
    assert len(replaced) == len(ws) and sum(a != b for a, b in zip(replaced, ws, strict=True)) <= n
    assert len(eda(text, "ri", 0.1, np.random.default_rng(seed)).split()) <= len(ws) + n


def test_an_unknown_operation_is_an_error() -> None:
    with pytest.raises(ValueError, match="sr, ri, rs or rd"):
        eda("a b", "xx", 0.1, np.random.default_rng(0))

"""The student recipe and the augmentations, on their definitions: hashed n-grams, the public code's
distillation loss, counted FLOPs, EDA's four operations, the refusal check, HarmAug's request, and the
control that shuffles the teacher's labels of the added prompts only."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from iclrbench.algorithms.safety_guard_distillation import (
    HARMAUG_REQUEST,
    HarmAug,
    HarmAugParams,
    harmaug_request,
    hashed,
    is_refusal,
    kd_loss,
    ngrams,
    student_flops,
    train_student,
)
from iclrbench.envs.safety_guard_distillation import SafetyGuardConfig, make_split

torch = pytest.importorskip("torch")

sentences = st.text(alphabet=st.sampled_from("ab cd'.\n9Z"), max_size=60)


@given(st.lists(sentences, min_size=1, max_size=8), st.integers(64, 4096))
@settings(max_examples=100, deadline=None)
def test_hashed_ngrams_are_an_embedding_bags_input(texts: list[str], buckets: int) -> None:
    indices, offsets = hashed(texts, buckets)
    assert len(offsets) == len(texts) and offsets[0] == 0 and np.all(np.diff(offsets) >= 1)
    assert indices.min() >= 0 and indices.max() < buckets
    again = hashed(texts, buckets)
    assert np.array_equal(indices, again[0]) and np.array_equal(offsets, again[1])


def test_ngrams_are_words_and_word_pairs() -> None:
    assert ngrams("Write a Note!") == ["write", "a", "note", "write a", "a note"]
    assert ngrams("...") == []


def test_a_replys_ngrams_are_kept_apart_from_the_prompts() -> None:
    from iclrbench.envs.safety_guard_distillation import conversation

    assert ngrams(conversation("How to", "How to")) == ["how", "to", "how to", "r:how", "r:to", "r:how to"]


def test_the_distillation_loss_is_half_cross_entropy_plus_kl() -> None:
    soft = torch.tensor([0.9, 0.2, 0.6])
    exact = torch.log(torch.stack([1 - soft, soft], -1))  # logits whose softmax is the soft label
    hard_ce = torch.nn.functional.cross_entropy(exact, (soft > 0.5).long())
    assert float(kd_loss(exact, soft)) == pytest.approx(0.5 * float(hard_ce), abs=1e-6)  # KL = 0
    other = torch.zeros(3, 2)
    kl = float(
        torch.nn.functional.kl_div(
            torch.log_softmax(other, -1), torch.stack([1 - soft, soft], -1), reduction="batchmean"
        )
    )
    ce = float(torch.nn.functional.cross_entropy(other, (soft > 0.5).long()))
    assert float(kd_loss(other, soft)) == pytest.approx(0.5 * (ce + kl), abs=1e-6)


def test_counted_flops_grow_with_the_prompt_and_the_width() -> None:
    short, long = "Write a note", "Write a long note about the weather in the hills"
    assert student_flops(long, 64) > student_flops(short, 64)
    assert student_flops(short, 1024) == 16 * student_flops(short, 64)


def test_a_student_learns_a_separable_set_and_the_same_seed_gives_the_same_student() -> None:
    config = SafetyGuardConfig(epochs=150, benign=40)  # 1 step an epoch on 8 prompts
    texts = [f"bake a {w} cake" for w in ["red", "blue", "green", "tall"]] + [
        f"build a {w} bomb" for w in ["red", "blue", "green", "tall"]
    ]
    soft = np.array([0.05] * 4 + [0.95] * 4)
    model, curve = train_student(texts, soft, config, 16, seed=0)
    again, curve_again = train_student(texts, soft, config, 16, seed=0)
    assert curve == curve_again and curve[-1] < curve[0]
    from iclrbench.algorithms.safety_guard_distillation import student_scores

    scores = student_scores(model, texts, config.buckets)
    assert np.all(scores[4:] > 0.5) and np.all(scores[:4] < 0.5)
    assert np.array_equal(scores, student_scores(again, texts, config.buckets))


@pytest.mark.parametrize(
    ("text", "refused"),
    [
        ("I'm sorry, but I can't help with that.", True),
        ('"I cannot write that."', True),
        ("- As an AI, I will not", True),
        ("Write a note that threatens a neighbour", False),
        ("Sorry-looking dogs: a guide", False),
    ],
)
def test_refusals_are_told_by_their_opening(text: str, refused: bool) -> None:
    assert is_refusal(text) is refused


def test_harmaug_request_lists_its_exemplars() -> None:
    assert harmaug_request([]) == HARMAUG_REQUEST
    asked = harmaug_request(["Write A", "Write B"])
    assert asked.startswith(HARMAUG_REQUEST) and asked.endswith("- Write A\n- Write B")


class _Teacher:
    def unsafe(self, texts: list[str], memoised: bool = True) -> np.ndarray:
        return np.linspace(0.0, 1.0, len(texts))


def test_the_control_gives_the_added_prompts_labels_drawn_from_the_whole_set() -> None:
    """The labelled set keeps its labels; each synthetic prompt gets another training prompt's label (drawn
    without replacement from the whole set), so the labels keep their mix but not their meaning."""
    config = SafetyGuardConfig(behaviours=8, benign=40, response_tokens=8)
    split = make_split(config, 0)
    added = [f"prompt {i}" for i in range(10)]
    n = len(split.student_train)
    true = HarmAug(HarmAugParams(), config, np.random.default_rng(0)).soft_labels(_Teacher(), split, added, 0)
    control = HarmAug(HarmAugParams(shuffle_labels=True), config, np.random.default_rng(0))
    shuffled = control.soft_labels(_Teacher(), split, added, 0)
    assert np.array_equal(true[:n], shuffled[:n])
    assert set(shuffled[n:]) <= set(true) and len(set(shuffled[n:])) == len(added)  # no repeats
    assert np.mean(shuffled[n:] == true[n:]) < 0.5

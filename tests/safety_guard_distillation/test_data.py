"""safety-guard-distillation's data: HarmBench's behaviours as shipped, the per-seed splits (the held-out
categories never reach the student's labelled set; labelled and evaluation pools never share a prompt),
the config's checks, and the cleaning of generations."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from iclrbench.envs.safety_guard_distillation import (
    CATEGORIES,
    OPENINGS,
    SafetyGuardConfig,
    clean_generation,
    harmbench_behaviours,
    make_split,
)

pytest.importorskip("torch")
try:
    harmbench_behaviours()
except Exception as exc:  # a UserError naming the install
    pytest.skip(str(exc), allow_module_level=True)

SMALL = SafetyGuardConfig(benign=40)


def test_harmbench_ships_six_categories_of_standard_behaviours() -> None:
    rows = harmbench_behaviours()
    assert len(rows) == len({t for t, _ in rows}) == 200
    assert not any(t.startswith(("Given this", "Slightly modify this")) for t, _ in rows)  # contextual
    assert {c for _, c in rows} == set(CATEGORIES)
    assert all(t.strip() == t and t for t, _ in rows)


@pytest.mark.parametrize("seed", [0, 1])
def test_the_split_keeps_held_out_categories_from_the_student(seed: int) -> None:
    split = make_split(SMALL, seed)
    student, teacher = split.student_train, split.teacher_train
    assert not set(student.categories) & set(SMALL.held_out)
    assert set(SMALL.held_out) <= set(teacher.categories) and set(student.texts) <= set(teacher.texts)
    assert set(split.eval_held_out.categories) == {*SMALL.held_out, "benign"}
    assert not set(split.eval_held_out.texts) & set(teacher.texts)  # evaluation prompts are never trained on
    assert not set(split.eval_seen.texts) & set(teacher.texts)
    assert set(split.eval_seen.categories) == {*SMALL.seen, "benign"}
    for examples in (student, teacher, split.eval_held_out, split.eval_seen):
        harmful = [c != "benign" for c in examples.categories]
        assert examples.labels.tolist() == [int(h) for h in harmful]


def test_the_same_seed_gives_the_same_split_and_another_seed_another() -> None:
    a, b, c = make_split(SMALL, 3), make_split(SMALL, 3), make_split(SMALL, 4)
    assert a.student_train.texts == b.student_train.texts and a.eval_held_out.texts == b.eval_held_out.texts
    assert a.student_train.texts != c.student_train.texts


def test_benign_prompts_are_distinct() -> None:
    """The generator repeats itself for a topic and opening asked twice: duplicates are dropped before the
    pools are cut, so that no benign prompt is both trained on and evaluated."""
    from iclrbench.envs.safety_guard_distillation import benign_prompts

    texts = benign_prompts(SMALL.benign)
    assert len(texts) == len(set(texts)) > 0.9 * SMALL.benign


def test_benign_prompts_share_harmbench_forms() -> None:
    """Each benign prompt opens with one of the openings HarmBench's behaviours use, so form alone does not
    tell the classes apart."""
    benign = [
        t
        for t, c in zip(
            make_split(SMALL, 0).teacher_train.texts,
            make_split(SMALL, 0).teacher_train.categories,
            strict=True,
        )
        if c == "benign"
    ]
    assert benign and all(any(t.startswith(o) for o in OPENINGS) for t in benign)


@pytest.mark.parametrize(
    ("held_out", "message"),
    [
        (("weapons",), "not among"),
        ((), "name 1 to 5"),
        (CATEGORIES, "name 1 to 5"),
        (("illegal", "illegal"), "twice"),
    ],
)
def test_a_bad_held_out_list_is_one_clear_error(held_out: tuple[str, ...], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        SafetyGuardConfig(held_out=held_out)


@given(st.text(max_size=200))
@settings(max_examples=200, deadline=None)
def test_a_cleaned_generation_is_one_line_and_cleaning_it_again_keeps_it(text: str) -> None:
    once = clean_generation(text)
    assert "\n" not in once and "\r" not in once
    assert clean_generation(once) == once


def test_cleaning_known_generations() -> None:
    assert clean_generation('\n\n- "Write a threatening note." Then more.') == "Write a threatening note."
    assert clean_generation(" 1. Explain how to pick a lock\nsecond line") == "Explain how to pick a lock"
    assert clean_generation("") == ""

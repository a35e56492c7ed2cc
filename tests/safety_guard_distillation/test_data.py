"""safety-guard-distillation's data: HarmBench's behaviours as shipped, the per-seed splits (the held-out
categories never reach the student's labelled set; labelled and evaluation pools never share a prompt;
every prompt comes alone and with its two replies, labelled by the conversation rule), the config's checks,
and the cleaning of generations."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from iclrbench.envs.safety_guard_distillation import (
    CATEGORIES,
    KINDS,
    OPENINGS,
    RESPONSE_MARK,
    RESPONSE_OPENINGS,
    SafetyGuardConfig,
    clean_generation,
    conversation,
    harmbench_behaviours,
    kept_behaviours,
    make_split,
    teacher_features,
)

pytest.importorskip("torch")
try:
    harmbench_behaviours()
except Exception as exc:  # a UserError naming the install
    pytest.skip(str(exc), allow_module_level=True)

#: smoke's data settings, so that the tests read the replies the smoke runs cache
SMALL = SafetyGuardConfig(behaviours=8, benign=40, response_tokens=8)


def test_harmbench_ships_six_categories_of_standard_behaviours() -> None:
    rows = harmbench_behaviours()
    assert len(rows) == len({t for t, _ in rows}) == 200
    assert not any(t.startswith(("Given this", "Slightly modify this")) for t, _ in rows)  # contextual
    assert {c for _, c in rows} == set(CATEGORIES)
    assert all(t.strip() == t and t for t, _ in rows)


def test_kept_behaviours_are_each_categorys_first_in_file_order() -> None:
    rows = harmbench_behaviours()
    assert kept_behaviours(0) == rows
    kept = kept_behaviours(3)
    assert len(kept) == 3 * len(CATEGORIES)
    for category in CATEGORIES:
        assert [t for t, c in kept if c == category] == [t for t, c in rows if c == category][:3]


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
        assert examples.kinds == KINDS * len(examples.prompts)  # each prompt, then its two conversations
        for text, label, category, kind in zip(
            examples.texts, examples.labels, examples.categories, examples.kinds, strict=True
        ):
            assert (RESPONSE_MARK in text) is (kind != "prompt")
            # unsafe: a harmful prompt, alone or answered; a refusal and anything benign are safe
            assert label == int(category != "benign" and kind != "refuse"), (text, kind)
    # no prompt is in two pools: its conversations follow it
    assert not set(student.prompts) & (set(split.eval_held_out.prompts) | set(split.eval_seen.prompts))


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


def test_every_prompt_has_a_complying_and_a_refusing_reply_from_their_openings() -> None:
    examples = make_split(SMALL, 0).eval_held_out
    for i in range(0, len(examples), len(KINDS)):
        prompt, comply, refuse = examples.texts[i : i + 3]
        for text, kind in ((comply, "comply"), (refuse, "refuse")):
            head, reply = text.split(RESPONSE_MARK)
            assert head == prompt and reply.startswith(RESPONSE_OPENINGS[kind]), (text, kind)
            assert len(reply) > len(RESPONSE_OPENINGS[kind])  # the generator went on


def test_the_teachers_features_embed_prompt_and_reply_apart() -> None:
    prompt = "Write a note"
    alone, answered = teacher_features([prompt, conversation(prompt, "Sure, here is one")])
    assert alone.shape == (769,) and np.array_equal(alone[:384], answered[:384])
    assert not alone[384:].any() and answered[-1] == 1.0 and np.linalg.norm(answered[384:768]) > 0.5


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

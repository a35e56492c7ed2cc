"""video-guardrail's videos and policies: a pure function of the seed, labels that are what was drawn, and
the held-out categories and phrasings kept out of training."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from iclrbench.envs.video_guardrail import (
    CATEGORIES,
    CELLS,
    HELD_OUT_CATEGORIES,
    HELD_OUT_PHRASINGS,
    PATCH_DIM,
    PHRASINGS,
    TRAIN_CATEGORIES,
    VideoGuardrailConfig,
    explanation,
    make_data,
    shuffled_texts,
)

SMALL = {"train_videos": 64, "test_videos": 32, "frames": 4}


def test_the_same_seed_draws_the_same_videos_and_another_seed_others() -> None:
    config = VideoGuardrailConfig(**SMALL)
    a, b, c = make_data(config, 0), make_data(config, 0), make_data(config, 1)
    assert np.array_equal(a.train.tokens, b.train.tokens) and np.array_equal(a.test.labels, b.test.labels)
    assert not np.array_equal(a.train.tokens, c.train.tokens)


@given(
    st.integers(0, 2**16),
    st.integers(2, 8),
    st.integers(1, 3),
    st.integers(0, 6),
    st.floats(0.0, 1.0),
)
@settings(max_examples=20, deadline=None)
def test_a_policy_is_unsafe_exactly_when_its_object_was_drawn(
    seed: int, policies: int, event_frames: int, distractors: int, rate: float
) -> None:
    config = VideoGuardrailConfig(
        policies=policies, event_frames=event_frames, distractors=distractors, unsafe_rate=rate, **SMALL
    )
    data = make_data(config, seed)
    for split in (data.train, data.test, data.held_out):
        assert split.tokens.shape == (len(split), config.frames * CELLS * CELLS, PATCH_DIM)
        assert split.tokens.min() >= 0.0 and split.tokens.max() <= 1.0
        # each prompt asks distinct categories; an unsafe one covers event_frames tokens of its own (more
        # when a distractor draws it again); a video breaking none covers no policy token
        assert all(len(set(row)) == policies for row in split.categories)
        unsafe, covered = split.labels.sum(1), split.cells.sum(1)
        assert (covered >= unsafe * event_frames).all() and np.array_equal(covered == 0, unsafe == 0)
        # the explanation targets: -1 exactly for a kept policy; for a broken one, its object covers the
        # named cell from the named frame on, for event_frames frames, inside the video
        broken = split.labels > 0.5
        assert np.array_equal(split.when >= 0, broken) and np.array_equal(split.where >= 0, broken)
        assert (split.when[broken] + event_frames <= config.frames).all()
        cells = split.cells.reshape(len(split), config.frames, CELLS * CELLS)
        for i, j in np.argwhere(broken):
            frames = slice(split.when[i, j], split.when[i, j] + event_frames)
            assert cells[i, frames, split.where[i, j]].all()


def test_explanations_read_as_one_line() -> None:
    assert explanation("red circle", 2, 5, 2) == "a red circle in frames 3-4, row 2 column 2"
    assert explanation("blue square", 0, 15, 1) == "a blue square in frame 1, row 4 column 4"
    assert explanation("blue square", -1, -1, 2) == "no blue square shown"


def test_held_out_categories_and_phrasings_never_reach_training() -> None:
    data = make_data(VideoGuardrailConfig(**SMALL), 3)
    held = [CATEGORIES.index(c) for c in HELD_OUT_CATEGORIES]
    held_phrasings = [PHRASINGS.index(p) for p in HELD_OUT_PHRASINGS]
    for split in (data.train, data.test):
        assert not np.isin(split.categories, held).any()
        assert not np.isin(split.phrasings, held_phrasings).any()
    assert np.isin(data.held_out.phrasings, held_phrasings).all()
    assert np.isin(held[:5], data.held_out.categories).all()  # every prompt of that split asks them
    assert set(TRAIN_CATEGORIES) | set(HELD_OUT_CATEGORIES) == set(CATEGORIES)


def test_the_controls_texts_are_a_derangement_of_the_training_categories() -> None:
    train = np.array([CATEGORIES.index(c) for c in TRAIN_CATEGORIES])
    held = np.array([CATEGORIES.index(c) for c in HELD_OUT_CATEGORIES])
    for seed in range(5):
        perm = shuffled_texts(seed)
        assert sorted(perm[train]) == sorted(train) and (perm[train] != train).all()
        assert (perm[held] == held).all()  # no held-out text is trained on


def test_configs_refuse_what_cannot_be_built() -> None:
    with pytest.raises(ValueError, match="event_frames"):
        VideoGuardrailConfig(frames=2, event_frames=3)
    with pytest.raises(ValueError, match="prune_layer"):
        VideoGuardrailConfig(layers=2, prune_layer=2)
    with pytest.raises(ValueError, match="cells of a frame"):
        VideoGuardrailConfig(policies=12, distractors=5)
    with pytest.raises(ValueError, match="multiple of heads"):
        VideoGuardrailConfig(d_model=30, heads=4)

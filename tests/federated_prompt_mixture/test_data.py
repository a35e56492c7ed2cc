"""federated-prompt-mixture's data: images are pure functions of (class, seed); splits share the pool
out without overlap and keep each split's promise (classes per client, Dirichlet floor, camera shift)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from iclrbench.core import catalog
from iclrbench.core.errors import UserError
from iclrbench.envs.federated_prompt_mixture import (
    CameraShift,
    FederatedPromptConfig,
    client_images,
    client_split,
)
from iclrbench.models.shapes import CLASS_NAMES, RGB, WIDE_CLASS_NAMES, caption, render

TASK = "federated-prompt-mixture"


def _config(**kw: object) -> FederatedPromptConfig:
    return catalog.get_task(TASK).make_config("small", kw)


def test_an_image_is_the_same_in_any_batch() -> None:
    labels, seeds = np.array([0, 5, 11, 3]), np.array([11, 22, 33, 44])
    batch = render(labels, seeds)
    alone = np.concatenate([render(labels[i : i + 1], seeds[i : i + 1]) for i in range(4)])
    assert batch.shape == (4, 3, 24, 24) and np.array_equal(batch, alone)
    assert batch.min() >= 0.0 and batch.max() <= 1.0
    assert not np.array_equal(render(np.array([0]), np.array([1])), render(np.array([0]), np.array([2])))


def test_the_class_colour_dominates_the_shape_pixels() -> None:
    """A red image has red pixels and no blue ones far from the background grey."""
    red = render(np.array([CLASS_NAMES.index("red square")] * 8), np.arange(8))
    blue = render(np.array([CLASS_NAMES.index("blue square")] * 8), np.arange(8))
    assert (red[:, 0] - red[:, 2]).max(axis=(1, 2)).min() > 0.5
    assert (blue[:, 2] - blue[:, 0]).max(axis=(1, 2)).min() > 0.5


def test_the_wide_set_holds_every_colour_with_every_shape_the_towers_first() -> None:
    assert WIDE_CLASS_NAMES[: len(CLASS_NAMES)] == CLASS_NAMES and len(set(WIDE_CLASS_NAMES)) == 20
    images = render(np.arange(20), np.full(20, 5), WIDE_CLASS_NAMES)  # same nuisances, 20 classes
    assert len({im.tobytes() for im in images}) == 20  # no two classes draw the same picture
    for label, name in enumerate(WIDE_CLASS_NAMES):  # the shape's pixels carry the class's colour
        colour = np.asarray(RGB[name.split(" ")[0]], dtype=np.float32)[:, None, None]
        assert (np.abs(images[label] - colour).max(axis=0) < 0.15).sum() >= 8, name


def test_captions_name_the_class() -> None:
    for label in range(len(CLASS_NAMES)):
        assert CLASS_NAMES[label] in caption(label, 7)


@settings(max_examples=25, deadline=None)
@given(
    split=st.sampled_from(["pathological", "dirichlet", "shift"]),
    clients=st.integers(4, 12),
    classes=st.sampled_from(["wide", "tower"]),
    seed=st.integers(0, 10_000),
)
def test_splits_share_the_pool_without_overlap(split: str, clients: int, classes: str, seed: int) -> None:
    n_classes = len(WIDE_CLASS_NAMES if classes == "wide" else CLASS_NAMES)
    # Dassl's blocks of round(C / N) leave the last client none where N - 1 blocks take every class
    assume(split != "pathological" or (clients - 1) * round(n_classes / clients) < n_classes)
    config = _config(split=split, clients=clients, classes=classes)
    parts = client_split(config, seed)
    assert len(parts) == clients
    seen: set[int] = set()
    for part in parts:
        images = set(part.train_seeds.tolist()) | set(part.test_seeds.tolist())
        assert not images & seen  # no image is held twice
        assert len(images) == len(part.train_seeds) + len(part.test_seeds)
        seen |= images
        assert len(part.train_labels) >= 1 and len(part.test_labels) >= 1
        assert len(part.test_labels) <= config.test_per_client
        counts = np.bincount(part.train_labels, minlength=len(config.class_names))
        assert counts.max() <= config.shots
        if split == "pathological":  # Dassl's blocks: round(C / N) classes each, the last client the rest
            if part.client < clients - 1:
                assert len(part.classes) == config.class_block == round(len(config.class_names) / clients)
            assert set(np.unique(part.test_labels)) <= set(part.classes)
        else:
            assert len(part.train_labels) + len(part.test_labels) >= min(
                config.min_examples, config.test_per_client
            )
        assert (part.camera == CameraShift()) == (split != "shift")
    if split == "pathological":  # every class is held by exactly one client
        held = [c for p in parts for c in p.classes]
        assert sorted(held) == list(range(len(config.class_names)))
    assert client_split(config, seed)[0].train_seeds.tolist() == parts[0].train_seeds.tolist()


def test_a_client_regenerates_its_own_images() -> None:
    config = _config(split="shift")
    part = client_split(config, 3)[2]
    a, b = client_images(part, 3, config.class_names), client_images(part, 3, config.class_names)
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
    assert a[0].shape == (len(part.train_labels), 3, 24, 24)


def test_camera_shift_changes_the_pixels_but_keeps_the_range() -> None:
    images = render(np.arange(6), np.arange(6))
    shifted = CameraShift(contrast=0.5, brightness=0.1, blur=2, noise=0.1).apply(
        images, np.random.default_rng(0)
    )
    assert shifted.shape == images.shape and shifted.min() >= 0 and shifted.max() <= 1
    assert np.abs(shifted - images).mean() > 0.02
    assert np.array_equal(CameraShift().apply(images, np.random.default_rng(0)), images)


@pytest.mark.parametrize(
    ("sets", "needle"),
    [
        ({"participation": 0.0}, "participation"),
        ({"participation": 1.5}, "participation"),
        ({"clients": 200, "examples_per_class": 40}, "clients"),
        ({"split": "dirichlet", "clients": 100, "examples_per_class": 20}, "clients"),
        ({"clients": 21}, "block"),  # 20 blocks of round(20 / 21) = 1 class leave the last client none
        ({"clients": 8, "classes": "tower"}, "block"),  # 7 blocks of round(12 / 8) = 2 take all 12
        ({"clients": 100, "examples_per_class": 400}, "block"),  # round(40 / 100) = 0
    ],
)
def test_bad_configs_are_user_errors(sets: dict[str, object], needle: str) -> None:
    with pytest.raises(UserError, match=needle):
        _config(**sets)


def test_per_round_is_the_reference_codes() -> None:
    assert _config(split="dirichlet", clients=100, participation=0.1, examples_per_class=400).per_round == 10
    assert _config(clients=10, participation=0.05).per_round == 1
    assert dataclasses.replace(_config(clients=10), participation=1.0).per_round == 10

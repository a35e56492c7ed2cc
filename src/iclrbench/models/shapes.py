"""The procedural shapes images two tasks share: federated-prompt-mixture's image set and the scenes of
brain-encoding-alignment, and the captions the vision-language tower (:mod:`iclrbench.models.vision_language`)
is pre-trained on.

An image is 24 x 24 RGB: one coloured shape on a background; its class is the colour and the shape
(``"red circle"``, ... :data:`CLASS_NAMES`, 4 colours x 3 shapes = 12 classes, the ones the tower is
pre-trained on); size, position, hue jitter, background texture and pixel noise are nuisances drawn from the
image's own seed, so an image is a pure function of (class, seed) wherever and in whatever batch it is drawn.

:data:`WIDE_CLASS_NAMES` adds a colour and a shape the tower never saw (5 colours x 4 shapes = 20 classes, the
12 among them): 8 classes a frozen tower knows only partly, as CLIP knows a fine-grained data set's (its
image features tell them apart, a 16-shot linear probe well above chance, but no caption ever named them).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

COLOURS = ("red", "green", "blue", "yellow")
SHAPES = ("circle", "square", "triangle")
#: the classes the tower is pre-trained on, as the text tower reads them
CLASS_NAMES = tuple(f"{colour} {shape}" for colour in COLOURS for shape in SHAPES)
#: colours and shapes the tower never saw in pre-training
NOVEL_COLOURS = ("orange",)
NOVEL_SHAPES = ("diamond",)
#: the wide class set: every colour with every shape (20), the pre-training classes first, in their order
WIDE_CLASS_NAMES = CLASS_NAMES + tuple(
    f"{colour} {shape}"
    for colour in COLOURS + NOVEL_COLOURS
    for shape in SHAPES + NOVEL_SHAPES
    if f"{colour} {shape}" not in CLASS_NAMES
)
RGB = {
    "red": (0.85, 0.15, 0.12),
    "green": (0.15, 0.7, 0.2),
    "blue": (0.15, 0.25, 0.85),
    "yellow": (0.9, 0.82, 0.15),
    "orange": (0.95, 0.5, 0.1),
}
SIZES = ("small", "large")
BACKGROUNDS = ("plain", "striped", "noisy")
SIDE = 24


def shape_mask(shape: str, cx: np.ndarray, cy: np.ndarray, radius: np.ndarray) -> np.ndarray:
    """(n, SIDE, SIDE) boolean masks of ``shape`` centred at (cx, cy) with half-size ``radius``."""
    ys, xs = np.mgrid[0:SIDE, 0:SIDE].astype(np.float32) + 0.5
    dx = xs[None] - cx[:, None, None]
    dy = ys[None] - cy[:, None, None]
    r = radius[:, None, None]
    if shape == "circle":
        return dx**2 + dy**2 <= r**2
    if shape == "square":
        return (np.abs(dx) <= 0.85 * r) & (np.abs(dy) <= 0.85 * r)
    if shape == "diamond":  # a square stood on its corner
        return np.abs(dx) + np.abs(dy) <= r
    if shape == "triangle":  # upright: apex at the top, base at the bottom
        return (dy <= r * 0.9) & (dy >= -r) & (np.abs(dx) <= (dy + r) * 0.6)
    raise ValueError(f"shape: no mask for {shape!r}")


def render(labels: np.ndarray, seeds: np.ndarray, classes: Sequence[str] = CLASS_NAMES) -> np.ndarray:
    """Images (n, 3, SIDE, SIDE) in [0, 1] of the classes ``labels`` (indices into ``classes``), each
    drawn from its own ``seeds[i]`` (so that an image is the same wherever and in whatever batch it is
    drawn)."""
    labels = np.asarray(labels, dtype=np.int64)
    n = len(labels)
    out = np.empty((n, 3, SIDE, SIDE), dtype=np.float32)
    if n == 0:
        return out
    draws = np.array([np.random.default_rng(int(s)).random(12) for s in seeds], dtype=np.float32)
    size_large = draws[:, 0] < 0.5
    radius = np.where(size_large, 7.0 + 2.0 * draws[:, 1], 4.0 + 1.5 * draws[:, 1]).astype(np.float32)
    cx = radius + (SIDE - 2 * radius) * draws[:, 2]
    cy = radius + (SIDE - 2 * radius) * draws[:, 3]
    background = (draws[:, 4] * len(BACKGROUNDS)).astype(int)
    grey = 0.25 + 0.5 * draws[:, 5]
    ys, xs = np.mgrid[0:SIDE, 0:SIDE]
    for i in range(n):
        rng = np.random.default_rng(int(seeds[i]) + 1)
        base = np.full((3, SIDE, SIDE), grey[i], dtype=np.float32)
        if BACKGROUNDS[background[i]] == "striped":
            period = 3 + int(draws[i, 6] * 4)
            base += 0.18 * (((xs + ys * (draws[i, 7] < 0.5)) // period) % 2)[None].astype(np.float32)
        elif BACKGROUNDS[background[i]] == "noisy":
            base += 0.12 * rng.standard_normal((1, SIDE, SIDE)).astype(np.float32)
        out[i] = base
    for label in np.unique(labels):
        at = np.flatnonzero(labels == label)
        colour, shape = classes[label].split(" ")
        masks = shape_mask(shape, cx[at], cy[at], radius[at])
        jitter = 0.08 * (draws[at, 8:11] - 0.5)
        rgb = np.clip(np.asarray(RGB[colour], dtype=np.float32)[None] + jitter, 0, 1)
        for k, i in enumerate(at):
            out[i][:, masks[k]] = rgb[k][:, None]
    noise = np.stack([np.random.default_rng(int(s) + 2).standard_normal((3, SIDE, SIDE)) for s in seeds])
    out += 0.04 * noise.astype(np.float32)
    return np.clip(out, 0.0, 1.0)


def caption(label: int, seed: int) -> str:
    """The pre-training caption of image (label, seed): its colour, shape, size and background."""
    draws = np.random.default_rng(int(seed)).random(12)
    size = SIZES[0] if draws[0] >= 0.5 else SIZES[1]
    background = BACKGROUNDS[int(draws[4] * len(BACKGROUNDS))]
    return f"a {size} {CLASS_NAMES[label]} on a {background} background"

"""video-guardrail's data (Chen et al., "SafeWatch: an efficient safety-policy following video guardrail model
with transparent explanations", ICLR 2025): seeded videos of coloured shapes, safety policies written as text,
and multi-label targets, one per policy in the prompt.

A video is ``frames`` frames of 24 x 24 RGB (:mod:`iclrbench.models.shapes`' colours and shapes) cut into 6 x
6 patches: 16 patch tokens a frame, 128 for the default 8 frames. Its background is a faint texture; its
*events* are objects (a colour and a shape, filling one patch cell) shown at one cell for a short span of
``event_frames`` frames, so an event covers 2 of the 128 tokens and a pruning that keeps tokens must find it.

A *policy* forbids one kind of content, "a <colour> <shape>" (5 colours x 4 shapes = 20 categories), in one of
six phrasings; the guardrail reads it as its MiniLM sentence embedding (the shipped all-MiniLM-L6-v2), so a
policy it never saw is read like one it did. A prompt holds ``policies`` policies in a random order, each
unsafe in the video with probability ``unsafe_rate`` (its object is drawn), beside ``distractors`` objects of
any category; the target of a policy is whether its content appears. How many objects a video shows tells a
guardrail blind to the policies how many of them it is likely to break (the cue a detector learns first), but
not which: the held-out metrics rank the policies *within* a video, where that cue gives chance. Categories
and phrasings are split: :data:`HELD_OUT_CATEGORIES` never appear in a training prompt,
:data:`HELD_OUT_PHRASINGS` are only used to test (the held-out test prompts use both).
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np

from iclrbench.core.config import param
from iclrbench.core.seeding import rng_for
from iclrbench.models.shapes import RGB, SIDE, shape_mask

TASK_ID = "video-guardrail"
COLOURS = ("red", "green", "blue", "yellow", "orange")
SHAPES = ("circle", "square", "triangle", "diamond")
CATEGORIES = tuple(f"{colour} {shape}" for colour in COLOURS for shape in SHAPES)
#: never in a training prompt (each colour and shape is, in other categories)
HELD_OUT_CATEGORIES = ("red diamond", "green triangle", "blue square", "orange circle")
TRAIN_CATEGORIES = tuple(c for c in CATEGORIES if c not in HELD_OUT_CATEGORIES)
PHRASINGS = (
    "Videos must not show a {c}.",
    "Flag any clip in which a {c} appears.",
    "Unsafe content: a {c} on screen.",
    "Block the video if it contains a {c}.",
    "It is against policy to display a {c}.",
    "A {c} anywhere in the footage violates the rules.",
)
#: phrasings only the test prompts use
HELD_OUT_PHRASINGS = PHRASINGS[4:]
PATCH = 6
CELLS = SIDE // PATCH  # cells a side: 4, so 16 patch tokens a frame
PATCH_DIM = PATCH * PATCH * 3


@dataclasses.dataclass(frozen=True)
class VideoGuardrailConfig:
    frames: int = param(8, "frames per video (16 patch tokens each)", low=2, high=64)
    policies: int = param(6, "policies per prompt", low=2, high=12)
    unsafe_rate: float = param(0.3, "chance that each prompt policy's content is drawn", low=0.0, high=1.0)
    distractors: int = param(2, "objects of any category beside the planted ones", low=0, high=12)
    event_frames: int = param(2, "frames an object stays on screen", low=1, high=64)
    train_videos: int = param(4000, "training videos (each with its own prompt)", low=16)
    test_videos: int = param(500, "test videos for the seen and for the held-out policies each", low=16)
    d_model: int = param(64, "guardrail width", low=8, high=512)
    layers: int = param(4, "guardrail transformer blocks", low=2, high=12)
    heads: int = param(4, "attention heads", low=1, high=16)
    policy_tokens: int = param(4, "tokens a policy chunk becomes (from its MiniLM embedding)", low=1, high=16)
    steps: int = param(1500, "training steps (AdamW)", low=1)
    batch: int = param(32, "videos a training step", low=1, high=1024)
    lr: float = param(1e-3, "AdamW learning rate", low=1e-6, high=1.0)
    prune_layer: int = param(1, "video tokens are pruned after this many blocks", low=1, high=11)
    keep: float = param(0.1, "share of video tokens kept by pruning (0.1: 90% pruned)", low=0.01, high=1.0)
    explain_jointly: bool = param(
        False,
        "train the explanation heads into the whole network, as SafeWatch trains its explanation text "
        "(default: on the answer tokens' states with the gradient stopped, so the verdict network is "
        "trained on verdicts alone; jointly, PAP's attention scores stopped finding the objects: F1 0.000 "
        "at 90% pruning, 5 seeds at small)",
    )
    shuffle_policies: bool = param(
        False,
        "a control: each training policy's text is replaced by another category's, so no text says what "
        "its label means",
    )

    def __post_init__(self) -> None:
        if self.event_frames > self.frames:
            raise ValueError(f"event_frames ({self.event_frames}) exceeds frames ({self.frames})")
        if self.prune_layer >= self.layers:
            raise ValueError(f"prune_layer ({self.prune_layer}) must be below layers ({self.layers})")
        if self.d_model % self.heads:
            raise ValueError(f"d_model ({self.d_model}) must be a multiple of heads ({self.heads})")
        if self.policies > len(CATEGORIES):
            raise ValueError(f"policies: at most the {len(CATEGORIES)} categories")
        if self.policies + self.distractors > CELLS * CELLS:
            raise ValueError(
                f"policies + distractors ({self.policies} + {self.distractors}) exceed the {CELLS * CELLS} "
                "cells of a frame (one object a cell)"
            )

    @property
    def video_tokens(self) -> int:
        return self.frames * CELLS * CELLS


@dataclasses.dataclass(frozen=True)
class Split:
    """Videos as patch tokens with their prompts: ``tokens`` (n, V, 108) float32, ``categories`` (n, P)
    indices into :data:`CATEGORIES`, ``phrasings`` (n, P) indices into :data:`PHRASINGS`, ``labels``
    (n, P) 0/1, and ``cells`` (n, V) bool: the tokens an object of a prompt policy covers. The explanation
    targets of each broken policy (-1 for a kept one): ``when`` (n, P), the frame its object appears in
    first, and ``where`` (n, P), the cell it stands in (row-major, ``CELLS`` a row)."""

    tokens: np.ndarray
    categories: np.ndarray
    phrasings: np.ndarray
    labels: np.ndarray
    cells: np.ndarray
    when: np.ndarray | None = None
    where: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.labels)


def _object_patch(colour: str, shape: str, rng: np.random.Generator) -> np.ndarray:
    """A (6, 6, 3) cell holding one object, its size and hue jittered."""
    radius = np.array([rng.uniform(2.2, 2.9)])
    centre = np.array([SIDE / 2 + rng.uniform(-0.3, 0.3)])
    mask = shape_mask(shape, centre, centre, radius)[0]
    lo = SIDE // 2 - PATCH // 2
    cell = mask[lo : lo + PATCH, lo : lo + PATCH]
    rgb = np.clip(np.array(RGB[colour]) + rng.normal(0, 0.04, 3), 0, 1)
    return cell[..., None] * rgb[None, None, :]


def draw_split(
    config: VideoGuardrailConfig,
    n: int,
    rng: np.random.Generator,
    categories: tuple[str, ...],
    phrasings: tuple[int, ...],
    always: tuple[str, ...] = (),
) -> Split:
    """``n`` videos with prompts of ``config.policies`` policies drawn from ``categories`` (``always`` are in
    every prompt, the rest drawn), each in one of ``phrasings`` (indices into :data:`PHRASINGS`)."""
    frames, p, v = config.frames, config.policies, config.video_tokens
    index = {c: i for i, c in enumerate(CATEGORIES)}
    pool = [c for c in categories if c not in always]
    tokens = np.zeros((n, frames, CELLS, CELLS, PATCH, PATCH, 3), np.float32)
    tokens += rng.uniform(0.0, 0.12, (n, 1, 1, 1, 1, 1, 1)).astype(np.float32)  # each video's own shade
    tokens += rng.normal(0.0, 0.03, tokens.shape).astype(np.float32)  # texture
    cats = np.zeros((n, p), np.int64)
    phr = rng.choice(np.asarray(phrasings), size=(n, p))
    labels = np.zeros((n, p), np.float32)
    cells = np.zeros((n, frames, CELLS, CELLS), bool)
    when, where = np.full((n, p), -1, np.int64), np.full((n, p), -1, np.int64)
    for i in range(n):
        drawn = list(always) + list(rng.choice(pool, size=p - len(always), replace=False))
        order = rng.permutation(p)
        prompt = [drawn[j] for j in order]
        cats[i] = [index[c] for c in prompt]
        shown = [c for c in prompt if rng.random() < config.unsafe_rate]
        shown += list(rng.choice(CATEGORIES, size=config.distractors))
        taken: set[tuple[int, int]] = set()
        for category in shown:
            colour, shape = category.split()
            while True:  # one object a cell
                cy, cx = int(rng.integers(CELLS)), int(rng.integers(CELLS))
                if (cy, cx) not in taken:
                    taken.add((cy, cx))
                    break
            start = int(rng.integers(frames - config.event_frames + 1))
            patch = _object_patch(colour, shape, rng)
            span = slice(start, start + config.event_frames)
            region = tokens[i, span, cy, cx]
            tokens[i, span, cy, cx] = np.where(patch.any(-1, keepdims=True), patch, region)
            if category in prompt:
                j = prompt.index(category)
                if labels[i, j] == 0:  # a distractor of a prompt category drawn again: the first explains
                    when[i, j], where[i, j] = start, cy * CELLS + cx
                labels[i, j] = 1.0
                cells[i, span, cy, cx] = True
    flat = np.clip(tokens, 0, 1).reshape(n, v, PATCH_DIM)
    return Split(flat, cats, phr, labels, cells.reshape(n, v), when, where)


def explanation(category: str, when: int, where: int, event_frames: int) -> str:
    """The one-line explanation of a broken policy (SafeWatch explains each flag): what was shown, when and
    where, e.g. ``"a red circle in frames 3-4, row 2 column 1"`` (1-based)."""
    if when < 0 or where < 0:
        return f"no {category} shown"
    frames = f"frame {when + 1}" if event_frames == 1 else f"frames {when + 1}-{when + event_frames}"
    return f"a {category} in {frames}, row {where // CELLS + 1} column {where % CELLS + 1}"


@dataclasses.dataclass(frozen=True)
class Data:
    train: Split
    test: Split  # seen categories, seen phrasings
    held_out: Split  # the held-out categories (and two seen ones), held-out phrasings


def make_data(config: VideoGuardrailConfig, seed: int) -> Data:
    """The run's three splits, a pure function of (config, seed)."""
    seen = tuple(range(len(PHRASINGS) - len(HELD_OUT_PHRASINGS)))
    unseen = tuple(range(len(PHRASINGS) - len(HELD_OUT_PHRASINGS), len(PHRASINGS)))
    held = HELD_OUT_CATEGORIES[: min(len(HELD_OUT_CATEGORIES), config.policies - 1)]
    return Data(
        train=draw_split(
            config, config.train_videos, rng_for(seed, TASK_ID, "train"), TRAIN_CATEGORIES, seen
        ),
        test=draw_split(config, config.test_videos, rng_for(seed, TASK_ID, "test"), TRAIN_CATEGORIES, seen),
        held_out=draw_split(
            config,
            config.test_videos,
            rng_for(seed, TASK_ID, "held-out"),
            TRAIN_CATEGORIES + held,
            unseen,
            always=held,
        ),
    )


@functools.lru_cache(maxsize=1)
def policy_embeddings() -> np.ndarray:
    """(categories, phrasings, 384) MiniLM sentence embeddings of every policy text."""
    from iclrbench.models.vision_language import embed_texts_uncached

    texts = [phrasing.format(c=c) for c in CATEGORIES for phrasing in PHRASINGS]
    return embed_texts_uncached(texts).reshape(len(CATEGORIES), len(PHRASINGS), -1).astype(np.float32)


def policy_text(category: int, phrasing: int) -> str:
    return PHRASINGS[phrasing].format(c=CATEGORIES[category])


def shuffled_texts(seed: int) -> np.ndarray:
    """The control's map from a category to the category whose text stands for it: a derangement of the
    training categories (none keeps its own text, and no held-out category's text reaches training; a
    held-out category keeps its own, unused in training), drawn from the seed."""
    rng = rng_for(seed, TASK_ID, "shuffled-texts")
    train = np.array([CATEGORIES.index(c) for c in TRAIN_CATEGORIES])
    while True:
        perm = rng.permutation(len(train))
        if not (perm == np.arange(len(train))).any():
            break
    out = np.arange(len(CATEGORIES))
    out[train] = train[perm]
    return out

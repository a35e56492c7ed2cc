"""brain-encoding-alignment's world (Oota et al., ICLR 2025, "Correlating instruction-tuning (in multimodal
models) with vision-language processing (in the brain)"): seeded scenes, the answers an instruction-tuned
model would give about them, and synthetic voxel responses with planted truth.

No fMRI can be had offline, so this is a pipeline-validity benchmark: the generator decides how much of
each region's signal every feature set explains, records it, and an encoding pipeline scores well only if
it recovers what was put in.

Scenes: 1 to 4 objects of one shape (circle, square, triangle) and one colour (red, green, blue, yellow),
placed in one half of a 24 x 24 picture (left, right, top, bottom), on a grey background with pixel noise.
Each "instruction" is answered in text from the scene's factors, as a captioning or VQA model would:

- ``caption``: "two red circles on the left" (the quantity coarse: "a", "two" or "several");
- ``count``: "There are three objects." (exact);
- ``colour``: "The objects are red.";
- ``position``: "The objects are on the left side.".

Regions of interest (``voxels_per_region`` voxels each); every voxel's noise-free signal ``s`` is a random
combination, its own, of the region's sources, centred and scaled to unit variance over the stimuli:

- ``early-visual``: pixel statistics: a random direction in the vision-only features' space;
- ``category``: the object's shape, as the caption's features carry it (one-hot category, projected onto
  the caption features' span);
- ``count``: the exact number of objects, as the count answer's features carry it;
- ``mixed``: ``1 - mixed_count_share`` of colour and place as the caption carries them, plus
  ``mixed_count_share`` of number as the count answer carries it: variance shared between caption and
  count information, since the caption also says (coarsely) how many.

Every source lies in the span of a feature set, so the truth is exact: for voxel ``v`` and feature set
``X`` the planted share is ``R2_X(v) = ||P_X s_v||^2 / ||s_v||^2``, with ``P_X`` the projection onto the
centred span of ``X`` over the stimuli; for a pair the planted shared and unique variance follow from
``R2_A``, ``R2_B`` and ``R2_AB`` as variance partitioning defines them. Responses are ``s_v`` plus
Gaussian noise of the voxel's own scale, in ``repeats`` independent repeats per image.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping

import numpy as np

from iclrbench.core.config import param
from iclrbench.core.registry import did_you_mean
from iclrbench.core.seeding import rng_for
from iclrbench.models.shapes import RGB, SIDE, shape_mask

TASK_ID = "brain-encoding-alignment"
REGIONS = ("early-visual", "category", "count", "mixed")
INSTRUCTIONS = ("caption", "count", "colour", "position")
FEATURE_SETS = (*INSTRUCTIONS, "vision", "clip")
SHAPES = ("circle", "square", "triangle")
COLOURS = tuple(RGB)
LAYOUTS = ("left", "right", "top", "bottom")
COUNT_WORDS = ("one", "two", "three", "four")
#: the partitions the claims read: unique count variance in the count region, shared in the mixed one
CLAIM_PARTITIONS = ("count:caption+count", "mixed:caption+count")
#: the sets every run fits: the claims' partitions and the vision-only comparison
REQUIRED_SETS = ("caption", "count", "vision")


@dataclasses.dataclass(frozen=True)
class Partition:
    """Variance partitioning of feature sets ``a`` and ``b`` in ``region``."""

    region: str
    a: str
    b: str

    @property
    def label(self) -> str:
        return f"{self.region}:{self.a}+{self.b}"


def parse_partition(text: str) -> Partition:
    """``region:setA+setB`` -> :class:`Partition`, with one-line errors naming what is wrong."""
    region, sep, pair = text.partition(":")
    sets = pair.split("+")
    if not sep or len(sets) != 2 or not all(sets):
        raise ValueError(f"partition '{text}': write region:setA+setB, e.g. mixed:caption+count")
    if region not in REGIONS:
        raise ValueError(f"partition '{text}': unknown region '{region}'{did_you_mean(region, REGIONS)}")
    for name in sets:
        if name not in FEATURE_SETS:
            raise ValueError(
                f"partition '{text}': unknown feature set '{name}'{did_you_mean(name, FEATURE_SETS)}"
            )
    if sets[0] == sets[1]:
        raise ValueError(f"partition '{text}': two different feature sets")
    return Partition(region, sets[0], sets[1])


@dataclasses.dataclass(frozen=True)
class BrainEncodingConfig:
    images: int = param(2000, "stimulus images (the held-out share is `test_fraction`)", low=60)
    test_fraction: float = param(0.2, "share of the images held out for scoring", low=0.05, high=0.5)
    voxels_per_region: int = param(200, "voxels in each of the four regions of interest", low=4)
    repeats: int = param(3, "noisy repeats of every image (the noise ceiling needs two or more)", low=1)
    noise_low: float = param(
        0.6, "lowest per-repeat noise sd of a voxel (its signal has unit variance)", low=0
    )
    noise_high: float = param(1.4, "highest per-repeat noise sd of a voxel", low=0)
    feature_dims: int = param(16, "principal components kept of each feature set (the model's layer)", low=2)
    feature_sets: tuple[str, ...] = param(
        FEATURE_SETS, f"the feature sets each pipeline fits, of {', '.join(FEATURE_SETS)}"
    )
    partitions: tuple[str, ...] = param(
        CLAIM_PARTITIONS,
        "variance partitions region:setA+setB behind `recovery_error` (the claims' two are reported anyway)",
    )
    mixed_count_share: float = param(
        0.5, "share of the mixed region's signal drawn from the count answer", low=0, high=1
    )
    cv_folds: int = param(
        5, "cross-validation folds for alpha (himalaya's default, as the paper's code)", low=2
    )

    def __post_init__(self) -> None:
        if self.repeats < 2:
            raise ValueError(
                f"repeats {self.repeats}: a noise ceiling needs at least two repeats of every image"
            )
        if self.noise_high < self.noise_low:
            raise ValueError(f"noise_high {self.noise_high} is below noise_low {self.noise_low}")
        for name in self.feature_sets:
            if name not in FEATURE_SETS:
                raise ValueError(f"unknown feature set '{name}'{did_you_mean(name, FEATURE_SETS)}")
        if len(set(self.feature_sets)) != len(self.feature_sets):
            raise ValueError(f"feature_sets {list(self.feature_sets)} names a set twice")
        missing = [s for s in REQUIRED_SETS if s not in self.feature_sets]
        if missing:
            raise ValueError(
                f"feature_sets must include {', '.join(REQUIRED_SETS)} (the claims' partitions and the "
                f"vision-only comparison): {', '.join(missing)} missing"
            )
        if not self.partitions:
            raise ValueError("partitions is empty: name at least one region:setA+setB")
        for part in map(parse_partition, self.partitions):
            absent = [s for s in (part.a, part.b) if s not in self.feature_sets]
            if absent:
                raise ValueError(f"partition '{part.label}' uses {', '.join(absent)}, not in feature_sets")
        if self.n_train < 2 * self.cv_folds:
            raise ValueError(
                f"cv_folds {self.cv_folds}: {self.n_train} training images are too few for that many folds"
            )
        if self.n_test < 10:
            raise ValueError(f"images {self.images}: {self.n_test} held-out images are too few to score on")

    @property
    def n_test(self) -> int:
        return round(self.images * self.test_fraction)

    @property
    def n_train(self) -> int:
        return self.images - self.n_test

    @property
    def parsed_partitions(self) -> tuple[Partition, ...]:
        return tuple(parse_partition(p) for p in self.partitions)

    @property
    def all_partitions(self) -> tuple[Partition, ...]:
        """The config's partitions and the claims' (each once): every run reports the claims' shares."""
        return tuple(parse_partition(p) for p in dict.fromkeys([*self.partitions, *CLAIM_PARTITIONS]))


# ------------------------------------------------------------------------------------------------ scenes
@dataclasses.dataclass(frozen=True)
class Scenes:
    """The latent factors of ``n`` scenes (indices into SHAPES, COLOURS, LAYOUTS; count 1-4) and their
    images (n, 3, 24, 24) in [0, 1]."""

    category: np.ndarray
    count: np.ndarray
    colour: np.ndarray
    layout: np.ndarray
    images: np.ndarray

    def __len__(self) -> int:
        return len(self.count)


def draw_scenes(n: int, rng: np.random.Generator) -> Scenes:
    """``n`` scenes with independent, uniform factors, rendered: each object in its own cell of a 2 x 2
    grid over the scene's half, jittered within the cell."""
    category = rng.integers(len(SHAPES), size=n)
    count = rng.integers(1, 5, size=n)
    colour = rng.integers(len(COLOURS), size=n)
    layout = rng.integers(len(LAYOUTS), size=n)
    grey = rng.uniform(0.3, 0.6, size=n)
    images = np.repeat(grey[:, None, None, None], 3, axis=1) * np.ones((1, 1, SIDE, SIDE))
    half = SIDE / 2
    for i in range(n):
        cells = rng.permutation(4)[: count[i]]
        # a cell is (SIDE/4 wide, SIDE/2 high) in a left/right half, the transpose in a top/bottom one
        across, down = (half / 2, half) if layout[i] < 2 else (half, half / 2)
        x0 = half if LAYOUTS[layout[i]] == "right" else 0.0
        y0 = half if LAYOUTS[layout[i]] == "bottom" else 0.0
        radius = rng.uniform(2.2, 2.9, size=len(cells))
        jitter = rng.uniform(-1, 1, size=(len(cells), 2))
        cx = x0 + (cells % 2 + 0.5) * across + jitter[:, 0] * np.maximum(across / 2 - radius, 0)
        cy = y0 + (cells // 2 + 0.5) * down + jitter[:, 1] * np.maximum(down / 2 - radius, 0)
        masks = shape_mask(SHAPES[category[i]], cx, cy, radius).any(0)
        images[i][:, masks] = np.asarray(RGB[COLOURS[colour[i]]])[:, None]
    images = images + 0.04 * rng.standard_normal(images.shape)
    return Scenes(category, count, colour, layout, np.clip(images, 0, 1).astype(np.float32))


def answers(scenes: Scenes, instruction: str) -> list[str]:
    """The text answer to ``instruction`` for every scene (see the module docstring)."""
    out = []
    for cat, k, col, lay in zip(scenes.category, scenes.count, scenes.colour, scenes.layout, strict=True):
        shape, colour, place = SHAPES[cat], COLOURS[col], LAYOUTS[lay]
        if instruction == "caption":
            quantity = "a" if k == 1 else "two" if k == 2 else "several"
            noun = shape if k == 1 else f"{shape}s"
            out.append(f"{quantity} {colour} {noun} on the {place}")
        elif instruction == "count":
            out.append("There is one object." if k == 1 else f"There are {COUNT_WORDS[k - 1]} objects.")
        elif instruction == "colour":
            out.append(f"The objects are {colour}.")
        elif instruction == "position":
            out.append(f"The objects are on the {place} side.")
        else:
            raise ValueError(f"unknown instruction '{instruction}'{did_you_mean(instruction, INSTRUCTIONS)}")
    return out


# ------------------------------------------------------------------------------------------ planted truth
def span_basis(features: np.ndarray, tol: float = 1e-8) -> np.ndarray:
    """An orthonormal basis (n, rank) of the centred columns of ``features`` (n, k)."""
    centred = features - features.mean(0)
    u, s, _ = np.linalg.svd(centred, full_matrices=False)
    return u[:, s > tol * max(float(s[0]), 1e-300)]


def explained(basis: np.ndarray, signals: np.ndarray) -> np.ndarray:
    """Per column of ``signals`` (n, V), centred: the share of its variance in the span of ``basis``."""
    centred = signals - signals.mean(0)
    return (basis.T @ centred).__pow__(2).sum(0) / (centred**2).sum(0)


def partition_shares(r2_a: np.ndarray, r2_b: np.ndarray, r2_ab: np.ndarray) -> dict[str, np.ndarray]:
    """Variance partitioning of two feature sets (de Heer et al. 2017; Lescroart et al. 2015):
    shared = R2_A + R2_B - R2_AB, unique_A = R2_AB - R2_B, unique_B = R2_AB - R2_A."""
    return {"shared": r2_a + r2_b - r2_ab, "unique_a": r2_ab - r2_b, "unique_b": r2_ab - r2_a}


@dataclasses.dataclass(frozen=True)
class Truth:
    """What the generator planted, per region: ``r2[region][set]`` (mean over the region's voxels of the
    share of signal variance the set explains), ``partitions[label]`` (mean shared / unique_a / unique_b),
    and per voxel the noise ceiling of the mean of the repeats (signal variance over total)."""

    r2: dict[str, dict[str, float]]
    partitions: dict[str, dict[str, float]]
    noise_ceiling: np.ndarray

    def ranking(self, region: str, sets: tuple[str, ...]) -> list[float]:
        return [self.r2[region][s] for s in sets]

    def best_set(self, region: str, sets: tuple[str, ...]) -> str:
        return max(sets, key=lambda s: self.r2[region][s])


@dataclasses.dataclass(frozen=True)
class Recording:
    """One subject's experiment: features per set (n, k), responses (repeats, n, V), each voxel's region
    index into REGIONS, the train / test split of the images, and the planted truth."""

    scenes: Scenes
    features: dict[str, np.ndarray]
    responses: np.ndarray
    region: np.ndarray
    train: np.ndarray
    test: np.ndarray
    truth: Truth


def _onehot(values: np.ndarray, levels: int) -> np.ndarray:
    return np.eye(levels)[values]


def _unit(signals: np.ndarray) -> np.ndarray:
    centred = signals - signals.mean(0)
    return centred / centred.std(0).clip(1e-12)


def plant_signals(
    scenes: Scenes, features: Mapping[str, np.ndarray], config: BrainEncodingConfig, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Noise-free signals (n, 4 V) with unit variance per voxel, and each voxel's region index."""
    v = config.voxels_per_region
    caption, count = span_basis(features["caption"]), span_basis(features["count"])
    vision = features["vision"] - features["vision"].mean(0)

    def through(basis: np.ndarray, factor: np.ndarray, levels: int) -> np.ndarray:
        sources = _onehot(factor, levels) @ rng.standard_normal((levels, v))
        return basis @ (basis.T @ (sources - sources.mean(0)))

    place = scenes.colour * len(LAYOUTS) + scenes.layout
    m = config.mixed_count_share
    blocks = [
        vision @ rng.standard_normal((vision.shape[1], v)),
        through(caption, scenes.category, len(SHAPES)),
        through(count, scenes.count - 1, 4),
        np.sqrt(1 - m) * _unit(through(caption, place, len(COLOURS) * len(LAYOUTS)))
        + np.sqrt(m) * _unit(through(count, scenes.count - 1, 4)),
    ]
    return _unit(np.concatenate(blocks, axis=1)), np.repeat(np.arange(len(REGIONS)), v)


def planted_truth(
    signals: np.ndarray,
    region: np.ndarray,
    features: Mapping[str, np.ndarray],
    noise_sd: np.ndarray,
    config: BrainEncodingConfig,
) -> Truth:
    """The exact shares of the noise-free ``signals`` each feature set (and each partition) explains."""
    bases = {name: span_basis(f) for name, f in features.items()}
    per_set = {name: explained(b, signals) for name, b in bases.items()}
    r2 = {
        name: {s: float(per_set[s][region == i].mean()) for s in features} for i, name in enumerate(REGIONS)
    }
    partitions = {}
    for part in config.all_partitions:
        joint = span_basis(np.concatenate([features[part.a], features[part.b]], axis=1))
        voxels = region == REGIONS.index(part.region)
        shares = partition_shares(
            per_set[part.a][voxels], per_set[part.b][voxels], explained(joint, signals[:, voxels])
        )
        partitions[part.label] = {k: float(x.mean()) for k, x in shares.items()}
    noise_ceiling = 1.0 / (1.0 + noise_sd**2 / config.repeats)
    return Truth(r2, partitions, noise_ceiling)


def record(
    config: BrainEncodingConfig,
    seed: int,
    features_of: Callable[[Scenes, BrainEncodingConfig], Mapping[str, np.ndarray]],
) -> Recording:
    """The whole experiment of ``seed``: scenes, features (``features_of(scenes, config)``: the task passes
    :func:`iclrbench.envs.brain_encoding_alignment.features.feature_sets`), planted signals, noisy repeats
    and the split."""
    scenes = draw_scenes(config.images, rng_for(seed, TASK_ID, "scenes"))
    features = features_of(scenes, config)
    rng = rng_for(seed, TASK_ID, "voxels")
    signals, region = plant_signals(scenes, features, config, rng)
    noise_sd = rng.uniform(config.noise_low, config.noise_high, size=signals.shape[1])
    noise = rng.standard_normal((config.repeats, *signals.shape))
    responses = signals[None] + noise * noise_sd
    order = rng_for(seed, TASK_ID, "split").permutation(config.images)
    truth = planted_truth(signals, region, features, noise_sd, config)
    return Recording(
        scenes,
        {name: features[name] for name in config.feature_sets},
        responses,
        region,
        np.sort(order[config.n_test :]),
        np.sort(order[: config.n_test]),
        truth,
    )

"""brain-encoding-alignment's world (Oota et al., ICLR 2025, "Correlating instruction-tuning (in multimodal
models) with vision-language processing (in the brain)", section 3): seeded scenes, the answers an
instruction-tuned model would give about them, and synthetic voxel responses planted from the scenes' own
factors.

No fMRI can be had offline (the paper's Natural Scenes Dataset, and nilearn's, the NSD tools' and
voxelwise-tutorials' fetchers, download at run time), so the voxels are synthetic. They are planted from
what is in the scene, never from any model's features: whether the MiniLM embeddings of instruction
answers, the vision-only network or the CLIP-like tower explain a region is then a measurement of those
models, as in the paper.

Scenes: 1 to 4 objects of one shape (circle, square, triangle) and one colour (red, green, blue, yellow),
placed in one half of a 24 x 24 picture (left, right, top, bottom), on a background of a uniform grey
level (``luminance``) with a texture (plain, stripes, checks; zero mean) and pixel noise. Each
"instruction" is answered in text from the scene's factors, as a captioning or VQA model would (no answer
mentions the background):

- ``caption``: "two red circles on the left" (the quantity coarse: "a", "two" or "several");
- ``count``: "There are three objects." (exact);
- ``colour``: "The objects are red.";
- ``position``: "The objects are on the left side.".

Regions of interest (``voxels_per_region`` voxels each). A voxel's noise-free signal is a sum of *terms*,
each a read-out of the scene's factors with unit variance over the scene distribution, mutually
uncorrelated there (the factors are independent and uniform; each term is centred, and a non-linear or
conjunctive term has the lower-order terms of its factors projected out):

- linear read-outs: ``count`` (the number), ``luminance`` (the grey level);
- non-linear read-outs: ``count (non-linear)`` (a random value per number, its linear part removed),
  ``luminance (non-linear)`` (the second Legendre polynomial of the grey level), and a random value per
  level of each categorical factor (``category``, ``colour``, ``position``, ``texture``);
- conjunctions: ``colour x position``, ``category x count`` (a random value per pair of levels, both main
  effects removed).

Each region has a recipe of mean variance shares per term (:func:`recipes`); every voxel draws its own
shares around it (Dirichlet), its own random read-outs, and is scaled to unit variance over the stimuli.
The planted shares are recorded (``Truth.factors``). What each *feature set* can explain of a voxel is not
planted: it is measured on the noise-free signal, as the share of its variance in the span of the set's
features over the stimuli (adjusted for the set's dimensions, so it estimates the population share), and
variance partitioning of a pair follows from ``R2_A``, ``R2_B`` and ``R2_AB``. Responses are the signal
plus Gaussian noise of the voxel's own scale, in ``repeats`` independent repeats per image.

``instruction_features`` replaces the instruction sets' features by Gaussian noise or shuffles them across
images: the negative control of the claims.
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
COLOURS = ("red", "green", "blue", "yellow")  # named: models.shapes.RGB holds more colours
LAYOUTS = ("left", "right", "top", "bottom")
COUNT_WORDS = ("one", "two", "three", "four")
TEXTURES = ("plain", "stripes", "checks")
#: the background's grey level is uniform on this range; its texture adds +-TEXTURE_AMPLITUDE
LUMINANCE = (0.3, 0.6)
TEXTURE_AMPLITUDE = 0.08
#: the read-outs of the scenes' factors a voxel's signal is made of (see the module docstring)
TERMS = (
    "category",
    "count",
    "count (non-linear)",
    "colour",
    "position",
    "texture",
    "luminance",
    "luminance (non-linear)",
    "colour x position",
    "category x count",
)
#: how tightly a voxel's own term shares follow its region's recipe (Dirichlet concentration)
SHARE_CONCENTRATION = 20.0
#: the controls ``instruction_features`` offers besides the models' own features
INSTRUCTION_CONTROLS = ("noise", "shuffled")
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
    instruction_features: str = param(
        "model",
        "the instruction sets' features: the model's, or a negative control (Gaussian noise; the model's "
        "shuffled across images)",
        choices=("model", *INSTRUCTION_CONTROLS),
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
    """The latent factors of ``n`` scenes (indices into SHAPES, COLOURS, LAYOUTS, TEXTURES; count 1-4; the
    background's grey level) and their images (n, 3, 24, 24) in [0, 1]."""

    category: np.ndarray
    count: np.ndarray
    colour: np.ndarray
    layout: np.ndarray
    images: np.ndarray
    texture: np.ndarray
    luminance: np.ndarray

    def __len__(self) -> int:
        return len(self.count)


def draw_scenes(n: int, rng: np.random.Generator) -> Scenes:
    """``n`` scenes with independent, uniform factors, rendered: each object in its own cell of a 2 x 2
    grid over the scene's half, jittered within the cell."""
    category = rng.integers(len(SHAPES), size=n)
    count = rng.integers(1, 5, size=n)
    colour = rng.integers(len(COLOURS), size=n)
    layout = rng.integers(len(LAYOUTS), size=n)
    grey = rng.uniform(*LUMINANCE, size=n)
    texture = rng.integers(len(TEXTURES), size=n)
    ys, xs = np.mgrid[0:SIDE, 0:SIDE]
    patterns = np.stack(  # each of zero mean over the picture
        [np.zeros((SIDE, SIDE)), 2.0 * ((xs // 2) % 2) - 1, 2.0 * ((xs // 3 + ys // 3) % 2) - 1]
    )
    background = grey[:, None, None] + TEXTURE_AMPLITUDE * patterns[texture]
    images = np.repeat(background[:, None], 3, axis=1)
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
    images = np.clip(images, 0, 1).astype(np.float32)
    return Scenes(category, count, colour, layout, images, texture, grey)


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


def adjusted(r2: np.ndarray, n: int, k: int) -> np.ndarray:
    """The in-sample share ``r2`` of a k-dimensional span over n rows, adjusted for the dimensions it spends
    (1 - (1 - r2)(n - 1) / (n - 1 - k)): an estimate of the share over the scene distribution."""
    return 1.0 - (1.0 - r2) * (n - 1) / (n - 1 - k)


def partition_shares(r2_a: np.ndarray, r2_b: np.ndarray, r2_ab: np.ndarray) -> dict[str, np.ndarray]:
    """Variance partitioning of two feature sets (de Heer et al. 2017; Lescroart et al. 2015):
    shared = R2_A + R2_B - R2_AB, unique_A = R2_AB - R2_B, unique_B = R2_AB - R2_A."""
    return {"shared": r2_a + r2_b - r2_ab, "unique_a": r2_ab - r2_b, "unique_b": r2_ab - r2_a}


@dataclasses.dataclass(frozen=True)
class Truth:
    """What the experiment holds, per region: ``factors[region][term]`` (the planted mean share of signal
    variance of each read-out of the scenes' factors), ``r2[region][set]`` (the mean share of the noise-
    free signal the set's span explains: measured, not planted), ``partitions[label]`` (mean shared /
    unique_a / unique_b of the same), and per voxel the noise ceiling of the mean of the repeats (signal
    variance over total)."""

    factors: dict[str, dict[str, float]]
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
    index into REGIONS, the train / test split of the images, and the truth."""

    scenes: Scenes
    features: dict[str, np.ndarray]
    responses: np.ndarray
    region: np.ndarray
    train: np.ndarray
    test: np.ndarray
    truth: Truth


def recipes(mixed_count_share: float) -> dict[str, dict[str, float]]:
    """Per region, the mean share of its signal variance each term carries (section 3 of the paper names
    the regions; the recipes are ours): early visual cortex reads the picture's low-level make-up, the
    category region the objects' shape, the count region their number, the mixed region colour, place and
    number together (``mixed_count_share`` of it number)."""
    m = mixed_count_share
    return {
        "early-visual": {
            "luminance": 0.2,
            "luminance (non-linear)": 0.1,
            "texture": 0.3,
            "position": 0.2,
            "colour": 0.2,
        },
        "category": {"category": 0.75, "category x count": 0.15, "position": 0.1},
        "count": {"count": 0.55, "count (non-linear)": 0.3, "position": 0.15},
        "mixed": {
            "colour": 0.25 * (1 - m),
            "position": 0.25 * (1 - m),
            "colour x position": 0.5 * (1 - m),
            "count": 0.7 * m,
            "count (non-linear)": 0.3 * m,
        },
    }


def _levels(values: np.ndarray, table: np.ndarray) -> np.ndarray:
    """A random value per level (table (L, V)), centred and of unit variance over uniform levels."""
    table = table - table.mean(0)
    return (table / np.sqrt((table**2).mean(0)).clip(1e-12))[values]


def _sign(rng: np.random.Generator, v: int) -> np.ndarray:
    return rng.choice([-1.0, 1.0], size=v)


def term_values(term: str, scenes: Scenes, rng: np.random.Generator, v: int) -> np.ndarray:
    """``v`` random read-outs (n, v) of ``term`` (see the module docstring): unit variance and zero mean
    over the scene distribution, uncorrelated there with every other term."""
    levels = {
        "category": (scenes.category, len(SHAPES)),
        "colour": (scenes.colour, len(COLOURS)),
        "position": (scenes.layout, len(LAYOUTS)),
        "texture": (scenes.texture, len(TEXTURES)),
    }
    if term in levels:
        values, n_levels = levels[term]
        return _levels(values, rng.standard_normal((n_levels, v)))
    number = (np.arange(1, 5) - 2.5) / np.sqrt(1.25)  # the count's levels, standardised
    if term == "count":
        return number[scenes.count - 1, None] * _sign(rng, v)
    if term == "count (non-linear)":
        table = rng.standard_normal((4, v))
        table = table - table.mean(0)
        table = table - np.outer(number, number @ table) / (number @ number)
        return _levels(scenes.count - 1, table)
    low, high = LUMINANCE
    u = (2 * scenes.luminance - low - high) / (high - low)  # uniform on [-1, 1]
    if term == "luminance":
        return np.sqrt(3.0) * u[:, None] * _sign(rng, v)
    if term == "luminance (non-linear)":
        return np.sqrt(5.0) * (1.5 * u**2 - 0.5)[:, None] * _sign(rng, v)
    pairs = {
        "colour x position": (scenes.colour, len(COLOURS), scenes.layout, len(LAYOUTS)),
        "category x count": (scenes.category, len(SHAPES), scenes.count - 1, 4),
    }
    if term in pairs:
        a, la, b, lb = pairs[term]
        table = rng.standard_normal((la, lb, v))
        table = table - table.mean(0, keepdims=True) - table.mean(1, keepdims=True) + table.mean((0, 1))
        return _levels(a * lb + b, table.reshape(la * lb, v))
    raise ValueError(f"unknown term '{term}'{did_you_mean(term, TERMS)}")


def _unit(signals: np.ndarray) -> np.ndarray:
    centred = signals - signals.mean(0)
    return centred / centred.std(0).clip(1e-12)


def plant_signals(
    scenes: Scenes, config: BrainEncodingConfig, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray, dict[str, dict[str, float]]]:
    """Noise-free signals (n, 4 V), unit variance per voxel over the stimuli, from the scenes' factors
    alone; each voxel's region index; and per region the planted mean share of each term."""
    v = config.voxels_per_region
    blocks, planted = [], {}
    for region, recipe in recipes(config.mixed_count_share).items():
        terms = [t for t, share in recipe.items() if share > 0]
        mean = np.array([recipe[t] for t in terms])
        shares = rng.dirichlet(SHARE_CONCENTRATION * mean / mean.sum(), size=v)  # (v, terms)
        blocks.append(
            sum(np.sqrt(shares[:, i]) * term_values(t, scenes, rng, v) for i, t in enumerate(terms))
        )
        mean_share = dict(zip(terms, shares.mean(0), strict=True))
        planted[region] = {t: float(mean_share.get(t, 0.0)) for t in TERMS}
    return _unit(np.concatenate(blocks, axis=1)), np.repeat(np.arange(len(REGIONS)), v), planted


def planted_truth(
    signals: np.ndarray,
    region: np.ndarray,
    features: Mapping[str, np.ndarray],
    noise_sd: np.ndarray,
    config: BrainEncodingConfig,
    factors: dict[str, dict[str, float]],
) -> Truth:
    """The truth: the planted term shares ``factors``, and the shares of the noise-free ``signals`` each
    feature set (and each partition's pair) spans over the stimuli, adjusted for its dimensions."""
    n = len(signals)
    bases = {name: span_basis(f) for name, f in features.items()}
    per_set = {name: adjusted(explained(b, signals), n, b.shape[1]) for name, b in bases.items()}
    r2 = {
        name: {s: float(per_set[s][region == i].mean()) for s in features} for i, name in enumerate(REGIONS)
    }
    partitions = {}
    for part in config.all_partitions:
        joint = span_basis(np.concatenate([features[part.a], features[part.b]], axis=1))
        voxels = region == REGIONS.index(part.region)
        r2_ab = adjusted(explained(joint, signals[:, voxels]), n, joint.shape[1])
        shares = partition_shares(per_set[part.a][voxels], per_set[part.b][voxels], r2_ab)
        partitions[part.label] = {k: float(x.mean()) for k, x in shares.items()}
    noise_ceiling = 1.0 / (1.0 + noise_sd**2 / config.repeats)
    return Truth(factors, r2, partitions, noise_ceiling)


def control_features(
    features: Mapping[str, np.ndarray], control: str, rng: np.random.Generator
) -> dict[str, np.ndarray]:
    """The feature sets with the instruction sets' replaced as ``control`` says: ``model`` keeps them,
    ``noise`` draws Gaussian features of the same shape unrelated to the scenes, ``shuffled`` permutes
    their rows across images (one permutation for all instruction sets)."""
    if control == "model":
        return dict(features)
    order = rng.permutation(len(next(iter(features.values()))))
    out = {}
    for name, f in features.items():
        if name not in INSTRUCTIONS:
            out[name] = f
        elif control == "noise":
            out[name] = rng.standard_normal(f.shape)
        elif control == "shuffled":
            out[name] = f[order]
        else:
            raise ValueError(f"unknown control '{control}'{did_you_mean(control, INSTRUCTION_CONTROLS)}")
    return out


def record(
    config: BrainEncodingConfig,
    seed: int,
    features_of: Callable[[Scenes, BrainEncodingConfig], Mapping[str, np.ndarray]],
) -> Recording:
    """The whole experiment of ``seed``: scenes, features (``features_of(scenes, config)``: the task passes
    :func:`iclrbench.envs.brain_encoding_alignment.features.feature_sets`), signals planted from the scenes'
    factors, noisy repeats and the split."""
    scenes = draw_scenes(config.images, rng_for(seed, TASK_ID, "scenes"))
    features = control_features(
        features_of(scenes, config), config.instruction_features, rng_for(seed, TASK_ID, "control")
    )
    rng = rng_for(seed, TASK_ID, "voxels")
    signals, region, factors = plant_signals(scenes, config, rng)
    noise_sd = rng.uniform(config.noise_low, config.noise_high, size=signals.shape[1])
    noise = rng.standard_normal((config.repeats, *signals.shape))
    responses = signals[None] + noise * noise_sd
    order = rng_for(seed, TASK_ID, "split").permutation(config.images)
    truth = planted_truth(signals, region, features, noise_sd, config, factors)
    return Recording(
        scenes,
        {name: features[name] for name in config.feature_sets},
        responses,
        region,
        np.sort(order[config.n_test :]),
        np.sort(order[: config.n_test]),
        truth,
    )

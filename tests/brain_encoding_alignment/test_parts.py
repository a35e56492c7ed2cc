"""brain-encoding-alignment's parts without the text model: scenes and answers, the terms voxels are read
out of, the planted shares (recovered from exact codes of the factors) and their independence of the
feature sets, the controls, the truth on stand-in feature sets, the noise ceiling, the scores, the
variance-partitioning identity, and the scikit-learn cross-check of himalaya's per-voxel ridge."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from iclrbench.envs.brain_encoding_alignment import (
    COLOURS,
    COUNT_WORDS,
    LAYOUTS,
    REGIONS,
    SHAPES,
    TERMS,
    BrainEncodingConfig,
    Scenes,
    answers,
    control_features,
    draw_scenes,
    explained,
    parse_partition,
    partition_shares,
    recipes,
    record,
    span_basis,
    term_values,
)

pytest.importorskip("himalaya")
pytest.importorskip("torch")

from iclrbench.benchmarks.brain_encoding_alignment import (
    noise_ceiling,
    pearson,
    r2_score,
    zscore,
)


def onehot_features(scenes: Scenes, config: BrainEncodingConfig) -> dict[str, np.ndarray]:
    """Stand-in feature sets: exact codes of what each answer says (no MiniLM), pixels for vision."""
    eye = np.eye
    coarse = np.minimum(scenes.count, 3) - 1
    caption = np.hstack(
        [eye(3)[scenes.category], eye(3)[coarse], eye(len(COLOURS))[scenes.colour], eye(4)[scenes.layout]]
    )
    pixels = scenes.images.reshape(len(scenes), 3, 4, 6, 4, 6).mean((3, 5)).reshape(len(scenes), -1)
    features = {
        "caption": caption,
        "count": eye(4)[scenes.count - 1],
        "colour": eye(len(COLOURS))[scenes.colour],
        "position": eye(4)[scenes.layout],
        "vision": pixels,
        "clip": np.hstack([pixels[:, :8], eye(3)[scenes.category]]),
    }
    return {name: features[name] for name in config.feature_sets}


@settings(max_examples=10, deadline=None)
@given(n=st.integers(1, 40), seed=st.integers(0, 10**6))
def test_scenes_are_valid_and_answers_say_what_the_scene_holds(n: int, seed: int) -> None:
    scenes = draw_scenes(n, np.random.default_rng(seed))
    assert scenes.images.shape == (n, 3, 24, 24) and scenes.images.min() >= 0 and scenes.images.max() <= 1
    assert set(scenes.count) <= {1, 2, 3, 4} and scenes.category.max() < len(SHAPES)
    for i, (caption, count) in enumerate(
        zip(answers(scenes, "caption"), answers(scenes, "count"), strict=True)
    ):
        assert SHAPES[scenes.category[i]] in caption and COLOURS[scenes.colour[i]] in caption
        assert LAYOUTS[scenes.layout[i]] in caption and COUNT_WORDS[scenes.count[i] - 1] in count


def test_more_objects_cover_more_of_the_picture() -> None:
    scenes = draw_scenes(400, np.random.default_rng(0))
    # the background: its grey level is the picture's luminance, its texture zero-mean
    background = np.median(scenes.images[:, 0].reshape(len(scenes), -1), axis=1)
    assert np.corrcoef(background, scenes.luminance)[0, 1] > 0.9
    rough = np.abs(np.diff(scenes.images[:, 0], axis=2)).mean((1, 2))
    assert rough[scenes.texture == 1].mean() > rough[scenes.texture == 0].mean() + 0.03
    grey = scenes.images.std(1).mean((1, 2))  # coloured pixels differ across channels; grey ones do not
    means = [grey[scenes.count == k].mean() for k in (1, 2, 3, 4)]
    assert means == sorted(means)
    # the objects sit in the named half
    left = scenes.images[:, :, :, :12].std(1).mean((1, 2)) > scenes.images[:, :, :, 12:].std(1).mean((1, 2))
    assert left[scenes.layout == 0].all() and not left[scenes.layout == 1].any()


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10**6), n=st.integers(30, 80), ka=st.integers(1, 6), kb=st.integers(1, 6))
def test_partition_shares_add_up_and_the_planted_span_is_exact(seed: int, n: int, ka: int, kb: int) -> None:
    rng = np.random.default_rng(seed)
    a, b = rng.standard_normal((n, ka)), rng.standard_normal((n, kb))
    inside = a @ rng.standard_normal((ka, 3))
    assert explained(span_basis(a), inside) == pytest.approx(np.ones(3))
    signals = np.hstack([inside, rng.standard_normal((n, 5))])
    r2_a, r2_b = explained(span_basis(a), signals), explained(span_basis(b), signals)
    r2_ab = explained(span_basis(np.hstack([a, b])), signals)
    assert np.all(r2_ab >= np.maximum(r2_a, r2_b) - 1e-9) and np.all(r2_ab <= 1 + 1e-9)
    shares = partition_shares(r2_a, r2_b, r2_ab)
    assert shares["shared"] + shares["unique_a"] + shares["unique_b"] == pytest.approx(r2_ab)
    assert np.all(shares["unique_a"] >= -1e-9) and np.all(shares["unique_b"] >= -1e-9)


def factor_codes(scenes: Scenes) -> dict[str, np.ndarray]:
    """Exact codes of each term's factors: every read-out of a term lies in its code's span."""
    eye = np.eye
    u = scenes.luminance
    return {
        "category": eye(3)[scenes.category],
        "count": eye(4)[scenes.count - 1],
        "colour": eye(4)[scenes.colour],
        "position": eye(4)[scenes.layout],
        "texture": eye(3)[scenes.texture],
        "luminance": np.stack([u, u**2], axis=1),
        "colour x position": eye(16)[scenes.colour * 4 + scenes.layout],
        "category x count": eye(12)[scenes.category * 4 + scenes.count - 1],
    }


def test_terms_are_unit_and_uncorrelated_over_the_scene_distribution() -> None:
    scenes = draw_scenes(40000, np.random.default_rng(0))
    rng = np.random.default_rng(1)
    values = np.stack([term_values(t, scenes, rng, 3) for t in TERMS])  # (terms, n, 3)
    assert values.mean(1) == pytest.approx(np.zeros((len(TERMS), 3)), abs=0.03)
    assert values.std(1) == pytest.approx(np.ones((len(TERMS), 3)), abs=0.03)
    for v in range(3):
        corr = np.corrcoef(values[:, :, v])
        assert np.abs(corr - np.eye(len(TERMS))).max() < 0.04
    with pytest.raises(ValueError, match="unknown term"):
        term_values("shape", scenes, rng, 1)


def test_the_voxels_are_planted_from_the_scenes_never_from_the_features() -> None:
    config = BrainEncodingConfig(images=600, voxels_per_region=10)
    one = record(config, 0, features_of=onehot_features)

    def unrelated(scenes: Scenes, config: BrainEncodingConfig) -> dict[str, np.ndarray]:
        rng = np.random.default_rng(5)
        return {name: rng.standard_normal((len(scenes), 6)) for name in config.feature_sets}

    other = record(config, 0, features_of=unrelated)
    # the same responses whatever the feature sets are; only what they explain of them differs
    assert np.array_equal(one.responses, other.responses)
    assert one.truth.factors == other.truth.factors
    assert one.truth.r2["category"]["caption"] > 0.7 and abs(other.truth.r2["category"]["caption"]) < 0.03


def test_the_planted_shares_of_each_region_are_what_the_factors_explain() -> None:
    config = BrainEncodingConfig(images=4000, voxels_per_region=30, noise_low=0.0, noise_high=0.0)
    rec = record(config, 0, features_of=onehot_features)
    signal = rec.responses[0]
    codes = factor_codes(rec.scenes)
    planned = recipes(config.mixed_count_share)
    for i, region in enumerate(REGIONS):
        shares = rec.truth.factors[region]
        assert sum(shares.values()) == pytest.approx(1.0)
        assert {t for t, x in shares.items() if x > 0} == {t for t, x in planned[region].items() if x > 0}
        for term, share in shares.items():
            assert share == pytest.approx(planned[region].get(term, 0.0), abs=0.06), (region, term)
        voxels = signal[:, rec.region == i]
        # main effects: a factor's one-hot span holds its linear and non-linear read-outs
        mains = {"category", "colour", "position", "texture"}
        for name in mains:
            held = explained(span_basis(codes[name]), voxels).mean()
            assert held == pytest.approx(shares[name], abs=0.03), (region, name)
        count = explained(span_basis(codes["count"]), voxels).mean()
        assert count == pytest.approx(shares["count"] + shares["count (non-linear)"], abs=0.03), region
        light = explained(span_basis(codes["luminance"]), voxels).mean()
        assert light == pytest.approx(shares["luminance"] + shares["luminance (non-linear)"], abs=0.03)
    truth = rec.truth
    # what the stand-in sets span: the count answer every read-out of the number, the caption's coarse
    # number ("a", "two", "several") part of it
    assert truth.r2["count"]["count"] == pytest.approx(
        truth.factors["count"]["count"] + truth.factors["count"]["count (non-linear)"], abs=0.03
    )
    count = truth.partitions["count:caption+count"]
    assert 0.05 < count["unique_b"] < 0.5 and count["unique_a"] > 0.05  # the caption's place, not number
    assert truth.best_set("early-visual", ("caption", "count", "vision")) == "vision"


def test_the_controls_replace_only_the_instruction_sets() -> None:
    config = BrainEncodingConfig(images=200, voxels_per_region=5)
    model = record(config, 2, features_of=onehot_features)
    for control in ("noise", "shuffled"):
        rec = record(
            BrainEncodingConfig(images=200, voxels_per_region=5, instruction_features=control),
            2,
            features_of=onehot_features,
        )
        assert np.array_equal(rec.responses, model.responses)
        for name in ("vision", "clip"):
            assert np.array_equal(rec.features[name], model.features[name])
        for name in ("caption", "count", "colour", "position"):
            assert rec.features[name].shape == model.features[name].shape
            assert not np.array_equal(rec.features[name], model.features[name])
        assert rec.truth.r2["category"]["caption"] < 0.1 < model.truth.r2["category"]["caption"]
    shuffled = control_features(model.features, "shuffled", np.random.default_rng(0))
    # the same rows, reordered: one permutation for every instruction set
    assert sorted(map(tuple, shuffled["count"])) == sorted(map(tuple, model.features["count"]))
    with pytest.raises(ValueError, match="unknown control"):
        control_features(model.features, "zeros", np.random.default_rng(0))


def test_the_recording_is_seeded_and_split() -> None:
    config = BrainEncodingConfig(images=200, voxels_per_region=5)
    one, two = (record(config, 3, features_of=onehot_features) for _ in range(2))
    assert np.array_equal(one.responses, two.responses) and np.array_equal(one.test, two.test)
    other = record(config, 4, features_of=onehot_features)
    assert not np.array_equal(one.responses, other.responses)
    assert len(one.test) == 40 and not set(one.test) & set(one.train)
    assert one.responses.shape == (3, 200, 4 * 5) and len(one.region) == 20


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10**6), sd=st.floats(0.0, 2.0), repeats=st.integers(2, 5))
def test_the_noise_ceiling_estimates_the_planted_one(seed: int, sd: float, repeats: int) -> None:
    rng = np.random.default_rng(seed)
    signal = rng.standard_normal((20000, 3))
    signal = (signal - signal.mean(0)) / signal.std(0)
    data = signal[None] + sd * rng.standard_normal((repeats, 20000, 3))
    estimate = noise_ceiling(data)
    assert np.all(estimate <= 1.0)
    assert estimate == pytest.approx(np.full(3, 1 / (1 + sd**2 / repeats)), abs=0.04)


def test_scores_match_their_definitions() -> None:
    from scipy.stats import pearsonr
    from sklearn.metrics import r2_score as sk_r2

    rng = np.random.default_rng(0)
    y, p = rng.standard_normal((50, 4)), rng.standard_normal((50, 4))
    assert r2_score(y, p) == pytest.approx([sk_r2(y[:, i], p[:, i]) for i in range(4)])
    assert pearson(y, p) == pytest.approx([pearsonr(y[:, i], p[:, i]).statistic for i in range(4)])
    assert pearson(y, np.ones_like(p)) == pytest.approx(np.zeros(4))
    assert r2_score(y, y) == pytest.approx(np.ones(4))


def test_zscore_uses_the_training_statistics_only() -> None:
    rng = np.random.default_rng(1)
    train, test = rng.normal(3, 2, (100, 2)), rng.normal(10, 5, (30, 2))
    z_train, z_test = zscore(train, test)
    assert z_train.mean(0) == pytest.approx(np.zeros(2), abs=1e-12)
    assert z_test == pytest.approx((test - train.mean(0)) / train.std(0))


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("visual:caption+count", "unknown region 'visual'"),
        ("mixed:caption+cont", "unknown feature set 'cont'"),
        ("mixed:caption", r"region:setA\+setB"),
        ("mixed:count+count", "two different"),
    ],
)
def test_bad_partitions_say_what_is_wrong(text: str, needle: str) -> None:
    with pytest.raises(ValueError, match=needle):
        parse_partition(text)


def test_config_checks() -> None:
    with pytest.raises(ValueError, match="two repeats"):
        BrainEncodingConfig(repeats=1)
    with pytest.raises(ValueError, match="must include"):
        BrainEncodingConfig(feature_sets=("caption", "count"))
    with pytest.raises(ValueError, match="not in feature_sets"):
        BrainEncodingConfig(feature_sets=("caption", "count", "vision"), partitions=("mixed:caption+clip",))
    assert [p.region for p in BrainEncodingConfig().all_partitions] == ["count", "mixed"]
    assert REGIONS == ("early-visual", "category", "count", "mixed")


# ------------------------------------------------------------------------------------------------ fitting
def _voxels(seed: int, n: int = 600, k: int = 8, v: int = 40) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, k))
    y = x @ rng.standard_normal((k, v)) * rng.uniform(0.05, 1.0, v) + rng.standard_normal((n, v))
    x_train, x_test = zscore(x[:480], x[480:])
    y_train, y_test = zscore(y[:480], y[480:])
    return x_train, y_train, x_test, y_test


def test_sklearn_ridgecv_cross_checks_himalaya() -> None:
    """Same alphas (within a grid step or two: himalaya selects by 5-fold CV, scikit-learn by leave-one-
    out) and the same predictions (correlation > 0.999 per voxel)."""
    from iclrbench.algorithms.brain_encoding_alignment import ALPHAS, ridge_cv_himalaya
    from iclrbench.baselines.brain_encoding_alignment import ridge_cv_sklearn_loop

    x_train, y_train, x_test, _ = _voxels(0)
    ours, alphas = ridge_cv_himalaya(x_train, y_train, x_test, folds=5)
    theirs, sk_alphas = ridge_cv_sklearn_loop(x_train, y_train, x_test)
    step = np.log10(ALPHAS[1] / ALPHAS[0])
    assert np.median(np.abs(np.log10(alphas / sk_alphas))) <= 2 * step + 1e-9
    assert set(np.round(np.log10(alphas), 6)) <= set(np.round(np.log10(ALPHAS), 6))
    assert np.min(pearson(ours, theirs)) > 0.999


def test_ols_is_least_squares_and_the_penalised_fits_shrink() -> None:
    from iclrbench.algorithms.brain_encoding_alignment import ridge_cv_himalaya
    from iclrbench.baselines.brain_encoding_alignment import least_squares

    x_train, y_train, x_test, y_test = _voxels(1)
    ols = least_squares(x_train, y_train, x_test)
    coef = np.linalg.solve(x_train.T @ x_train, x_train.T @ y_train)
    assert ols == pytest.approx(x_test @ coef)
    ridge, alphas = ridge_cv_himalaya(x_train, y_train, x_test, folds=5)
    assert np.all(np.linalg.norm(ridge, axis=0) <= np.linalg.norm(ols, axis=0) + 1e-6)
    weak = alphas >= np.quantile(alphas, 0.75)  # the most penalised: the weakest voxels
    assert (
        alphas.min() < alphas.max()
        and r2_score(y_test, ridge)[weak].mean() >= r2_score(y_test, ols)[weak].mean() - 1e-3
    )


def test_banded_ridge_fits_a_pair_at_least_as_well_as_either_set() -> None:
    from iclrbench.algorithms.brain_encoding_alignment import banded_ridge_himalaya, ridge_cv_himalaya

    x_train, y_train, x_test, y_test = _voxels(2)
    a_train, b_train, a_test, b_test = x_train[:, :5], x_train[:, 5:], x_test[:, :5], x_test[:, 5:]
    joint = r2_score(y_test, banded_ridge_himalaya(a_train, b_train, y_train, a_test, b_test, folds=5))
    only_a = r2_score(y_test, ridge_cv_himalaya(a_train, y_train, a_test, folds=5)[0])
    assert joint.mean() > only_a.mean() + 0.01

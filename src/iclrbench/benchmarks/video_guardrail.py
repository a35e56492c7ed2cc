"""video-guardrail: Chen et al., "SafeWatch: an efficient safety-policy following video guardrail model with
transparent explanations", ICLR 2025 (arXiv:2501.06598).

One run trains a guardrail (:mod:`iclrbench.algorithms.video_guardrail`: SafeWatch's parallel policy encoding
with its policy-aware token pruning; :mod:`iclrbench.baselines.video_guardrail`: no pruning, random pruning,
sequential encoding, a per-frame classifier) on :mod:`iclrbench.envs.video_guardrail`'s seeded videos and
policies, and scores it on a test split of the training policies and on a split of held-out policies and
phrasings.

Metrics: ``f1`` (primary: macro over the categories of the test split, a verdict at logit 0), ``auprc`` (macro
average precision), ``ranking`` (within a video, the chance a broken policy outscores a kept one: 0.5 for a
guardrail blind to the policies' text, whatever the video shows), ``heldout_ranking`` and ``heldout_f1`` (the
held-out categories, written in held-out phrasings), ``position_bias`` (the test split presented in every
rotation of its policy order, so each verdict is asked at every position: the largest gap between two
positions' accuracies, less that gap with each video's rotations shuffled), ``prefill_mflops`` (per video,
counted), ``kept_tokens`` (video tokens after pruning), ``explanation_accuracy`` and
``heldout_explanation_accuracy`` (the share of broken policies flagged with an explanation that names the
right frame and cell), ``latency_ms`` (per video, measured on this CPU) and ``seconds``.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from iclrbench.algorithms.video_guardrail import Guardrail, kept_video_tokens
from iclrbench.core.algorithm import Algorithm
from iclrbench.core.decision import combine, compare_runs, empty, mean_figure
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
)
from iclrbench.envs.video_guardrail import (
    CATEGORIES,
    HELD_OUT_CATEGORIES,
    TASK_ID,
    Split,
    VideoGuardrailConfig,
    explanation,
    make_data,
)
from iclrbench.models.torch_threads import one_torch_thread


# ------------------------------------------------------------------------------------------------ metrics
def average_precision(labels: np.ndarray, scores: np.ndarray) -> float:
    """Average precision, sklearn's definition: sum over the distinct score thresholds, from the highest, of
    the recall gained there times the precision there (tied scores are one threshold, so a constant score
    gets the prevalence); NaN without a positive."""
    labels, scores = np.asarray(labels, float), np.asarray(scores, float)
    positives = labels.sum()
    if positives == 0:
        return float("nan")
    order = np.argsort(-scores, kind="stable")
    hits, ordered = labels[order], scores[order]
    last = np.r_[ordered[1:] != ordered[:-1], True]  # the last index of each run of tied scores
    tp = np.cumsum(hits)[last]
    seen = (np.arange(1, len(hits) + 1))[last]
    recall_gain = np.diff(np.r_[0.0, tp]) / positives
    return float((recall_gain * tp / seen).sum())


def _f1(labels: np.ndarray, predicted: np.ndarray) -> float:
    tp = float((labels * predicted).sum())
    fp, fn = float(((1 - labels) * predicted).sum()), float((labels * (1 - predicted)).sum())
    return 0.0 if tp == 0 else 2 * tp / (2 * tp + fp + fn)


def macro(split: Split, scores: np.ndarray, categories: tuple[str, ...]) -> tuple[float, float]:
    """(macro F1 at logit 0, macro average precision) over ``categories``, each over the verdicts on that
    category's policies in the split (a category with no positive is left out of the average precision)."""
    f1s, aps = [], []
    for name in categories:
        asked = split.categories == CATEGORIES.index(name)
        if not asked.any():
            continue
        y, s = split.labels[asked], scores[asked]
        f1s.append(_f1(y, (s > 0).astype(float)))
        ap = average_precision(y, s)
        if np.isfinite(ap):
            aps.append(ap)
    return float(np.mean(f1s)), float(np.mean(aps)) if aps else float("nan")


def within_video_ranking(split: Split, scores: np.ndarray, categories: tuple[str, ...]) -> float:
    """The chance that, in one video, a policy it breaks scores above one it keeps (ties count half), over
    every such pair among the policies on ``categories``: reading the video alone scores a video's policies
    alike and gives 0.5, so what lifts it is reading the policies. NaN without a pair."""
    asked = np.isin(split.categories, [CATEGORIES.index(c) for c in categories])
    unsafe, safe = asked & (split.labels > 0.5), asked & (split.labels <= 0.5)
    pairs = unsafe[:, :, None] & safe[:, None, :]
    if not pairs.any():
        return float("nan")
    gap = scores[:, :, None] - scores[:, None, :]
    won = (gap > 0) + 0.5 * (gap == 0)
    return float(won[pairs].mean())


def position_correct(algorithm: Guardrail, split: Split) -> np.ndarray:
    """(n, P, P): whether the verdict on prompt policy j was right when it was asked at position k, with the
    prompt presented in each rotation of its order (so each verdict is asked at every position once)."""
    n, p = split.categories.shape
    out = np.zeros((n, p, p), bool)
    for shift in range(p):
        order = np.roll(np.arange(p), shift)  # position k holds prompt policy order[k]
        correct = (algorithm.scores(split, order) > 0) == (split.labels > 0.5)
        out[:, order, np.arange(p)] = correct[:, order]
    return out


def position_bias(correct: np.ndarray, seed: int, draws: int = 200) -> tuple[float, np.ndarray]:
    """(bias, accuracy at each position) from :func:`position_correct`. The gap between the best and the
    worst position's accuracy is positive for any guardrail whose verdicts change with the order at all,
    noise included; the bias is that gap less its mean when each video's rotations are shuffled (no position
    effect: a verdict's correctness may depend on the order around it, not on where it stands). Rotations,
    not single verdicts, are shuffled, because one rotation puts a video's policies at every position once
    (a Latin square): a flip shared by a whole rotation moves every position alike, and shuffling verdicts
    one by one would scatter it and bias the null upward. An order-blind guardrail scores 0."""
    accuracy = correct.mean((0, 1))
    gap = float(accuracy.max() - accuracy.min())
    n, p, _ = correct.shape
    rng = np.random.default_rng(seed)
    policy = np.arange(p)[:, None]
    shift = (np.arange(p)[None, :] - policy) % p  # the rotation that put policy j at position k
    null = []
    for _ in range(draws):
        sigma = rng.random((n, p)).argsort(1)  # each video's rotations relabelled
        source = (policy[None] + sigma[:, shift]) % p  # (n, P, P): the position read for (j, k)
        moved = np.take_along_axis(correct, source, 2).mean((0, 1))
        null.append(moved.max() - moved.min())
    return gap - float(np.mean(null)), accuracy


def explanation_accuracy(split: Split, scores: np.ndarray, when: np.ndarray, where: np.ndarray) -> float:
    """Over the split's broken policies, the share flagged (logit > 0) with an explanation naming the frame
    the content first appears in and its cell: a flag with the wrong explanation, or a miss, counts 0."""
    broken = split.labels > 0.5
    right = (scores > 0) & (when == split.when) & (where == split.where)
    return float(right[broken].mean()) if broken.any() else float("nan")


# ------------------------------------------------------------------------------------------------- claims
def _runs(groups: list[list[RunResult]]) -> dict[str, list[RunResult]]:
    return {g[0].algorithm: g for g in groups if g}


def bias_requests(budget: str) -> list[RunRequest]:
    seeds = VideoGuardrailTask.claim_seeds(budget)
    return [RunRequest(a, {}, seeds) for a in ("safewatch-no-pruning", "sequential")]


def judge_bias(groups: list[list[RunResult]]) -> tuple[Verdict, dict[str, Any]]:
    """Sequential encoding's position bias exceeds PEPE's (paired by seed), SafeWatch's section 3.2; F1
    beside."""
    runs = _runs(groups)
    if len(runs.get("safewatch-no-pruning", [])) < 2 or len(runs.get("sequential", [])) < 2:
        return empty("fewer than 2 seeds of safewatch-no-pruning or sequential")
    parts = {
        "position bias sequential - pepe > 0": compare_runs(
            runs["sequential"], runs["safewatch-no-pruning"], "position_bias", ">", quantity="bias gap"
        )
    }
    return combine(
        parts,
        position_bias={n: mean_figure(r, "position_bias") for n, r in runs.items()},
        f1={n: mean_figure(r, "f1") for n, r in runs.items()},
    )


PRUNING_ARMS = ("safewatch-no-pruning", "safewatch", "safewatch-random-pruning")


def pruning_requests(budget: str) -> list[RunRequest]:
    return [RunRequest(a, {}, VideoGuardrailTask.claim_seeds(budget)) for a in PRUNING_ARMS]


def judge_pruning(groups: list[list[RunResult]]) -> tuple[Verdict, dict[str, Any]]:
    """At ``keep`` = 0.1 (90% of the video tokens pruned), PAP's F1 stays within a point of no pruning and
    random pruning of as many tokens loses more than PAP (paired by seed); prefill cost beside."""
    runs = _runs(groups)
    if any(len(runs.get(a, [])) < 2 for a in PRUNING_ARMS):
        return empty("fewer than 2 seeds of safewatch, safewatch-no-pruning or safewatch-random-pruning")
    none, pap, rand = (runs[a] for a in PRUNING_ARMS)
    parts = {
        "f1 no pruning - pap <= 0.01": compare_runs(none, pap, "f1", "<=", 0.01, quantity="f1 lost by pap"),
        "f1 pap - random > 0": compare_runs(pap, rand, "f1", ">", quantity="f1 pap - random"),
    }
    return combine(
        parts,
        f1={n: mean_figure(r, "f1") for n, r in runs.items()},
        prefill_mflops={n: mean_figure(r, "prefill_mflops") for n, r in runs.items()},
        kept_tokens={n: mean_figure(r, "kept_tokens") for n, r in runs.items()},
    )


# ---------------------------------------------------------------------------------------------------- task
class VideoGuardrailTask(Task):
    id = TASK_ID
    # 2: position bias less a null that shuffles each video's rotations (version 1 shuffled single verdicts,
    #    which scatters a rotation's shared flips and biases the null upward)
    # 3: explanations (when and where) from heads on the answer states, the gradient stopped (the verdict
    #    network is built with the heads, so its initial weights, and its trained verdicts, differ from v2's)
    version = 3
    paper = Paper(
        title="SafeWatch: an efficient safety-policy following video guardrail model with transparent "
        "explanations",
        authors="Zhaorun Chen, Francesco Pinto, Minzhou Pan, Bo Li",
        arxiv="2501.06598",
    )
    summary = (
        "A video guardrail that reads safety policies as text and flags, per policy, whether a video breaks "
        "it: SafeWatch's parallel equivalent policy encoding (PEPE) and policy-aware token pruning (PAP) "
        "against sequential encoding, no pruning, random pruning and a per-frame classifier, on seeded "
        "videos of coloured shapes. Departures: a small transformer trained from scratch on patch tokens "
        "stands in for the paper's 8B video LLM; each flag's explanation is when and where its content is "
        "shown (two classification heads on the answer tokens, rendered as one line), not the paper's free "
        "text, and trained on the answer states with the gradient stopped (jointly, explain_jointly=true, "
        "PAP's attention scores stopped finding the objects: F1 0.000 at 90% pruning); "
        "the public code is evaluation only, so PEPE's mask and positions and PAP's scoring (each video "
        "token's attention to a policy's chunk in the first block, which reads one frame at a time, before "
        "the answers read the video) are built from the paper's and the model card's words."
    )
    Config = VideoGuardrailConfig
    budgets = {  # noqa: RUF012  (read-only class data, as in Task)
        "smoke": Budget(
            "smoke",
            {
                "frames": 4,
                "train_videos": 256,
                "test_videos": 64,
                "d_model": 32,
                "layers": 2,
                "steps": 100,
            },
            "4 frames, 2 blocks of d = 32, 100 steps: a few seconds a training (a smoke guardrail is barely "
            "trained: its verdicts are near chance)",
            # tests/test_contract.py: 25 s (150 steps), 2 cores (2026-12-06)
            check_minutes=0.5,
            claim_seeds=(0, 1),
        ),
        "small": Budget(
            "small",
            {"frames": 6, "layers": 3, "train_videos": 3000, "test_videos": 400, "steps": 1200, "lr": 2e-3},
            "6 frames (96 video tokens), 3 blocks of d = 64, 1,200 steps of 32 videos: about 1.8 min a "
            "training on one core; SafeWatch and its pruning ablations share one",
            # bench claims -j 2 from an empty store, 2 otherwise idle cores (v3, 2026-12-07): 20 runs, 10
            # trainings (v2: 9.5; the explanation heads and their scoring add the rest)
            claims_minutes=12.6,
            claim_seeds=tuple(range(5)),
        ),
        "paper": Budget(
            "paper",
            {"frames": 8, "layers": 4, "train_videos": 20000, "test_videos": 2000, "steps": 6000},
            "8 frames, 4 blocks, 6,000 steps: about 15 min a training on one core (the paper fine-tunes an "
            "8B video LLM on multi-GPU nodes)",
            claim_seeds=tuple(range(5)),
        ),
    }
    metrics = (
        Metric(
            "f1", True, "", "macro F1 over the test split's categories (seen policies), verdict at logit 0"
        ),
        Metric("auprc", True, "", "macro average precision over the test split's categories"),
        Metric(
            "ranking",
            True,
            "",
            "within a video, the chance a broken policy scores above a kept one (0.5: blind to the text)",
        ),
        Metric("heldout_ranking", True, "", "ranking over the held-out categories, in held-out phrasings"),
        Metric("heldout_f1", True, "", "macro F1 over the held-out categories, in held-out phrasings"),
        Metric(
            "position_bias",
            False,
            "",
            "gap between the best and worst position's accuracy, over every rotation of the order, less the "
            "gap shuffling each verdict's positions gives (0: no effect of position beyond noise)",
        ),
        Metric("prefill_mflops", False, "MFLOP", "counted prefill FLOPs per video"),
        Metric("kept_tokens", False, "", "video tokens the blocks after pruning see"),
        Metric(
            "explanation_accuracy",
            True,
            "",
            "share of the test split's broken policies flagged with the right frame and cell named",
        ),
        Metric("heldout_explanation_accuracy", True, "", "explanation_accuracy on the held-out categories"),
        Metric("latency_ms", False, "ms", "scoring time per video on this CPU", measured=True),
        Metric("seconds", False, "s", "wall-clock seconds of training and scoring", measured=True),
    )
    protocol = "Guardrail: fit(train split, seed); scores(split, order) -> (n, policies) logits; flops()"
    requires = Requirement("video-guardrail", ("torch", "transformers"))
    algorithm_modules = ("iclrbench.algorithms.video_guardrail", "iclrbench.baselines.video_guardrail")
    claims = (
        Claim(
            "pepe-removes-position-bias",
            "Policies encoded in parallel at equivalent positions (PEPE) are judged alike wherever they "
            "stand in the prompt; sequentially encoded ones are not: sequential encoding's position bias "
            "exceeds PEPE's (paired by seed).",
            bias_requests,
            judge_bias,
            # small (2026-12-07, 5 seeds, v3): sequential's bias +0.0001 (-0.0005 to 0.0008) against PEPE's
            # 0 (v2: -0.0005, -0.00075 to -0.00034, not reproduced): trained on shuffled orders, as SafeWatch
            # trains, the sequential guardrail has no position bias to speak of; F1 0.963 against PEPE's 0.968
            expected="inconclusive",
        ),
        Claim(
            "pap-keeps-f1-at-90-percent-pruning",
            "Pruning 90% of the video tokens by the policies' attention (PAP) keeps F1 within a point of no "
            "pruning, while pruning as many at random loses more; prefill cost falls accordingly.",
            pruning_requests,
            judge_pruning,
            # small (2026-12-07, 5 seeds, v3): F1 0.968 unpruned, 0.473 with PAP (lost 0.49, 0.20 to 0.78;
            # seeds 0.20-0.73), 0.329 at random (PAP - random +0.14, -0.16 to 0.45); prefill 49.4 -> 25.1
            # MFLOPs. v2's networks (other initial weights) gave PAP 0.637: its F1 rests on the seed
            expected="not_reproduced",
        ),
    )

    def evaluate(self, algorithm: Algorithm, config: VideoGuardrailConfig, seed: int) -> Outcome:
        if not isinstance(algorithm, Guardrail):
            raise TypeError(f"{type(algorithm).__name__} is not a Guardrail")
        with one_torch_thread():
            start = time.perf_counter()
            data = make_data(config, seed)
            algorithm.fit(data.train, seed)
            tick = time.perf_counter()
            test = algorithm.scores(data.test)
            latency = 1e3 * (time.perf_counter() - tick) / len(data.test)
            held = algorithm.scores(data.held_out)
            explained = algorithm.explanations(data.test)
            explained_held = algorithm.explanations(data.held_out)
            bias, positions = position_bias(position_correct(algorithm, data.test), seed)
        f1, auprc = macro(data.test, test, tuple(CATEGORIES))
        held_categories = tuple(c for c in HELD_OUT_CATEGORIES if c in _asked(data.held_out))
        heldout_f1, _ = macro(data.held_out, held, held_categories)
        pruned = algorithm.prune != "none"
        return Outcome(
            metrics={
                "f1": f1,
                "auprc": auprc,
                "ranking": within_video_ranking(data.test, test, CATEGORIES),
                "heldout_ranking": within_video_ranking(data.held_out, held, held_categories),
                "heldout_f1": heldout_f1,
                "position_bias": bias,
                "prefill_mflops": algorithm.flops() / 1e6,
                "kept_tokens": float(kept_video_tokens(config) if pruned else config.video_tokens),
                "explanation_accuracy": explanation_accuracy(data.test, test, *explained),
                "heldout_explanation_accuracy": explanation_accuracy(data.held_out, held, *explained_held),
                "latency_ms": latency,
                "seconds": time.perf_counter() - start,
            },
            curves={
                "train_loss": Curve(
                    algorithm.curve[:, 0].tolist(), algorithm.curve[:, 1].tolist(), "step", "training loss"
                )
            },
            notes=(
                f"accuracy by position {', '.join(f'{a:.3f}' for a in positions)}; "
                f"{len(data.train)} training videos, {config.video_tokens} video tokens each; "
                + _example(data.test, test, explained, config)
            ),
        )


def _asked(split: Split) -> set[str]:
    return {CATEGORIES[i] for i in np.unique(split.categories)}


def _example(split: Split, scores: np.ndarray, explained: tuple[np.ndarray, np.ndarray], config: Any) -> str:
    """The first broken policy of the test split: its explanation as given and as it should be."""
    broken = np.argwhere(split.labels > 0.5)
    if not len(broken):
        return "no broken policy in the test split"
    i, j = broken[0]
    name = CATEGORIES[split.categories[i, j]]
    said = explanation(name, int(explained[0][i, j]), int(explained[1][i, j]), config.event_frames)
    truth = explanation(name, int(split.when[i, j]), int(split.where[i, j]), config.event_frames)
    verdict = "flagged" if scores[i, j] > 0 else "missed"
    return f"e.g. video 0's {name!r}: {verdict}, explained {said!r} (truth {truth!r})"

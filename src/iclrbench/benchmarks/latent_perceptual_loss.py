"""latent-perceptual-loss: Berrada et al., "Boosting latent diffusion with perceptual objectives", ICLR 2025
(arXiv:2411.04873).

One run = one (recipe, dataset, parameterisation, seed): a class-conditional latent denoiser
(:mod:`iclrbench.algorithms.latent_perceptual_loss.nets`) is trained from scratch on the frozen autoencoder's
latents of the dataset's training images (:mod:`iclrbench.envs.latent_perceptual_loss`) with the recipe's loss
(:mod:`iclrbench.algorithms.latent_perceptual_loss`), then samples ``samples`` images (classes in equal
shares) from fixed noise. The seed fixes the denoiser's initial weights, its batches, times and noise, and the
sampling noise, the same for every recipe: runs of one seed are paired.

Metrics: ``fd`` (primary: Frechet distance between the evaluator's features of the samples and of the
training images), ``precision``, ``recall`` (k = 3 manifolds in those features), ``sample_accuracy`` (the
evaluator names the class a sample was conditioned on), ``evaluator_accuracy`` (the evaluator's own test
accuracy), ``step_ms`` (wall milliseconds per training step once LPL is on), ``lpl_share`` (the share of
those steps' samples at low enough noise for LPL), ``final_loss`` (the diffusion loss, last 10% of steps),
``seconds``.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from iclrbench.core.algorithm import Algorithm
from iclrbench.core.decision import combine, compare_runs, empty, mean_figure, metric_values
from iclrbench.core.result import RunResult
from iclrbench.core.seeding import seed_for
from iclrbench.core.stats import stratified_bootstrap_ci
from iclrbench.core.task import (
    Budget,
    Claim,
    Metric,
    Outcome,
    Paper,
    Requirement,
    RunRequest,
    Task,
    Verdict,
    runs_where,
)
from iclrbench.envs.latent_perceptual_loss import (
    PARAMETERISATIONS,
    TASK_ID,
    LatentDiffusionConfig,
    alpha_sigma,
    load_images,
    sample,
    snr,
    target,
    z0_estimate,
)

CONTROL_MARGIN = 0.1  # "does not lower FD": not by more than 10% of the diffusion-only FD


def _generator(seed: int, what: str) -> Any:
    import torch

    return torch.Generator().manual_seed(seed_for(seed, TASK_ID, what) % 2**63)


def train_and_sample(recipe: Any, config: LatentDiffusionConfig, seed: int) -> dict[str, Any]:
    """Train the denoiser with ``recipe`` and sample; returns images, labels and training figures."""
    import torch

    from iclrbench.algorithms.latent_perceptual_loss import nets as latent_nets

    p = config.parameterisation
    images = load_images(config.dataset)
    ae = latent_nets.autoencoder(config.dataset)
    decoder = latent_nets.random_decoder_autoencoder(config.dataset, seed) if recipe.random_decoder else ae
    with torch.no_grad():
        latents = ae.encode(torch.from_numpy(images.train))
    labels = torch.from_numpy(images.train_labels)
    torch.manual_seed(seed_for(seed, TASK_ID, "denoiser-init") % 2**63)
    model = latent_nets.make_denoiser(config.classes, config.width, config.blocks)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=0.01)
    data, noise_gen = _generator(seed, "batches"), _generator(seed, "noise")
    start = int(config.lpl_start * config.train_steps)
    losses, step_seconds, low_noise = [], [], []
    for step in range(config.train_steps):
        began = time.perf_counter()
        index = torch.randint(len(latents), (config.batch,), generator=data)
        z0, y = latents[index], labels[index]
        t = torch.rand(config.batch, generator=noise_gen) * (1 - 2e-3) + 1e-3
        noise = torch.randn(z0.shape, generator=noise_gen)
        a, s = alpha_sigma(t[:, None, None, None], p)
        zt = a * z0 + s * noise
        output = model(zt, t, y)
        loss = (output - target(z0, noise, t[:, None, None, None], p)).pow(2).mean((1, 2, 3)).mean()
        total = loss
        if recipe.extra != "none" and step >= start:
            chosen = snr(t, p) > config.snr_threshold
            low_noise.append(float(chosen.float().mean()))
            if chosen.any():
                z0_hat = z0_estimate(zt[chosen], output[chosen], t[chosen, None, None, None], p)
                extra = recipe.extra_loss(decoder, z0_hat, z0[chosen]).mean()
                total = loss + config.lpl_weight * extra
        optimizer.zero_grad(set_to_none=True)
        total.backward()
        optimizer.step()
        losses.append(loss.item())
        if step >= start:
            step_seconds.append(time.perf_counter() - began)
    model.eval()
    per_class = config.samples // config.classes
    sample_labels = torch.arange(config.classes).repeat_interleave(per_class)
    shape = (len(sample_labels), *latents.shape[1:])
    noise = torch.randn(shape, generator=_generator(seed, "sampling"))
    z = sample(model, shape, sample_labels, config, noise, clip=float(latents.abs().max()))
    with torch.no_grad():
        generated = ae.decode(z).clamp(-1, 1)
    tail = max(1, config.train_steps // 10)
    return {
        "images": generated,
        "labels": sample_labels,
        "final_loss": float(np.mean(losses[-tail:])),
        "step_ms": 1000 * float(np.mean(step_seconds)) if step_seconds else float("nan"),
        "lpl_share": float(np.mean(low_noise)) if low_noise else 0.0,
    }


def quality(generated: Any, labels: Any, config: LatentDiffusionConfig) -> dict[str, float]:
    """FD, precision, recall and sample accuracy in the frozen evaluator's features."""
    import torch

    from iclrbench.algorithms.latent_perceptual_loss import nets as latent_nets
    from iclrbench.models.image_metrics import frechet_distance, precision_recall

    images = load_images(config.dataset)
    evaluator = latent_nets.evaluator(config.dataset, config.classes, config.side)
    with torch.no_grad():
        real = evaluator.features(torch.from_numpy(images.train)).numpy().astype(np.float64)
        fake = evaluator.features(generated).numpy().astype(np.float64)
        predicted = evaluator.head(torch.from_numpy(fake).float()).argmax(1)
        test = evaluator(torch.from_numpy(images.test)).argmax(1).numpy()
    precision, recall = precision_recall(real, fake)
    return {
        "fd": frechet_distance(fake, real),
        "precision": precision,
        "recall": recall,
        "sample_accuracy": float((predicted == labels).float().mean()),
        "evaluator_accuracy": float((test == images.test_labels).mean()),
    }


# ------------------------------------------------------------------------------------------------ claims
def lowers_fd_requests(budget: str) -> list[RunRequest]:
    return [
        RunRequest(a, {"parameterisation": p}, LatentPerceptualLossTask.claim_seeds(budget))
        for p in PARAMETERISATIONS
        for a in ("lpl", "no-lpl")
    ]


def paired_bootstrap(a: list[RunResult], b: list[RunResult], metric: str) -> list[float]:
    """The percentile bootstrap 95% interval of the mean per-seed difference a - b (the issue's figure,
    reported beside the verdict; the verdict itself is the project's paired Student-t rule, whose error
    rate holds at 5 seeds where a percentile bootstrap's interval is too narrow)."""
    va, vb = metric_values(a, metric), metric_values(b, metric)
    diffs = np.array([va[s] - vb[s] for s in sorted(va.keys() & vb.keys())])
    return [round(v, 4) for v in stratified_bootstrap_ci(diffs)]


def judge_lowers_fd(groups: list[list[RunResult]]) -> tuple[Verdict, dict[str, Any]]:
    """For each parameterisation, LPL's FD minus the diffusion-only FD (paired by seed) is below 0."""
    parts, bootstrap = {}, {}
    for p in PARAMETERISATIONS:
        lpl, base = (
            runs_where(groups, "lpl", parameterisation=p),
            runs_where(groups, "no-lpl", parameterisation=p),
        )
        if len(lpl) < 2 or len(base) < 2:
            return empty(f"{p}: fewer than 2 seeds of lpl or no-lpl")
        parts[f"{p}: fd lpl - no-lpl < 0"] = compare_runs(lpl, base, "fd", "<", quantity="fd lpl - no-lpl")
        bootstrap[p] = paired_bootstrap(lpl, base, "fd")
    return combine(
        parts,
        paired_bootstrap_95=bootstrap,
        fd={
            p: {a: mean_figure(runs_where(groups, a, parameterisation=p), "fd") for a in ("lpl", "no-lpl")}
            for p in PARAMETERISATIONS
        },
        sample_accuracy={
            p: {
                a: mean_figure(runs_where(groups, a, parameterisation=p), "sample_accuracy")
                for a in ("lpl", "no-lpl")
            }
            for p in PARAMETERISATIONS
        },
    )


def control_requests(budget: str) -> list[RunRequest]:
    return [
        RunRequest(a, {"parameterisation": "eps"}, LatentPerceptualLossTask.claim_seeds(budget))
        for a in ("lpl-random-decoder", "no-lpl")
    ]


def judge_control(groups: list[list[RunResult]]) -> tuple[Verdict, dict[str, Any]]:
    """With eps-prediction, LPL through a random decoder does not lower FD by more than CONTROL_MARGIN
    of the diffusion-only FD: the paired interval of ``fd(random) - (1 - margin) fd(no-lpl)`` lies above
    0 (``not_reproduced`` when it lies below: the control helps, so any gain of LPL is not its features')."""
    control, base = (
        runs_where(groups, "lpl-random-decoder", parameterisation="eps"),
        runs_where(groups, "no-lpl", parameterisation="eps"),
    )
    if len(control) < 2 or len(base) < 2:
        return empty("fewer than 2 seeds of lpl-random-decoder or no-lpl")
    parts = {
        f"eps: fd random-decoder - {1 - CONTROL_MARGIN:g} x no-lpl > 0": compare_runs(
            control,
            base,
            "fd",
            ">",
            scale_b=1 - CONTROL_MARGIN,
            quantity=f"fd random-decoder - {1 - CONTROL_MARGIN:g} x no-lpl",
        )
    }
    return combine(
        parts, fd={"lpl-random-decoder": mean_figure(control, "fd"), "no-lpl": mean_figure(base, "fd")}
    )


def overhead_requests(budget: str) -> list[RunRequest]:
    return [
        RunRequest(a, {"parameterisation": "eps"}, LatentPerceptualLossTask.claim_seeds(budget))
        for a in ("lpl", "no-lpl")
    ]


def judge_overhead(groups: list[list[RunResult]]) -> tuple[Verdict, dict[str, Any]]:
    """Reported, not tested: LPL's wall milliseconds per training step over the diffusion-only step's,
    once LPL is on (the paper calls the overhead modest). ``reproduced`` when LPL's step costs at most
    twice the diffusion-only step (paired interval of ``lpl - 2 x no-lpl`` below 0)."""
    lpl, base = (
        runs_where(groups, "lpl", parameterisation="eps"),
        runs_where(groups, "no-lpl", parameterisation="eps"),
    )
    if len(lpl) < 2 or len(base) < 2:
        return empty("fewer than 2 seeds of lpl or no-lpl")
    parts = {
        "step ms lpl - 2 x no-lpl < 0": compare_runs(
            lpl, base, "step_ms", "<", scale_b=2.0, quantity="step ms lpl - 2 x no-lpl"
        )
    }
    ratio = mean_figure(lpl, "step_ms") / mean_figure(base, "step_ms")
    return combine(
        parts,
        step_ms={"lpl": mean_figure(lpl, "step_ms"), "no-lpl": mean_figure(base, "step_ms")},
        overhead_ratio=round(float(ratio), 3),
        lpl_share=mean_figure(lpl, "lpl_share"),
    )


# -------------------------------------------------------------------------------------------------- task
class LatentPerceptualLossTask(Task):
    id = TASK_ID
    version = 2  # 2: the frozen networks train until their held-out figure settles (nets.NETS_VERSION 2)
    paper = Paper(
        title="Boosting latent diffusion with perceptual objectives",
        authors="Tariq Berrada, Pietro Astolfi, Melissa Hall, Marton Havasi, Yohann Benchetrit, "
        "Adriana Romero-Soriano, Karteek Alahari, Michal Drozdzal, Jakob Verbeek",
        arxiv="2411.04873",
    )
    summary = (
        "Latent diffusion on small images with eps-, v-prediction and flow matching, trained with and "
        "without the latent perceptual loss (decoder features of the predicted clean latent, outlier-masked "
        "and normalised, at low noise), against a random-decoder control and pixel MSE; Frechet distance in "
        "a frozen classifier's features."
    )
    Config = LatentDiffusionConfig
    budgets = {  # noqa: RUF012  (read-only class data, as in Task)
        "smoke": Budget(
            "smoke",
            {"train_steps": 60, "samples": 100, "sample_steps": 10},
            "60 training steps, 100 samples in 10 steps (the autoencoder and evaluator trained once)",
            claim_seeds=(0, 1),
        ),
        "small": Budget(
            "small",
            {},
            "2,000 training steps, 1,000 samples in 50 steps: ~45 s a run, ~80 s with LPL",
            claims_minutes=20.9,  # bench claims -j 2, 2 cores: 1,251 s, 35 runs (2026-12-03)
            claim_seeds=tuple(range(5)),
        ),
        "paper": Budget(
            "paper",
            {"train_steps": 20000, "width": 128, "samples": 5000},
            "20,000 steps of a width-128 denoiser, 5,000 samples",
            claim_seeds=tuple(range(10)),
        ),
    }
    metrics = (
        Metric("fd", False, "", "Frechet distance of samples to training images in the evaluator's features"),
        Metric("precision", True, "", "share of samples inside the real k-NN manifold (k = 3)"),
        Metric("recall", True, "", "share of real images inside the samples' k-NN manifold"),
        Metric("sample_accuracy", True, "", "the evaluator names the class a sample was conditioned on"),
        Metric("evaluator_accuracy", True, "", "the evaluator's accuracy on the test images"),
        Metric("step_ms", False, "ms", "wall milliseconds per training step once LPL is on", measured=True),
        Metric("lpl_share", True, "", "share of a batch at low enough noise for LPL (recipes with a term)"),
        Metric("final_loss", False, "", "diffusion loss over the last 10% of steps"),
        Metric("seconds", False, "s", "wall seconds of the run", measured=True),
    )
    protocol = "Recipe: extra_loss(autoencoder, z0_hat, z0) -> per-sample loss added at low noise"
    requires = Requirement("lpl", ("torch", "sklearn", "scipy"))
    algorithm_modules = (
        "iclrbench.algorithms.latent_perceptual_loss",
        "iclrbench.baselines.latent_perceptual_loss",
    )
    claims = (
        Claim(
            "lpl-lowers-fd",
            "LPL lowers the Frechet distance for each of eps-prediction, v-prediction and flow matching "
            "(paired by seed: the interval of FD(lpl) - FD(no-lpl) lies below 0).",
            lowers_fd_requests,
            judge_lowers_fd,
            # measured at small: FD(lpl) - FD(no-lpl) +0.027 (eps), -0.004 (v), +0.007 (flow) of 39.8, 23.6
            # and 20.9, every interval across 0: LPL at the port's weight is ~1% of the diffusion loss here
            expected="inconclusive",
        ),
        Claim(
            "random-decoder-does-not-help",
            f"LPL through a randomly initialised decoder does not lower FD by more than {CONTROL_MARGIN:.0%} "
            "(eps-prediction, paired by seed).",
            control_requests,
            judge_control,
            expected="reproduced",
        ),
        Claim(
            "modest-overhead",
            "LPL's training step costs at most twice the diffusion-only step (reported with the ratio).",
            overhead_requests,
            judge_overhead,
            # no expected verdict: wall milliseconds depend on the machine's load (1.93x measured)
        ),
    )

    def prepare(self, config: LatentDiffusionConfig) -> None:
        from iclrbench.algorithms.latent_perceptual_loss import nets as latent_nets

        latent_nets.autoencoder(config.dataset)
        latent_nets.evaluator(config.dataset, config.classes, config.side)

    def evaluate(self, algorithm: Algorithm, config: LatentDiffusionConfig, seed: int) -> Outcome:
        from iclrbench.algorithms.latent_perceptual_loss import Recipe
        from iclrbench.algorithms.latent_perceptual_loss import nets as latent_nets
        from iclrbench.models.torch_threads import one_torch_thread

        if not isinstance(algorithm, Recipe):
            raise TypeError(f"{type(algorithm).__name__} is not a Recipe")
        started = time.perf_counter()
        with one_torch_thread():
            # the frozen networks' quality, as stored when they were trained, checked before any analysis
            # rests on them: a missed floor fails the run with the figure (issue 53)
            artifacts = latent_nets.checked_artifacts(config.dataset, config.classes, config.side)
            trained = train_and_sample(algorithm, config, seed)
            metrics = quality(trained["images"], trained["labels"], config)
        metrics.update(
            step_ms=trained["step_ms"],
            lpl_share=trained["lpl_share"],
            final_loss=trained["final_loss"],
            seconds=time.perf_counter() - started,
        )
        return Outcome(
            metrics=metrics,
            notes=(
                f"{config.dataset}, {config.parameterisation}, {config.train_steps} steps, "
                f"{config.samples} samples"
            ),
            artifacts=artifacts,
        )

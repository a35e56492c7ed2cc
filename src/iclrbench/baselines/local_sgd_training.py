"""Baselines of local-sgd-training (the TASKS.md card; Cheng et al., "EDiT: a local-SGD-based efficient
distributed training method for large language models", ICLR 2025, section 4): the synchronous and
local-SGD methods EDiT is compared with, each a :class:`~iclrbench.algorithms.local_sgd_training.SyncSpec`
the workers follow.

- ``diloco``: DiLoCo (Douillard et al. 2023), the plain mean of the pseudo-gradients through a Nesterov
  outer step, syncing the whole model at once (charged its whole transfer), without EDiT's penalty.
- ``local-sgd``: local SGD (Stich 2019), plain parameter averaging every tau steps from the first step.
- ``post-local-sgd``: post-local SGD (Lin et al. 2020), synchronous for the warm-up, then local SGD.
- ``ddp``: synchronous data parallel, gradients all-reduced every step.
- ``edit-no-penalty``: EDiT with its pseudo-gradient penalty off (same warm-up, layer-wise sync, Nesterov
  outer step at momentum 0.8): the control that tells the penalty from DiLoCo's other differences.
- ``co2``: CO2 (Sun et al., ICLR 2024), the paper's asynchronous baseline: each sync's all-reduce overlaps
  the next tau local steps, so the outer step is one round stale.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from iclrbench.algorithms.local_sgd_training import DistributedTrainer, EDiTParams, SyncSpec, edit_spec
from iclrbench.core.algorithm import register_algorithm
from iclrbench.core.config import param
from iclrbench.envs.local_sgd_training import TASK_ID, LocalSGDConfig


def outer_step_spec(p: Any, config: LocalSGDConfig, **fields: Any) -> SyncSpec:
    """A local-SGD :class:`SyncSpec` with an outer step (DiLoCo, CO2): ``p``'s warm-up and tau (the task's
    where unset), outer lr and momentum; ``fields`` add the method's own."""
    return SyncSpec(
        kind="local",
        warmup_steps=config.warmup_steps if p.warmup_steps < 0 else p.warmup_steps,
        tau=p.tau or config.tau,
        outer_lr=p.outer_lr,
        momentum=p.momentum,
        **fields,
    )


@dataclasses.dataclass(frozen=True)
class DiLoCoParams:
    warmup_steps: int = param(-1, "synchronous warm-up steps (-1: the task's warmup_steps)", low=-1)
    tau: int = param(0, "local steps between syncs (0: the task's tau)", low=0)
    outer_lr: float = param(0.7, "outer Nesterov SGD learning rate (DiLoCo, Douillard et al. 2023)", low=0.0)
    momentum: float = param(0.9, "outer Nesterov momentum (DiLoCo)", low=0.0, high=0.999)


@register_algorithm(task=TASK_ID, name="diloco", role="baseline")
class DiLoCo(DistributedTrainer):
    """DiLoCo: the plain mean of the pseudo-gradients through a Nesterov outer step; no penalty. It syncs
    the whole model at once after its tau inner steps, so the clock charges the whole transfer (EDiT's
    layer-wise sync hides behind the forward pass); the same outer step as EDiT's otherwise, with momentum
    0.9 against 0.8."""

    Params = DiLoCoParams

    def sync_spec(self) -> SyncSpec:
        return outer_step_spec(self.params, self.config, nesterov=True)


@dataclasses.dataclass(frozen=True)
class LocalSGDParams:
    tau: int = param(0, "local steps between parameter averages (0: the task's tau)", low=0)


@register_algorithm(task=TASK_ID, name="local-sgd", role="baseline")
class LocalSGD(DistributedTrainer):
    """Local SGD (Stich 2019): plain parameter averaging every tau steps, from the first step."""

    Params = LocalSGDParams

    def sync_spec(self) -> SyncSpec:
        return SyncSpec(kind="local", warmup_steps=0, tau=self.params.tau or self.config.tau)


@register_algorithm(task=TASK_ID, name="post-local-sgd", role="baseline")
class PostLocalSGD(DistributedTrainer):
    """Post-local SGD (Lin et al. 2020): synchronous data parallel for the warm-up, then local SGD."""

    Params = LocalSGDParams

    def sync_spec(self) -> SyncSpec:
        c = self.config
        return SyncSpec(kind="local", warmup_steps=c.warmup_steps, tau=self.params.tau or c.tau)


@register_algorithm(task=TASK_ID, name="ddp", role="baseline")
class SynchronousDDP(DistributedTrainer):
    """Synchronous data parallel: ``DistributedDataParallel`` all-reduces the gradients every step."""

    def sync_spec(self) -> SyncSpec:
        return SyncSpec(kind="ddp", tau=self.config.tau)


@register_algorithm(task=TASK_ID, name="edit-no-penalty", role="baseline")
class EDiTWithoutPenalty(DistributedTrainer):
    """EDiT without the pseudo-gradient penalty (anomaly elimination, weighted averaging, clipping): the
    plain mean of the pseudo-gradients through EDiT's own outer step, so it differs from EDiT in the penalty
    alone (DiLoCo also differs in momentum, 0.9 against 0.8)."""

    Params = EDiTParams

    def sync_spec(self) -> SyncSpec:
        return edit_spec(self.params, self.config, penalty=False)


@dataclasses.dataclass(frozen=True)
class CO2Params:
    warmup_steps: int = param(-1, "synchronous warm-up steps (-1: the task's warmup_steps)", low=-1)
    tau: int = param(0, "local steps between syncs (0: the task's tau)", low=0)
    outer_lr: float = param(1.0, "outer learning rate (CO2's fairscale co2.py: 1.0)", low=0.0)
    momentum: float = param(
        0.2, "outer heavy-ball momentum (co2_examples/run_co2_local.sh, 4 workers: 0.2)", low=0.0, high=0.999
    )
    gap_penalty: float = param(
        1.0, "staleness gap penalty: the stale pseudo-gradient is divided by it (co2.py's constant)", low=1e-6
    )
    clamp: float = param(
        1.0,
        "outer momentum clipping: element-wise clamp to [-clamp, clamp] (0: off; the example's 1.0)",
        low=0.0,
    )


@register_algorithm(task=TASK_ID, name="co2", role="baseline")
class CO2(DistributedTrainer):
    """CO2 (Sun et al., "CO2: efficient distributed training with full communication-computation overlap",
    ICLR 2024; the asynchronous baseline of EDiT's section 4). Every tau local steps a worker launches the
    all-reduce of its pseudo-gradient ``x_t - y_t^i`` (the outer iterate less its local weights) and goes on
    training while it runs; the outer step then applies the previous round's average, one round stale:
    ``m = beta m + avg_{t-1} / gap_penalty``, ``m = clamp(m, -c, c)``, ``x_{t+1} = x_t - outer_lr m``
    (heavy-ball, as the public ``co2.py``'s ``_perform_local_optimization``). The clock charges a sync only
    the transfer its tau local steps cannot hide, so on a link that moves the model in about a step the
    sync is free.

    Departures (``bench info``): the paper's staleness gap penalty is adaptive (its Algorithm 1); its
    formula could not be read offline, and the public code divides by a constant, default 1, which is what
    runs here. The public code's clamp discards its result (a no-op); here it clamps, at the example script's
    threshold 1.0. The first round has no stale average to apply: the workers begin the second round from
    the first round's start, and its average arrives one round later."""

    Params = CO2Params

    def sync_spec(self) -> SyncSpec:
        p = self.params
        return outer_step_spec(
            p, self.config, delayed=True, gap_penalty=p.gap_penalty, momentum_clamp=p.clamp
        )

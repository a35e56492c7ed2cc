"""local-sgd-training's methods: EDiT and A-EDiT (Cheng et al., ICLR 2025); the local-SGD family they are
compared with is in :mod:`iclrbench.baselines.local_sgd_training`. Each algorithm is declarative: its
parameters become a :class:`SyncSpec` (plain data) that every worker process
(:mod:`iclrbench.algorithms.local_sgd_training.worker`) turns into the same sync schedule.

EDiT (section 3): after ``warmup_steps`` fully synchronous steps, workers take ``tau`` local AdamW steps,
then sync *layer by layer* in forward pre-hooks (the paper overlaps each layer's sync with the forward
computation). Per layer, each worker's pseudo-gradient ``delta_i = theta_global - theta_i`` goes through the
pseudo-gradient penalty (section 3.2):

1. anomaly elimination: an EWMA of the layer's pseudo-gradient norm (alpha 0.02) gives a z-score; a worker
   whose z exceeds 3 (times ``max(1, std)`` of the recent z-scores) drops its delta for this sync;
2. weighted averaging: weights ``softmax(-norm / T)`` across workers (an anomalous worker's norm + 1e6);
3. gradient clipping of the averaged pseudo-gradient to norm ``phi``;

then a Nesterov outer step (lr 0.7, momentum 0.8) on the global weights, which every worker adopts.
A-EDiT syncs by elapsed (virtual) time instead of steps (a worker takes the whole steps that fit in an
interval and carries what is left of it into the next), skips a sync when the workers took fewer than
``min_total_steps`` steps together since the last one, and mixes the softmax weights half and half with
each worker's share of those steps.

Defaults follow the authors' recipe (atorch ``docs/README-EDiT.md``: tau 10, phi 10, T 1, z 3, detector
warm-up 10 syncs, outer SGD lr 0.7, momentum 0.8, Nesterov). One deliberate difference: the EWMA weighs
its first values equally instead of starting at 0 (:class:`EwmaDetector`).
"""

from __future__ import annotations

import collections
import dataclasses
import math
from typing import Any

from iclrbench.core.algorithm import Algorithm, register_algorithm
from iclrbench.core.config import param
from iclrbench.envs.local_sgd_training import TASK_ID, LocalSGDConfig, machine_refuses


@dataclasses.dataclass(frozen=True)
class SyncSpec:
    """What a worker does between and at syncs (plain data, sent to the workers as JSON)."""

    kind: str  # "ddp": all-reduce gradients every step; "local": local steps and outer syncs
    warmup_steps: int = 0
    tau: int = 10
    outer_lr: float = 1.0  # 1 and momentum 0: plain parameter averaging (local SGD)
    momentum: float = 0.0
    nesterov: bool = False
    penalty: bool = False  # EDiT's pseudo-gradient penalty
    ewma_alpha: float = 0.02
    z_threshold: float = 3.0
    detector_warmup: int = 10
    temperature: float = 1.0
    clip: float = 10.0
    by_time: bool = False  # A-EDiT: sync every ``sync_interval`` virtual time units
    sync_interval: float = 0.0  # 0: tau nominal steps
    min_total_steps: int = 0
    step_weight: float = 0.0  # share of the step-share weights mixed into the softmax weights
    # EDiT's schedule: each module's sync overlaps the forward computation before it (charged by
    # envs.local_sgd_training.layerwise_sync_time); False: the whole model is synced at once, then training
    # resumes (DiLoCo, local SGD), and the clock charges the whole transfer
    layerwise: bool = False
    # CO2's schedule (Sun et al. 2024): each sync's all-reduce runs during the next tau local steps, so the
    # outer step applies the previous round's averaged pseudo-gradient (one round stale) and the clock
    # charges only the transfer beyond those steps
    delayed: bool = False
    gap_penalty: float = 1.0  # CO2: the pseudo-gradient is divided by it before the outer momentum
    momentum_clamp: float = 0.0  # CO2: the outer momentum clamped element-wise to [-c, c] (0: off)


class EwmaDetector:
    """Online EWMA mean and variance of a stream of norms; flags values whose z-score is too high.

    ``update``: ``d = x - mean; mean += a d; var = (1 - a)(var + a d^2)`` (the exponentially weighted
    variance) with ``a = max(alpha, 1 / count)``: the first values are weighted equally (their plain mean
    and population variance), later ones exponentially. atorch starts the mean at 0 with ``a = alpha``
    throughout and waits 120 syncs for that start to fade; runs here have tens of syncs.
    ``is_outlier(x)``: after ``warmup`` values, ``(x - mean) / std > threshold * max(1, std of the last
    warmup z-scores)`` (one-sided: only a norm far above its history is an anomaly)."""

    def __init__(self, alpha: float, threshold: float, warmup: int) -> None:
        self.alpha, self.threshold, self.warmup = alpha, threshold, warmup
        self.mean, self.var, self.count = 0.0, 0.0, 0
        self.z_window: collections.deque[float] = collections.deque(maxlen=max(warmup, 2))

    def z(self, x: float) -> float:
        std = math.sqrt(self.var)
        return 0.0 if std == 0.0 or self.count < 2 else (x - self.mean) / std

    def is_outlier(self, x: float) -> bool:
        if self.count < self.warmup:
            return False
        window = list(self.z_window)
        spread = float(_std(window)) if len(window) > 1 else 0.0
        return self.z(x) > self.threshold * max(1.0, spread)

    def update(self, x: float) -> None:
        self.count += 1
        a = max(self.alpha, 1.0 / self.count)
        d = x - self.mean
        self.mean += a * d
        self.var = (1 - a) * (self.var + a * d * d)  # exact when a = 1 / count (Finch 2009, eq. 143)
        self.z_window.append(self.z(x))


def _std(values: list[float]) -> float:
    m = sum(values) / len(values)
    return math.sqrt(sum((v - m) ** 2 for v in values) / len(values))


def softmax_weights(norms: list[float], temperature: float) -> list[float]:
    """``softmax(-norm / T)`` over workers (shifted by the smallest norm, so huge norms underflow to 0)."""
    low = min(norms)
    e = [math.exp(-(n - low) / temperature) for n in norms]
    total = sum(e)
    return [x / total for x in e]


# -------------------------------------------------------------------------------------------- algorithms
class DistributedTrainer(Algorithm):
    """Base of this task's methods: ``sync_spec()`` says how the workers train and sync."""

    config: LocalSGDConfig

    @classmethod
    def supports(cls, config: LocalSGDConfig) -> str | None:
        """Refuse, before any run, what this machine cannot host (checked by the driver only: a worker
        under torchrun on another node builds the same config)."""
        return machine_refuses(config)

    def sync_spec(self) -> SyncSpec:
        raise TypeError(f"{type(self).__name__} must implement sync_spec()")


@dataclasses.dataclass(frozen=True)
class EDiTParams:
    warmup_steps: int = param(-1, "synchronous warm-up steps (-1: the task's warmup_steps)", low=-1)
    tau: int = param(0, "local steps between syncs (0: the task's tau)", low=0)
    outer_lr: float = param(0.7, "outer Nesterov SGD learning rate", low=0.0)
    momentum: float = param(0.8, "outer Nesterov momentum", low=0.0, high=0.999)
    ewma_alpha: float = param(0.02, "EWMA weight of the anomaly detector", low=1e-4, high=1.0)
    z_threshold: float = param(3.0, "z-score above which a worker's pseudo-gradient is dropped", low=0.0)
    detector_warmup: int = param(10, "syncs before the detector may flag", low=0)
    temperature: float = param(1.0, "T of the softmax(-norm / T) worker weights", low=1e-6)
    clip: float = param(10.0, "phi: norm the averaged pseudo-gradient is clipped to (per layer)", low=1e-9)


def edit_spec(p: Any, config: LocalSGDConfig, **extra: Any) -> SyncSpec:
    """EDiT's :class:`SyncSpec` from its parameters; ``extra`` overrides or adds fields (A-EDiT's timing, the
    control without the penalty)."""
    fields = dict(
        kind="local",
        warmup_steps=config.warmup_steps if p.warmup_steps < 0 else p.warmup_steps,
        tau=p.tau or config.tau,
        outer_lr=p.outer_lr,
        momentum=p.momentum,
        nesterov=True,
        penalty=True,
        layerwise=True,
        ewma_alpha=p.ewma_alpha,
        z_threshold=p.z_threshold,
        detector_warmup=p.detector_warmup,
        temperature=p.temperature,
        clip=p.clip,
    )
    return SyncSpec(**{**fields, **extra})


@register_algorithm(task=TASK_ID, name="edit", role="reference")
class EDiT(DistributedTrainer):
    """EDiT: layer-wise syncs every tau steps with the pseudo-gradient penalty and a Nesterov outer step."""

    Params = EDiTParams

    def sync_spec(self) -> SyncSpec:
        return edit_spec(self.params, self.config)


@dataclasses.dataclass(frozen=True)
class AEDiTParams(EDiTParams):
    sync_interval: float = param(0.0, "virtual time between syncs (0: tau nominal steps)", low=0.0)
    min_total_steps: int = param(0, "skip a sync below these steps over all workers (0: tau)", low=0)
    step_weight: float = param(
        0.5, "share of the step-share weights in the worker weights", low=0.0, high=1.0
    )


@register_algorithm(task=TASK_ID, name="a-edit", role="reference")
class AEDiT(DistributedTrainer):
    """A-EDiT: EDiT's sync, every ``sync_interval`` of virtual time instead of every tau steps: a slow
    worker takes fewer local steps instead of holding the others back."""

    Params = AEDiTParams

    def sync_spec(self) -> SyncSpec:
        p = self.params
        tau = p.tau or self.config.tau
        return edit_spec(
            p,
            self.config,
            by_time=True,
            sync_interval=p.sync_interval or float(tau),
            min_total_steps=p.min_total_steps or tau,
            step_weight=p.step_weight,
        )

"""local-sgd-training's world (EDiT, Cheng et al., ICLR 2025): the configuration, a seeded corpus, the small
causal transformer every worker trains, the virtual clock, and the seeded faults.

- Corpus: a first-order Markov chain over ``vocab`` tokens whose next-token distributions are Dirichlet draws
  (concentration ``concentration``), fixed by ``data_seed``; each worker samples its own shard from it
  (seeded by run seed and rank), validation is a held-out sample. Its entropy rate is the loss floor.
- Model: token and position embeddings, ``layers`` pre-norm causal transformer blocks, a linear head; every
  block is one module, so a layer-wise sync visits embedding, blocks, head in forward order.
- Virtual clock: each worker's step costs ``1 + jitter`` time units (seeded per run), the slow worker's
  ``slow_factor`` times that, and a collective costs its payload over ``link_mb_per_unit``; results never
  depend on this machine's load (wall seconds are reported beside them).
- Faults: in the window of local steps ``[anomaly_start, anomaly_start + anomaly_steps)`` one worker
  (seeded) trains on corrupted batches (its tokens mapped through a random permutation of the vocabulary:
  fluent text of another language) or with its learning rate multiplied by ``lr_spike``.
"""

from __future__ import annotations

import dataclasses
import math
import os
import socket
from typing import Any

import numpy as np

from iclrbench.core.config import param
from iclrbench.core.seeding import seed_for

TASK_ID = "local-sgd-training"
ANOMALIES = ("none", "corrupt", "lr-spike")


def max_workers() -> int:
    """Workers one run may start here: two per core (each is one single-threaded process), 2 to 8."""
    return max(2, min(8, 2 * (os.cpu_count() or 1)))


@dataclasses.dataclass(frozen=True)
class LocalSGDConfig:
    workers: int = param(2, "worker processes joined by torch.distributed (gloo)", low=2, high=8)
    steps: float = param(300.0, "virtual time budget, in nominal step costs", low=1.0)
    tau: int = param(10, "local steps between syncs (EDiT, DiLoCo, local SGD)", low=1)
    warmup_steps: int = param(20, "fully synchronous steps (gradients all-reduced) before local steps", low=0)
    vocab: int = param(128, "tokens of the Markov-chain corpus", low=4, high=512)
    concentration: float = param(0.1, "Dirichlet concentration of the chain's next-token rows", low=1e-3)
    seq_len: int = param(32, "tokens per training sequence", low=4, high=256)
    batch: int = param(16, "sequences per local step", low=1)
    shard: int = param(2048, "training sequences per worker", low=16)
    val: int = param(256, "held-out validation sequences", low=8)
    d_model: int = param(64, "width of the transformer (<= 128)", low=16, high=128)
    layers: int = param(2, "transformer blocks", low=1, high=8)
    heads: int = param(4, "attention heads", low=1)
    lr: float = param(2e-3, "inner AdamW learning rate", low=1e-6)
    step_jitter: float = param(0.05, "spread of the workers' step costs (log-normal sigma)", low=0.0)
    slow_factor: float = param(1.0, "the slow worker's step cost multiple (1: none)", low=1.0)
    link_mb_per_unit: float = param(4.0, "MB a collective moves per virtual time unit", low=1e-3)
    anomaly: str = param(
        "none", "fault: none, corrupt (permuted-vocabulary batches), lr-spike", choices=ANOMALIES
    )
    anomaly_start: int = param(
        150, "first local step of the fault window (after EDiT's detector has seen 10 syncs)", low=0
    )
    anomaly_steps: int = param(20, "local steps the fault lasts", low=1)
    lr_spike: float = param(30.0, "learning-rate multiple during an lr-spike fault", low=1.0)
    equal_steps: int = param(60, "local steps at which val_loss_at_equal_steps is read", low=1)
    target_loss: float = param(
        0.0, "validation loss to reach (0: the chain's entropy rate + 0.5 nats)", low=0.0
    )
    data_seed: int = param(0, "seed of the chain (the language); the run seed draws shards and faults", low=0)
    rendezvous: str = param("127.0.0.1", "rendezvous host (an address of this machine; port chosen free)")

    def __post_init__(self) -> None:
        if self.d_model % self.heads:
            raise ValueError(f"d_model ({self.d_model}) must be a multiple of heads ({self.heads})")


def machine_refuses(config: LocalSGDConfig) -> str | None:
    """Why this machine cannot host the run's workers (too many; a rendezvous host it cannot listen on:
    the driver starts every worker here, and rank 0 serves the rendezvous store), else None."""
    if config.workers > max_workers():
        return (
            f"workers={config.workers}: this machine runs at most {max_workers()} (two per core, "
            f"{os.cpu_count()} cores)"
        )
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.settimeout(3.0)
            s.bind((config.rendezvous, 0))
    except OSError as exc:
        return f"rendezvous {config.rendezvous!r} does not answer here ({exc.strerror or exc})"
    return None


def free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


# ------------------------------------------------------------------------------------------------ corpus
@dataclasses.dataclass(frozen=True)
class Chain:
    """A first-order Markov chain: ``probs[a]`` is the distribution of the token after ``a`` (sparse rows
    at small concentration, so context matters: the unigram entropy is near log V, the chain's far below)."""

    probs: np.ndarray  # (V, V)

    @classmethod
    def make(cls, vocab: int, concentration: float, seed: int) -> Chain:
        rng = np.random.default_rng(seed_for(seed, TASK_ID, "chain"))
        return cls(rng.dirichlet(np.full(vocab, concentration), size=vocab))

    def stationary(self) -> np.ndarray:
        """The stationary distribution, solved exactly (``pi P = pi``, ``sum pi = 1``): power iteration
        does not converge in a fixed number of steps on a slowly mixing chain (low concentration)."""
        v = self.probs.shape[0]
        system = np.vstack([self.probs.T - np.eye(v), np.ones((1, v))])
        rhs = np.zeros(v + 1)
        rhs[-1] = 1.0
        pi = np.linalg.lstsq(system, rhs, rcond=None)[0]
        pi = np.clip(pi, 0.0, None)
        return pi / pi.sum()

    def entropy_rate(self) -> float:
        """Nats per token at the stationary distribution: the loss floor."""
        with np.errstate(divide="ignore", invalid="ignore"):
            h = -np.where(self.probs > 0, self.probs * np.log(self.probs), 0.0).sum(-1)
        return float(self.stationary() @ h)

    def sample(self, n: int, length: int, rng: np.random.Generator) -> np.ndarray:
        """``n`` sequences of ``length`` tokens (vectorised over sequences), after a 16-token burn-in."""
        v = self.probs.shape[0]
        cum = np.cumsum(self.probs, axis=-1)
        a = rng.integers(v, size=n)
        out = np.empty((n, length + 16), dtype=np.int64)
        for t in range(length + 16):
            u = rng.random(n)[:, None]
            a = np.minimum((u > cum[a]).sum(-1), v - 1)
            out[:, t] = a
        return out[:, 16:]


def target_loss(config: LocalSGDConfig) -> float:
    if config.target_loss > 0:
        return config.target_loss
    return Chain.make(config.vocab, config.concentration, config.data_seed).entropy_rate() + 0.5


# ------------------------------------------------------------------------------------------------ faults
@dataclasses.dataclass(frozen=True)
class World:
    """What one run's seed fixes for every worker alike: step costs, the faulty worker, the permutation."""

    step_costs: tuple[float, ...]
    faulty: int  # rank of the worker the fault hits (-1: none)
    permutation: tuple[int, ...]

    def faulty_now(self, rank: int, step: int, config: LocalSGDConfig) -> bool:
        return (
            config.anomaly != "none"
            and rank == self.faulty
            and config.anomaly_start <= step < config.anomaly_start + config.anomaly_steps
        )


def make_world(config: LocalSGDConfig, seed: int) -> World:
    rng = np.random.default_rng(seed_for(seed, TASK_ID, "world"))
    costs = np.exp(rng.normal(0.0, config.step_jitter, size=config.workers))
    costs[-1] *= config.slow_factor  # the last rank is the slow one
    faulty = int(rng.integers(config.workers)) if config.anomaly != "none" else -1
    return World(tuple(float(c) for c in costs), faulty, tuple(int(i) for i in rng.permutation(config.vocab)))


def collective_cost(nbytes: float, config: LocalSGDConfig) -> float:
    """Virtual time a collective moving ``nbytes`` per worker takes."""
    return nbytes / 1e6 / config.link_mb_per_unit


#: the forward pass's share of a training step's cost (the backward pass costs about twice the forward)
FORWARD_SHARE = 1.0 / 3.0


def layerwise_sync_time(transfers: list[float], forwards: list[float]) -> float:
    """Virtual time a layer-wise sync adds to the forward pass it runs in (EDiT, section 3.1 and its
    figure 2: each module's parameters are synced just before the module computes, so a module's transfer
    overlaps the forward computation of the modules before it). One link: module ``j``'s collective starts
    when module ``j - 1``'s has finished; module ``j`` computes once its own collective and module
    ``j - 1``'s forward are done. Returns the pipeline's length less the forward's own ``sum(forwards)``:
    the whole transfer when there is no computation to hide behind, never less than the first module's
    transfer (nothing runs before it) nor than the transfer beyond the compute it can hide behind."""
    link = compute = 0.0
    for transfer, forward in zip(transfers, forwards, strict=True):
        link += transfer
        compute = max(compute, link) + forward
    return compute - sum(forwards)


def bucketed_allreduce_time(backwards: list[float], transfers: list[float]) -> float:
    """Virtual time synchronous data parallel's gradient all-reduce adds to a step, bucketed as DDP does
    (PyTorch's ``DistributedDataParallel``): modules in backward order, each module's gradients sent once
    its backward is done, while the backward of the modules before it runs; one link. Returns the
    pipeline's length less the backward's own ``sum(backwards)``: never less than the last module's
    transfer (nothing is left to hide it), never more than the whole transfer. The mirror of
    :func:`layerwise_sync_time`, at the same granularity (one module, one bucket), so neither schedule is
    favoured by it."""
    compute = link = 0.0
    for backward, transfer in zip(backwards, transfers, strict=True):
        compute += backward
        link = max(link, compute) + transfer
    return link - compute


# ------------------------------------------------------------------------------------------------- model
def make_model(config: LocalSGDConfig) -> Any:
    """The small causal transformer (seeded by the caller's torch.manual_seed)."""
    import torch
    from torch import nn

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layer = nn.TransformerEncoderLayer(
                config.d_model,
                config.heads,
                4 * config.d_model,
                dropout=0.0,
                batch_first=True,
                norm_first=True,
            )

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            mask = nn.Transformer.generate_square_subsequent_mask(x.shape[1])
            return self.layer(x, src_mask=mask, is_causal=True)

    class Embed(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.tokens = nn.Embedding(config.vocab, config.d_model)
            self.positions = nn.Embedding(config.seq_len, config.d_model)

        def forward(self, ids: torch.Tensor) -> torch.Tensor:
            return self.tokens(ids) + self.positions(torch.arange(ids.shape[1]))

    class Head(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.norm = nn.LayerNorm(config.d_model)
            self.out = nn.Linear(config.d_model, config.vocab)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.out(self.norm(x))

    return nn.Sequential(Embed(), *[Block() for _ in range(config.layers)], Head())


def parameter_bytes(model: Any) -> int:
    return int(sum(p.numel() * p.element_size() for p in model.parameters()))


def nominal_rounds(config: LocalSGDConfig) -> int:
    return max(1, math.ceil(config.steps / config.tau))

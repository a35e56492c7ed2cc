"""The DP-SGD auditing game in the hidden-state threat model (Cebere, Bellet, Papernot, ICLR 2025, Sec. 3).

A challenger trains ``runs`` models with the canary (world "in") and ``runs`` without (world "out") by
DP-SGD with Opacus's semantics -- per-example gradients clipped to norm C, summed, Gaussian noise of std
sigma * C added, divided by the batch size -- on fixed, known batches of a seeded synthetic tabular data set,
from one fixed initialisation. The adversary only sees each run's final parameters.

All 2 x ``runs`` trainings advance together as one batched tensor computation (runs x parameters). For
the two models used here the per-example gradients are outer products, so their norms are products of
norms and their clipped sum is one contraction: per-example gradients are never materialised. Training
runs in float32, as Opacus does by default.
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING

import numpy as np

from iclrbench.core.config import param

if TYPE_CHECKING:
    import torch

N_CLASSES = 2


@dataclasses.dataclass(frozen=True)
class DpAuditConfig:
    """One audit: the model, the privacy level of the canary's schedule, and the scale of the game."""

    model: str = param(
        "mlp", "mlp (8-10-2, 112 parameters) or logreg (8-2 softmax, 18)", choices=("mlp", "logreg")
    )
    epsilon_target: float = param(
        4.0,
        "epsilon at delta of 250 insertions: sets sigma = sqrt(250) / mu(epsilon_target)",
        low=0.1,
        high=50,
    )
    k: int = param(1, "the canary is inserted at every k-th step; T = insertions x k", low=1, high=1000)
    insertions: int = param(250, "how many times the canary is inserted", low=1, high=100_000)
    runs: int = param(1000, "training runs per world (in / out)", low=10, high=1_000_000)
    batch_size: int = param(64, "examples per (known, fixed) batch", low=1, high=4096)
    n_data: int = param(512, "training examples", low=8, high=1_000_000)
    features: int = param(8, "input features", low=1, high=1024)
    hidden: int = param(10, "hidden units of the MLP", low=1, high=1024)
    learning_rate: float = param(0.1, "SGD learning rate", low=1e-6, high=100.0)
    clip: float = param(1.0, "per-example clipping norm C", low=1e-6)
    delta: float = param(1e-5, "delta of the (epsilon, delta) statements", low=1e-12, high=0.1)

    @property
    def steps(self) -> int:
        return self.insertions * self.k


@dataclasses.dataclass(frozen=True)
class Canary:
    """What the adversary inserts: a gradient (a parameter-space vector, not clipped further) or an input
    example (x, label) whose gradient is clipped like the others; and at which steps (bool mask, (T,))."""

    steps: np.ndarray
    gradient: np.ndarray | None = None
    example: tuple[np.ndarray, int] | None = None

    @property
    def insertions(self) -> int:
        return int(self.steps.sum())


class MlpModel:
    """x -> W2 relu(W1 x + b1) + b2; parameters in nn.Sequential(Linear, ReLU, Linear) order."""

    def __init__(self, features: int, hidden: int) -> None:
        self.features, self.hidden = features, hidden
        self.shapes = [(hidden, features), (hidden,), (N_CLASSES, hidden), (N_CLASSES,)]
        self.size = sum(math.prod(s) for s in self.shapes)

    def unflatten(self, theta: torch.Tensor) -> list[torch.Tensor]:
        out, start = [], 0
        for shape in self.shapes:
            n = math.prod(shape)
            out.append(theta[:, start : start + n].reshape(theta.shape[0], *shape))
            start += n
        return out

    def forward(self, theta: torch.Tensor, x: torch.Tensor) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        import torch

        w1, b1, w2, b2 = self.unflatten(theta)
        z1 = torch.einsum("bd,nhd->nbh", x, w1) + b1[:, None, :]
        a1 = torch.relu(z1)
        logits = torch.einsum("nbh,nch->nbc", a1, w2) + b2[:, None, :]
        return logits, {"z1": z1, "a1": a1}

    def clipped_gradient_sum(
        self, theta: torch.Tensor, x: torch.Tensor, y: torch.Tensor, clip: float
    ) -> torch.Tensor:
        """sum_b min(1, C / ||g_b||) g_b of the per-example cross-entropy gradients, for every run: (N, P).

        With two classes, d CE / d logits = (p_1 - y) (-1, +1), so the backward pass runs on one residual
        per example; every per-example gradient block is an outer product, whose norm is the product of
        norms, so clipping needs no per-example gradient in memory.
        """
        import torch

        w1, b1, w2, b2 = self.unflatten(theta)
        n, h, d = w1.shape
        # layout (B, N, h): the shared batch multiplies all runs' weights in one large matrix product
        z1 = (x @ w1.permute(2, 0, 1).reshape(d, n * h)).reshape(-1, n, h) + b1[None]
        a1 = torch.relu(z1)
        active = (z1 > 0).to(z1.dtype)
        w_diff = w2[:, 1] - w2[:, 0]  # (N, h)
        margin = (a1 * w_diff[None]).sum(-1) + (b2[:, 1] - b2[:, 0])[None]  # (B, N)
        residual = torch.sigmoid(margin) - y[:, None]  # d CE / d logit_1
        # dz1 = residual * w_diff * active, never built: its squared norm is residual^2 (active . w_diff^2)
        dz1_norm2 = residual**2 * (active * (w_diff**2)[None]).sum(-1)
        norm2 = dz1_norm2 * (1.0 + (x * x).sum(-1))[:, None] + 2.0 * residual**2 * (1.0 + (a1 * a1).sum(-1))
        weight = residual * torch.clamp(clip / torch.sqrt(norm2 + 1e-30), max=1.0)  # clipped residual
        gated = active * weight[..., None]  # (B, N, h)
        grad_w1 = (x.T @ gated.reshape(-1, n * h)).reshape(d, n, h).permute(1, 2, 0)  # (N, h, d)
        row = (a1 * weight[..., None]).sum(0)  # (N, h): gradient of w2[1]; w2[0] gets -row
        total = weight.sum(0)[:, None]
        parts = [
            w_diff[:, :, None] * grad_w1,
            w_diff * gated.sum(0),
            torch.stack([-row, row], 1),
            torch.cat([-total, total], 1),
        ]
        return torch.cat([p.reshape(theta.shape[0], -1) for p in parts], dim=1)

    def loss(self, theta: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        import torch

        logits, _ = self.forward(theta, x)
        return -torch.log_softmax(logits, dim=-1)[:, torch.arange(len(y)), y]  # (N, B)


class LogRegModel(MlpModel):
    """Multinomial logistic regression x -> W x + b (two classes): the MLP's output layer alone."""

    def __init__(self, features: int, hidden: int = 0) -> None:
        self.features = features
        self.shapes = [(N_CLASSES, features), (N_CLASSES,)]
        self.size = sum(math.prod(s) for s in self.shapes)

    def forward(self, theta: torch.Tensor, x: torch.Tensor) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        import torch

        w, b = self.unflatten(theta)
        return torch.einsum("bd,ncd->nbc", x, w) + b[:, None, :], {}

    def clipped_gradient_sum(
        self, theta: torch.Tensor, x: torch.Tensor, y: torch.Tensor, clip: float
    ) -> torch.Tensor:
        import torch

        w, b = self.unflatten(theta)
        margin = torch.matmul(x, (w[:, 1] - w[:, 0])[:, :, None])[..., 0] + (b[:, 1] - b[:, 0])[:, None]
        residual = torch.sigmoid(margin) - y
        norm2 = 2.0 * residual**2 * (1.0 + (x * x).sum(-1))
        residual = residual * torch.clamp(clip / torch.sqrt(norm2 + 1e-30), max=1.0)
        row = torch.matmul(residual[:, None, :], x)[:, 0]
        total = residual.sum(1, keepdim=True)
        return torch.cat([-row, row, -total, total], dim=1)


def make_model(config: DpAuditConfig) -> MlpModel:
    if config.model == "mlp":
        return MlpModel(config.features, config.hidden)
    return LogRegModel(config.features)


class DpSgdGame:
    """The data, the initialisation and the noise level of one audit; :meth:`play` trains every run."""

    def __init__(self, config: DpAuditConfig, rng: np.random.Generator, noise_multiplier: float) -> None:
        self.config = config
        self.model = make_model(config)
        self.noise_multiplier = noise_multiplier
        self.x = rng.normal(size=(config.n_data, config.features))
        weights = rng.normal(size=config.features)
        self.y = (self.x @ weights + 0.5 * rng.normal(size=config.n_data) > 0).astype(np.int64)
        bound = 1.0 / math.sqrt(config.features)  # torch.nn.Linear's default initialisation range
        self.theta0 = rng.uniform(-bound, bound, size=self.model.size)
        self._seed = int(rng.integers(2**62))

    @property
    def parameters(self) -> int:
        return self.model.size

    def batch(self, step: int) -> tuple[np.ndarray, np.ndarray]:
        """The known batch of a step: consecutive slices of the data, cycling."""
        per_epoch = max(1, self.config.n_data // self.config.batch_size)
        start = (step % per_epoch) * self.config.batch_size
        return self.x[start : start + self.config.batch_size], self.y[start : start + self.config.batch_size]

    def play(self, canary: Canary | None, members: np.ndarray, noise: bool = True) -> np.ndarray:
        """Train one run per entry of ``members`` (True: the canary is in); return final params (N, P)."""
        import torch

        c = self.config
        generator = torch.Generator().manual_seed(self._seed)
        n = len(members)
        theta = torch.as_tensor(np.tile(self.theta0, (n, 1)), dtype=torch.float32)
        inside = torch.as_tensor(members, dtype=torch.float32)[:, None]
        grad_canary = (
            None
            if canary is None or canary.gradient is None
            else torch.as_tensor(canary.gradient, dtype=torch.float32)
        )
        if canary is not None and canary.example is not None:
            example_x = torch.as_tensor(canary.example[0][None, :], dtype=torch.float32)
            example_y = torch.as_tensor([float(canary.example[1])], dtype=torch.float32)
        batches = [self._tensors(t) for t in range(max(1, c.n_data // c.batch_size))]
        for step in range(c.steps):
            x, y = batches[step % len(batches)]
            total = self.model.clipped_gradient_sum(theta, x, y, c.clip)
            if canary is not None and canary.steps[step]:
                if grad_canary is not None:
                    total = total + inside * grad_canary[None, :]
                else:
                    total = total + inside * self.model.clipped_gradient_sum(
                        theta, example_x, example_y, c.clip
                    )
            if noise:
                total = total + torch.randn(theta.shape, generator=generator, dtype=torch.float32) * (
                    self.noise_multiplier * c.clip
                )
            theta = theta - c.learning_rate * total / c.batch_size
        return theta.numpy()

    def _tensors(self, step: int) -> tuple[torch.Tensor, torch.Tensor]:
        import torch

        x, y = self.batch(step)
        return torch.as_tensor(x, dtype=torch.float32), torch.as_tensor(y, dtype=torch.float32)

    def loss(self, theta: np.ndarray, x: np.ndarray, label: int) -> np.ndarray:
        """Cross-entropy of the example (x, label) under every run's parameters: (N,)."""
        import torch

        params = torch.as_tensor(theta)
        values = self.model.loss(
            params, torch.as_tensor(x[None, :], dtype=params.dtype), torch.as_tensor([label])
        )
        return values[:, 0].numpy()


def noiseless_movement(game: DpSgdGame) -> np.ndarray:
    """Total absolute update of every coordinate in one noiseless, canary-free training: (P,)."""
    import torch

    c = game.config
    theta = torch.as_tensor(game.theta0[None, :], dtype=torch.float32)
    moved = torch.zeros_like(theta)
    for step in range(c.steps):
        x, y = game._tensors(step)
        update = c.learning_rate * game.model.clipped_gradient_sum(theta, x, y, c.clip) / c.batch_size
        moved += update.abs()
        theta = theta - update
    return moved[0].numpy()

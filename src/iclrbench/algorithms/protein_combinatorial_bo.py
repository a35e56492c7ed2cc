"""GameOpt: "Optimistic games for combinatorial Bayesian optimization with application to protein design"
(Bal, Sessa, Mutny, Krause, ICLR 2025).

Each site of the sequence is a player with 20 actions (the letters); every player's payoff is the GP-UCB
value mu(x) + beta sigma(x) of the joint sequence (Sec. 3, Eq. 3). Instead of maximising UCB over the
20^L sequences, GameOpt finds equilibria of this common-payoff game -- sequences from which no single
site gains by changing its letter -- and queries the best of them:

- :class:`GameOptBestResponse`: iterated best response: from a random start, score every single-site
  deviation (all L x 20), move to the best, stop when no deviation improves (a pure Nash equilibrium).
- :class:`GameOptHedge`: every player runs Hedge (multiplicative weights, learning rate 0.5, 400 rounds)
  on the payoffs of its unilateral deviations, which drives play to a coarse correlated equilibrium;
  the last joint strategies played are the candidates.

Both play 3 games from random starts and return the top-B candidates by UCB (beta = 2).

The surrogate (:class:`OneHotGP`) is BoTorch's ``SingleTaskGP`` on one-hot sequences -- RBF kernel with
one lengthscale per (site, letter) (ARD), BoTorch's default priors, standardised outcomes -- fitted by
``fit_gpytorch_mll``. Predictions reuse the fitted hyperparameters in closed form: for one-hot inputs the
squared distance to a training sequence is a sum over sites of a (site, letter, train) table, so UCB of
all L x 20 deviations of a sequence costs table look-ups instead of kernel evaluations.
Protocol of the task (``SequenceOptimizer``): ``ask(n) -> (n, L) int array``, ``tell(X, y)``.
"""

from __future__ import annotations

import dataclasses
import warnings
from typing import Any

import numpy as np

from iclrbench.core.algorithm import Algorithm, register_algorithm
from iclrbench.core.config import param
from iclrbench.envs.protein_combinatorial_bo import N_LETTERS, ProteinConfig

TASK = "protein-combinatorial-bo"


class SequenceOptimizer(Algorithm):
    """Base of this task's algorithms: ``ask(n)`` proposes n sequences, ``tell(X, y)`` shows results.

    ``acquisition_evaluations`` is the number of acquisition (UCB) values the last ``ask`` computed.
    """

    config: ProteinConfig

    def __init__(self, params: Any, config: ProteinConfig, rng: np.random.Generator) -> None:
        super().__init__(params, config, rng)
        self.length = config.sequence_length
        self.X = np.zeros((0, self.length), dtype=np.int64)
        self.y = np.zeros(0)
        self.acquisition_evaluations = 0

    def tell(self, X: np.ndarray, y: np.ndarray) -> None:
        self.X = np.concatenate([self.X, X])
        self.y = np.concatenate([self.y, y])

    def ask(self, n: int) -> np.ndarray:
        raise TypeError(f"{type(self).__name__} must implement ask()")

    def random_sequences(self, n: int) -> np.ndarray:
        return self.rng.integers(0, N_LETTERS, size=(n, self.length))

    def select_unseen(self, candidates: np.ndarray, scores: np.ndarray, n: int) -> np.ndarray:
        """The n best-scoring distinct candidates not queried before, topped up at random if short."""
        seen = {row.tobytes() for row in self.X}
        chosen: list[np.ndarray] = []
        for index in np.argsort(-scores, kind="stable"):
            key = candidates[index].tobytes()
            if key not in seen:
                seen.add(key)
                chosen.append(candidates[index])
                if len(chosen) == n:
                    break
        while len(chosen) < n:
            row = self.random_sequences(1)[0]
            if row.tobytes() not in seen:
                seen.add(row.tobytes())
                chosen.append(row)
        return np.stack(chosen)


class OneHotGP:
    """A fitted GP on one-hot sequences and its UCB (see the module docstring)."""

    def __init__(self, X: np.ndarray, y: np.ndarray, *, beta: float = 2.0, maxiter: int = 50) -> None:
        import torch
        from botorch.fit import fit_gpytorch_mll
        from botorch.models import SingleTaskGP
        from gpytorch.mlls import ExactMarginalLogLikelihood

        self.beta, self.evaluations = beta, 0
        self.train = X
        n, length = X.shape
        one_hot = torch.nn.functional.one_hot(torch.as_tensor(X), N_LETTERS).reshape(n, -1).double()
        targets = torch.as_tensor(y, dtype=torch.double).unsqueeze(-1)
        model = SingleTaskGP(one_hot, targets)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # BoTorch's optimisation and input-data warnings
            fit_gpytorch_mll(
                ExactMarginalLogLikelihood(model.likelihood, model),
                optimizer_kwargs={"options": {"maxiter": maxiter}},
            )
        self.model = model
        kernel = model.covar_module
        self.outputscale = float(kernel.outputscale) if hasattr(kernel, "outputscale") else 1.0
        base = kernel.base_kernel if hasattr(kernel, "base_kernel") else kernel
        inv_sq = (1.0 / base.lengthscale.detach().double().reshape(length, N_LETTERS) ** 2).numpy()
        # table[i, a, j]: squared scaled distance contributed by site i between letter a and train j
        own = inv_sq[np.arange(length)[:, None], X.T]  # (L, n): weight of train j's own letter at i
        self.table = np.where(
            np.arange(N_LETTERS)[None, :, None] == X.T[:, None, :], 0.0, inv_sq[:, :, None] + own[:, None, :]
        )
        self.mean = float(model.mean_module.constant.detach())
        noise = float(model.likelihood.noise.detach())
        gram = self._kernel_from_distance(self.distances(X)) + noise * np.eye(n)
        self.chol = np.linalg.cholesky(gram)
        from scipy.linalg import cho_solve, solve_triangular  # here: bench list never loads scipy

        # L^{-1} once, so each prediction's variance is one matrix product instead of a triangular solve
        self.chol_inv = solve_triangular(self.chol, np.eye(n), lower=True)
        standardized = model.train_targets.detach().double().numpy()
        self.alpha = cho_solve((self.chol, True), standardized - self.mean)
        transform = model.outcome_transform
        self.y_mean = float(transform.means.squeeze())
        self.y_std = float(transform.stdvs.squeeze())

    def _kernel_from_distance(self, distance: np.ndarray) -> np.ndarray:
        return self.outputscale * np.exp(-0.5 * distance)

    def distances(self, X: np.ndarray) -> np.ndarray:
        """Scaled squared distances (N, n) from sequences X to the training sequences."""
        length = X.shape[1]
        return self.table[np.arange(length)[None, :], X].sum(axis=1)

    def predict_from_distance(self, distance: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Posterior mean and standard deviation, standardised units, from (N, n) distances."""
        k = self._kernel_from_distance(distance)
        mean = self.mean + k @ self.alpha
        v = self.chol_inv @ k.T
        var = np.maximum(self.outputscale - (v * v).sum(axis=0), 1e-12)
        return mean, np.sqrt(var)

    def ucb(self, X: np.ndarray, chunk: int = 20_000) -> np.ndarray:
        """mu + beta sigma in the units of the observations, for every row of X."""
        out = np.empty(len(X))
        for start in range(0, len(X), chunk):
            mean, sd = self.predict_from_distance(self.distances(X[start : start + chunk]))
            out[start : start + chunk] = (mean + self.beta * sd) * self.y_std + self.y_mean
        self.evaluations += len(X)
        return out

    def deviation_ucb(self, base: np.ndarray, standardized: bool = False) -> np.ndarray:
        """UCB of every single-site deviation of each base sequence: (G, L) -> (G, L, 20)."""
        games, length = base.shape
        site = np.arange(length)
        base_distance = self.table[site[None, :], base].sum(axis=1)  # (G, n)
        own = self.table[site[None, :], base]  # (G, L, n)
        distance = base_distance[:, None, None, :] - own[:, :, None, :] + self.table[None]  # (G, L, 20, n)
        mean, sd = self.predict_from_distance(distance.reshape(-1, distance.shape[-1]))
        self.evaluations += mean.size
        value = mean + self.beta * sd
        if not standardized:
            value = value * self.y_std + self.y_mean
        return value.reshape(games, length, N_LETTERS)


def deviations(base: np.ndarray) -> np.ndarray:
    """Every single-site deviation of each base sequence: (G, L) -> (G, L, 20, L)."""
    length = base.shape[1]
    out = np.repeat(base[:, None, None, :], length, axis=1).repeat(N_LETTERS, axis=2)
    site = np.arange(length)
    out[:, site, :, site] = np.arange(N_LETTERS)[None, None, :]
    return out


@dataclasses.dataclass(frozen=True)
class GameOptParams:
    beta: float = param(2.0, "UCB exploration weight: payoff mu + beta sigma", low=0.0)
    games: int = param(3, "games played from random starts per round", low=1, high=64)
    max_iterations: int = param(50, "best-response steps per game before giving up on convergence", low=1)
    gp_maxiter: int = param(50, "L-BFGS iterations of the GP hyperparameter fit", low=1)


class _GameOptBase(SequenceOptimizer):
    Params: Any = GameOptParams

    def fit(self) -> OneHotGP:
        return OneHotGP(self.X, self.y, beta=self.params.beta, maxiter=self.params.gp_maxiter)


@register_algorithm(task=TASK, name="gameopt-ibr", role="reference")
class GameOptBestResponse(_GameOptBase):
    """GameOpt with iterated best response to pure Nash equilibria of the UCB game (Sec. 3, Alg. 1)."""

    def ask(self, n: int) -> np.ndarray:
        gp = self.fit()
        _, pool_x, pool_u = best_response_equilibria(
            gp, self.random_sequences(self.params.games), self.params.max_iterations
        )
        self.acquisition_evaluations = gp.evaluations
        # equilibria first (their payoff is the best of their neighbourhood), then the neighbourhoods
        return self.select_unseen(pool_x, pool_u, n)


def best_response_equilibria(
    gp: OneHotGP, starts: np.ndarray, max_iterations: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Iterated best response in the UCB game, all games at once.

    Each step scores every single-site deviation (L x 20) of each unconverged game and moves to the best
    one; a game stops when no deviation beats its current sequence -- a pure Nash equilibrium of the
    common-payoff game (or after ``max_iterations``). Returns the final sequences and every scored
    (sequence, UCB) pair.
    """
    current = starts.copy()
    games, length = current.shape
    active = np.ones(games, dtype=bool)
    pool_x, pool_u = [], []
    for _ in range(max_iterations):
        idx = np.flatnonzero(active)
        values = gp.deviation_ucb(current[idx]).reshape(len(idx), -1)  # (g, L * 20)
        best = values.argmax(axis=1)
        here = values[np.arange(len(idx)), current[idx, 0]]  # site 0 keeping its letter: unchanged
        improves = values[np.arange(len(idx)), best] > here + 1e-12
        pool_x.append(deviations(current[idx]).reshape(-1, length))
        pool_u.append(values.reshape(-1))
        site, letter = np.divmod(best[improves], N_LETTERS)
        current[idx[improves], site] = letter
        active[idx[~improves]] = False
        if not active.any():
            break
    return current, np.concatenate(pool_x), np.concatenate(pool_u)


@dataclasses.dataclass(frozen=True)
class HedgeParams:
    beta: float = param(2.0, "UCB exploration weight: payoff mu + beta sigma", low=0.0)
    games: int = param(3, "games played from random starts per round", low=1, high=64)
    hedge_rounds: int = param(400, "rounds of Hedge dynamics per game", low=1)
    learning_rate: float = param(0.5, "Hedge learning rate (on standardised UCB payoffs)", low=1e-6)
    tail: int = param(20, "last joint strategies of each game kept as candidates", low=1)
    gp_maxiter: int = param(50, "L-BFGS iterations of the GP hyperparameter fit", low=1)


@register_algorithm(task=TASK, name="gameopt-hedge", role="reference")
class GameOptHedge(_GameOptBase):
    """GameOpt with Hedge dynamics toward a coarse correlated equilibrium of the UCB game (Sec. 3)."""

    Params = HedgeParams

    def ask(self, n: int) -> np.ndarray:
        p = self.params
        gp = self.fit()
        log_weights = np.zeros((p.games, self.length, N_LETTERS))
        played = []
        for _ in range(p.hedge_rounds):
            probs = np.exp(log_weights - log_weights.max(axis=-1, keepdims=True))
            probs /= probs.sum(axis=-1, keepdims=True)
            draws = self.rng.random((p.games, self.length, 1))
            joint = (probs.cumsum(axis=-1) < draws).sum(axis=-1).clip(0, N_LETTERS - 1)
            played.append(joint)
            log_weights += p.learning_rate * gp.deviation_ucb(joint, standardized=True)
        modes = log_weights.argmax(axis=-1)
        candidates = np.concatenate([modes, *played[-p.tail :]])
        scores = gp.ucb(candidates)
        self.acquisition_evaluations = gp.evaluations
        return self.select_unseen(candidates, scores, n)

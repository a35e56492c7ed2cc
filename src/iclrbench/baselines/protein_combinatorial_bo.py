"""Baselines for protein-combinatorial-bo (the TASKS.md card; Bal et al., ICLR 2025, Sec. 5).

All model-based baselines maximise the same GP-UCB (beta = 2) as GameOpt, through the same
:class:`~iclrbench.algorithms.protein_combinatorial_bo.OneHotGP`; only the acquisition optimiser differs:

- ``random-search``: B uniformly random sequences a round, no model.
- ``exhaustive-ucb``: UCB of every sequence (enumerable spaces only: 20^4 = 160,000), the top B.
- ``local-search-ucb``: stochastic hill climbing on UCB from the best observed sequences.
- ``genetic-ucb``: a genetic algorithm on UCB (tournament selection, uniform crossover, 1/L mutation).
- ``botorch-local-search``: BoTorch's ``optimize_acqf_discrete_local_search`` (sequential greedy q-batch).
- ``greedy-mutation``: all single mutants of the best observed sequence, the top B by UCB.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from iclrbench.algorithms.protein_combinatorial_bo import TASK, OneHotGP, SequenceOptimizer, deviations
from iclrbench.core.algorithm import register_algorithm
from iclrbench.core.config import param
from iclrbench.envs.protein_combinatorial_bo import ENUMERABLE_LIMIT, N_LETTERS, ProteinConfig


@dataclasses.dataclass(frozen=True)
class UcbParams:
    beta: float = param(2.0, "UCB exploration weight: mu + beta sigma", low=0.0)
    gp_maxiter: int = param(50, "L-BFGS iterations of the GP hyperparameter fit", low=1)


class _UcbBaseline(SequenceOptimizer):
    Params: Any = UcbParams

    def fit(self) -> OneHotGP:
        return OneHotGP(self.X, self.y, beta=self.params.beta, maxiter=self.params.gp_maxiter)


@register_algorithm(task=TASK, name="random-search", role="baseline")
class RandomSearch(SequenceOptimizer):
    """B uniformly random sequences a round."""

    def ask(self, n: int) -> np.ndarray:
        self.acquisition_evaluations = 0
        return self.select_unseen(self.random_sequences(n), np.zeros(n), n)


@register_algorithm(task=TASK, name="exhaustive-ucb", role="baseline")
class ExhaustiveUcb(_UcbBaseline):
    """GP-UCB maximised exactly: every sequence of an enumerable space scored, the top B queried."""

    @classmethod
    def supports(cls, config: ProteinConfig) -> str | None:
        size = N_LETTERS**config.sequence_length
        return None if size <= ENUMERABLE_LIMIT else f"20^{config.sequence_length} sequences: not enumerable"

    def ask(self, n: int) -> np.ndarray:
        gp = self.fit()
        everything = np.indices((N_LETTERS,) * self.length).reshape(self.length, -1).T
        scores = gp.ucb(everything)
        self.acquisition_evaluations = gp.evaluations
        return self.select_unseen(everything, scores, n)


@dataclasses.dataclass(frozen=True)
class LocalSearchParams(UcbParams):
    starts: int = param(3, "hill climbs per round, from the best observed sequences", low=1)
    neighbours: int = param(20, "random single mutants scored per step", low=1)
    evaluation_budget: int = param(2000, "UCB evaluations per round", low=1)


@register_algorithm(task=TASK, name="local-search-ucb", role="baseline")
class LocalSearchUcb(_UcbBaseline):
    """Stochastic hill climbing on UCB: from the best observed sequences, move to the best of a few
    random single mutants while it improves, within an evaluation budget."""

    Params = LocalSearchParams

    def ask(self, n: int) -> np.ndarray:
        p = self.params
        gp = self.fit()
        current = self.X[np.argsort(-self.y, kind="stable")[: p.starts]].copy()
        value = gp.ucb(current)
        pool_x, pool_u = [current.copy()], [value.copy()]
        while gp.evaluations + len(current) * p.neighbours <= p.evaluation_budget:
            g = len(current)
            mutants = np.repeat(current[:, None, :], p.neighbours, axis=1)
            sites = self.rng.integers(0, self.length, size=(g, p.neighbours))
            letters = self.rng.integers(0, N_LETTERS, size=(g, p.neighbours))
            mutants[np.arange(g)[:, None], np.arange(p.neighbours)[None, :], sites] = letters
            scores = gp.ucb(mutants.reshape(-1, self.length)).reshape(g, p.neighbours)
            pool_x.append(mutants.reshape(-1, self.length))
            pool_u.append(scores.reshape(-1))
            best = scores.argmax(axis=1)
            better = scores[np.arange(g), best] > value
            current[better] = mutants[np.arange(g), best][better]
            value[better] = scores[np.arange(g), best][better]
        self.acquisition_evaluations = gp.evaluations
        return self.select_unseen(np.concatenate(pool_x), np.concatenate(pool_u), n)


@dataclasses.dataclass(frozen=True)
class GeneticParams(UcbParams):
    population: int = param(64, "population size", low=4)
    generations: int = param(30, "generations per round", low=1)


@register_algorithm(task=TASK, name="genetic-ucb", role="baseline")
class GeneticUcb(_UcbBaseline):
    """A genetic algorithm on UCB: binary tournaments, uniform crossover, mutation rate 1/L, elitism."""

    Params = GeneticParams

    def ask(self, n: int) -> np.ndarray:
        p = self.params
        gp = self.fit()
        elite = self.X[np.argsort(-self.y, kind="stable")[: p.population // 2]]
        population = np.concatenate([elite, self.random_sequences(p.population - len(elite))])
        fitness = gp.ucb(population)
        pool_x, pool_u = [population], [fitness]
        for _ in range(p.generations):
            a, b = self.rng.integers(0, p.population, size=(2, p.population, 2))
            parent_a = np.where(fitness[a[:, 0]] >= fitness[a[:, 1]], a[:, 0], a[:, 1])
            parent_b = np.where(fitness[b[:, 0]] >= fitness[b[:, 1]], b[:, 0], b[:, 1])
            mask = self.rng.random((p.population, self.length)) < 0.5
            children = np.where(mask, population[parent_a], population[parent_b])
            mutate = self.rng.random(children.shape) < 1.0 / self.length
            children[mutate] = self.rng.integers(0, N_LETTERS, size=int(mutate.sum()))
            child_fitness = gp.ucb(children)
            pool_x.append(children)
            pool_u.append(child_fitness)
            keep = np.argsort(-np.concatenate([fitness, child_fitness]), kind="stable")[: p.population]
            population = np.concatenate([population, children])[keep]
            fitness = np.concatenate([fitness, child_fitness])[keep]
        self.acquisition_evaluations = gp.evaluations
        return self.select_unseen(np.concatenate(pool_x), np.concatenate(pool_u), n)


@dataclasses.dataclass(frozen=True)
class BotorchLocalParams(UcbParams):
    num_restarts: int = param(3, "local searches per candidate", low=1)
    raw_samples: int = param(256, "random sequences scored to pick the starts", low=1)


@register_algorithm(task=TASK, name="botorch-local-search", role="baseline")
class BotorchDiscreteLocalSearch(_UcbBaseline):
    """BoTorch's ``optimize_acqf_discrete_local_search`` on UCB over integer-coded sequences."""

    Params = BotorchLocalParams

    def ask(self, n: int) -> np.ndarray:
        import torch
        from botorch.acquisition import AcquisitionFunction
        from botorch.optim.optimize import optimize_acqf_discrete_local_search

        gp = self.fit()

        class IntegerCodedUcb(AcquisitionFunction):
            """UCB of integer-coded sequences; pending points are ignored (top-B, as GameOpt)."""

            def __init__(self, model: Any) -> None:
                super().__init__(model)
                self.X_pending = None

            def forward(self, X: torch.Tensor) -> torch.Tensor:
                flat = X.reshape(-1, X.shape[-1]).round().long().numpy()
                return torch.as_tensor(gp.ucb(flat), dtype=X.dtype).reshape(X.shape[:-2])

        torch.manual_seed(int(self.rng.integers(2**31)))  # its starting points come from torch's RNG
        choices = [torch.arange(N_LETTERS, dtype=torch.double)] * self.length
        candidates, _ = optimize_acqf_discrete_local_search(
            IntegerCodedUcb(gp.model),
            choices,
            q=n,
            num_restarts=self.params.num_restarts,
            raw_samples=self.params.raw_samples,
            X_avoid=torch.as_tensor(self.X, dtype=torch.double),
            return_acq_values=False,
        )
        self.acquisition_evaluations = gp.evaluations
        proposed = candidates.round().long().numpy()
        return self.select_unseen(proposed, -np.arange(len(proposed), dtype=float), n)


@register_algorithm(task=TASK, name="greedy-mutation", role="baseline")
class GreedyMutation(_UcbBaseline):
    """All single mutants of the best observed sequence, the top B by UCB."""

    def ask(self, n: int) -> np.ndarray:
        gp = self.fit()
        best = self.X[[int(np.argmax(self.y))]]
        mutants = deviations(best).reshape(-1, self.length)
        scores = gp.ucb(mutants)
        self.acquisition_evaluations = gp.evaluations
        return self.select_unseen(mutants, scores, n)

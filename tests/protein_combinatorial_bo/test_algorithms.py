"""GameOpt and the baselines: the surrogate's known answers, equilibrium invariants, determinism."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from iclrbench.algorithms.protein_combinatorial_bo import (
    GameOptBestResponse,
    GameOptHedge,
    OneHotGP,
    best_response_equilibria,
    deviations,
)
from iclrbench.baselines.protein_combinatorial_bo import ExhaustiveUcb, GreedyMutation, RandomSearch
from iclrbench.core import catalog
from iclrbench.core import config as cfg
from iclrbench.envs.protein_combinatorial_bo import ProteinConfig, SequenceBlackBox

TASK = "protein-combinatorial-bo"


@pytest.fixture(scope="module")
def gp() -> OneHotGP:
    rng = np.random.default_rng(0)
    X = rng.integers(0, 20, size=(30, 5))
    return OneHotGP(X, np.sin(X.sum(axis=1) / 7.0) + 0.1 * rng.normal(size=30))


def test_closed_form_ucb_matches_botorch_posterior(gp: OneHotGP) -> None:
    candidates = np.random.default_rng(1).integers(0, 20, size=(300, 5))
    ours = gp.ucb(candidates)
    gp.model.eval()
    one_hot = torch.nn.functional.one_hot(torch.as_tensor(candidates), 20).reshape(300, -1).double()
    with torch.no_grad():
        post = gp.model.posterior(one_hot)
    reference = (post.mean.squeeze(-1) + 2.0 * post.variance.squeeze(-1).sqrt()).numpy()
    assert np.allclose(ours, reference, atol=1e-9)


def test_deviation_ucb_equals_ucb_of_explicit_deviations(gp: OneHotGP) -> None:
    base = np.random.default_rng(2).integers(0, 20, size=(3, 5))
    assert np.allclose(gp.deviation_ucb(base).reshape(-1), gp.ucb(deviations(base).reshape(-1, 5)))


def test_deviations_change_exactly_one_site() -> None:
    base = np.array([[3, 1, 4, 1]])
    dev = deviations(base)
    changed = (dev != base[:, None, None, :]).sum(axis=-1)
    assert dev.shape == (1, 4, 20, 4) and changed.max() == 1 and (changed == 0).sum() == 4


def test_best_response_ends_in_pure_nash_equilibria(gp: OneHotGP) -> None:
    starts = np.random.default_rng(3).integers(0, 20, size=(4, 5))
    final, pool_x, pool_u = best_response_equilibria(gp, starts, max_iterations=100)
    for x in final:
        own = gp.ucb(x[None])[0]
        assert gp.deviation_ucb(x[None]).max() <= own + 1e-9, "no single site can improve UCB"
    assert len(pool_x) == len(pool_u)


def test_gameopt_uses_far_fewer_evaluations_than_exhaustive() -> None:
    config = cfg.build(ProteinConfig, {"landscape": "gb1-4"})
    box = SequenceBlackBox(config, np.random.default_rng(0))
    start = np.random.default_rng(1).integers(0, 20, size=(12, 4))
    y = box.observe(start)
    game = GameOptBestResponse(GameOptBestResponse.Params(), config, np.random.default_rng(0))
    full = ExhaustiveUcb(ExhaustiveUcb.Params(), config, np.random.default_rng(0))
    for algo in (game, full):
        algo.tell(start, y)
        batch = algo.ask(5)
        assert batch.shape == (5, 4) and len({r.tobytes() for r in batch}) == 5
        assert not ({r.tobytes() for r in batch} & {r.tobytes() for r in start})
    assert full.acquisition_evaluations == 20**4
    assert game.acquisition_evaluations * 10 < full.acquisition_evaluations


@pytest.mark.parametrize("cls", [GameOptBestResponse, GameOptHedge, RandomSearch, GreedyMutation])
def test_same_seed_same_batch(cls: type) -> None:
    config = cfg.build(ProteinConfig, {"landscape": "nk", "length": 8})
    start = np.random.default_rng(4).integers(0, 20, size=(10, 8))
    y = SequenceBlackBox(config, np.random.default_rng(0)).observe(start)
    params = cls.Params() if cls is not GameOptHedge else cls.Params(hedge_rounds=30)
    batches = []
    for _ in range(2):
        algo = cls(params, config, np.random.default_rng(7))
        algo.tell(start, y)
        batches.append(algo.ask(4))
    assert np.array_equal(batches[0], batches[1])


def test_exhaustive_refuses_spaces_it_cannot_enumerate() -> None:
    config = cfg.build(ProteinConfig, {"landscape": "ehrlich", "length": 32})
    assert "not enumerable" in (catalog.get_algorithm(TASK, "exhaustive-ucb").supports(config) or "")

"""Speed of icl-circuit's ablations: every mask of one layer range (the five step masks and the random
control) over 1,000 episodes of the small subject's shape (4 layers, d=128), each in one batched forward
pass per mask, side by side with one episode at a time; both read out the same :class:`Trace` (asserted).
``make perf`` prints them; ``extra_info`` holds the ratio. The weights are untrained: timing does not
depend on them."""

from __future__ import annotations

import numpy as np
import pytest

from iclrbench.algorithms.icl_circuit import ABLATIONS
from iclrbench.baselines.icl_circuit import RandomControl, RandomControlParams
from iclrbench.envs import icl_circuit as env
from iclrbench.envs.icl_circuit.subjects import trace_tiny

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.long  # one episode at a time: ~6,000 forward passes
CONFIG = env.IclCircuitConfig(layers="upper")
FIGURES: dict[str, float] = {}


@pytest.fixture(scope="module")
def setup() -> tuple[object, env.Episodes, list[dict[int, np.ndarray]]]:
    torch.manual_seed(0)
    model = env.make_model(CONFIG).eval()
    episodes = env.sample_episodes(CONFIG, 1000, np.random.default_rng(0))
    rng = np.random.default_rng(0)
    ablations = [ABLATIONS[m](None, CONFIG, rng) for m in env.MASKS if m != "none"]
    ablations.append(RandomControl(RandomControlParams(), CONFIG, rng))
    return model, episodes, [a.masks(episodes) for a in ablations]


def _all_masks(setup, size: int) -> list:  # type: ignore[no-untyped-def]
    model, episodes, masks = setup
    return [trace_tiny(model, episodes, m, size) for m in masks]


def test_all_ablations_batched(benchmark, setup, single_thread) -> None:  # type: ignore[no-untyped-def]
    benchmark.group = "icl-circuit: 6 ablations x 1,000 episodes"
    traces = benchmark.pedantic(_all_masks, args=(setup, 1000), rounds=3, iterations=1)
    FIGURES["batched"] = benchmark.stats.stats.median if benchmark.stats else 0.0
    FIGURES["accuracy"] = float(traces[3].label_logits.sum())
    one = _all_masks(setup, 1)  # the same numbers one episode at a time
    for a, b in zip(traces, one, strict=True):
        np.testing.assert_allclose(a.label_logits, b.label_logits, rtol=1e-4, atol=1e-5)


def test_all_ablations_one_episode_at_a_time(benchmark, setup, single_thread) -> None:  # type: ignore[no-untyped-def]
    benchmark.group = "icl-circuit: 6 ablations x 1,000 episodes"
    benchmark.pedantic(_all_masks, args=(setup, 1), rounds=1, iterations=1)
    if FIGURES.get("batched") and benchmark.stats:
        benchmark.extra_info["one at a time / batched"] = round(
            benchmark.stats.stats.median / FIGURES["batched"], 1
        )

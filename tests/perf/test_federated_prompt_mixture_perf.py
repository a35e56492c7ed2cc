"""Speed of federated-prompt-mixture's engine: one warm federated round of pFedMoAP with 10 clients (the
pathological split at `small`) in Flower's simulation runtime, and the same round's client computation
without Flower (the clients' ``local_train`` one after another in this process). ``extra_info`` holds the
warm round's seconds and the engine's overhead as a ratio (Flower round / plain round); the Flower run
runs 2 virtual clients at once, the plain round one at a time. ``make perf`` prints the figures."""

from __future__ import annotations

import numpy as np
import pytest

from iclrbench.algorithms.federated_prompt_mixture import PFedMoAP, PFedMoAPParams
from iclrbench.algorithms.federated_prompt_mixture.flower import RunSettings, local_data, simulate
from iclrbench.benchmarks.federated_prompt_mixture import FederatedPromptTask
from iclrbench.core import config as cfg
from iclrbench.core.seeding import seed_for

pytest.importorskip("flwr")
pytestmark = [pytest.mark.usefixtures("single_thread"), pytest.mark.long]  # ~1 min: Ray and MiniLM
CONFIG = FederatedPromptTask().make_config("small", {"split": "pathological", "rounds": 2})
SETTINGS = RunSettings("pfedmoap", {}, cfg.as_dict(CONFIG), 0)
FIGURES: dict[str, float] = {}


def plain_rounds(rounds: int) -> list[float]:
    """pFedMoAP's rounds without Flower: the server half and every client's local_train in this process;
    returns each round's seconds."""
    import time

    method = PFedMoAP(PFedMoAPParams(), CONFIG, np.random.default_rng(0))
    state = method.init_server(CONFIG, 0)
    local: dict[int, dict[str, np.ndarray]] = {c: {} for c in range(CONFIG.clients)}
    data = {c: local_data(SETTINGS.to_json(), c) for c in range(CONFIG.clients)}
    seconds = []
    for round_ in range(1, rounds + 1):
        started = time.perf_counter()
        uploads = {}
        for c in range(CONFIG.clients):
            seed = seed_for(0, "client", str(c), str(round_))
            upload, local[c] = method.local_train(data[c], method.downlink(state, c, round_), local[c], seed)
            uploads[c] = (upload, len(data[c].train_y))
        method.aggregate(state, uploads, round_)
        seconds.append(time.perf_counter() - started)
    return seconds


def test_pfedmoap_round_without_flower(benchmark) -> None:  # type: ignore[no-untyped-def]
    rounds = benchmark.pedantic(plain_rounds, args=(2,), rounds=1, iterations=1)
    FIGURES["plain_round_seconds"] = rounds[-1]  # the warm round, with experts
    benchmark.extra_info["warm_round_seconds"] = round(rounds[-1], 3)


def test_pfedmoap_round_on_flower(benchmark) -> None:  # type: ignore[no-untyped-def]
    log = benchmark.pedantic(simulate, args=(SETTINGS, 2), rounds=1, iterations=1)
    warm = log.round_seconds[-1]
    benchmark.extra_info["warm_round_seconds"] = round(warm, 3)
    benchmark.extra_info["first_round_seconds"] = round(log.round_seconds[0], 3)
    if "plain_round_seconds" in FIGURES:
        benchmark.extra_info["flower_over_plain"] = round(warm / FIGURES["plain_round_seconds"], 3)
    assert len(log.accuracy) == CONFIG.clients

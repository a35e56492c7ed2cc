from __future__ import annotations

from pathlib import Path

import pytest

from iclrbench import runner
from iclrbench.core.errors import UserError
from iclrbench.core.store import ResultStore

TASK = "contextual-bilateral-trade"


@pytest.mark.parametrize(
    ("text", "seeds"), [("0-4", [0, 1, 2, 3, 4]), ("0,3,7", [0, 3, 7]), ("0-2,9", [0, 1, 2, 9]), ("5", [5])]
)
def test_parse_seeds(text: str, seeds: list[int]) -> None:
    assert runner.parse_seeds(text) == seeds


@pytest.mark.parametrize("text", ["", "a", "4-2", "-1", "1,,2", "0-99999999", "1.5"])
def test_malformed_seeds(text: str) -> None:
    with pytest.raises(UserError, match="--seeds"):
        runner.parse_seeds(text)


def test_parse_sets() -> None:
    assert runner.parse_sets(["d=8", "horizon = 1e5"]) == {"d": "8", "horizon": "1e5"}
    with pytest.raises(UserError, match="expected KEY=VALUE"):
        runner.parse_sets(["d"])


def test_sets_route_to_config_and_params() -> None:
    specs = runner.plan(
        TASK, ["ellipsoid-sbb", "random-price"], [0], "smoke", {"d": "3", "epsilon_scale": "2"}
    )
    by_algo = {s.algorithm: s for s in specs}
    assert by_algo["ellipsoid-sbb"].params == {"epsilon_scale": 2.0}
    assert by_algo["random-price"].params == {}
    assert all(s.config["d"] == 3 for s in specs)


def test_unknown_set_key_is_reported_with_a_suggestion() -> None:
    with pytest.raises(UserError, match="did you mean 'horizon'"):
        runner.plan(TASK, ["ellipsoid-sbb"], [0], "smoke", {"horizn": "10"})


def test_unsupported_algorithm_is_an_error_unless_skipping() -> None:
    with pytest.raises(UserError, match="needs global budget balance"):
        runner.plan(TASK, ["one-bit-gbb"], [0], "smoke")
    skipped: list[str] = []
    assert (
        runner.plan(
            TASK,
            ["one-bit-gbb"],
            [0],
            "smoke",
            skip_unsupported=True,
            on_skip=lambda n, why: skipped.append(n),
        )
        == []
    )
    assert skipped == ["one-bit-gbb"]


def test_stored_runs_are_reused_and_force_redoes(db: Path) -> None:
    specs = runner.plan(TASK, ["random-price"], [0, 1], "smoke", {"horizon": "200"})
    with ResultStore(db) as store:
        first = runner.run_specs(specs, store)
        assert (first.ran, first.reused) == (2, 0)
        second = runner.run_specs(specs, store)
        assert (second.ran, second.reused) == (0, 2)
        assert sorted(r.metrics["regret"] for r in first.results) == sorted(
            r.metrics["regret"] for r in second.results
        )
        forced = runner.run_specs(specs, store, force=True)
        assert forced.ran == 2 and store.count() == 2


def test_a_failed_run_is_stored_then_retried(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from iclrbench.baselines.contextual_bilateral_trade import RandomPrice

    specs = runner.plan(TASK, ["random-price"], [0], "smoke", {"horizon": "100"})

    def explode(self: RandomPrice, market: object) -> None:
        raise RuntimeError("numerical blow-up")

    with ResultStore(db) as store:
        monkeypatch.setattr(RandomPrice, "play", explode)
        report = runner.run_specs(specs, store)
        assert report.failed == 1
        stored = store.get(specs[0].key)
        assert stored is not None and stored.status == "failed"
        assert stored.error == "RuntimeError: numerical blow-up"
        monkeypatch.undo()
        retry = runner.run_specs(specs, store)
        assert retry.ran == 1 and retry.failed == 0
        stored = store.get(specs[0].key)
        assert stored is not None and stored.status == "ok"


def test_a_failing_seed_in_a_batch_does_not_sink_the_others(monkeypatch: pytest.MonkeyPatch) -> None:
    from iclrbench.benchmarks.contextual_bilateral_trade import BilateralTradeTask

    specs = runner.plan(TASK, ["ellipsoid-sbb"], [0, 1, 2], "smoke", {"horizon": "300"})
    original = BilateralTradeTask.evaluate_many

    def fails_on_seed_1(self, algorithms, config, seeds):  # type: ignore[no-untyped-def]
        if 1 in seeds:
            raise FloatingPointError("seed 1 diverged")
        return original(self, algorithms, config, seeds)

    monkeypatch.setattr(BilateralTradeTask, "evaluate_many", fails_on_seed_1)
    results = runner.execute_batch(specs)
    assert [r.status for r in results] == ["ok", "failed", "ok"]
    assert results[1].error == "FloatingPointError: seed 1 diverged"


def test_batched_and_single_runs_store_the_same_numbers() -> None:
    specs = runner.plan(TASK, ["ellipsoid-sbb"], [0, 1, 2, 3], "smoke", {"horizon": "2000"})
    batched = runner.execute_batch(specs)
    alone = [runner.execute(s) for s in specs]
    for b, a in zip(batched, alone, strict=True):
        assert b.metrics["regret"] == a.metrics["regret"]
        assert b.curves == a.curves
        assert b.provenance["batch"] == 4 and a.provenance["batch"] == 1


def test_process_pool_gives_the_same_results(db: Path) -> None:
    specs = runner.plan(TASK, ["ellipsoid-sbb", "random-price"], [0, 1], "smoke", {"horizon": "500"})
    with ResultStore(db) as store:
        parallel = runner.run_specs(specs, store, jobs=2)
    serial = [runner.execute(s) for s in specs]
    got = {(r.algorithm, r.seed): r.metrics["regret"] for r in parallel.results}
    assert got == {(r.algorithm, r.seed): r.metrics["regret"] for r in serial}


def test_interrupt_keeps_finished_runs(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    specs = runner.plan(TASK, ["random-price", "ellipsoid-sbb"], [0], "smoke", {"horizon": "100"})
    calls = {"n": 0}
    real = runner.execute_batch

    def interrupt_second(batch: list[runner.RunSpec]) -> list:  # type: ignore[type-arg]
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt
        return real(batch)

    monkeypatch.setattr(runner, "execute_batch", interrupt_second)
    with ResultStore(db) as store, pytest.raises(KeyboardInterrupt):
        runner.run_specs(specs, store)
    with ResultStore(db) as store:
        assert store.count() == 1 and store.integrity() == "ok"

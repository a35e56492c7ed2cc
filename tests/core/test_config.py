from __future__ import annotations

import dataclasses
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from iclrbench.core import config as cfg
from iclrbench.core.errors import UserError
from iclrbench.core.seeding import rng_for, seed_for


@dataclasses.dataclass(frozen=True)
class Example:
    n: int = cfg.param(3, "a count", low=1, high=100)
    rate: float = cfg.param(0.5, "a rate", low=0.0, high=1.0)
    mode: str = cfg.param("a", "a mode", choices=("a", "b"))
    flag: bool = cfg.param(False, "a flag")


def test_defaults_and_string_overrides_are_typed() -> None:
    built = cfg.build(Example, {"n": "1e1", "rate": "0.25", "mode": "b", "flag": "yes"})
    assert built == Example(n=10, rate=0.25, mode="b", flag=True)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"m": "1"}, "unknown config key 'm'"),
        ({"n": "three"}, "n: expected int, got 'three'"),
        ({"n": "2.5"}, "n: expected int"),
        ({"n": "0"}, "n: 0 is below the minimum 1"),
        ({"rate": "2"}, "rate: 2.0 is above the maximum 1.0"),
        ({"mode": "c"}, "mode: 'c' is not one of a, b"),
        ({"flag": "maybe"}, "flag: expected bool"),
    ],
)
def test_bad_values_are_user_errors(overrides: dict[str, str], message: str) -> None:
    with pytest.raises(UserError, match=message):
        cfg.build(Example, overrides)


@given(st.integers(min_value=1, max_value=100))
def test_integers_round_trip_through_text(n: int) -> None:
    assert cfg.build(Example, {"n": str(n)}).n == n


def test_hash_ignores_key_order_and_sees_values() -> None:
    assert cfg.stable_hash({"a": 1, "b": 2}) == cfg.stable_hash({"b": 2, "a": 1})
    assert cfg.stable_hash({"a": 1}) != cfg.stable_hash({"a": 2})


def test_seeds_are_deterministic_and_scoped() -> None:
    assert seed_for(0, "task", "algo") == seed_for(0, "task", "algo")
    assert seed_for(0, "task", "algo") != seed_for(1, "task", "algo")
    assert seed_for(0, "task", "env") != seed_for(0, "task", "algo")
    assert rng_for(3, "t").random() == rng_for(3, "t").random()


# ------------------------------------------------------------------------------ stored run keys unchanged
# Computed with the parser before pydantic (commit 8e3eca0): the project reuses stored runs by these hashes,
# so a change here would silently orphan every stored run of the task.
BILATERAL_DEFAULTS_HASH = "120f53988ff7a8fd"
EXAMPLE_DEFAULTS_HASH = "6b96f642e0daa644"
EXAMPLE_OVERRIDDEN_HASH = "969d1768800e23e0"


def test_hashes_of_plain_configs_are_those_of_the_old_parser() -> None:
    from iclrbench.envs.contextual_bilateral_trade import BilateralTradeConfig

    bilateral = cfg.build(BilateralTradeConfig)
    assert cfg.as_dict(bilateral) == dataclasses.asdict(bilateral)
    assert cfg.stable_hash(cfg.as_dict(bilateral)) == BILATERAL_DEFAULTS_HASH
    assert cfg.stable_hash(cfg.as_dict(cfg.build(Example))) == EXAMPLE_DEFAULTS_HASH
    overridden = cfg.build(Example, {"n": "1e1", "rate": "0.25", "mode": "b", "flag": "yes"})
    assert cfg.stable_hash(cfg.as_dict(overridden)) == EXAMPLE_OVERRIDDEN_HASH


def test_a_float_field_given_an_int_hashes_as_a_float() -> None:
    # budgets write `noise: 0`; the old parser stored 0.0, and the hash must not see the difference
    built = cfg.build(Example, {"rate": 1})
    assert built.rate == 1.0 and isinstance(built.rate, float)
    assert cfg.stable_hash(cfg.as_dict(built)) == cfg.stable_hash(cfg.as_dict(Example(rate=1.0)))


def test_every_task_config_and_algorithm_params_build_from_their_budgets_and_round_trip() -> None:
    import json

    from iclrbench.core import catalog

    for task_id in catalog.task_ids():
        task = catalog.get_task(task_id)
        for budget in task.budgets:
            config = task.make_config(budget)
            stored = json.loads(json.dumps(cfg.as_dict(config)))  # as the store and the workers see it
            assert cfg.build(task.Config, stored) == config, (task_id, budget)
        if task_id not in catalog.available_task_ids():
            continue  # its algorithms' modules import what is not installed
        for name, algo in catalog.algorithms(task_id).items():
            params = cfg.build(algo.Params, {})
            assert cfg.build(algo.Params, cfg.as_dict(params)) == params, (task_id, name)
            for row in cfg.describe(algo.Params):
                assert row["type"] in {"int", "float", "str", "bool"} or "[" in row["type"], row


# ------------------------------------------------------------------------------------ non-finite numbers
@pytest.mark.parametrize(
    "raw", ["nan", "NaN", "inf", "-inf", "Infinity", "1e400", float("nan"), float("inf")]
)
def test_non_finite_floats_are_refused_in_one_line(raw: object) -> None:
    with pytest.raises(UserError) as info:
        cfg.build(Example, {"rate": raw})
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("rate: expected a finite float, got ") and "nan or inf" in message


def test_non_finite_noise_and_epsilon_scale_of_the_bilateral_task_are_refused() -> None:
    from iclrbench import runner

    with pytest.raises(UserError, match="noise: expected a finite float, got 'nan'"):
        runner.plan("contextual-bilateral-trade", ["random-price"], [0], "smoke", {"noise": "nan"})
    with pytest.raises(UserError, match="epsilon_scale: expected a finite float, got 'inf'"):
        runner.plan("contextual-bilateral-trade", ["ellipsoid-sbb"], [0], "smoke", {"epsilon_scale": "inf"})


@dataclasses.dataclass(frozen=True)
class Unbounded:
    scale: float = cfg.param(1.0, "may be infinite", allow_nonfinite=True, low=0.0)
    plain: float = cfg.param(1.0, "finite only")


@pytest.mark.parametrize("raw", ["inf", float("inf"), "nan"])
def test_a_field_that_declares_it_takes_non_finite_values_gets_them(raw: object) -> None:
    value = cfg.build(Unbounded, {"scale": raw}).scale
    assert not math.isfinite(value)


def test_a_non_finite_default_is_refused_unless_declared() -> None:
    @dataclasses.dataclass(frozen=True)
    class BadDefault:
        x: float = cfg.param(float("nan"), "oops")

    with pytest.raises(UserError, match="x: nan is not finite"):
        cfg.build(BadDefault)
    with pytest.raises(UserError, match="x: inf is not finite"):
        cfg.check(BadDefault(x=float("inf")))

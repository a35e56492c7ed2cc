from __future__ import annotations

import dataclasses

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

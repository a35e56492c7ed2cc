"""Every field type a task or algorithm may declare: parsed from ``--set`` text and from Python values (YAML
sweep files, budgets, a stored run's ``as_dict``), refused in one line naming key, type and value, and
written back by ``format_value`` so that it reads back equal."""

from __future__ import annotations

import dataclasses
import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any, Literal, Optional

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from iclrbench.core import config as cfg
from iclrbench.core.errors import UserError


@dataclasses.dataclass(frozen=True)
class Layer:
    width: int = cfg.param(4, "units", low=1, high=1024)
    act: Literal["relu", "gelu"] = cfg.param("relu", "activation")


@dataclasses.dataclass(frozen=True)
class Model:
    layer: Layer = cfg.param(Layer(), "the hidden layer")  # noqa: RUF009  (an immutable default)
    dropout: float = cfg.param(0.0, "dropout rate", low=0.0, high=1.0)


@dataclasses.dataclass(frozen=True)
class Rich:
    n: int = cfg.param(3, "a count")
    rate: float = cfg.param(0.5, "a rate")
    flag: bool = cfg.param(False, "a flag")
    name: str = cfg.param("x", "a name")
    layers: tuple[int, ...] = cfg.param((3, 4), "hidden sizes", low=1)
    rates: tuple[float, ...] = cfg.param((0.1,), "rates")
    names: tuple[str, ...] = cfg.param(("a",), "names")
    pair: tuple[int, str] = cfg.param((1, "a"), "a fixed pair")
    mode: Literal["fast", "slow"] = cfg.param("fast", "speed")
    level: Literal[1, 2, 3] = cfg.param(1, "an int choice")
    cap: int | None = cfg.param(None, "optional cap")
    scale: Optional[float] = cfg.param(None, "optional scale")  # noqa: UP045  (the Optional spelling is tested)
    label: str | None = cfg.param(None, "optional label")
    kind: Literal["a", "b"] | None = cfg.param(None, "optional choice")
    path: Path = cfg.param(Path("data"), "a path")  # noqa: RUF009  (an immutable default)
    weights: dict[str, float] | None = cfg.param(None, "named weights")  # noqa: RUF009  (an immutable default)
    model: Model = cfg.param(Model(), "a nested config")  # noqa: RUF009  (an immutable default)
    spare: Layer | None = cfg.param(None, "an optional nested config")  # noqa: RUF009  (an immutable default)
    wild: float = cfg.param(1.0, "may be nan or inf", allow_nonfinite=True)
    wilds: tuple[float, ...] = cfg.param((), "may hold nan or inf", allow_nonfinite=True)


def parse(name: str, raw: Any) -> Any:
    return cfg.parse_value(Rich, name, raw)


# ------------------------------------------------------------------------------------------ from text
@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        ("n", "42", 42),
        ("n", "1e5", 100_000),
        ("n", "100_000", 100_000),
        ("n", "-3", -3),
        ("n", "2.0", 2),
        ("n", str(10**30), 10**30),  # exact, not through a float
        ("rate", "0.25", 0.25),
        ("rate", "1e-3", 0.001),
        ("rate", "3", 3.0),
        *[("flag", t, True) for t in ("true", "True", "yes", "on", "1", "ON")],
        *[("flag", t, False) for t in ("false", "no", "off", "0", "FALSE")],
        ("name", "hello world", "hello world"),
        ("name", "", ""),
        ("layers", "3,4", (3, 4)),
        ("layers", "(3,4)", (3, 4)),
        ("layers", "[3, 4]", (3, 4)),
        ("layers", "3", (3,)),
        ("layers", "3,", (3,)),
        ("layers", " 3 , 4 ", (3, 4)),
        ("layers", "1e3,2", (1000, 2)),
        ("layers", "()", ()),
        ("layers", "[]", ()),
        ("rates", "0.5,1e-2", (0.5, 0.01)),
        ("names", "a, b", ("a", "b")),
        ("names", '["a,b", "c"]', ("a,b", "c")),
        ("pair", "7,seven", (7, "seven")),
        ("mode", "slow", "slow"),
        ("level", "2", 2),
        ("cap", "none", None),
        ("cap", "Null", None),
        ("cap", "5", 5),
        ("scale", "none", None),
        ("scale", "0.5", 0.5),
        ("label", "null", None),
        ("label", "hi", "hi"),
        ("kind", "b", "b"),
        ("kind", "none", None),
        ("path", "/tmp/out", Path("/tmp/out")),
        ("path", "runs/x.sqlite", Path("runs/x.sqlite")),
        ("weights", '{"a": 1, "b": 0.5}', {"a": 1.0, "b": 0.5}),
        ("model", '{"dropout": 0.5}', Model(dropout=0.5)),
        ("model", '{"layer": {"width": 8}}', Model(layer=Layer(width=8))),
        ("spare", "none", None),
        ("spare", '{"act": "gelu"}', Layer(act="gelu")),
        ("wild", "inf", math.inf),
        ("wild", "-inf", -math.inf),
        ("wilds", "1,inf", (1.0, math.inf)),
    ],
)
def test_text_is_parsed_to_the_declared_type(name: str, text: str, expected: Any) -> None:
    value = parse(name, text)
    assert value == expected and type(value) is type(expected)


def test_nan_is_taken_where_declared() -> None:
    assert math.isnan(parse("wild", "nan"))
    assert math.isnan(parse("wilds", "nan,1")[0])


# ------------------------------------------------------------------------------- from Python values
@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [
        ("n", 7, 7),
        ("n", 1e5, 100_000),  # a YAML float with no fraction
        ("rate", 1, 1.0),
        ("flag", True, True),
        ("flag", 0, False),
        ("layers", [3, 4], (3, 4)),
        ("layers", (5,), (5,)),
        ("layers", ["1e3", 4], (1000, 4)),  # YAML 1.1 leaves 1e3 a string
        ("layers", "3,4", (3, 4)),  # a YAML string is read as --set text
        ("rates", [1, 0.5], (1.0, 0.5)),
        ("names", ["a", "b"], ("a", "b")),
        ("pair", [1, "x"], (1, "x")),
        ("mode", "slow", "slow"),
        ("level", 3, 3),
        ("cap", None, None),
        ("cap", 9, 9),
        ("scale", None, None),
        ("path", "a/b", Path("a/b")),
        ("path", Path("a/b"), Path("a/b")),
        ("weights", {"a": 1}, {"a": 1.0}),
        ("model", {"layer": {"width": 16}}, Model(layer=Layer(width=16))),
        ("model", Model(dropout=0.1), Model(dropout=0.1)),
        ("spare", {"width": 2}, Layer(width=2)),
        ("spare", None, None),
    ],
)
def test_python_values_are_parsed_to_the_declared_type(name: str, value: Any, expected: Any) -> None:
    parsed = parse(name, value)
    assert parsed == expected and type(parsed) is type(expected)


# -------------------------------------------------------------------------------------- nested configs
def test_dotted_keys_set_fields_of_nested_configs_on_top_of_the_default() -> None:
    built = cfg.build(Rich, {"model.layer.width": "8", "model.dropout": 0.5})
    assert built.model == Model(layer=Layer(width=8), dropout=0.5)
    # a whole-object value applies first, dotted keys of the same field on top
    built = cfg.build(Rich, {"model.dropout": "0.2", "model": '{"layer": {"act": "gelu"}}'})
    assert built.model == Model(layer=Layer(act="gelu"), dropout=0.2)


def test_a_nested_field_keeps_its_own_default_not_the_class_default() -> None:
    @dataclasses.dataclass(frozen=True)
    class Tuned:
        layer: Layer = cfg.param(Layer(width=64, act="gelu"), "a tuned default")  # noqa: RUF009  (an immutable default)

    assert cfg.build(Tuned, {"layer.width": 8}).layer == Layer(width=8, act="gelu")
    assert cfg.build(Tuned, {"layer": {"width": 8}}).layer == Layer(width=8, act="gelu")


def test_nested_bounds_and_choices_are_checked_with_the_full_key() -> None:
    with pytest.raises(UserError, match=r"^model\.layer\.width: 0 is below the minimum 1$"):
        cfg.build(Rich, {"model.layer.width": 0})
    with pytest.raises(UserError, match=r"^model\.layer\.width: 0 is below the minimum 1$"):
        cfg.build(Rich, {"model": {"layer": {"width": 0}}})


def test_as_dict_is_plain_json_and_builds_back_equal() -> None:
    x = cfg.build(Rich, {"cap": 3, "path": "out/x", "weights": {"w": 2}, "spare": {"width": 3}})
    data = cfg.as_dict(x)
    assert data["layers"] == [3, 4] and data["path"] == "out/x" and data["model"]["layer"]["width"] == 4
    assert json.loads(json.dumps(data)) == data
    assert cfg.build(Rich, data) == x
    assert cfg.build(Rich, json.loads(json.dumps(data))) == x


# ------------------------------------------------------------------------------------------ the errors
@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"n": "three"}, "n: expected int, got 'three'"),
        ({"n": "2.5"}, "n: expected int, got '2.5'"),
        ({"n": True}, "n: expected int, got True (a boolean is not a number)"),
        (
            {"n": 2.5},
            "n: expected int, got 2.5 (input should be a valid integer, got a number with a fractional part)",
        ),
        ({"rate": "fast"}, "rate: expected float, got 'fast'"),
        ({"rate": False}, "rate: expected float, got False (a boolean is not a number)"),
        ({"flag": "maybe"}, "flag: expected bool, got 'maybe'"),
        ({"layers": "3,x"}, "layers: expected tuple[int, ...], got '3,x' (item 2 'x' is not int)"),
        ({"layers": "3;4"}, "layers: expected tuple[int, ...], got '3;4' (item 1 '3;4' is not int)"),
        ({"layers": [3, "x"]}, "layers: expected tuple[int, ...], got [3, 'x'] (item 2 'x' is not int)"),
        (
            {"layers": [True]},
            "layers: expected tuple[int, ...], got [True] (item 1: a boolean is not a number)",
        ),
        (
            {"rates": [0.5, None]},
            "rates: expected tuple[float, ...], got [0.5, None] (item 2: input should be",
        ),
        ({"layers": "0,4"}, "layers: 0 is below the minimum 1"),
        ({"pair": "1,2,3"}, "pair: expected tuple[int, str], got '1,2,3' (3 items, expected 2)"),
        ({"mode": "slwo"}, "mode: expected Literal['fast', 'slow'], got 'slwo'; did you mean 'slow'?"),
        ({"mode": "zzz"}, "mode: expected Literal['fast', 'slow'], got 'zzz'; choose from fast, slow"),
        ({"level": "4"}, "level: expected Literal[1, 2, 3], got '4'"),
        ({"kind": "c"}, "kind: expected Literal['a', 'b'] | None, got 'c'; choose from a, b"),
        ({"cap": "3.5"}, "cap: expected int | None, got '3.5'"),
        ({"weights": "a=1"}, "weights: expected dict[str, float] | None, got 'a=1' (expected a JSON object"),
        ({"model": "wide"}, "model: expected Model as a JSON object such as"),
        ({"model": None}, "model: expected Model, got None"),
        (
            {"model.layer.act": "gleu"},
            "model.layer.act: expected Literal['relu', 'gelu'], got 'gleu'; did you",
        ),
        ({"model.layr.width": 3}, "unknown config key 'model.layr.width'; did you mean 'model.layer.width'?"),
        ({"model": {"dropuot": 0.1}}, "unknown config key 'model.dropuot'; did you mean 'model.dropout'?"),
        ({"n.x": 3}, "unknown config key 'n.x'"),
        ({"layesr": "3"}, "unknown config key 'layesr'; did you mean 'layers'?"),
        (
            {"rates": "1,nan"},
            "rates: expected a finite tuple[float, ...], got '1,nan' (this field takes no nan",
        ),
        ({"rate": "inf"}, "rate: expected a finite float, got 'inf'"),
    ],
)
def test_bad_values_are_one_line_naming_key_type_and_value(overrides: dict[str, Any], message: str) -> None:
    with pytest.raises(UserError) as info:
        cfg.build(Rich, overrides)
    text = str(info.value)
    assert "\n" not in text
    assert text.startswith(message), text


def test_a_long_bad_value_is_shortened_in_the_error() -> None:
    with pytest.raises(UserError) as info:
        cfg.build(Rich, {"n": "x" * 500})
    assert len(str(info.value)) < 120


def test_what_names_the_kind_of_key() -> None:
    with pytest.raises(UserError, match=r"unknown ellipsoid-sbb parameter key 'model\.layr'"):
        cfg.build(Rich, {"model.layr": 1}, what="ellipsoid-sbb parameter")


def test_a_required_field_left_out_is_named() -> None:
    @dataclasses.dataclass(frozen=True)
    class Needs:
        size: int

    with pytest.raises(UserError, match="config key 'size' is required"):
        cfg.build(Needs)
    assert cfg.build(Needs, {"size": "2"}) == Needs(2)


def test_cross_field_checks_of_post_init_are_user_errors() -> None:
    @dataclasses.dataclass(frozen=True)
    class Ordered:
        low: int = cfg.param(0, "low")
        high: int = cfg.param(1, "high")

        def __post_init__(self) -> None:
            if self.low > self.high:
                raise ValueError(f"low ({self.low}) must not exceed high ({self.high})")

    with pytest.raises(UserError, match=r"low \(5\) must not exceed high \(1\)"):
        cfg.build(Ordered, {"low": "5"})


# ------------------------------------------------------------------------------------------ describe
def test_describe_shows_readable_type_names_and_plain_defaults() -> None:
    rows = {r["name"]: r for r in cfg.describe(Rich)}
    assert rows["layers"]["type"] == "tuple[int, ...]"
    assert rows["pair"]["type"] == "tuple[int, str]"
    assert rows["mode"]["type"] == "Literal['fast', 'slow']"
    assert rows["cap"]["type"] == "int | None"
    assert rows["scale"]["type"] == "float | None"
    assert rows["kind"]["type"] == "Literal['a', 'b'] | None"
    assert rows["path"]["type"] == "Path"
    assert rows["model"]["type"] == "Model"
    assert rows["n"]["type"] == "int" and rows["n"]["default"] == 3
    assert rows["layers"]["default"] == [3, 4] and rows["path"]["default"] == "data"
    assert rows["model"]["default"] == {"layer": {"width": 4, "act": "relu"}, "dropout": 0.0}
    assert rows["wild"]["allow_nonfinite"] and not rows["rate"]["allow_nonfinite"]
    json.dumps(rows)  # bench info --format json


# ------------------------------------------------------------------------------- format is the inverse
def test_format_value_writes_the_short_form_where_it_reads_back() -> None:
    assert cfg.format_value(Rich, "layers", (3, 4)) == "3,4"
    assert cfg.format_value(Rich, "layers", ()) == "()"
    assert cfg.format_value(Rich, "flag", True) == "true"
    assert cfg.format_value(Rich, "cap", None) == "none"
    assert cfg.format_value(Rich, "rate", 0.1) == "0.1"
    assert cfg.format_value(Rich, "path", Path("a/b")) == "a/b"
    assert cfg.format_value(Rich, "names", ("a,b", "c")) == '["a,b", "c"]'
    assert (
        cfg.format_value(Rich, "model", Model()) == '{"layer": {"width": 4, "act": "relu"}, "dropout": 0.0}'
    )


def same(a: Any, b: Any) -> bool:
    """Equal, with nan equal to nan and the same types (True is not 1)."""
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


finite = st.floats(allow_nan=False, allow_infinity=False)
anyfloat = st.floats(allow_nan=True, allow_infinity=True)
layers = st.builds(Layer, width=st.integers(1, 1024), act=st.sampled_from(["relu", "gelu"]))
models = st.builds(Model, layer=layers, dropout=st.floats(0.0, 1.0))
not_none_text = st.text().filter(lambda s: s.strip().lower() not in {"none", "null"})

VALUES: dict[str, st.SearchStrategy[Any]] = {
    "n": st.integers(),
    "rate": finite,
    "flag": st.booleans(),
    "name": st.text(),
    "layers": st.lists(st.integers(min_value=1)).map(tuple),
    "rates": st.lists(finite).map(tuple),
    "names": st.lists(st.text()).map(tuple),
    "pair": st.tuples(st.integers(), st.text()),
    "mode": st.sampled_from(["fast", "slow"]),
    "level": st.sampled_from([1, 2, 3]),
    "cap": st.none() | st.integers(),
    "scale": st.none() | finite,
    "label": st.none() | not_none_text,  # the text "none" is None on the command line, by design
    "kind": st.sampled_from([None, "a", "b"]),
    "path": st.builds(Path, st.text(alphabet=st.characters(blacklist_characters="\x00"))),
    "weights": st.none() | st.dictionaries(st.text(), finite),
    "model": models,
    "spare": st.none() | layers,
    "wild": anyfloat,
    "wilds": st.lists(anyfloat).map(tuple),
}


def test_every_field_has_a_value_strategy() -> None:
    assert set(VALUES) == {f.name for f in dataclasses.fields(Rich)}


@pytest.mark.parametrize("name", sorted(VALUES))
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_parse_of_format_is_the_value(name: str, data: st.DataObject) -> None:
    value = data.draw(VALUES[name])
    text = cfg.format_value(Rich, name, value)
    assert isinstance(text, str)
    assert same(cfg.parse_value(Rich, name, text), value), text


@settings(max_examples=150, deadline=None)
@given(
    st.fixed_dictionaries(
        {k: v for k, v in VALUES.items() if k not in {"wild", "wilds"}},  # nan != nan in dataclass eq
    )
)
def test_build_of_as_dict_is_the_instance(values: dict[str, Any]) -> None:
    instance = Rich(**values)
    data = cfg.as_dict(instance)
    assert cfg.build(Rich, data) == instance
    assert cfg.build(Rich, json.loads(json.dumps(data))) == instance  # through the store's JSON
    assert cfg.stable_hash(data) == cfg.stable_hash(cfg.as_dict(cfg.build(Rich, data)))


@settings(max_examples=100, deadline=None)
@given(st.lists(anyfloat).map(tuple), anyfloat)
def test_non_finite_values_round_trip_where_declared(wilds: tuple[float, ...], wild: float) -> None:
    instance = cfg.build(Rich, {"wilds": wilds, "wild": wild})
    back = cfg.build(Rich, cfg.as_dict(instance))
    assert same(back.wilds, wilds) and same(back.wild, wild)


# --------------------------------------------------------------------------------------------- speed
def test_pydantic_is_not_imported_until_a_value_needs_it() -> None:
    # bench list must stay under 1 s cold: the config module, and building a config of plain fields,
    # must not pay pydantic's import
    code = (
        "import sys, dataclasses\n"
        "from iclrbench.core import config as cfg\n"
        "from iclrbench.envs.contextual_bilateral_trade import BilateralTradeConfig\n"
        "cfg.build(BilateralTradeConfig, {'d': '4', 'noise': 0})\n"
        "assert 'pydantic' not in sys.modules, 'imported early'\n"
        "@dataclasses.dataclass(frozen=True)\n"
        "class T:\n"
        "    xs: tuple[int, ...] = (1,)\n"
        "assert cfg.build(T, {'xs': '3,4'}).xs == (3, 4)\n"
        "assert 'pydantic' in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)

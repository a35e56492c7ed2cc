"""The device data file and the roofline projection onto it (iclrbench.envs.mobile_llm_profiling.devices)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from iclrbench.envs.mobile_llm_profiling.devices import Device, devices, project, project_all

PARAMETERS = 1.35e8  # about SmolLM2-135M
WEIGHT_BYTES = 1.0e8  # about its Q4_K_M file


def test_every_device_cites_its_figures() -> None:
    rows = devices()
    assert len(rows) >= 5
    assert len({d.id for d in rows}) == len(rows)
    for d in rows:
        assert d.kind in {"phone", "board", "laptop"}
        assert "bandwidth_gb_s" in d.sources
        for figure in ("sustained_bandwidth_gb_s", "int8_tops", "power_w"):
            if getattr(d, figure) is not None:
                assert d.sources[figure].strip(), (d.id, figure)
        # a sustained figure is a measurement under the vendor's peak, never above it
        assert (d.sustained_bandwidth_gb_s or 0) <= d.bandwidth_gb_s


def test_an_unsourced_figure_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "devices.toml"
    path.write_text(
        '[[device]]\nid = "x"\nname = "x"\nkind = "board"\nmemory = "?"\nbandwidth_gb_s = 10.0\n'
        'bandwidth_source = "a datasheet"\npower_w = 5.0\n'
    )
    with pytest.raises(ValueError, match="power_w without a source"):
        devices.__wrapped__(path)


def test_a_135m_model_is_memory_bound_on_every_device() -> None:
    for device_id, p in project_all(WEIGHT_BYTES, PARAMETERS).items():
        device = next(d for d in devices() if d.id == device_id)
        assert p.bound == "memory"
        assert p.decode_tps == pytest.approx(device.peak_bandwidth / WEIGHT_BYTES)
        if device.power_w is None:
            assert p.energy_mj_per_token is None
        else:
            assert p.energy_mj_per_token == pytest.approx(1e3 * device.power_w / p.decode_tps)


def test_the_sustained_bandwidth_gives_a_second_projection_where_published() -> None:
    pi5 = next(d for d in devices() if d.id == "raspberry-pi-5")
    p = project(1e9, 1e6, pi5)  # 1 GB of weights: tok/s = GB/s
    assert p.decode_tps == pytest.approx(pi5.bandwidth_gb_s)
    assert pi5.sustained_bandwidth_gb_s is not None
    assert p.sustained_decode_tps == pytest.approx(pi5.sustained_bandwidth_gb_s)
    assert p.sustained_decode_tps < p.decode_tps
    assert all(
        project(1e9, 1e6, d).sustained_decode_tps is None for d in devices() if not d.sustained_bandwidth_gb_s
    )


def test_a_weak_accelerator_makes_decode_compute_bound() -> None:
    base = devices()[0]
    weak = dataclasses.replace(base, int8_tops=1e-6)  # 1 MOP/s
    p = project(1e6, 5e5, weak)
    assert p.bound == "compute"
    assert p.decode_tps == pytest.approx(1.0)


@given(st.floats(1e6, 1e10), st.floats(1.5, 8.0))
def test_fewer_bytes_decode_proportionally_faster(weight_bytes: float, shrink: float) -> None:
    device: Device = devices()[0]
    big, small = project(weight_bytes, 1e6, device), project(weight_bytes / shrink, 1e6, device)
    assert small.decode_tps == pytest.approx(shrink * big.decode_tps, rel=1e-9)

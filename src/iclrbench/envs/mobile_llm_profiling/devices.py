"""Projection of a configuration's decode speed and energy onto phones and boards (PalmBench, Li et al.,
ICLR 2025, section 5), by the roofline of :mod:`iclrbench.envs.mobile_llm_profiling.roofline` with each
device's published figures from ``devices.toml`` (every figure cites its source there).

    decode tok/s = min(bandwidth / weight bytes, int8 ops/s / (2 x parameters))
    energy per token = power / decode tok/s

The bandwidth is the device's vendor peak for every device, so projections compare like with like and each
is an upper bound on the decode rate (a lower bound on the energy); where a measured (sustained) bandwidth
is published, the projection at that figure is given too (``sustained_decode_tps``). The same model
predicts this CPU from its own measured bandwidth, which is how the task checks it (claim
``roofline-predicts-this-cpu``): a projection is only as good as that check.
"""

from __future__ import annotations

import dataclasses
import sys
from functools import cache
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

from iclrbench.envs.mobile_llm_profiling.roofline import predicted_decode_tps

DATA_FILE = Path(__file__).with_name("devices.toml")


@dataclasses.dataclass(frozen=True)
class Device:
    """One device's published figures (units as named); ``None`` where no source gives the figure."""

    id: str
    name: str
    kind: str
    memory: str
    bandwidth_gb_s: float
    sustained_bandwidth_gb_s: float | None
    int8_tops: float | None
    power_w: float | None
    sources: dict[str, str]

    @property
    def peak_bandwidth(self) -> float:
        """Bytes/s at the vendor's (or derived) peak: what every projection uses."""
        return 1e9 * self.bandwidth_gb_s


@dataclasses.dataclass(frozen=True)
class Projection:
    """A configuration's roofline figures on one device."""

    device: str
    decode_tps: float
    energy_mj_per_token: float | None
    bound: str  # "memory" or "compute": which roofline term binds
    sustained_decode_tps: float | None = None  # at the published measured bandwidth, where there is one


FIGURES = ("bandwidth_gb_s", "sustained_bandwidth_gb_s", "int8_tops", "power_w")


@cache
def devices(path: Path = DATA_FILE) -> tuple[Device, ...]:
    """The devices of the data file; a figure without its ``*_source`` is refused (ValueError)."""
    with path.open("rb") as f:
        rows = tomllib.load(f)["device"]
    out = []
    for row in rows:
        sources = {k.removesuffix("_source"): v for k, v in row.items() if k.endswith("_source")}
        unsourced = [k for k in FIGURES if k in row and k not in sources]
        if unsourced:
            raise ValueError(f"{path.name}: {row.get('id')} gives {', '.join(unsourced)} without a source")
        out.append(
            Device(
                id=row["id"],
                name=row["name"],
                kind=row["kind"],
                memory=row["memory"],
                bandwidth_gb_s=float(row["bandwidth_gb_s"]),
                sustained_bandwidth_gb_s=row.get("sustained_bandwidth_gb_s"),
                int8_tops=row.get("int8_tops"),
                power_w=row.get("power_w"),
                sources=sources,
            )
        )
    return tuple(out)


def project(weight_bytes: float, parameters: float, device: Device) -> Projection:
    """Decode tok/s and energy per token (mJ) of ``weight_bytes`` of ``parameters`` weights on ``device``."""
    ops = 1e12 * device.int8_tops if device.int8_tops else float("inf")
    tps = predicted_decode_tps(weight_bytes, device.peak_bandwidth, parameters, ops)
    memory_tps = device.peak_bandwidth / weight_bytes
    energy = 1e3 * device.power_w / tps if device.power_w else None
    sustained = None
    if device.sustained_bandwidth_gb_s:
        sustained = predicted_decode_tps(weight_bytes, 1e9 * device.sustained_bandwidth_gb_s, parameters, ops)
    return Projection(device.id, tps, energy, "memory" if tps >= memory_tps else "compute", sustained)


def project_all(weight_bytes: float, parameters: float) -> dict[str, Projection]:
    """:func:`project` on every device of the data file, by device id."""
    return {d.id: project(weight_bytes, parameters, d) for d in devices()}

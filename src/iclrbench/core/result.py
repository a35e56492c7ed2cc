"""The result schema, documented in one place. One :class:`RunResult` is one row of the store.

=================  ============================================================================
field              meaning
=================  ============================================================================
task               task id, e.g. ``contextual-bilateral-trade``
task_version       the task's ``version``; bumped whenever results would change
config             the resolved task config (every key, defaults included)
config_hash        16 hex chars of sha256 over the sorted config JSON
algorithm          algorithm name, registered against the task
role               ``reference`` / ``baseline`` / ``oracle``
params             the resolved hyperparameters
params_hash        16 hex chars of sha256 over the sorted params JSON
seed               the run's seed (all randomness derives from it, see ``core.seeding``)
budget             ``smoke`` / ``small`` / ``paper``: the budget whose overrides built ``config``
status             ``ok`` or ``failed``
error              for a failed run, ``ExceptionType: message``; empty otherwise
metrics            metric name -> float (the task's metrics, primary first)
curves             curve name -> {"x": [...], "y": [...], "x_label", "y_label"}
notes              free text from the task
wall_s, cpu_s      wall-clock and CPU seconds of ``evaluate``
peak_mem_mb        peak resident memory of the process that ran it (MB)
provenance         package version, git sha, python / numpy / torch versions, CPU, threads, host OS;
                   ``accelerator`` (name, memory, driver) when the run's process used torch with CUDA
created_at         ISO-8601 UTC time stamp
=================  ============================================================================

The run key -- (task, task_version, config_hash, algorithm, params_hash, seed) -- is unique in the store.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import platform
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

SCHEMA_VERSION = 1


@dataclasses.dataclass
class RunResult:
    task: str
    task_version: int
    config: dict[str, Any]
    config_hash: str
    algorithm: str
    role: str
    params: dict[str, Any]
    params_hash: str
    seed: int
    budget: str
    status: str
    error: str = ""
    metrics: dict[str, float] = dataclasses.field(default_factory=dict)
    curves: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    notes: str = ""
    wall_s: float = 0.0
    cpu_s: float = 0.0
    peak_mem_mb: float = 0.0
    provenance: dict[str, Any] = dataclasses.field(default_factory=dict)
    created_at: str = ""
    run_id: int | None = None

    @property
    def key(self) -> str:
        return run_key(
            self.task, self.task_version, self.config_hash, self.algorithm, self.params_hash, self.seed
        )

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def run_key(task: str, version: int, config_hash: str, algorithm: str, params_hash: str, seed: int) -> str:
    return f"{task}|v{version}|{config_hash}|{algorithm}|{params_hash}|{seed}"


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return ""


@functools.lru_cache(maxsize=1)
def _git_sha() -> str:
    here = Path(__file__).resolve().parent
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True, timeout=5, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.stdout.strip() if out.returncode == 0 else ""


@functools.lru_cache(maxsize=1)
def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def accelerator() -> dict[str, Any] | None:
    """The GPU a run could use: name, memory (GiB), CUDA driver -- read from torch only if the run's
    code has imported it (``bench list`` never pays for torch), None on a CPU-only machine."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    try:
        if not torch.cuda.is_available():
            return None
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        driver = ""
        version_file = Path("/proc/driver/nvidia/version")
        if version_file.exists():
            first = version_file.read_text().splitlines()[0]
            driver = next((w for w in first.split() if w[:1].isdigit() and "." in w), "")
        return {
            "name": str(props.name),
            "memory_gib": round(props.total_memory / 2**30, 1),
            "count": int(torch.cuda.device_count()),
            "cuda": str(torch.version.cuda or ""),
            "driver": driver,
        }
    except Exception:  # a broken driver must not fail the run it describes
        return None


def run_provenance() -> dict[str, Any]:
    """:func:`provenance`, plus the accelerator where the run's process has one."""
    out = dict(provenance())
    gpu = accelerator()
    if gpu is not None:
        out["accelerator"] = gpu
    return out


@functools.lru_cache(maxsize=1)
def provenance() -> dict[str, Any]:
    """Where and with what a run was computed. torch's version is read from metadata, never imported."""
    return {
        "iclrbench": _version("iclrbench"),
        "git_sha": _git_sha(),
        "python": platform.python_version(),
        "numpy": _version("numpy"),
        "torch": _version("torch"),
        "cpu": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "threads": int(os.environ.get("OMP_NUM_THREADS", "0")) or os.cpu_count(),
        "platform": platform.platform(),
        "executable": sys.executable,
    }

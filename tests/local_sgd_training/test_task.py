"""local-sgd-training end to end at smoke: real gloo workers; the traffic arithmetic of every method, the
same seed giving the same run, faults caught by EDiT's detector, a rendezvous that does not answer refused
within seconds, and no worker left behind by a kill -9 of the driver."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import numpy as np
import psutil
import pytest

from iclrbench.benchmarks.local_sgd_training import LocalSGDTask
from iclrbench.core.result import RunResult
from iclrbench.testing import evaluate_once
from tests.conftest import Refused, plugin_env

TASK = "local-sgd-training"
if LocalSGDTask.unavailable():
    pytest.skip(LocalSGDTask.unavailable() or "", allow_module_level=True)
DECLARED = {m.name for m in LocalSGDTask.metrics}


@pytest.fixture(scope="module")
def outcomes() -> dict[str, RunResult]:
    return {name: evaluate_once(TASK, name) for name in ("ddp", "local-sgd", "edit", "a-edit")}


def test_runs_report_every_declared_metric(outcomes: dict[str, RunResult]) -> None:
    for name, outcome in outcomes.items():
        m = outcome.metrics
        assert set(m) == DECLARED, name
        assert 0 < m["val_loss"] < np.log(128) + 1 and m["loss_spike"] >= 0, name
        assert m["local_steps"] > 0 and m["reached_target"] in (0.0, 1.0), name


def test_local_methods_send_tau_times_fewer_weight_bytes_per_step(outcomes: dict[str, RunResult]) -> None:
    ddp = outcomes["ddp"].metrics["kb_per_step"]
    for name in ("local-sgd", "edit"):
        assert outcomes[name].metrics["kb_per_step"] == pytest.approx(ddp / 10, rel=1e-9), name
    assert outcomes["local-sgd"].metrics["control_kb"] == 0.0  # plain averaging needs no norms
    assert outcomes["edit"].metrics["control_kb"] > 0.0


def test_a_step_synchronous_run_waits_for_its_slowest_worker() -> None:
    # at smoke's tau, EDiT held to the slow worker's pace never syncs nor reaches equal_steps: its traffic
    # and equal-step loss would be NaN, a run the runner fails; tau=5 gives it a sync, equal_steps=10 a loss
    slow = {"slow_factor": 3.0, "tau": 5, "equal_steps": 10}
    edit = evaluate_once(TASK, "edit", **slow)
    a_edit = evaluate_once(TASK, "a-edit", **slow)
    # EDiT's workers all take the slow one's pace; A-EDiT's fast worker keeps stepping
    assert a_edit.metrics["local_steps"] > 1.3 * edit.metrics["local_steps"]
    assert a_edit.metrics["syncs"] > edit.metrics["syncs"]


def test_the_same_seed_gives_the_same_run(outcomes: dict[str, RunResult]) -> None:
    again = evaluate_once(TASK, "edit")
    for key, value in outcomes["edit"].metrics.items():
        if key != "wall_seconds":
            assert again.metrics[key] == value, key


def test_edit_drops_the_pseudo_gradients_of_a_worker_whose_learning_rate_spikes() -> None:
    spiked = evaluate_once(TASK, "edit", detector_warmup=3, anomaly="lr-spike", tau=4, anomaly_start=34)
    assert spiked.metrics["flagged"] > 0
    clean = evaluate_once(TASK, "edit", detector_warmup=3, tau=4)
    assert clean.metrics["flagged"] < spiked.metrics["flagged"]


def test_a_rendezvous_that_does_not_answer_is_refused_within_seconds(refused: Refused) -> None:
    started = time.monotonic()
    sets = ("--set", "rendezvous=10.255.255.1")
    error = refused("run", TASK, "edit", *sets, "--budget", "smoke", "--seeds", "0")
    assert "does not answer" in error
    assert time.monotonic() - started < 10


def _workers(marker: str) -> list[psutil.Process]:
    out = []
    for p in psutil.process_iter(["cmdline"]):
        line = " ".join(p.info["cmdline"] or [])
        if "local_sgd_training.worker" in line and marker in line:
            out.append(p)
    return out


def test_kill_9_of_the_driver_leaves_no_worker_or_port(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The driver starts the workers; a kill -9 of it takes them down (PR_SET_PDEATHSIG), with their
    sockets; the run's spec files live in a temporary folder named for the driver."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    driver = subprocess.Popen(
        [sys.executable, "-m", "iclrbench.cli", "run", TASK, "edit", "--budget", "small", "--seeds", "0",
         "--db", str(tmp_path / "r.sqlite")],
        env=plugin_env(TMPDIR=str(tmp)),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while len(_workers(str(tmp))) < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
        workers = _workers(str(tmp))
        assert len(workers) == 2, "the workers never started"
        ports: set[int] = set()
        while not ports and time.monotonic() < deadline:  # rank 0 serves the rendezvous store
            ports = {
                c.laddr.port for w in workers for c in w.net_connections() if c.status == psutil.CONN_LISTEN
            }
            time.sleep(0.2)
        assert ports, "rank 0 never listened"
        os.kill(driver.pid, signal.SIGKILL)
        driver.wait()
        _, alive = psutil.wait_procs(workers, timeout=10)
        assert alive == []
        listening = {c.laddr.port for c in psutil.net_connections("tcp") if c.status == psutil.CONN_LISTEN}
        assert not ports & listening
    finally:
        if driver.poll() is None:
            driver.kill()

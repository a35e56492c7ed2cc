"""local-sgd-training: Cheng et al., "EDiT: a local-SGD-based efficient distributed training method for
large language models", ICLR 2025 (arXiv:2412.07210).

One run starts ``workers`` real processes (:mod:`iclrbench.algorithms.local_sgd_training.worker`) joined by
torch.distributed over gloo at a free port of this machine, each training the small causal transformer of
:mod:`iclrbench.envs.local_sgd_training` on its shard of a seeded Markov-chain corpus, and syncing as the
algorithm (:mod:`iclrbench.algorithms.local_sgd_training`) says, until the run's virtual time budget is spent.
Step costs and collectives run on a virtual clock (seeded per worker; one worker may be slow), so results do
not depend on this machine's load; the wall seconds are reported beside them.

Metrics: ``val_loss`` (primary: the synced model's validation loss when the virtual time budget is
spent), ``val_loss_at_equal_steps`` (at the first evaluation after ``equal_steps`` local steps per
worker), ``time_to_target`` (virtual time of the first evaluation at or below the target loss; the budget
when never), ``reached_target`` (0/1), ``loss_spike`` (the largest rise of the synced model's validation
loss above its running minimum, after the warm-up: the global model is what a fault corrupts; a faulty
worker's own training loss rises under every method), ``mb_per_worker`` (MB each worker sent into
collectives), ``kb_per_step`` (KB of weights and gradients per local step after the warm-up),
``control_kb`` (KB of the scalars that steer syncs: EDiT's norms, A-EDiT's step counts), ``local_steps``
(mean per worker),
``syncs``, ``skipped_syncs``, ``flagged`` (pseudo-gradients the anomaly detector dropped),
``wall_seconds``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from iclrbench.core.algorithm import Algorithm
from iclrbench.core.decision import combine, compare_runs, empty, mean_figure
from iclrbench.core.result import RunResult
from iclrbench.core.task import (
    Budget,
    Claim,
    Curve,
    Metric,
    Outcome,
    Paper,
    Requirement,
    Resources,
    RunRequest,
    Task,
    Verdict,
    ok_runs,
)
from iclrbench.envs.local_sgd_training import TASK_ID, LocalSGDConfig, free_port, target_loss

CLEAN: dict[str, Any] = {}
FAULT = {"anomaly": "lr-spike"}
CORRUPT = {"anomaly": "corrupt"}
#: the penalty claim's arms: EDiT, its control without the penalty (same sync, same momentum), DiLoCo beside
PENALTY_ARMS = ("edit", "edit-no-penalty", "diloco")
#: one worker 3x slower, over three times the clean budget: step-count syncs then give EDiT the clean
#: budget's 300 steps, so the target is within its reach (at 300 units its 100 steps were not, issue 42)
SLOW = {"slow_factor": 3.0, "steps": 900.0}
#: a limited link: the model's 0.47 MB take 0.95 units, about a step, to move (4 MB a unit by default)
LIMITED_LINK = {"link_mb_per_unit": 0.5}
EFFICIENCY_ARMS = ("edit", "ddp", "diloco", "co2")  # CO2 beside: the claim is EDiT against DDP and DiLoCo
#: a loss spike above this (nats) is a spike
SPIKE_NATS = 0.1


# ------------------------------------------------------------------------------------------------ driver
def launch(config: LocalSGDConfig, seed: int, sync: dict[str, Any], timeout: float = 600.0) -> dict[str, Any]:
    """Start the workers (torchrun's environment: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT), wait for
    them, return rank 0's result. A worker that fails stops the others at once (no one waits on a dead
    peer until gloo's timeout); every worker dies with this process."""
    with tempfile.TemporaryDirectory(prefix="iclrbench-local-sgd-") as tmp:
        spec_path, out = Path(tmp) / "run.json", Path(tmp) / "result.json"
        run = {"config": dataclasses.asdict(config), "seed": seed, "sync": sync, "out": str(out)}
        spec_path.write_text(json.dumps(run))
        env = {
            **os.environ,
            "MASTER_ADDR": config.rendezvous,
            "MASTER_PORT": str(free_port(config.rendezvous)),
            "WORLD_SIZE": str(config.workers),
            "OMP_NUM_THREADS": "1",
            "ICLRBENCH_DIE_WITH_PARENT": "1",
        }
        logs = [Path(tmp) / f"rank{r}.log" for r in range(config.workers)]
        procs = []
        try:
            for rank in range(config.workers):
                with logs[rank].open("w") as log:
                    procs.append(
                        subprocess.Popen(
                            [
                                sys.executable,
                                "-m",
                                "iclrbench.algorithms.local_sgd_training.worker",
                                "--spec",
                                str(spec_path),
                            ],
                            env={**env, "RANK": str(rank), "LOCAL_RANK": str(rank)},
                            stdout=log,
                            stderr=subprocess.STDOUT,
                        )
                    )
            deadline = time.monotonic() + timeout
            while any(p.poll() is None for p in procs):
                failed = [r for r, p in enumerate(procs) if p.poll() not in (None, 0)]
                if failed:
                    raise RuntimeError(f"worker {failed[0]} failed: {_tail(logs[failed[0]])}")
                if time.monotonic() > deadline:
                    raise TimeoutError(f"the workers did not finish in {timeout:.0f} s")
                time.sleep(0.05)
            failed = [r for r, p in enumerate(procs) if p.returncode != 0]
            if failed:
                raise RuntimeError(f"worker {failed[0]} failed: {_tail(logs[failed[0]])}")
            return dict(json.loads(out.read_text()))
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
            for p in procs:
                p.wait()


def _tail(log: Path) -> str:
    lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
    return lines[-1] if lines else "(no output)"


def summarise(result: dict[str, Any], config: LocalSGDConfig, warmup_steps: int) -> dict[str, float]:
    """The run's metrics from rank 0's trace (see the module docstring)."""
    trace = result["trace"]
    clock, steps, loss = (np.asarray(trace[k], float) for k in ("clock", "steps", "val_loss"))
    target = target_loss(config)
    reached = np.flatnonzero(loss <= target)
    after = steps >= warmup_steps
    spike = 0.0
    if after.sum() > 1:
        tail = loss[after]
        spike = float(np.max(tail - np.minimum.accumulate(tail)))
    at_equal = np.flatnonzero(steps >= config.equal_steps)
    local_steps = float(result["local_steps_after_warmup"])
    return {
        "val_loss": float(loss[-1]),
        "val_loss_at_equal_steps": float(loss[at_equal[0]]) if len(at_equal) else float("nan"),
        "time_to_target": float(clock[reached[0]]) if len(reached) else float(config.steps),
        "reached_target": float(len(reached) > 0),
        "loss_spike": spike,
        "mb_per_worker": result["bytes"] / 1e6,
        "kb_per_step": result["local_bytes"] / 1e3 / local_steps if local_steps > 0 else float("nan"),
        "control_kb": result["control_bytes"] / 1e3,
        "local_steps": float(np.mean(result["steps"])),
        "syncs": float(result["syncs"]),
        "skipped_syncs": float(result["skipped"]),
        "flagged": float(result["flagged"]),
        "wall_seconds": float(result["wall_seconds"]),
    }


# ------------------------------------------------------------------------------------------------ claims
def _by(groups: list[list[RunResult]], overrides: dict[str, Any]) -> dict[str, list[RunResult]]:
    out: dict[str, list[RunResult]] = {}
    for runs in groups:
        for r in ok_runs(runs):
            if all(r.config.get(k) == v for k, v in overrides.items()) and (
                overrides or (r.config.get("anomaly") == "none" and r.config.get("slow_factor") == 1.0)
            ):
                out.setdefault(r.algorithm, []).append(r)
    return out


def penalty_requests(budget: str) -> list[RunRequest]:
    s = LocalSGDTask.claim_seeds(budget)
    return [RunRequest(a, dict(o), s) for o in (FAULT, CORRUPT, CLEAN) for a in PENALTY_ARMS]


def judge_penalty(groups: list[list[RunResult]]) -> tuple[Verdict, dict[str, Any]]:
    """Under each fault (a worker's learning rate spiking; a worker fed corrupted batches, the bad data the
    paper's spikes come from), EDiT without its penalty spikes (its largest rise above its running minimum
    exceeds its own clean run's by more than SPIKE_NATS) and EDiT with it does not, paired by seed: the
    control has EDiT's sync and momentum, so only the penalty differs, and each arm's clean run is its
    baseline. Without faults EDiT's final validation loss is no worse than the control's (the interval of
    EDiT - control lies below +0.02 nats). DiLoCo's figures are reported beside."""
    scenarios = ("lr-spike", "corrupt", "clean")  # the order of penalty_requests
    runs: dict[str, dict[str, list[RunResult]]] = {}
    for i, name in enumerate(scenarios):
        block = (*groups, *([[]] * 9))[3 * i : 3 * i + 3]
        runs[name] = {arm: ok_runs(g) for arm, g in zip(PENALTY_ARMS, block, strict=True)}
        if len(runs[name]["edit"]) < 2 or len(runs[name]["edit-no-penalty"]) < 2:
            return empty(f"{name}: fewer than 2 seeds of edit or edit without the penalty")
    clean = runs["clean"]
    parts = {}
    for fault in ("lr-spike", "corrupt"):
        quantity = "spike fault - clean"
        parts[f"edit-no-penalty: spike with {fault} - without > {SPIKE_NATS:g}"] = compare_runs(
            runs[fault]["edit-no-penalty"],
            clean["edit-no-penalty"],
            "loss_spike",
            ">",
            SPIKE_NATS,
            quantity=quantity,
        )
        parts[f"edit: spike with {fault} - without < {SPIKE_NATS:g}"] = compare_runs(
            runs[fault]["edit"], clean["edit"], "loss_spike", "<", SPIKE_NATS, quantity=quantity
        )
    parts["clean: edit - edit-no-penalty val loss < 0.02"] = compare_runs(
        clean["edit"], clean["edit-no-penalty"], "val_loss", "<", 0.02, quantity="val loss edit - control"
    )

    def figure(metric: str, scenario: str) -> dict[str, float | None]:
        return {a: mean_figure(r, metric) if r else None for a, r in runs[scenario].items()}

    return combine(
        parts,
        loss_spike={s: figure("loss_spike", s) for s in scenarios},
        flagged={s: figure("flagged", s) for s in ("lr-spike", "corrupt")},
        val_loss={s: figure("val_loss", s) for s in scenarios},
    )


def straggler_requests(budget: str) -> list[RunRequest]:
    return [RunRequest(a, dict(SLOW), LocalSGDTask.claim_seeds(budget)) for a in ("a-edit", "edit")]


def judge_straggler(groups: list[list[RunResult]]) -> tuple[Verdict, dict[str, Any]]:
    """With one worker 3x slower, A-EDiT reaches the target loss sooner in virtual time than EDiT (paired
    by seed; a run that never reaches it counts the whole budget)."""
    runs = _by(groups, SLOW)
    if len(runs.get("a-edit", [])) < 2 or len(runs.get("edit", [])) < 2:
        return empty("fewer than 2 seeds of a-edit or edit with a slow worker")
    parts = {
        "time to target a-edit - edit < 0": compare_runs(
            runs["a-edit"], runs["edit"], "time_to_target", "<", quantity="virtual time a-edit - edit"
        )
    }
    return combine(
        parts,
        time_to_target={n: mean_figure(r, "time_to_target") for n, r in runs.items()},
        reached_target={n: mean_figure(r, "reached_target") for n, r in runs.items()},
        val_loss={n: mean_figure(r, "val_loss") for n, r in runs.items()},
    )


def efficiency_requests(budget: str) -> list[RunRequest]:
    return [RunRequest(a, dict(LIMITED_LINK), LocalSGDTask.claim_seeds(budget)) for a in EFFICIENCY_ARMS]


def judge_efficiency(groups: list[list[RunResult]]) -> tuple[Verdict, dict[str, Any]]:
    """Under a limited link, EDiT reaches the target validation loss sooner in virtual time than
    synchronous DDP (which moves the model every step) and than DiLoCo (which moves it whole every tau steps,
    where EDiT's layer-wise sync hides behind the forward pass); paired by seed, a run that never reaches the
    target counts the whole budget. Both parts required; CO2, whose one-round-stale sync hides behind the
    next round's steps, is reported beside (EDiT's paper compares it on loss, not on this link)."""
    runs = _by(groups, LIMITED_LINK)
    if any(len(runs.get(a, [])) < 2 for a in ("edit", "ddp", "diloco")):
        return empty("fewer than 2 seeds of edit, ddp or diloco on the limited link")
    parts = {
        f"time to target edit - {other} < 0": compare_runs(
            runs["edit"], runs[other], "time_to_target", "<", quantity=f"virtual time edit - {other}"
        )
        for other in ("ddp", "diloco")
    }
    return combine(
        parts,
        time_to_target={n: mean_figure(r, "time_to_target") for n, r in runs.items()},
        reached_target={n: mean_figure(r, "reached_target") for n, r in runs.items()},
        val_loss={n: mean_figure(r, "val_loss") for n, r in runs.items()},
    )


# -------------------------------------------------------------------------------------------------- task
class LocalSGDTask(Task):
    id = TASK_ID
    # 2: A-EDiT carries the part of an interval a worker's last whole step did not fill into the next one
    #    (it dropped it), and the penalty claim has EDiT without its penalty as its control (issue 42)
    # 3: the clock charges EDiT's layer-wise sync the transfer its forward pass cannot hide, a whole-model
    #    sync (DiLoCo, local SGD) its whole transfer, a synchronous step the all-reduce its backward pass
    #    cannot hide (DDP's buckets), and the control scalars a sync sends (issue 42)
    version = 3
    paper = Paper(
        title="EDiT: a local-SGD-based efficient distributed training method for large language models",
        authors="Jialiang Cheng, Ning Gao, Yun Yue, Zhiling Ye, Jiadi Jiang, Jian Sha",
        arxiv="2412.07210",
    )
    summary = (
        "Local-SGD training on real torch.distributed (gloo) workers: EDiT's layer-wise syncs with the "
        "pseudo-gradient penalty and A-EDiT's time-based syncs, against synchronous DDP, local SGD, "
        "post-local SGD, DiLoCo and CO2 (its all-reduce overlapping the next round, one round stale), "
        "with a slow worker and injected faults on a virtual clock that charges "
        "EDiT's layer-wise sync the transfer its forward pass cannot hide, DDP's bucketed all-reduce what "
        "its backward pass cannot hide, and a whole-model sync its whole transfer. Departures: a "
        "Markov-chain corpus and a 2-block transformer stand in for the paper's LLM pre-training; CO2's "
        "staleness gap penalty is the public code's constant divisor (1), not the paper's adaptive one, "
        "whose formula could not be read offline."
    )
    Config = LocalSGDConfig
    budgets = {  # noqa: RUF012  (read-only class data, as in Task)
        "smoke": Budget(
            "smoke",
            {"steps": 60.0, "warmup_steps": 10, "equal_steps": 20, "anomaly_start": 30, "anomaly_steps": 10,
             "shard": 256, "val": 64, "d_model": 32},
            "2 workers, 60 steps of a 2-block d=32 transformer: ~5 s a run, most of it starting processes",
            check_minutes=3.0,  # tests/test_contract.py: 154 s under make test, 184 s in CI (2026-12-05)
            claim_seeds=(0, 1),
        ),
        "small": Budget(
            "small",
            {},
            "2 workers, 300 steps of a 2-block d=64 transformer: ~7 s a run",
            # bench claims -j 2 from an empty store, 2 idle cores (2026-12-05, v3): 14.0 min for 70 runs (the
            # penalty claim's 45, the straggler's 10 over 900 units, the limited link's 15)
            claims_minutes=14.0,
            claim_seeds=tuple(range(5)),
        ),
        "paper": Budget(
            "paper", {"workers": 4, "steps": 1000.0, "d_model": 128, "layers": 4},
            "4 workers, 1000 steps of a 4-block d=128 transformer",
            claim_seeds=tuple(range(10)),
        ),
    }  # fmt: skip
    metrics = (
        Metric("val_loss", False, "nats", "synced model's validation loss at the virtual time budget"),
        Metric("val_loss_at_equal_steps", False, "nats", "validation loss after equal_steps local steps"),
        Metric(
            "time_to_target", False, "units", "virtual time to the target validation loss (budget if never)"
        ),
        Metric("reached_target", True, "", "1 if the target loss was reached within the budget"),
        Metric("loss_spike", False, "nats", "largest rise of the validation loss above its running minimum"),
        Metric("mb_per_worker", False, "MB", "bytes each worker sent into collectives"),
        Metric("kb_per_step", False, "KB", "weight and gradient bytes per local step after the warm-up"),
        Metric("control_kb", False, "KB", "bytes of the scalars that steer syncs (norms, step counts)"),
        Metric("local_steps", True, "", "local steps per worker (mean)"),
        Metric("syncs", False, "", "outer syncs"),
        Metric("skipped_syncs", False, "", "A-EDiT syncs skipped for too few steps"),
        Metric("flagged", False, "", "pseudo-gradients the anomaly detector dropped (all layers, workers)"),
        Metric("wall_seconds", False, "s", "wall-clock seconds of the workers", measured=True),
    )
    protocol = "DistributedTrainer: sync_spec() -> SyncSpec (plain data every worker follows)"
    requires = Requirement("local-sgd", ("torch",))
    algorithm_modules = ("iclrbench.algorithms.local_sgd_training", "iclrbench.baselines.local_sgd_training")
    claims = (
        Claim(
            "penalty-stops-spikes",
            "With one worker's learning rate spiking 30x for 20 steps, and with one worker fed corrupted "
            "batches for 20 steps, EDiT without its pseudo-gradient penalty (same sync and momentum) spikes "
            f"(its largest rise above its running minimum exceeds its clean run's by > {SPIKE_NATS} nats) "
            "and EDiT does not; without faults EDiT's final validation loss is no worse than the control's "
            "(within 0.02 nats, paired). DiLoCo beside.",
            penalty_requests,
            judge_penalty,
            version=2,
            # small, v3 (2026-12-05): spikes above clean, no penalty 0.79 (lr) and 0.40 (corrupt), EDiT
            # 0.011 and 0.015; clean EDiT - control +0.0003 nats (v2 the same)
            expected="reproduced",
        ),
        Claim(
            "a-edit-beats-straggler",
            "With one worker 3x slower, A-EDiT reaches the target validation loss sooner in virtual time "
            "than EDiT, whose step-count syncs wait for the slow worker (over three times the budget, so "
            "that EDiT's own steps can reach the target).",
            straggler_requests,
            judge_straggler,
            version=2,
            # small, v3 (2026-12-05): both reach the target in every seed; A-EDiT at 290.7 units, EDiT at
            # 542.9 (paired -284 to -220)
            expected="reproduced",
        ),
        Claim(
            "edit-fastest-on-a-limited-link",
            "On a link that takes about a step to move the model, EDiT reaches the target validation loss "
            "sooner in virtual time than synchronous DDP and than DiLoCo (the paper's efficiency claim: "
            "EDiT's layer-wise sync overlaps the forward pass; paired by seed).",
            efficiency_requests,
            judge_efficiency,
            version=2,  # 2: CO2 beside
            # small, v3 (2026-12-05): EDiT 207.9 units, DiLoCo 229.9 (paired -29.5 to -14.4), DDP never
            # reached the target in its 300 (final loss 3.53 against a target of 3.51); claim v2
            # (2026-12-06): the same, and CO2 beside never reached it (final loss 3.748); its 20 runs took
            # 1 min 57 s with -j 2
            expected="reproduced",
        ),
    )

    def resources(self, config: LocalSGDConfig) -> Resources:
        return Resources(processes=config.workers, memory_gb=0.5 * config.workers)

    def evaluate(self, algorithm: Algorithm, config: LocalSGDConfig, seed: int) -> Outcome:
        from iclrbench.algorithms.local_sgd_training import DistributedTrainer

        if not isinstance(algorithm, DistributedTrainer):
            raise TypeError(f"{type(algorithm).__name__} is not a DistributedTrainer")
        spec = algorithm.sync_spec()
        result = launch(config, seed, dataclasses.asdict(spec))
        metrics = summarise(result, config, spec.warmup_steps if spec.kind == "local" else 0)
        trace = result["trace"]
        return Outcome(
            metrics=metrics,
            curves={
                "val_loss": Curve(list(map(float, trace["clock"])), list(map(float, trace["val_loss"])),
                                  "virtual time", "validation loss")
            },
            notes=(
                f"{config.workers} gloo workers, steps per worker {result['steps']}, target loss "
                f"{target_loss(config):.3f}; {result['syncs']} syncs, {result['flagged']} pseudo-gradients "
                f"flagged; model {result['model_bytes'] / 1e3:.0f} KB"
            ),
        )  # fmt: skip

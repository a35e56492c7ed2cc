"""One worker of a local-sgd-training run: a process of a torch.distributed (gloo) group that trains its copy
of the small causal transformer on its shard and syncs as the run's :class:`SyncSpec` says.

The rendezvous is torchrun's (``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT`` in the
environment), so the same entry point runs under the task's driver or under ``torchrun`` across machines::

    torchrun --nnodes 2 --nproc-per-node 1 --node-rank 0 --master-addr HOST --master-port 29500 \\
        -m iclrbench.algorithms.local_sgd_training.worker --spec run.json      # the same on the other node,
        rank 1

``run.json`` holds ``{"config": {...}, "seed": 0, "sync": {...}, "out": "result.json"}`` (the driver
writes one per run; rank 0 writes the result). Under the driver (``ICLRBENCH_DIE_WITH_PARENT=1``) a worker
dies with the process that started it, so a ``kill -9`` of the driver leaves no worker, port or socket.

Sync: when a sync is due, every module's forward pre-hook syncs that module's parameters just before the
module runs, during the forward pass that evaluates the synced model on the validation set. The virtual
clock charges it by the method's schedule: EDiT's layer-wise sync (``SyncSpec.layerwise``) overlaps each
module's collective with the forward computation of the modules before it, so only the transfer beyond that
compute is charged (:func:`iclrbench.envs.local_sgd_training.layerwise_sync_time`); a whole-model sync
(DiLoCo, local SGD) is charged its whole transfer. A synchronous step (DDP, and every method's warm-up)
overlaps each module's gradient all-reduce with the backward of the modules before it, as DDP's buckets do
(:func:`iclrbench.envs.local_sgd_training.bucketed_allreduce_time`). CO2 (``SyncSpec.delayed``) overlaps
a sync's all-reduce with the next round's local steps: its outer step applies the previous round's average,
and the clock charges only the transfer beyond those steps.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np

from iclrbench.algorithms.local_sgd_training import EwmaDetector, SyncSpec, softmax_weights
from iclrbench.core.seeding import seed_for
from iclrbench.envs.local_sgd_training import (
    FORWARD_SHARE,
    TASK_ID,
    Chain,
    LocalSGDConfig,
    World,
    bucketed_allreduce_time,
    collective_cost,
    layerwise_sync_time,
    make_model,
    make_world,
    parameter_bytes,
)


class Comm:
    """torch.distributed collectives that count the bytes this worker sends (its payload per collective:
    an all-reduce of n floats sends 4n bytes, an all-gather its own tensor): ``bytes`` for weights and
    gradients, ``control_bytes`` for the scalars that steer a sync (norms, step counts)."""

    def __init__(self) -> None:
        import torch.distributed as dist

        self.dist = dist
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        self.bytes = 0
        self.control_bytes = 0

    def all_reduce(self, tensor: Any) -> Any:
        self.bytes += tensor.numel() * tensor.element_size()
        self.dist.all_reduce(tensor)
        return tensor

    def all_gather(self, tensor: Any) -> list[Any]:
        """Gather one small control tensor from every worker."""
        import torch

        self.control_bytes += tensor.numel() * tensor.element_size()
        out = [torch.empty_like(tensor) for _ in range(self.world)]
        self.dist.all_gather(out, tensor)
        return out


class OuterSync:
    """The outer step, module by module, in forward pre-hooks (see the module docstring)."""

    def __init__(self, modules: list[Any], spec: SyncSpec, comm: Comm) -> None:
        self.modules, self.spec, self.comm = modules, spec, comm
        self.last: list[Any] = [None] * len(modules)
        self.buf: list[Any] = [None] * len(modules)
        self.detectors = [
            EwmaDetector(spec.ewma_alpha, spec.z_threshold, spec.detector_warmup) for _ in modules
        ]
        self.pending: set[int] = set()
        self.shares: list[float] | None = None
        self.stale: list[Any] = [None] * len(modules)  # CO2: the average still in flight, per module
        self.moved = [0] * len(modules)  # bytes each module's last sync sent (weights and control)
        self.flagged = 0
        for j, module in enumerate(modules):
            module.register_forward_pre_hook(self._hook(j))

    def start(self, average: bool = False) -> None:
        """The local phase begins from the current weights, identical on every worker unless a fault
        during the warm-up made one diverge: then (``average``) from the workers' mean."""
        for j, m in enumerate(self.modules):
            theta = _flat(m).clone()
            if average:
                theta = self.comm.all_reduce(theta) / self.comm.world
                _assign(m, theta)
            self.last[j] = theta

    def request(self, shares: list[float] | None = None) -> None:
        self.pending = set(range(len(self.modules)))
        self.shares = shares

    def _hook(self, j: int) -> Any:
        def hook(module: Any, args: Any) -> None:
            if j in self.pending:
                self.pending.discard(j)
                before = self.comm.bytes + self.comm.control_bytes
                self.sync(j)
                self.moved[j] = self.comm.bytes + self.comm.control_bytes - before

        return hook

    def sync(self, j: int) -> None:
        import torch

        spec, comm = self.spec, self.comm
        theta = _flat(self.modules[j])
        delta = self.last[j] - theta
        if spec.penalty:
            norm = float(delta.norm())
            detector = self.detectors[j]
            if detector.is_outlier(norm):
                delta.zero_()
                norm += 1e6  # its softmax weight vanishes
                self.flagged += 1
            else:
                detector.update(norm)
            norms = [float(t) for t in comm.all_gather(torch.tensor([norm], dtype=torch.float64))]
            normal = [n < 1e6 for n in norms]
            if not any(normal):  # every worker anomalous: no outer step, back to the global weights
                _assign(self.modules[j], self.last[j])
                return
            weights = softmax_weights(norms, spec.temperature)
            if spec.step_weight > 0 and self.shares is not None:
                # a dropped worker's step share goes to the others (its delta is zero)
                kept = [s if ok else 0.0 for s, ok in zip(self.shares, normal, strict=True)]
                shares = [s / sum(kept) for s in kept] if sum(kept) > 0 else kept
                r = spec.step_weight
                weights = [(1 - r) * w + r * s for w, s in zip(weights, shares, strict=True)]
            avg = comm.all_reduce(delta * weights[comm.rank])
            size = float(avg.norm())
            avg *= min(1.0, spec.clip / (size + 1e-6))
        else:
            avg = comm.all_reduce(delta) / comm.world
        if spec.delayed:
            # CO2: this round's average arrives during the next round; the outer step takes the previous
            # round's (none after the first round: the workers go on from where that round began)
            avg, self.stale[j] = self.stale[j], avg
            if avg is None:
                _assign(self.modules[j], self.last[j])
                return
            avg = avg / spec.gap_penalty
        if spec.momentum > 0:
            if self.buf[j] is None:
                self.buf[j] = avg.clone()
            else:
                self.buf[j].mul_(spec.momentum).add_(avg)
            if spec.momentum_clamp > 0:
                self.buf[j].clamp_(-spec.momentum_clamp, spec.momentum_clamp)
            update = avg + spec.momentum * self.buf[j] if spec.nesterov else self.buf[j]
        else:
            update = avg
        self.last[j] = self.last[j] - spec.outer_lr * update
        _assign(self.modules[j], self.last[j])


def _flat(module: Any) -> Any:
    import torch

    return torch.cat([p.detach().reshape(-1) for p in module.parameters()])


def _assign(module: Any, flat: Any) -> None:
    offset = 0
    for p in module.parameters():
        n = p.numel()
        p.data.copy_(flat[offset : offset + n].view_as(p))
        offset += n


@dataclasses.dataclass
class Trace:
    """What rank 0 reports: the synced model's validation loss over virtual time and steps."""

    clock: list[float] = dataclasses.field(default_factory=list)
    steps: list[float] = dataclasses.field(default_factory=list)
    val_loss: list[float] = dataclasses.field(default_factory=list)


def train(config: LocalSGDConfig, seed: int, spec: SyncSpec) -> dict[str, Any]:
    import torch
    import torch.nn.functional as F

    comm = Comm()
    rank, world = comm.rank, comm.world
    if world != config.workers:
        raise ValueError(f"the group has {world} workers, the config {config.workers}")
    torch.manual_seed(seed_for(seed, TASK_ID, "init") % 2**63)  # the same initial weights on every worker
    model = make_model(config)
    chain = Chain.make(config.vocab, config.concentration, config.data_seed)
    shard = torch.from_numpy(
        chain.sample(
            config.shard, config.seq_len + 1, np.random.default_rng(seed_for(seed, TASK_ID, f"shard-{rank}"))
        )
    )
    val = torch.from_numpy(
        chain.sample(config.val, config.seq_len + 1, np.random.default_rng(seed_for(seed, TASK_ID, "val")))
    )
    batches = np.random.default_rng(seed_for(seed, TASK_ID, f"batches-{rank}"))
    state: World = make_world(config, seed)
    permutation = torch.tensor(state.permutation)
    costs = state.step_costs
    model_bytes = parameter_bytes(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=0.0)
    trace, clock, step = Trace(), 0.0, 0
    mean_steps = 0.0

    def local_step(ddp_model: Any = None) -> None:
        nonlocal step
        ids = shard[batches.integers(len(shard), size=config.batch)]
        faulty = state.faulty_now(rank, step, config)
        if faulty and config.anomaly == "corrupt":
            ids = permutation[ids]
        for group in optimizer.param_groups:
            group["lr"] = config.lr * (config.lr_spike if faulty and config.anomaly == "lr-spike" else 1.0)
        net = ddp_model if ddp_model is not None else model
        logits = net(ids[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, config.vocab), ids[:, 1:].reshape(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if ddp_model is None and sync_grads:
            for p in model.parameters():
                comm.all_reduce(p.grad).div_(world)
        optimizer.step()
        step += 1

    def evaluate() -> None:
        with torch.no_grad():
            logits = model(val[:, :-1])
            loss = float(F.cross_entropy(logits.reshape(-1, config.vocab), val[:, 1:].reshape(-1)))
        trace.clock.append(clock)
        trace.steps.append(mean_steps)
        trace.val_loss.append(loss)

    budget = config.steps
    sync_grads = True
    # a synchronous step: the slowest worker's step, then the gradients' all-reduce as DDP's buckets overlap
    # it with the backward pass (module by module, last module first)
    backwards = [max(costs) * (1 - FORWARD_SHARE) * parameter_bytes(m) / model_bytes for m in model][::-1]
    transfers = [collective_cost(parameter_bytes(m), config) for m in model][::-1]
    synchronous_step = max(costs) + bucketed_allreduce_time(backwards, transfers)
    if spec.kind == "ddp":
        from torch.nn.parallel import DistributedDataParallel

        ddp = DistributedDataParallel(model)
        evaluate()
        while clock + synchronous_step <= budget:
            comm.bytes += model_bytes  # DDP all-reduces every gradient once per step
            local_step(ddp)
            clock += synchronous_step
            mean_steps = float(step)
            if step % spec.tau == 0:
                evaluate()
        if trace.steps[-1] != step:
            evaluate()  # the final model
        return _result(
            trace,
            comm,
            step,
            model_bytes,
            spec,
            config,
            flagged=0,
            syncs=0,
            skipped=0,
            local_bytes=comm.bytes,
        )

    evaluate()
    while step < spec.warmup_steps and clock + synchronous_step <= budget:
        local_step()
        clock += synchronous_step
        mean_steps = float(step)
        if step % spec.tau == 0:
            evaluate()
    sync_grads = False
    sync_wall: list[float] = []
    outer = OuterSync(list(model), spec, comm)
    outer.start(average=config.anomaly != "none" and config.anomaly_start < spec.warmup_steps)
    warm_bytes, warm_steps = comm.bytes, step
    modules = list(model)
    shares = [parameter_bytes(m) / model_bytes for m in modules]

    def sync_time(moved: list[int]) -> float:
        """Virtual time of a sync that sent ``moved`` bytes per module (weights and the control scalars),
        by the method's schedule; the forward it overlaps runs at the slowest worker's pace, each module's
        share of it in proportion to its parameters (a matrix product's FLOPs per token; the embedding's
        lookup is cheaper than that, so the compute ahead of the first block is a little overstated)."""
        transfers = [collective_cost(b, config) for b in moved]
        if spec.delayed:  # CO2: the all-reduce runs during the next round's local steps
            return max(0.0, sum(transfers) - spec.tau * max(costs))
        if not spec.layerwise:
            return sum(transfers)
        return layerwise_sync_time(transfers, [max(costs) * FORWARD_SHARE * share for share in shares])

    # what a sync costs before it runs (the budget's guard): the weights, a norm per module and worker
    # (EDiT's penalty) and the step counts (A-EDiT)
    sync_cost = sync_time(
        [parameter_bytes(m) + 8 * int(spec.penalty) for m in modules[:-1]]
        + [parameter_bytes(modules[-1]) + 8 * int(spec.penalty) + 8]
    )
    syncs = skipped = 0
    if spec.by_time:
        interval = spec.sync_interval
        since = 0
        carried = 0.0  # time of this worker's interval left over after its last whole step, carried on
        while clock + interval + sync_cost <= budget:
            available = interval + carried
            todo = int(available / costs[rank] + 1e-9)
            carried = max(0.0, available - todo * costs[rank])
            for _ in range(todo):
                local_step()
            since += todo
            counts = [int(t) for t in comm.all_gather(torch.tensor([since], dtype=torch.int64))]
            mean_steps = float(np.mean([c for c in _gather_int(comm, step)]))
            clock += interval
            if sum(counts) < spec.min_total_steps:
                skipped += 1
                continue
            outer.request([c / sum(counts) for c in counts])
            tick = time.perf_counter()
            evaluate()  # the hooks sync each module before it runs
            sync_wall.append(time.perf_counter() - tick)
            clock += sync_time(outer.moved)
            trace.clock[-1] = clock
            syncs += 1
            since = 0
    else:
        round_time = spec.tau * max(costs)
        while clock + round_time + sync_cost <= budget:
            for _ in range(spec.tau):
                local_step()
            mean_steps = float(step)
            clock += round_time
            outer.request()
            tick = time.perf_counter()
            evaluate()  # the hooks sync each module before it runs
            sync_wall.append(time.perf_counter() - tick)
            clock += sync_time(outer.moved)
            trace.clock[-1] = clock
            syncs += 1
    flagged = sum(_gather_int(comm, outer.flagged))
    local_bytes = comm.bytes - warm_bytes
    result = _result(trace, comm, step, model_bytes, spec, config, flagged, syncs, skipped, local_bytes)
    result["local_steps_after_warmup"] = float(np.mean(_gather_int(comm, step))) - warm_steps
    result["sync_wall_ms"] = 1e3 * float(np.median(sync_wall)) if sync_wall else float("nan")
    return result


def _gather_int(comm: Comm, value: int) -> list[int]:
    """Every worker's ``value`` (bookkeeping for the report: not counted as traffic)."""
    import torch

    out = [torch.zeros(1, dtype=torch.int64) for _ in range(comm.world)]
    comm.dist.all_gather(out, torch.tensor([value], dtype=torch.int64))
    return [int(t) for t in out]


def _result(
    trace: Trace,
    comm: Comm,
    step: int,
    model_bytes: int,
    spec: SyncSpec,
    config: LocalSGDConfig,
    flagged: int,
    syncs: int,
    skipped: int,
    local_bytes: int,
) -> dict[str, Any]:
    steps = _gather_int(comm, step)
    return {
        "trace": dataclasses.asdict(trace),
        "bytes": comm.bytes,
        "control_bytes": comm.control_bytes,
        "local_bytes": local_bytes,
        "local_steps_after_warmup": float(np.mean(steps)) if spec.kind == "ddp" else 0.0,
        "steps": steps,
        "model_bytes": model_bytes,
        "flagged": flagged,
        "syncs": syncs,
        "skipped": skipped,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spec", required=True, help="the run's JSON: config, seed, sync, out")
    args = parser.parse_args(argv)
    if os.environ.get("ICLRBENCH_DIE_WITH_PARENT") == "1":
        from iclrbench.executors import die_with_parent

        die_with_parent()
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    run = json.loads(Path(args.spec).read_text())
    config = LocalSGDConfig(**run["config"])
    spec = SyncSpec(**run["sync"])
    started = time.perf_counter()
    dist.init_process_group(
        "gloo",
        rank=int(os.environ["RANK"]),
        world_size=int(os.environ["WORLD_SIZE"]),
        timeout=timedelta(seconds=float(os.environ.get("ICLRBENCH_GLOO_TIMEOUT", "60"))),
    )
    try:
        result = train(config, int(run["seed"]), spec)
        dist.barrier()
    finally:
        dist.destroy_process_group()
    if int(os.environ["RANK"]) == 0:
        result["wall_seconds"] = time.perf_counter() - started
        out = Path(run["out"])
        tmp = out.with_name(out.name + ".tmp")
        tmp.write_text(json.dumps(result))
        os.replace(tmp, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())

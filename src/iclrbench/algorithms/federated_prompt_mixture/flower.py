"""federated-prompt-mixture on Flower: the ``ClientApp``, the ``ServerApp`` with our ``Strategy``, and one
run in Flower's simulation runtime (Ray), with the bytes counted from the messages Flower sends.

- :data:`client_app`: a Flower ``ClientApp``. On ``query`` it says which partition it holds; on ``train``
  it rebuilds the method from the message's configuration, regenerates its own partition (a pure function
  of the run seed and its ``partition-id``), runs the method's client half and replies with the upload;
  on ``evaluate`` it tests. Its private state (a personal prompt, pFedMoAP's gate and experts) lives in
  Flower's per-node ``context.state`` and is never sent.
- :class:`PromptStrategy`: a Flower ``Strategy`` whose sampling is the server's (participation x N clients
  a round, seeded) and whose downlink and aggregation are the method's server half.
- :func:`make_server_app`: a ``ServerApp`` that runs the strategy for ``rounds`` rounds, then evaluates
  every client once; it counts the bytes of each message's content (Flower's own serialisation, summed
  over the message's record tree) each way.
- :func:`simulate`: one run: ``flwr.simulation.run_simulation`` with ``clients`` virtual SuperNodes, each
  ClientApp on one CPU; Ray's temporary folder and ``FLWR_HOME`` under the task cache; telemetry off; the
  Ray session is shut down when the run ends, fails or is interrupted.

The same two apps run on a real federation (docs/tasks/federated_prompt_mixture.md: ``flwr run .
<federation>`` from a Flower app project whose ``[tool.flwr.app.components]`` name ``...:server_app`` and
``...:client_app``); there the ServerApp reads its settings from the run config keys ``algorithm``,
``params``, ``config`` (JSON) and ``seed``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from iclrbench.algorithms.federated_prompt_mixture import Arrays, LocalData, PromptMethod, algorithm_arrays
from iclrbench.core.seeding import seed_for
from iclrbench.envs.federated_prompt_mixture import (
    TASK_ID,
    FederatedPromptConfig,
    client_images,
    client_split,
)

#: slowest reply the server waits for, per round (seconds)
ROUND_TIMEOUT = 1800.0


# --------------------------------------------------------------------------------------------- settings
@dataclasses.dataclass(frozen=True)
class RunSettings:
    """Everything a client needs to rebuild the run: the method, its parameters, the config, the seed."""

    algorithm: str
    params: Mapping[str, Any]
    config: Mapping[str, Any]
    seed: int

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> RunSettings:
        data = json.loads(text)
        return cls(data["algorithm"], data["params"], data["config"], int(data["seed"]))

    @classmethod
    def from_run_config(cls, run_config: Mapping[str, Any]) -> RunSettings:
        """From ``flwr run``'s run config (pyproject ``[tool.flwr.app.config]`` or ``--run-config``)."""
        return cls(
            str(run_config.get("algorithm", "pfedmoap")),
            json.loads(str(run_config.get("params", "{}"))),
            json.loads(str(run_config.get("config", "{}"))),
            int(run_config.get("seed", 0)),
        )

    def _typed(self) -> tuple[type, Any, FederatedPromptConfig]:
        """(algorithm class, typed params, typed config); bad names or values raise UserError."""
        from iclrbench.core import catalog
        from iclrbench.core import config as cfg

        # on the config's own defaults, not a budget's: a partial config (flwr run) means what it says
        config = cfg.build(FederatedPromptConfig, dict(self.config), what=f"{TASK_ID} config")
        algo_cls = catalog.get_algorithm(TASK_ID, self.algorithm)
        params = cfg.build(algo_cls.Params, dict(self.params), what=f"{self.algorithm} parameter")
        return algo_cls, params, config

    def canonical(self) -> RunSettings:
        """The same settings with every parameter and config field spelled out, as `bench` sends them: the
        settings travel in every message, so a partial run config (flwr run) would otherwise count fewer
        bytes than the same federation run through `bench`."""
        from iclrbench.core.config import as_dict

        _, params, config = self._typed()
        return RunSettings(self.algorithm, as_dict(params), as_dict(config), self.seed)

    def build(self) -> tuple[PromptMethod, FederatedPromptConfig]:
        algo_cls, params, config = self._typed()
        rng = np.random.default_rng(seed_for(self.seed, TASK_ID, self.algorithm))
        method = algo_cls(params, config, rng)
        if not isinstance(method, PromptMethod):
            raise TypeError(f"{self.algorithm} does not implement PromptMethod")
        return method, config


@functools.lru_cache(maxsize=8)
def _method(settings_json: str) -> tuple[PromptMethod, FederatedPromptConfig]:
    return RunSettings.from_json(settings_json).build()


@functools.lru_cache(maxsize=64)
def local_data(settings_json: str, partition: int) -> LocalData:
    """One client's frozen features (its own images through the frozen image tower), cached per process."""
    import torch

    from iclrbench.models import vision_language as vl

    settings = RunSettings.from_json(settings_json)
    _, config = _method(settings_json)
    data = client_split(config, settings.seed)[partition]
    train, test = client_images(data, settings.seed, config.class_names)
    return LocalData(
        train_x=torch.from_numpy(vl.image_features(train)),
        train_y=torch.from_numpy(data.train_labels),
        test_x=torch.from_numpy(vl.image_features(test)),
        test_y=torch.from_numpy(data.test_labels),
        encoder=_encoder(config.class_names, config.n_ctx, config.precision),
        logit_scale=vl.logit_scale(),
        zero_shot=torch.from_numpy(vl.zero_shot_features(config.class_names)),
        run_seed=settings.seed,
    )


@functools.lru_cache(maxsize=4)
def _encoder(class_names: tuple[str, ...], n_ctx: int, precision: str) -> Any:
    from iclrbench.models.vision_language import PromptedTextEncoder

    return PromptedTextEncoder(class_names, n_ctx, precision)


# ----------------------------------------------------------------------------------------- record utils
def to_record(arrays: Mapping[str, np.ndarray]) -> Any:
    from flwr.app import Array, ArrayRecord

    return ArrayRecord({k: Array(v) for k, v in algorithm_arrays(arrays).items()})


def from_record(record: Any) -> Arrays:
    return {k: np.asarray(v.numpy(), dtype=np.float32) for k, v in record.items()}


def content_bytes(message: Any) -> int:
    """Bytes of a message's content as Flower serialises it: the sum over the content's object tree
    (records, arrays, array chunks) of each object's deflated size. Message headers (ids, timestamps,
    ~100 bytes) are left out so that the count is the same on every run."""
    try:  # Flower >= 1.20 ships messages as trees of inflatable objects (identical objects sent once)
        from flwr.supercore.inflatable.inflatable_object import get_all_nested_objects
    except ImportError:  # older layouts: the content's protobuf encoding
        from flwr.common.serde import recorddict_to_proto

        return len(recorddict_to_proto(message.content).SerializeToString())
    return sum(len(obj.deflate()) for obj in get_all_nested_objects(message.content).values())


# ------------------------------------------------------------------------------------------- client app
def _client_handlers() -> Any:
    from flwr.app import ConfigRecord, Context, Message, MetricRecord, RecordDict
    from flwr.clientapp import ClientApp

    app = ClientApp()

    def _setup(msg: Message, context: Context) -> tuple[str, PromptMethod, int, LocalData, Arrays]:
        import torch

        torch.set_num_threads(1)  # one virtual client per CPU
        settings_json = str(msg.content["config"]["settings"])
        method, config = _method(settings_json)
        # several federations (seeds) may share one runtime, N nodes each: the client is the id modulo N
        partition = int(context.node_config["partition-id"]) % config.clients
        local = from_record(context.state["local"]) if "local" in context.state else {}
        return settings_json, method, partition, local_data(settings_json, partition), local

    @app.query()
    def query(msg: Message, context: Context) -> Message:
        if "partition-id" not in context.node_config:
            raise KeyError("this SuperNode has no partition-id: start it with --node-config 'partition-id=K'")
        partition = int(context.node_config["partition-id"])
        return Message(RecordDict({"metrics": MetricRecord({"partition-id": partition})}), reply_to=msg)

    @app.train()
    def train(msg: Message, context: Context) -> Message:
        started = time.perf_counter()
        settings_json, method, partition, data, local = _setup(msg, context)
        round_ = int(msg.content["config"]["round"])
        seed = RunSettings.from_json(settings_json).seed
        down = from_record(msg.content["arrays"])
        upload, local = method.local_train(
            data, down, local, seed_for(seed, "client", str(partition), str(round_))
        )
        context.state["local"] = to_record(local)
        metrics = {"num-examples": len(data.train_y), "seconds": time.perf_counter() - started}
        return Message(
            RecordDict({"arrays": to_record(upload), "metrics": MetricRecord(metrics)}), reply_to=msg
        )

    @app.evaluate()
    def evaluate(msg: Message, context: Context) -> Message:
        settings_json, method, partition, data, local = _setup(msg, context)
        seed = RunSettings.from_json(settings_json).seed
        down = from_record(msg.content["arrays"])
        acc = method.local_evaluate(data, down, local, seed_for(seed, "client", str(partition), "evaluate"))
        metrics = {"accuracy": acc, "num-examples": len(data.test_y)}
        return Message(RecordDict({"metrics": MetricRecord(metrics)}), reply_to=msg)

    del ConfigRecord
    return app


client_app = _client_handlers()


# ------------------------------------------------------------------------------------------- server app
@dataclasses.dataclass
class RunLog:
    """What the ServerApp reports back to :func:`simulate`."""

    accuracy: dict[int, float] = dataclasses.field(default_factory=dict)
    bytes_up: int = 0
    bytes_down: int = 0
    rounds: int = 0
    round_seconds: list[float] = dataclasses.field(default_factory=list)
    client_seconds: float = 0.0
    error: BaseException | None = None


def exchange(
    grid: Any, groups: list[list[Any]], logs: list[RunLog], timeout: float = ROUND_TIMEOUT
) -> list[list[Any]]:
    """Send every federation's messages in one ``send_and_receive`` (the federations' clients compute side
    by side) and return each federation's replies; each message's content bytes are counted to its
    federation's log, down and up. A client's error or a missing reply ends the run."""
    owner = {}
    for g, (messages, log) in enumerate(zip(groups, logs, strict=True)):
        log.bytes_down += sum(content_bytes(m) for m in messages)
        owner.update({m.metadata.dst_node_id: g for m in messages})
    sent = [m for messages in groups for m in messages]
    replies = list(grid.send_and_receive(sent, timeout=timeout))
    for reply in replies:
        if reply.has_error():
            raise RuntimeError(f"a client failed: {reply.error.reason}")
    if len(replies) < len(sent):
        raise RuntimeError(f"{len(sent) - len(replies)} of {len(sent)} clients did not reply")
    out: list[list[Any]] = [[] for _ in groups]
    for reply in sorted(replies, key=lambda r: r.metadata.src_node_id):
        g = owner[reply.metadata.src_node_id]
        out[g].append(reply)
        logs[g].bytes_up += content_bytes(reply)
    return out


def _strategy_base() -> type:
    from flwr.serverapp.strategy import Strategy

    return Strategy


class PromptStrategy(_strategy_base()):  # type: ignore[misc]
    """A Flower Strategy driven by a :class:`PromptMethod`: seeded client sampling, the method's per-client
    downlink (pFedMoAP: each client its own experts), the method's aggregation; the ArrayRecord it returns
    from ``aggregate_train`` is the aggregate prompt. Our ServerApp calls its ``configure_*`` /
    ``aggregate_*`` itself rather than ``Strategy.start``: federations of several seeds share one runtime
    and their rounds go out together, and a query round first maps nodes to partitions."""

    def __init__(self, method: PromptMethod, config: FederatedPromptConfig, settings: RunSettings) -> None:
        self.method, self.config, self.settings = method, config, settings
        self.state = method.init_server(config, settings.seed)
        self.nodes: dict[int, int] = {}  # partition id -> node id
        self.sampled: list[int] = []

    def _message(self, partition: int, arrays: Arrays, kind: str, round_: int) -> Any:
        from flwr.app import ConfigRecord, Message, RecordDict

        config = ConfigRecord({"settings": self.settings.to_json(), "round": round_})
        content = RecordDict({"arrays": to_record(arrays), "config": config})
        return Message(content, dst_node_id=self.nodes[partition], message_type=kind, group_id=str(round_))

    def configure_train(self, server_round: int, arrays: Any, config: Any, grid: Any) -> Iterable[Any]:
        rng = np.random.default_rng(seed_for(self.settings.seed, TASK_ID, "sample", str(server_round)))
        if self.method.trains_every_client:
            self.sampled = list(range(self.config.clients))
        else:
            chosen = rng.choice(self.config.clients, self.config.per_round, replace=False)
            self.sampled = sorted(chosen.tolist())
        return [
            self._message(c, self.method.downlink(self.state, c, server_round), "train", server_round)
            for c in self.sampled
        ]

    def aggregate_train(self, server_round: int, replies: Iterable[Any]) -> tuple[Any, Any]:
        from flwr.app import MetricRecord

        partitions = {node: part for part, node in self.nodes.items()}
        uploads = {
            partitions[r.metadata.src_node_id]: (
                from_record(r.content["arrays"]),
                int(r.content["metrics"]["num-examples"]),
            )
            for r in replies
        }
        seconds = sum(float(r.content["metrics"]["seconds"]) for r in replies)
        self.method.aggregate(self.state, uploads, server_round)
        # who has trained, with how many examples: methods read it to send first-contact arrays once
        self.state.sizes.update({client: size for client, (_, size) in uploads.items()})
        return to_record({"ctx": self.state.global_ctx}), MetricRecord({"client-seconds": seconds})

    def configure_evaluate(self, server_round: int, arrays: Any, config: Any, grid: Any) -> Iterable[Any]:
        return [
            self._message(c, self.method.eval_downlink(self.state, c), "evaluate", server_round)
            for c in sorted(self.nodes)
        ]

    def aggregate_evaluate(self, server_round: int, replies: Iterable[Any]) -> Any:
        from flwr.app import MetricRecord

        accs = [float(r.content["metrics"]["accuracy"]) for r in replies]
        return MetricRecord({"accuracy": float(np.mean(accs)), "worst-accuracy": float(np.min(accs))})

    def summary(self) -> None:
        return None


def _wait_for_nodes(grid: Any, count: int, timeout: float = 120.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while True:
        nodes = sorted(grid.get_node_ids())
        if len(nodes) >= count:
            return nodes
        if time.monotonic() > deadline:
            raise RuntimeError(f"only {len(nodes)} of {count} SuperNodes connected in {timeout:.0f} s")
        time.sleep(0.05)


def run_rounds(
    grid: Any,
    federations: list[RunSettings],
    logs: list[RunLog],
    progress: Callable[[int, int], None] | None = None,
) -> None:
    """The ServerApp's body for one or more independent federations (the same config; a seed and a method
    each) on nodes ``[g N, (g + 1) N)``: learn which node holds which partition, ``rounds`` rounds of each
    federation's strategy (their clients computing side by side), then one evaluation of every client."""
    from flwr.app import Message, RecordDict

    built = [settings.build() for settings in federations]
    strategies = [PromptStrategy(m, c, s) for (m, c), s in zip(built, federations, strict=True)]
    clients, rounds = built[0][1].clients, built[0][1].rounds
    nodes = _wait_for_nodes(grid, clients * len(federations))
    hello = [[Message(RecordDict(), dst_node_id=n, message_type="query", group_id="0") for n in nodes]]
    for reply in exchange(grid, hello, [RunLog()])[0]:  # set-up, not any one federation's traffic
        partition = int(reply.content["metrics"]["partition-id"])
        if not 0 <= partition < clients * len(federations):
            raise RuntimeError(
                f"a SuperNode holds partition-id {partition}, outside 0..{clients * len(federations) - 1}: "
                f"start N = {clients} SuperNodes with --node-config 'partition-id=<0..N-1>'"
            )
        strategies[partition // clients].nodes[partition % clients] = reply.metadata.src_node_id
    missing = [(g, c) for g, st in enumerate(strategies) for c in range(clients) if c not in st.nodes]
    if missing:
        raise RuntimeError(f"no SuperNode holds partition(s) {missing[:5]} (two nodes share a partition-id?)")
    for round_ in range(1, rounds + 1):
        started = time.perf_counter()
        sent = [strategy.configure_train(round_, None, None, grid) for strategy in strategies]
        for strategy, replies, log in zip(strategies, exchange(grid, sent, logs), logs, strict=True):
            _, metrics = strategy.aggregate_train(round_, replies)
            log.client_seconds += float(metrics["client-seconds"])
            log.round_seconds.append(time.perf_counter() - started)
            log.rounds = round_
        if progress is not None:
            progress(round_, rounds)
    sent = [strategy.configure_evaluate(rounds, None, None, grid) for strategy in strategies]
    for strategy, replies, log in zip(strategies, exchange(grid, sent, logs), logs, strict=True):
        partitions = {node: part for part, node in strategy.nodes.items()}
        log.accuracy = {
            partitions[r.metadata.src_node_id]: float(r.content["metrics"]["accuracy"]) for r in replies
        }


def make_server_app(
    federations: list[RunSettings] | None,
    logs: list[RunLog],
    progress: Callable[[int, int], None] | None = None,
) -> Any:
    """A ServerApp for ``federations`` (or, when None, one federation from the run config of ``flwr
    run``); ``logs`` receives one RunLog per federation."""
    from flwr.app import Context
    from flwr.serverapp import Grid, ServerApp

    app = ServerApp()

    @app.main()
    def main(grid: Grid, context: Context) -> None:
        runs = federations or [RunSettings.from_run_config(context.run_config).canonical()]
        run_logs = logs if federations is not None else [RunLog()]  # flwr run: a fresh log per run
        try:
            run_rounds(grid, runs, run_logs, progress)
        except BaseException as exc:  # reported by simulate(); Flower would only log it
            run_logs[0].error = exc
            raise
        if federations is None:  # under `flwr run` the log is the report
            from flwr.common.logger import FLOWER_LOGGER

            log = run_logs[0]
            accs = [log.accuracy[c] for c in sorted(log.accuracy)]
            FLOWER_LOGGER.info(
                "accuracy %.4f (worst %.4f) over %d clients; bytes up %d, down %d",
                float(np.mean(accs)),
                float(np.min(accs)),
                len(accs),
                log.bytes_up,
                log.bytes_down,
            )

    return app


#: the ServerApp ``flwr run`` loads (settings from the run config)
server_app = make_server_app(None, [])


# ---------------------------------------------------------------------------------------------- running
def _runtime_dirs() -> tuple[Path, Path]:
    """(FLWR_HOME, the folder of Ray's per-run temp folders) under the task cache. Ray's socket paths must
    stay under 107 bytes, so a cache deeper than ~40 characters gets a folder under the system temp."""
    from iclrbench.core.cache import cache_root

    root = cache_root().resolve() / TASK_ID
    flwr_home = root / "flwr-home"
    ray_tmp = root / "ray"
    if len(str(ray_tmp)) > 40:
        ray_tmp = Path(tempfile.gettempdir()) / f"iclrbench-ray-{os.getuid()}"
    flwr_home.mkdir(parents=True, exist_ok=True)
    ray_tmp.mkdir(parents=True, exist_ok=True)
    return flwr_home, ray_tmp


@contextlib.contextmanager
def _environment(updates: Mapping[str, str]) -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in updates}
    os.environ.update(updates)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


_SIMULATION_LOCK = threading.Lock()


def simulate(
    settings: RunSettings, actors: int, progress: Callable[[int, int], None] | None = None
) -> RunLog:
    """One federation in Flower's simulation runtime (:func:`simulate_many` of one)."""
    return simulate_many([settings], actors, progress)[0]


def simulate_many(
    federations: list[RunSettings], actors: int, progress: Callable[[int, int], None] | None = None
) -> list[RunLog]:
    """Run independent federations (the same config; a seed and a method each) in one Flower simulation
    runtime: one Ray session, N virtual SuperNodes per federation, ``actors`` of them computing at once
    (one CPU each), so that Ray's start-up is paid once. Each federation's clients, messages and bytes are
    its own: the results equal those of one federation at a time. The Ray session is gone on return."""
    import logging

    from iclrbench.core.cache import cache_root
    from iclrbench.models.vision_language import image_tower

    if len({json.dumps(dict(f.config), sort_keys=True) for f in federations}) != 1:
        raise ValueError("federations sharing a runtime must have the same config (clients, rounds, ...)")
    _, config = federations[0].build()
    image_tower()  # pre-train (or load) the frozen tower here, once, not in every actor
    flwr_home, ray_root = _runtime_dirs()
    ray_tmp = Path(tempfile.mkdtemp(prefix="r", dir=ray_root))  # this run's; removed when it ends
    env = {
        "FLWR_HOME": str(flwr_home),
        "RAY_TMPDIR": str(ray_tmp),
        "FLWR_TELEMETRY_ENABLED": "0",
        "RAY_USAGE_STATS_ENABLED": "0",
        "RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO": "0",
        "RAY_DEDUP_LOGS": "0",
        "ICLRBENCH_CACHE": str(cache_root().resolve()),
        "TOKENIZERS_PARALLELISM": "false",
        "OMP_NUM_THREADS": "1",
    }
    logs = [RunLog() for _ in federations]
    backend = {
        "client_resources": {"num_cpus": 1, "num_gpus": 0.0},
        "init_args": {
            "num_cpus": actors,
            "num_gpus": 0,
            "include_dashboard": False,
            "log_to_driver": False,
            "object_store_memory": 256 * 1024**2,
            "_temp_dir": str(ray_tmp),
        },
    }
    with _SIMULATION_LOCK, _environment(env):
        from flwr.common.logger import FLOWER_LOGGER
        from flwr.simulation import run_simulation

        level = FLOWER_LOGGER.level
        FLOWER_LOGGER.setLevel(logging.ERROR)
        try:
            run_simulation(
                make_server_app(list(federations), logs, progress),
                client_app,
                num_supernodes=config.clients * len(federations),
                backend_config=backend,
            )
        finally:
            FLOWER_LOGGER.setLevel(level)
            _shutdown_ray()
            shutil.rmtree(ray_tmp, ignore_errors=True)  # the session's logs and sockets
    if logs[0].error is not None:
        raise RuntimeError(f"the federated run failed: {logs[0].error}") from logs[0].error
    for log in logs:
        if len(log.accuracy) != config.clients:
            raise RuntimeError(f"{len(log.accuracy)} of {config.clients} clients were evaluated")
    return logs


def _shutdown_ray() -> None:
    """Flower shuts Ray down after a simulation; make sure of it (an interrupted one may not have)."""
    try:
        import ray
    except ImportError:
        return
    if ray.is_initialized():
        ray.shutdown()

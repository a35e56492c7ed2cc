"""pFedMoAP: Luo, Chen, Wu, "Mixture of experts made personalized: federated prompt learning for
vision-language models", ICLR 2025 (arXiv:2410.10114); defaults from the authors' code (ljaiverson/pFedMoAP:
``train.sh``, ``federated_main.py``, ``trainers/pfedmoap.py``, ``configs/trainers/PFEDMOAP/rn50.yaml``).

The protocol every method of this task implements (:class:`PromptMethod`) has a server half, run by our
Flower ``ServerApp`` strategy, and a client half, run by the ``ClientApp`` on the client's own data:

- server: ``init_server`` (the round-0 state), ``downlink(state, client)`` (the arrays sent to a sampled
  client), ``aggregate(state, uploads)`` (what the server does with the prompts that come back),
  ``eval_downlink`` (the arrays a client evaluates with after the last round);
- client: ``local_train(model, data, down, local, seed) -> (upload, local)`` and
  ``local_evaluate(model, data, down, local) -> accuracy``. ``local`` is the client's private state (kept in
  Flower's per-node ``context.state``; it never leaves the client).

pFedMoAP (the paper's Sec. 3, Fig. 2), per round and sampled client i:

1. the local prompt p_i starts from last round's aggregate (the data-size weighted mean of the uploaded
   prompts, as PromptFL); in the first round there are no experts and it is CoOp;
2. the server sends K *other* clients' latest prompts -- frozen non-local experts; their text features are
   computed once. As the public code runs (``trainers/pfedmoap.py: sparse_selection``, called without its
   ``method``, whose default is ``random``): the first K clients with a prompt in one order of all clients
   shuffled once per run. ``selection=nearest`` takes the K nearest by L2 distance to p_i's last upload,
   the selection the paper describes;
3. a local attention gating network (8 heads, d = 128: features pooled by taking every 3rd of MiniLM's
   384 dimensions, as the code's stride pooling; scores scaled by 10 instead of 1/sqrt(d)) takes the image
   feature as the query and, per class, the experts' text features (the local one first, with gradients)
   as keys and values, giving a mixed text feature T_moe per class;
4. logits = s cos(I, T_moe) + lambda s cos(I, T_local) (Eq. 5; s the logit scale, lambda = 0.5), trained
   by cross entropy: the prompt with SGD(lr, momentum 0.9, cosine over the local epochs), the gate with
   SGD(0.01); only p_i goes up, the gate stays on the client.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from iclrbench.core.algorithm import Algorithm, register_algorithm
from iclrbench.core.config import param
from iclrbench.core.seeding import seed_for
from iclrbench.envs.federated_prompt_mixture import TASK_ID, FederatedPromptConfig

if TYPE_CHECKING:
    import torch

Arrays = dict[str, np.ndarray]


# ----------------------------------------------------------------------------------------- shared pieces
@dataclasses.dataclass
class LocalData:
    """One client's frozen image features and labels (torch tensors), and the frozen text tower."""

    train_x: torch.Tensor
    train_y: torch.Tensor
    test_x: torch.Tensor
    test_y: torch.Tensor
    encoder: Any  # PromptedTextEncoder
    logit_scale: float
    zero_shot: torch.Tensor  # (C, 384) text features of the hand-written prompt
    run_seed: int = 0


@dataclasses.dataclass
class ServerState:
    """What the server keeps between rounds: the aggregate prompt, each client's latest upload and its
    number of training examples."""

    global_ctx: np.ndarray
    client_ctx: dict[int, np.ndarray] = dataclasses.field(default_factory=dict)
    sizes: dict[int, int] = dataclasses.field(default_factory=dict)
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)


def initial_context(config: FederatedPromptConfig, seed: int) -> np.ndarray:
    """CoOp's random generic context: n_ctx x 384 drawn N(0, 0.02^2) (``nn.init.normal_(std=0.02)``)."""
    rng = np.random.default_rng(seed_for(seed, TASK_ID, "ctx-init"))
    return (0.02 * rng.standard_normal((config.n_ctx, 384))).astype(np.float32)


def weighted_mean(uploads: Mapping[int, tuple[np.ndarray, int]]) -> np.ndarray:
    """FedAvg of prompts: the mean weighted by each client's number of training examples (clients in id
    order, so the sum is the same however replies arrive)."""
    ids = sorted(uploads)
    weights = np.array([uploads[i][1] for i in ids], dtype=np.float64)
    stack = np.stack([uploads[i][0] for i in ids]).astype(np.float64)
    return (np.tensordot(weights / weights.sum(), stack, axes=1)).astype(np.float32)


def _cosine_lr(base: float, epoch: int, epochs: int) -> float:
    return 0.5 * base * (1.0 + math.cos(math.pi * epoch / epochs))


def class_logits(data: LocalData, image_x: torch.Tensor, text: torch.Tensor) -> torch.Tensor:
    return data.logit_scale * image_x @ text.T


def train_prompt(
    data: LocalData,
    ctx: np.ndarray,
    config: FederatedPromptConfig,
    seed: int,
    *,
    epochs: int | None = None,
    anchor: np.ndarray | None = None,
    mu: float = 0.0,
    logits_fn: Any = None,
    extra_params: tuple[Any, ...] = (),
    extra_lr: float = 0.01,
) -> np.ndarray:
    """CoOp on the client's training set: SGD(lr, momentum, cosine over the epochs, batches of
    ``batch_size`` shuffled by ``seed``) on cross entropy of ``logits_fn(x, text_features)`` (default: the
    scaled cosine similarities); ``mu / 2 ||ctx - anchor||^2`` added for FedProx. ``extra_params`` (a
    gate) train beside it with SGD(extra_lr). Both optimisers carry Dassl's default weight decay
    (``config.weight_decay``). Not reproduced from Dassl: the first epoch's constant warm-up lr of 1e-5
    (with 5 local epochs a round it would idle a fifth of every round) and ``drop_last`` batches."""
    import torch

    epochs = config.local_epochs if epochs is None else epochs
    generator = torch.Generator().manual_seed(seed_for(seed, "batches") % 2**63)
    prompt = torch.nn.Parameter(torch.from_numpy(np.array(ctx, dtype=np.float32)))
    decay = config.weight_decay
    optim = torch.optim.SGD([prompt], lr=config.lr, momentum=config.momentum, weight_decay=decay)
    extra = (
        torch.optim.SGD(list(extra_params), lr=extra_lr, momentum=config.momentum, weight_decay=decay)
        if extra_params
        else None
    )
    anchor_t = torch.from_numpy(np.asarray(anchor, dtype=np.float32)) if anchor is not None else None
    logits_fn = logits_fn or (lambda x, text: class_logits(data, x, text))
    n = len(data.train_y)
    for epoch in range(epochs):
        for group in optim.param_groups:
            group["lr"] = _cosine_lr(config.lr, epoch, epochs)
        order = torch.randperm(n, generator=generator)
        for at in range(0, n, config.batch_size):
            batch = order[at : at + config.batch_size]
            text = data.encoder.encode(prompt)
            loss = torch.nn.functional.cross_entropy(
                logits_fn(data.train_x[batch], text), data.train_y[batch]
            )
            if anchor_t is not None and mu > 0:
                loss = loss + 0.5 * mu * ((prompt - anchor_t) ** 2).sum()
            optim.zero_grad()
            if extra is not None:
                extra.zero_grad()
            loss.backward()
            optim.step()
            if extra is not None:
                extra.step()
    return prompt.detach().numpy().copy()


def accuracy(logits: torch.Tensor, labels: torch.Tensor) -> float:
    return float((logits.argmax(-1) == labels).float().mean()) if len(labels) else float("nan")


def prompt_accuracy(data: LocalData, ctx: np.ndarray) -> float:
    """Test accuracy of the plain prompted classifier (CoOp's logits) with context ``ctx``."""
    import torch

    with torch.no_grad():
        text = data.encoder.encode(torch.from_numpy(np.asarray(ctx, dtype=np.float32)))
        return accuracy(class_logits(data, data.test_x, text), data.test_y)


# ------------------------------------------------------------------------------------------- protocol
class PromptMethod(Algorithm):
    """Protocol of federated-prompt-mixture; the default is PromptFL (FedAvg of prompts, Guo et al.,
    "PromptFL: let federated participants cooperatively learn prompts instead of models", 2023)."""

    #: True for methods without a server (local CoOp): every client trains every round, whatever the
    #: participation, as the reference code's "local" mode
    trains_every_client: bool = False

    # ---- server half
    def init_server(self, config: FederatedPromptConfig, seed: int) -> ServerState:
        return ServerState(global_ctx=initial_context(config, seed))

    def downlink(self, state: ServerState, client: int, round_: int) -> Arrays:
        return {"ctx": state.global_ctx}

    def aggregate(self, state: ServerState, uploads: Mapping[int, tuple[Arrays, int]], round_: int) -> None:
        for client, (arrays, size) in uploads.items():
            state.client_ctx[client] = arrays["ctx"]
            state.sizes[client] = size
        state.global_ctx = weighted_mean({c: (a["ctx"], n) for c, (a, n) in uploads.items()})

    def eval_downlink(self, state: ServerState, client: int) -> Arrays:
        return {"ctx": state.global_ctx}

    # ---- client half
    def local_train(self, data: LocalData, down: Arrays, local: Arrays, seed: int) -> tuple[Arrays, Arrays]:
        ctx = train_prompt(data, down["ctx"], self.config, seed)
        return {"ctx": ctx}, local

    def local_evaluate(self, data: LocalData, down: Arrays, local: Arrays, seed: int) -> float:
        return prompt_accuracy(data, down["ctx"])


# ------------------------------------------------------------------------------------------- pFedMoAP
@dataclasses.dataclass(frozen=True)
class PFedMoAPParams:
    lmbda: float = param(
        0.5, "weight of the local prompt's logits (Eq. 5; paper: 0.5; 0 = ablation)", low=0.0
    )
    experts: int = param(
        0,
        "K non-local experts downloaded; 0: min(9, N - 1), as the code's min(num_experts=10, num_users) "
        "less the local one",
        low=0,
    )
    heads: int = param(8, "heads of the attention gate (paper: 8)", low=1, high=64)
    gate_dim: int = param(128, "gate width: features pooled from 384 by stride 384 / d (paper: 128)", low=8)
    scaling: float = param(10.0, "attention score scale (paper: 10, instead of 1 / sqrt(d))", low=1e-3)
    gate_lr: float = param(0.01, "SGD learning rate of the gate (paper: 0.01)", low=1e-6, high=10.0)
    selection: Literal["nearest", "random"] = param(
        "random",
        "how experts are chosen: random (the public code: the first K in an order of the clients shuffled "
        "once per run) or nearest (the paper's text: the K closest prompts in L2)",
    )


def make_gate(params: PFedMoAPParams, seed: int) -> torch.nn.Module:
    """The paper's gating network: multi-head attention with linear Q, K, V, O maps of width d."""
    import torch
    from torch import nn

    class AttentionGate(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            d = params.gate_dim
            self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))

        def forward(self, query: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
            """query (C, B, d), keys = values (C, E, d) -> mixed features (C, B, d)."""
            c, b, d = query.shape
            h = params.heads
            q = self.q(query).view(c, b, h, d // h).transpose(1, 2)
            k = self.k(keys).view(c, -1, h, d // h).transpose(1, 2)
            v = self.v(keys).view(c, -1, h, d // h).transpose(1, 2)
            weights = torch.softmax(q @ k.transpose(-2, -1) * params.scaling, dim=-1)
            return self.o((weights @ v).transpose(1, 2).reshape(c, b, d))

    with torch.random.fork_rng():  # the global torch stream is left as it was
        torch.manual_seed(seed_for(seed, "gate") % 2**63)
        return AttentionGate()


@register_algorithm(task=TASK_ID, name="pfedmoap", role="reference")
class PFedMoAP(PromptMethod):
    """pFedMoAP: personalised prompt with a local attention gate over K other clients' prompts."""

    Params = PFedMoAPParams

    @classmethod
    def incompatible(cls, params: PFedMoAPParams, config: FederatedPromptConfig) -> str | None:
        if params.experts >= config.clients:
            return f"experts={params.experts}: K must be below the {config.clients} clients (K other clients)"
        if 384 % params.gate_dim or params.gate_dim % params.heads:
            return f"gate_dim={params.gate_dim} must divide 384 and be a multiple of heads={params.heads}"
        return None

    def downlink(self, state: ServerState, client: int, round_: int) -> Arrays:
        """The aggregate, and K experts -- except the first time a client is sampled, when it trains only
        its prompt, as the reference code does ("training only the local prompts the first time each
        client is selected"): no experts, no gate yet."""
        chosen = self._select(state, client)
        if not chosen:
            return {"ctx": state.global_ctx}
        state.extra.setdefault("gated", set()).add(client)
        return {"ctx": state.global_ctx, "experts": np.stack([state.client_ctx[c] for c in chosen])}

    def _select(self, state: ServerState, client: int) -> list[int]:
        """The K experts of ``client`` from the clients' latest prompts; none while it has no prompt of its
        own or no other client has one."""
        own = state.client_ctx.get(client)
        others = [c for c in sorted(state.client_ctx) if c != client]
        if own is None or not others:
            return []
        k = min(self.experts, len(others))
        if self.params.selection == "random":
            return [c for c in self._order(state) if c in others][:k]
        # nearest by the L2 distance between prompts; ties to the lower id. (The public code's torch.topk
        # over its list of distances returns list positions, not client ids; this is the paper's selection.)
        dist = [float(np.linalg.norm(state.client_ctx[c] - own)) for c in others]
        return [others[i] for i in np.argsort(dist, kind="stable")[:k]]

    def _order(self, state: ServerState) -> list[int]:
        """All clients in the order shuffled once for the run (the public trainer's
        ``shuffled_all_indices``)."""
        if "order" not in state.extra:
            rng = np.random.default_rng(seed_for(int(state.extra.get("seed", 0)), "experts-order"))
            state.extra["order"] = rng.permutation(self.config.clients).tolist()
        return state.extra["order"]

    @property
    def experts(self) -> int:
        """K: the parameter, else min(9, N - 1)."""
        return self.params.experts or min(9, self.config.clients - 1)

    def init_server(self, config: FederatedPromptConfig, seed: int) -> ServerState:
        state = super().init_server(config, seed)
        state.extra["seed"] = seed
        return state

    def aggregate(self, state: ServerState, uploads: Mapping[int, tuple[Arrays, int]], round_: int) -> None:
        super().aggregate(state, uploads, round_)
        state.extra["last_round"] = set(uploads)

    def eval_downlink(self, state: ServerState, client: int) -> Arrays:
        """What a client tests with after the last round. A client sampled in it tests as it trained (its
        experts from then, held in its local state). Any other client that has a gate gets experts selected
        again from the clients' latest prompts, as the public code does before testing the clients not
        selected; a client that never trained tests the aggregate."""
        if client in state.extra.get("last_round", ()) or client not in state.extra.get("gated", ()):
            return {"ctx": state.global_ctx}
        chosen = self._select(state, client)
        return {"ctx": state.global_ctx, "experts": np.stack([state.client_ctx[c] for c in chosen])}

    def _features(self, x: torch.Tensor) -> torch.Tensor:
        return x[..., :: 384 // self.params.gate_dim]

    def _moe_logits(
        self,
        data: LocalData,
        gate: torch.nn.Module,
        x: torch.Tensor,
        local_text: torch.Tensor,
        expert_text: torch.Tensor,
    ) -> torch.Tensor:
        """Eq. 5: s <pool(I), T_moe> + lambda s <I, T_local>; T_moe from the gate over [local, experts]."""
        import torch

        query = self._features(x).unsqueeze(0).expand(local_text.shape[0], -1, -1)  # (C, B, d)
        keys = torch.cat(
            [self._features(local_text).unsqueeze(1), self._features(expert_text).transpose(0, 1)], 1
        )
        mixed = gate(query, keys).permute(1, 2, 0)  # (B, d, C)
        moe = data.logit_scale * torch.bmm(self._features(x).unsqueeze(1), mixed).squeeze(1)
        return moe + self.params.lmbda * class_logits(data, x, local_text)

    def _gate(self, data: LocalData, local: Arrays) -> torch.nn.Module:
        """The client's own gate, else the run's common initial gate (the same for every client, as the
        reference's one ``global_weights``)."""
        import torch

        gate = make_gate(self.params, data.run_seed)
        if any(key.startswith("gate.") for key in local):
            gate.load_state_dict(
                {k[5:]: torch.from_numpy(v) for k, v in local.items() if k.startswith("gate.")}
            )
        return gate

    def local_train(self, data: LocalData, down: Arrays, local: Arrays, seed: int) -> tuple[Arrays, Arrays]:
        import torch

        if "experts" not in down:  # first round: no other client has a prompt yet; CoOp from the aggregate
            ctx = train_prompt(data, down["ctx"], self.config, seed)
            return {"ctx": ctx}, {**local, "ctx": ctx}
        gate = self._gate(data, local)
        with torch.no_grad():
            expert_text = data.encoder.encode(torch.from_numpy(down["experts"]))  # (K, C, 384), frozen
        ctx = train_prompt(
            data,
            down["ctx"],
            self.config,
            seed,
            logits_fn=lambda x, text: self._moe_logits(data, gate, x, text, expert_text),
            extra_params=tuple(gate.parameters()),
            extra_lr=self.params.gate_lr,
        )
        state = {f"gate.{k}": v.detach().numpy().copy() for k, v in gate.state_dict().items()}
        return {"ctx": ctx}, {**state, "ctx": ctx, "experts": down["experts"]}

    def local_evaluate(self, data: LocalData, down: Arrays, local: Arrays, seed: int) -> float:
        import torch

        if "ctx" not in local:  # never sampled: the aggregate prompt, plain CoOp logits
            return prompt_accuracy(data, down["ctx"])
        if "experts" not in local:
            return prompt_accuracy(data, local["ctx"])
        gate = self._gate(data, local)
        experts = down.get("experts", local["experts"])  # re-selected by the server if not sampled last
        with torch.no_grad():
            local_text = data.encoder.encode(torch.from_numpy(local["ctx"]))
            expert_text = data.encoder.encode(torch.from_numpy(experts))
            return accuracy(self._moe_logits(data, gate, data.test_x, local_text, expert_text), data.test_y)


def algorithm_arrays(arrays: Mapping[str, Any]) -> Arrays:
    """Arrays as float32 numpy (what goes into a Flower ArrayRecord)."""
    return {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in arrays.items()}

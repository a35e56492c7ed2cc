"""SafeWatch (Chen et al., "SafeWatch: an efficient safety-policy following video guardrail model with
transparent explanations", ICLR 2025): a guardrail that reads safety policies and a video and says, per
policy, whether the video breaks it, built around two mechanisms (its section 3):

- **PEPE**, parallel equivalent policy encoding: each policy chunk is encoded on its own, every chunk at the
  same positions (the model card: "each policy in parallel with the equivalent RoPE embedding"), chunks
  blind to each other; the video tokens, after them, attend to every chunk. A policy's verdict is read from
  its answer token, placed after the video at one shared position, attending to its own chunk and the video.
  Reordering the policies then reorders the verdicts and changes nothing else: no position bias.
- **PAP**, policy-aware adaptive pruning: "for each policy, SafeWatch calculates the relevance score based on
  its cross-attention with the video tokens and then activates Top-k most informative tokens and prunes the
  rest". Here the first ``prune_layer`` blocks read each frame on its own (a video LLM's vision encoder)
  with the policy chunks, and the answers do not read the video yet; in the last of them each video
  token's attention to a policy's chunk (summed over its tokens, mean over heads) is its relevance to that
  policy. Each policy keeps its top ``ceil(M / P)`` video tokens, the union is kept (cut to ``M = keep x V``
  by the best relevance over policies), and the later blocks, where the answers read the video, see only
  those. Training is unpruned; pruning is applied when the guardrail runs (training-free, as the paper's).

The guardrail here is a small transformer trained from scratch on :mod:`iclrbench.envs.video_guardrail`'s
videos (patch tokens by a linear embedding; a policy chunk is ``policy_tokens`` tokens projected from its
MiniLM sentence embedding), not the paper's 8B video LLM. For each policy it gives a verdict and, as the
paper's guardrail explains each flag, an explanation: when and where the content is shown (the frame its
object first appears in and its cell, two classification heads on the same answer token, trained on the
broken policies beside the verdict, with the gradient stopped at the answer states unless
``explain_jointly``; rendered as one line by :func:`~iclrbench.envs.video_guardrail.explanation`), where the
paper writes free text and trains it jointly. Its sequential-encoding twin (:mod:`iclrbench.baselines.
video_guardrail`) is the same network with the policies concatenated at increasing positions under a causal
mask, as an LLM prompt would hold them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from iclrbench.core.algorithm import Algorithm, register_algorithm
from iclrbench.core.cache import build_once, cache_root
from iclrbench.core.config import as_dict, stable_hash
from iclrbench.core.seeding import seed_for
from iclrbench.envs.video_guardrail import (
    CELLS,
    PATCH_DIM,
    TASK_ID,
    Split,
    VideoGuardrailConfig,
    policy_embeddings,
    shuffled_texts,
)

if TYPE_CHECKING:
    import torch

#: model version: a change here retrains every cached guardrail
#: 3: the control deranges the training categories only; 4: the curve kept; 5: the explanation heads
GUARDRAIL_VERSION = 5
#: the explanation's loss beside the verdict's: cross entropy of its frame and of its cell, averaged over the
#: broken policies of a batch, each at half weight (the two heads together weigh as the verdict)
EXPLANATION_WEIGHT = 0.5
CHUNK, VIDEO, ANSWER = 0, 1, 2


def layout(config: VideoGuardrailConfig, encoding: str) -> dict[str, np.ndarray]:
    """Per token of ``[policy chunks][video][answers]``: ``kind`` (chunk, video, answer), ``policy`` (its
    policy for chunk and answer tokens, -1 for video), ``frame`` (a video token's frame, -1 for the rest),
    ``order`` (its place in the sequence, for the causal mask) and ``position`` (its position embedding:
    PEPE gives every chunk, and every answer, the same)."""
    p, length, v = config.policies, config.policy_tokens, config.video_tokens
    kind = np.repeat([CHUNK, VIDEO, ANSWER], [p * length, v, p])
    policy = np.concatenate([np.repeat(np.arange(p), length), np.full(v, -1), np.arange(p)])
    frame = np.concatenate([np.full(p * length, -1), np.arange(v) // (v // config.frames), np.full(p, -1)])
    order = np.arange(len(kind))
    if encoding == "parallel":
        position = np.concatenate(
            [np.tile(np.arange(length), p), length + np.arange(v), np.full(p, length + v)]
        )
    else:
        position = order.copy()
    return {"kind": kind, "policy": policy, "frame": frame, "order": order, "position": position}


def attention_mask(lay: Mapping[str, torch.Tensor], encoding: str, frame_local: bool) -> torch.Tensor:
    """(B, S, S) True where a query may attend to a key, from the per-token descriptors of :func:`layout`
    (B, S) (so a pruned sequence keeps its rules). PEPE: a chunk sees its own chunk; a video token every
    chunk and the video; an answer its own chunk, the video and itself. Sequential: causal over the
    sequence's order. ``frame_local`` (the blocks before pruning): a video token sees its own frame's tokens
    and the policy chunks, an answer no video token (it reads the video only once pruned, as the paper's
    query is decoded from the kept tokens)."""
    kind, policy, frame, order = lay["kind"], lay["policy"], lay["frame"], lay["order"]
    q_kind, k_kind = kind[:, :, None], kind[:, None, :]
    if encoding == "parallel":
        same = policy[:, :, None] == policy[:, None, :]
        chunk = (q_kind == CHUNK) & (k_kind == CHUNK) & same
        video = (q_kind == VIDEO) & (k_kind != ANSWER)
        answer = (q_kind == ANSWER) & ((k_kind == VIDEO) | same)
        mask = chunk | video | answer
    else:
        mask = order[:, None, :] <= order[:, :, None]
    if frame_local:
        own_frame = (k_kind == VIDEO) & (frame[:, :, None] == frame[:, None, :])
        mask = (
            mask
            & ((q_kind != VIDEO) | own_frame | (k_kind == CHUNK))
            & ((q_kind != ANSWER) | (k_kind != VIDEO))
        )
    return mask


def _build(config: VideoGuardrailConfig, encoding: str) -> Any:
    import torch
    from torch import nn

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            d = config.d_model
            self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.qkv, self.out = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

        def forward(self, x: torch.Tensor, mask: torch.Tensor, weights: bool = False) -> Any:
            """The block's output; with ``weights`` also its attention weights (B, S, S), mean over heads
            (PAP reads the video tokens' attention to each policy chunk from them)."""
            b, s, d = x.shape
            h = config.heads
            q, k, v = self.qkv(self.norm1(x)).view(b, s, 3, h, d // h).permute(2, 0, 3, 1, 4)
            bias = torch.zeros(mask.shape).masked_fill_(~mask, float("-inf"))[:, None]
            if weights:
                attention = (q @ k.transpose(-1, -2) / math.sqrt(d // h) + bias).softmax(-1)
                mixed = attention @ v
            else:
                mixed = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=bias)
            x = x + self.out(mixed.transpose(1, 2).reshape(b, s, d))
            x = x + self.mlp(self.norm2(x))
            return (x, attention.mean(1)) if weights else x

    class Guardrail(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            d, length = config.d_model, config.policy_tokens
            self.policy_in = nn.Linear(384, length * d)
            self.answer_in = nn.Linear(384, d)
            self.video_in = nn.Linear(PATCH_DIM, d)
            self.kind_embed = nn.Embedding(3, d)
            slots = config.policies * length + config.video_tokens + config.policies
            self.position = nn.Parameter(torch.randn(slots, d) * 0.02)
            self.blocks = nn.ModuleList(Block() for _ in range(config.layers))
            self.norm, self.head = nn.LayerNorm(d), nn.Linear(d, 1)
            self.explain = nn.Linear(d, config.frames + CELLS * CELLS)  # when, then where
            self.layout = {k: torch.from_numpy(v) for k, v in layout(config, encoding).items()}

        def forward(
            self,
            video: torch.Tensor,
            policies: torch.Tensor,
            prune: str = "none",
            generator: torch.Generator | None = None,
            explain: bool = False,
        ) -> Any:
            """Logits (B, P) of "the video breaks policy p"; ``video`` (B, V, 108), ``policies`` (B, P, 384)
            sentence embeddings; ``prune``: none, policy (PAP) or random (as many tokens, at random). With
            ``explain``, also the explanation's logits (B, P, frames + cells): the frame the content first
            appears in, then its cell."""
            b, p, _ = policies.shape
            chunks = self.policy_in(policies).view(b, p * config.policy_tokens, config.d_model)
            x = torch.cat([chunks, self.video_in(video), self.answer_in(policies)], 1)
            lay = {k: v.unsqueeze(0) for k, v in self.layout.items()}  # one layout for the batch
            x = x + self.position[lay["position"]] + self.kind_embed(lay["kind"])
            local = attention_mask(lay, encoding, frame_local=True)
            mask = attention_mask(lay, encoding, frame_local=False)
            for i, block in enumerate(self.blocks):
                if i < config.prune_layer - 1:
                    x = block(x, local)
                elif i == config.prune_layer - 1 and prune != "none":
                    x, weights = block(x, local, weights=True)
                    keep = self._kept(weights, lay, prune, generator)
                    x = torch.gather(x, 1, keep[..., None].expand(-1, -1, x.shape[-1]))
                    lay = {k: torch.gather(v.expand(b, -1), 1, keep) for k, v in lay.items()}
                    mask = attention_mask(lay, encoding, frame_local=False)
                elif i == config.prune_layer - 1:
                    x = block(x, local)
                else:
                    x = block(x, mask)
            answers = self.norm(x[:, -p:])
            verdicts = self.head(answers).squeeze(-1)
            if not explain:
                return verdicts
            # a probe on the answer states unless trained jointly: jointly trained, the first block's
            # attention, which PAP ranks the video tokens by, stopped pointing at the objects
            return verdicts, self.explain(answers if config.explain_jointly else answers.detach())

        def _kept(
            self, weights: torch.Tensor, lay: dict[str, torch.Tensor], prune: str, generator: Any
        ) -> torch.Tensor:
            """Indices (B, S') of the tokens kept: every chunk and answer token, and M video tokens."""
            kind = lay["kind"][0]
            video = torch.nonzero(kind == VIDEO).squeeze(-1)
            others = torch.nonzero(kind != VIDEO).squeeze(-1)
            b, v, p = weights.shape[0], len(video), config.policies
            m = kept_video_tokens(config)
            if prune == "random":
                scores = torch.rand(b, v, generator=generator)
            elif prune == "policy":
                chunks = torch.nonzero(kind == CHUNK).squeeze(-1)
                # each video token's attention to each policy's chunk: (B, P, V)
                to_chunks = weights[:, video][:, :, chunks].view(b, v, p, -1).sum(-1).transpose(1, 2)
                top = to_chunks.topk(min(v, math.ceil(m / p)), dim=-1).indices
                union = torch.zeros(b, v, dtype=torch.bool).scatter_(1, top.reshape(b, -1), True)
                scores = to_chunks.amax(1) + union.float()  # the union first, by its best score
            else:
                raise ValueError(f"prune: none, policy or random, not {prune!r}")
            chosen = video[scores.topk(m, dim=-1).indices.sort(-1).values]
            return torch.cat([others[:-p].expand(b, -1), chosen, others[-p:].expand(b, -1)], 1)

    return Guardrail()


def kept_video_tokens(config: VideoGuardrailConfig) -> int:
    """M, the video tokens pruning keeps: ``keep`` of them, at least one."""
    return max(1, round(config.keep * config.video_tokens))


def prefill_flops(config: VideoGuardrailConfig, pruned: bool) -> float:
    """Multiply-adds x 2 of one prefill: per block of n tokens, the projections and the MLP (2 n 12 d^2) and
    attention's scores and mixing (4 n^2 d); the blocks after ``prune_layer`` see the pruned sequence."""
    d = config.d_model
    full = config.policies * (config.policy_tokens + 1) + config.video_tokens
    after = full - config.video_tokens + kept_video_tokens(config) if pruned else full

    def block(n: int) -> float:
        return 2 * n * 12 * d * d + 4 * n * n * d

    return config.prune_layer * block(full) + (config.layers - config.prune_layer) * block(after)


def policy_inputs(split: Split, texts: np.ndarray | None = None) -> np.ndarray:
    """(n, P, 384) the prompts' policy embeddings; ``texts`` maps a category to the one whose text it
    gets (the shuffled-texts control)."""
    table = policy_embeddings()
    categories = split.categories if texts is None else texts[split.categories]
    return table[categories, split.phrasings]


#: the key under which a cached guardrail keeps its training curve beside its weights
CURVE_KEY = "training-curve"


def trained_guardrail(
    config: VideoGuardrailConfig, train: Split, seed: int, encoding: str
) -> tuple[Any, np.ndarray]:
    """The guardrail trained on ``train`` and its training curve (step, mean loss) (cached by config, seed
    and encoding: SafeWatch and its pruning ablations share one trained network, as pruning is applied after
    training)."""
    import torch

    key = stable_hash({"v": GUARDRAIL_VERSION, "config": as_dict(config), "seed": seed, "encoding": encoding})
    folder = cache_root() / TASK_ID / f"guardrail-{key[:16]}"

    def write(tmp: Any) -> None:
        model, curve = train_guardrail(config, train, seed, encoding)
        weights = {k: v.detach().numpy() for k, v in model.state_dict().items()}
        np.savez(tmp, **weights, **{CURVE_KEY: curve})

    path = build_once(folder / "weights.npz", write)
    model = _build(config, encoding)
    with np.load(path, allow_pickle=False) as stored:
        curve = stored[CURVE_KEY]
        model.load_state_dict({k: torch.from_numpy(stored[k]) for k in stored.files if k != CURVE_KEY})
    return model.eval(), curve


def explanation_loss(explained: torch.Tensor, when: torch.Tensor, where: torch.Tensor, frames: int) -> Any:
    """Cross entropy of the explanation's frame and cell over the broken policies (``when`` >= 0), each at
    :data:`EXPLANATION_WEIGHT`; 0 for a batch without one."""
    import torch

    broken = when >= 0
    if not broken.any():
        return explained.sum() * 0.0
    logits = explained[broken]
    ce = torch.nn.functional.cross_entropy
    return EXPLANATION_WEIGHT * (ce(logits[:, :frames], when[broken]) + ce(logits[:, frames:], where[broken]))


def train_guardrail(
    config: VideoGuardrailConfig, train: Split, seed: int, encoding: str
) -> tuple[Any, np.ndarray]:
    """AdamW on the binary cross entropy of every (video, policy) verdict plus the explanation's loss on the
    broken ones (:func:`explanation_loss`), batches drawn by the seed; returns the model and its curve,
    (step, mean loss over the steps since the last point) every 5% of training."""
    import torch

    torch.manual_seed(seed_for(seed, TASK_ID, "init", encoding) % 2**63)
    model = _build(config, encoding)
    texts = shuffled_texts(seed) if config.shuffle_policies else None
    video = torch.from_numpy(train.tokens)
    policies = torch.from_numpy(policy_inputs(train, texts))
    labels = torch.from_numpy(train.labels)
    when, where = torch.from_numpy(train.when), torch.from_numpy(train.where)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=0.01)
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, config.lr, total_steps=config.steps)
    batches = torch.Generator().manual_seed(seed_for(seed, TASK_ID, "batches") % 2**63)
    model.train()
    every = max(1, config.steps // 20)
    curve, running = [], []
    for step in range(1, config.steps + 1):
        rows = torch.randint(len(train), (config.batch,), generator=batches)
        verdicts, explained = model(video[rows], policies[rows], explain=True)
        loss = torch.nn.functional.binary_cross_entropy_with_logits(verdicts, labels[rows])
        loss = loss + explanation_loss(explained, when[rows], where[rows], config.frames)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        running.append(loss.item())
        if step % every == 0 or step == config.steps:
            curve.append((step, float(np.mean(running))))
            running = []
        schedule.step()
    return model.eval(), np.array(curve, dtype=np.float64)


# -------------------------------------------------------------------------------------------- algorithms
class Guardrail(Algorithm):
    """Base of this task's methods: ``scores(split)`` gives each (video, policy) verdict's score (n, P)."""

    config: VideoGuardrailConfig
    encoding = "parallel"
    prune = "none"

    def fit(self, train: Split, seed: int) -> None:
        self.model, self.curve = trained_guardrail(self.config, train, seed, self.encoding)
        self.generator_seed = seed_for(seed, TASK_ID, "random-pruning") % 2**63

    def _run(self, split: Split, inputs: np.ndarray, explain: bool) -> Any:
        """The model over ``split`` in batches of 128, pruning drawn from the run's generator (the same
        tokens for the same split): logits (n, P), and with ``explain`` the explanation logits too."""
        import torch

        generator = torch.Generator().manual_seed(self.generator_seed)
        out = []
        with torch.no_grad():
            for at in range(0, len(split), 128):
                rows = slice(at, at + 128)
                video, policies = torch.from_numpy(split.tokens[rows]), torch.from_numpy(inputs[rows])
                out.append(self.model(video, policies, self.prune, generator, explain=explain))
        if explain:
            return tuple(np.concatenate([o[k].numpy() for o in out]) for k in (0, 1))
        return np.concatenate([o.numpy() for o in out])

    def scores(self, split: Split, order: np.ndarray | None = None) -> np.ndarray:
        """Logits (n, P) in the prompt's order; ``order`` (P,) presents the policies to the model permuted
        (its outputs are mapped back), to measure position bias."""
        order = np.arange(split.categories.shape[1]) if order is None else order
        logits = self._run(split, policy_inputs(split)[:, order], explain=False)
        back = np.empty_like(logits)
        back[:, order] = logits
        return back

    def explanations(self, split: Split) -> tuple[np.ndarray, np.ndarray]:
        """Each (video, policy)'s explanation, (when, where) (n, P) each: the frame the guardrail says the
        content first appears in and the cell it names (its two heads' argmax), in the prompt's order."""
        _, explained = self._run(split, policy_inputs(split), explain=True)
        frames = self.config.frames
        return explained[..., :frames].argmax(-1), explained[..., frames:].argmax(-1)

    def flops(self) -> float:
        return prefill_flops(self.config, self.prune != "none")


@register_algorithm(task=TASK_ID, name="safewatch", role="reference")
class SafeWatch(Guardrail):
    """SafeWatch: policies encoded in parallel at equivalent positions (PEPE) and the video pruned to the
    tokens the policies attend to (PAP, ``keep`` of them: 90% pruned by default)."""

    prune = "policy"

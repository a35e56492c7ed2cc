"""icl-circuit's world (Cho et al., ICLR 2025, "Revisiting in-context learning inference circuit in large
language models"): in-context classification episodes laid out as the paper's prompts,
``x1 s1 y1 ... xk sk yk xq sq`` (``s`` the forerunner token before each label), and the small causal
transformer trained on them from scratch, whose attention can be masked link by link.

Episodes: ``topics`` latent topics each own ``topic_words`` tokens; an input ``x`` is a bag of ``x_len``
tokens of one topic. Each episode draws ``classes`` topics and a fresh topic -> label-word mapping (from
``label_words`` label tokens), ``k`` demonstrations and a query whose class appears among them: the label
can only come from the context. Position roles (x, s, y, xq, sq) are fixed by the layout, so masks and
read-outs index positions directly.

The SmolLM2 subject reads real text instead (:mod:`iclrbench.envs.icl_circuit.prompts`, the StaICC sets of
:mod:`iclrbench.envs.icl_circuit.data`); both share :class:`Episodes`, :class:`Roles` and the masks.

Layer ranges follow the paper's ``Experiments/Exp5_Ablation.ipynb``: a mask covers the layers from
``int(maskstart * L)`` to ``int(maskend * L)`` (end excluded), in quarters (``q1`` .. ``q4``: 0-25% ..
75-100%; for SmolLM2's 30 layers 0-6, 7-14, 15-21, 22-29).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from iclrbench.core.config import param
from iclrbench.core.seeding import seed_for
from iclrbench.envs.icl_circuit.data import TEXT_SETS

TASK_ID = "icl-circuit"
MASKS = ("none", "xi_to_si", "xq_to_sq", "si_to_yi", "yi_to_sq", "si_to_si")


SUBJECTS = ("tiny", "smollm2")
SMOLLM2_LAYERS = 30
#: layer specs besides 'a-b': halves, the paper's quarters, every layer, none, and the quarter that holds the
#: unablated subject's correct-induction peak (resolved per run from its own unablated pass)
LAYER_SPECS = ("lower", "upper", "q1", "q2", "q3", "q4", "all", "none", "induction")


@dataclasses.dataclass(frozen=True)
class IclCircuitConfig:
    subject: str = param(
        "tiny",
        "the model analysed: tiny (trained here) or smollm2 (SmolLM2-135M-Instruct on the paper's real "
        "text sets)",
        choices=SUBJECTS,
    )
    dataset: str = param(
        "sst2",
        "smollm2: the real text set (StaICC's files, the paper's prompt layout and label words)",
        choices=tuple(TEXT_SETS),
    )
    k: int = param(4, "demonstrations per episode (0: zero-shot, smollm2 only)", low=0, high=16)
    classes: int = param(3, "tiny: classes per episode (chance = 1 / classes)", low=2, high=8)
    topics: int = param(6, "tiny: latent topics of the inputs", low=2)
    topic_words: int = param(8, "tiny: tokens per topic", low=1)
    label_words: int = param(4, "tiny: label tokens an episode's classes are named by", low=2)
    x_len: int = param(3, "tiny: tokens per input", low=1, high=16)
    layers: str = param(
        "upper",
        "layer range masked: lower or upper half, q1-q4 (the paper's quarters), all, none, 'a-b' (0-based, "
        "inclusive), or induction (the quarter of the unablated subject's correct-induction peak)",
    )
    episodes: int = param(0, "test episodes per run (0: 1,000 for tiny, 100 for smollm2)", low=0)
    batch: int = param(0, "episodes per forward pass (0: all at once for tiny, 20 for smollm2)", low=0)
    d_model: int = param(64, "tiny: width (<= 256)", low=32, high=256)
    n_layers: int = param(4, "tiny: transformer blocks", low=2, high=8)
    heads: int = param(4, "tiny: attention heads", low=1)
    max_train_steps: int = param(
        6000,
        "tiny: most training steps (AdamW, batch 128); training stops earlier once converged: the held-out "
        "floors met, then half as many steps again",
        low=10,
    )
    subject_seed: int = param(0, "tiny: seed of the training run (initial weights and batches)", low=0)
    accuracy_floor: float = param(
        0.95,
        "tiny: held-out accuracy the trained subject must reach before anything is analysed",
        low=0,
        high=1,
    )
    induction_floor: float = param(
        0.15, "tiny: correct-induction score (largest layer's) the trained subject must reach", low=-1, high=1
    )
    min_above_chance: float = param(
        0.15,
        "the analyses run only when the unablated accuracy beats chance by this much (0: always)",
        low=0,
        high=1,
    )

    def __post_init__(self) -> None:
        if self.d_model % self.heads:
            raise ValueError(f"d_model ({self.d_model}) must be a multiple of heads ({self.heads})")
        if self.classes > min(self.topics, self.label_words):
            raise ValueError(f"classes ({self.classes}) exceed topics or label_words")
        if 0 < self.episodes < 10:
            raise ValueError(f"episodes ({self.episodes}): at least 10, or 0 for the subject's default")
        if self.subject == "tiny" and self.k == 0:
            raise ValueError(
                "k=0 is for smollm2: the tiny world names its labels afresh in every episode, so without "
                "demonstrations no label can be known (every run reports zero_shot_accuracy, the same "
                "queries "
                "without demonstrations)"
            )
        if self.subject != "tiny" and self.n_episodes > TEXT_SETS[self.dataset].tests:
            raise ValueError(
                f"episodes ({self.n_episodes}): the {self.dataset} test pool has "
                f"{TEXT_SETS[self.dataset].tests}"
            )
        if self.layers != "induction":
            layer_range(self)  # a range outside the model is one line, exit 2

    @property
    def n_episodes(self) -> int:
        return self.episodes or (1000 if self.subject == "tiny" else 100)

    @property
    def batch_size(self) -> int:
        return self.batch or (self.n_episodes if self.subject == "tiny" else 20)

    @property
    def depth(self) -> int:
        """The analysed model's number of layers."""
        return self.n_layers if self.subject == "tiny" else SMOLLM2_LAYERS

    @property
    def n_classes(self) -> int:
        """Classes per episode of the analysed subject: chance is 1 / n_classes."""
        return self.classes if self.subject == "tiny" else len(TEXT_SETS[self.dataset].labels)

    @property
    def vocab(self) -> int:
        return self.topics * self.topic_words + self.label_words + 1

    @property
    def forerunner(self) -> int:
        return self.vocab - 1

    @property
    def seq_len(self) -> int:
        return (self.k + 1) * (self.x_len + 2) - 1


def quarter(n_layers: int, q: int) -> tuple[int, ...]:
    """Quarter ``q`` (1-4) of ``n_layers`` as the paper's notebook masks it: ``int((q - 1) / 4 * L)`` up to
    ``int(q / 4 * L)``, end excluded (``Experiments/Exp5_Ablation.ipynb``, ``maskstart`` / ``maskend``)."""
    return tuple(range(int((q - 1) / 4 * n_layers), int(q / 4 * n_layers)))


def quarter_of(n_layers: int, layer: int) -> int:
    """The quarter (1-4) that holds ``layer``."""
    return next(q for q in range(1, 5) if layer in quarter(n_layers, q))


def layer_range(config: IclCircuitConfig, induction_layer: int | None = None) -> tuple[int, ...]:
    """The masked layers: ``lower`` / ``upper`` half, quarter ``q1`` .. ``q4``, ``all``, ``none``, ``a-b``
    (inclusive), or ``induction``: the quarter holding ``induction_layer`` (the unablated subject's
    correct-induction peak, which the run measures first)."""
    n = config.depth
    spec = config.layers
    if spec == "lower":
        return tuple(range(n // 2))
    if spec == "upper":
        return tuple(range(n // 2, n))
    if spec in ("q1", "q2", "q3", "q4"):
        return quarter(n, int(spec[1]))
    if spec == "induction":
        if induction_layer is None:
            raise ValueError("layers=induction: the induction layer is measured on the unablated pass first")
        return quarter(n, quarter_of(n, induction_layer))
    if spec == "all":
        return tuple(range(n))
    if spec == "none":
        return ()
    try:
        a, b = (int(v) for v in spec.split("-"))
    except ValueError:
        raise ValueError(f"layers: {', '.join(LAYER_SPECS)} or 'a-b', not {spec!r}") from None
    if not 0 <= a <= b < n:
        raise ValueError(f"layers {spec}: the {config.subject} model has layers 0-{n - 1}")
    return tuple(range(a, b + 1))


@dataclasses.dataclass(frozen=True)
class Roles:
    """Token positions of each role, per episode (``n`` rows): inputs are contiguous spans."""

    x_start: np.ndarray  # (n, k + 1) first token of each input: the demonstrations', then the query's
    x_end: np.ndarray  # (n, k + 1) one past its last token
    s: np.ndarray  # (n, k) forerunners
    y: np.ndarray  # (n, k) labels
    sq: np.ndarray  # (n,) the query's forerunner: the prediction position
    length: np.ndarray  # (n,) tokens of the prompt (the rest of a row is padding)

    @property
    def shared(self) -> bool:
        """Every episode has the same layout (the tiny subject's), so one (T, T) mask serves all."""
        return all(bool((a == a[:1]).all()) for a in dataclasses.astuple(self))

    def take(self, index: np.ndarray | slice) -> Roles:
        return Roles(*(a[index] for a in dataclasses.astuple(self)))


def layout(config: IclCircuitConfig, n: int) -> Roles:
    """The tiny subject's fixed layout ``x1 s1 y1 ... xk sk yk xq sq``, repeated for ``n`` episodes."""
    block = config.x_len + 2
    starts = np.arange(config.k + 1) * block
    s = starts[:-1] + config.x_len

    def rows(a: np.ndarray | int) -> np.ndarray:
        return np.broadcast_to(np.asarray(a), (n, *np.shape(a))).copy()

    return Roles(
        rows(starts),
        rows(starts + config.x_len),
        rows(s),
        rows(s + 1),
        rows(starts[-1] + config.x_len),
        rows(config.seq_len),
    )


@dataclasses.dataclass(frozen=True)
class Episodes:
    ids: np.ndarray  # (n, T) prompts ending at sq, right-padded (padding follows sq, so causal masks hide it)
    roles: Roles
    demo_classes: np.ndarray  # (n, k) class index of each demonstration
    query_class: np.ndarray  # (n,)
    label_tokens: np.ndarray  # (n, classes) the token naming each class in this episode
    topic: np.ndarray  # (n, k + 1) latent topic of each input (the tiny world's; the class for text)

    def take(self, index: np.ndarray | slice) -> Episodes:
        return Episodes(
            self.ids[index], self.roles.take(index), self.demo_classes[index], self.query_class[index],
            self.label_tokens[index], self.topic[index],
        )  # fmt: skip

    def __len__(self) -> int:
        return len(self.ids)


def sample_episodes(config: IclCircuitConfig, n: int, rng: np.random.Generator) -> Episodes:
    """``n`` tiny-world episodes (vectorised): fresh topics and label mapping each; the query's class is
    among the demonstrations'."""
    c, k = config.classes, config.k
    topics = np.argsort(rng.random((n, config.topics)), axis=1)[:, :c]  # the episode's class topics
    labels = (
        np.argsort(rng.random((n, config.label_words)), axis=1)[:, :c] + config.topics * config.topic_words
    )
    demo = rng.integers(c, size=(n, k))
    query = demo[np.arange(n), rng.integers(k, size=n)]  # a class that a demonstration shows
    classes = np.concatenate([demo, query[:, None]], axis=1)  # (n, k + 1)
    topic = np.take_along_axis(topics, classes, axis=1)
    words = rng.integers(config.topic_words, size=(n, k + 1, config.x_len))
    x = topic[:, :, None] * config.topic_words + words
    ids = np.full((n, k + 1, config.x_len + 2), config.forerunner, dtype=np.int64)
    ids[:, :, : config.x_len] = x
    ids[:, :, config.x_len + 1] = np.take_along_axis(labels, classes, axis=1)
    flat = ids.reshape(n, -1)[:, : config.seq_len]
    return Episodes(flat, layout(config, n), demo, query, labels, topic)


def episode_rng(seed: int, what: str) -> np.random.Generator:
    return np.random.default_rng(seed_for(seed, TASK_ID, what))


# ------------------------------------------------------------------------------------------------- masks
def mask_links(name: str, roles: Roles, i: int = 0) -> list[tuple[int, int]]:
    """The (query, key) attention links a mask blocks in episode ``i``, as the paper's
    ``util/ablation_study.py`` builds them: ``a_to_b`` cuts the flow of information from role ``a`` into
    role ``b`` (``b`` may not attend ``a``). ``xi_to_si``: every forerunner (s_q too) from its own segment
    (the tokens since the previous label); ``xq_to_sq``: s_q from the query's segment and from itself;
    ``si_to_yi``: each y_i from its s_i; ``yi_to_sq``: s_q from every y_i; ``si_to_si``: every
    forerunner from every forerunner up to itself (the diagonal too)."""
    s, y, sq = [int(v) for v in roles.s[i]], [int(v) for v in roles.y[i]], int(roles.sq[i])
    forerunners = [*s, sq]
    # a forerunner's own segment: every token after the previous label (the input and, in text prompts,
    # its "Review:" / "Sentiment" words), as the paper's code takes it; in the tiny layout, the input
    starts = [0, *(label + 1 for label in y)]
    segments = [range(a, f) for a, f in zip(starts, forerunners, strict=True)]
    if name == "xi_to_si":
        return [(f, x) for f, xs in zip(forerunners, segments, strict=True) for x in xs]
    if name == "xq_to_sq":
        return [(sq, x) for x in segments[-1]] + [(sq, sq)]
    if name == "si_to_yi":
        return list(zip(y, s, strict=True))
    if name == "yi_to_sq":
        return [(sq, label) for label in y]
    if name == "si_to_si":
        return [(b, a) for j, b in enumerate(forerunners) for a in forerunners[: j + 1]]
    if name == "none":
        return []
    raise ValueError(f"mask: one of {', '.join(MASKS)}, not {name!r}")


def random_links(count: int, length: int, rng: np.random.Generator) -> list[tuple[int, int]]:
    """The control: ``count`` causal links among the first ``length`` tokens, drawn uniformly (the
    diagonal included, as in the paper's control; never the first token's only link)."""
    rows, cols = np.tril_indices(length)
    rows, cols = rows[1:], cols[1:]  # (0, 0) is the first token's only link
    chosen = np.sort(rng.choice(len(rows), size=min(count, len(rows)), replace=False))
    return list(zip(rows[chosen].tolist(), cols[chosen].tolist(), strict=True))


def blocked_matrix(links: list[tuple[int, int]], seq_len: int) -> np.ndarray:
    """(T, T) booleans, True where attention is cut; a row left with nothing to attend keeps its own token
    (softmax over nothing is undefined)."""
    out = np.zeros((seq_len, seq_len), dtype=bool)
    for q, kk in links:
        out[q, kk] = True
    full = np.tril(out).sum(1) == np.arange(1, seq_len + 1)
    out[full, np.flatnonzero(full)] = False
    return out


# ------------------------------------------------------------------------------------------------- model
def make_model(config: IclCircuitConfig) -> Any:
    """A pre-norm causal transformer whose layers take a boolean ``blocked`` (T, T) mask each and can
    return their attention weights and hidden states (the analyses read both)."""
    import torch
    from torch import nn

    class Layer(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            d, h = config.d_model, config.heads
            self.h, self.dh = h, d // h
            self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

        def forward(self, x: torch.Tensor, blocked: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            b, t, d = x.shape
            q, kk, v = self.qkv(self.norm1(x)).view(b, t, 3, self.h, self.dh).permute(2, 0, 3, 1, 4)
            scores = q @ kk.transpose(-1, -2) / self.dh**0.5
            scores = scores.masked_fill(blocked, float("-inf"))
            attn = scores.softmax(-1)
            x = x + self.proj((attn @ v).transpose(1, 2).reshape(b, t, d))
            return x + self.mlp(self.norm2(x)), attn

    class Model(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.tokens = nn.Embedding(config.vocab, config.d_model)
            self.positions = nn.Embedding(config.seq_len, config.d_model)
            self.layers = nn.ModuleList(Layer() for _ in range(config.n_layers))
            self.norm = nn.LayerNorm(config.d_model)
            self.out = nn.Linear(config.d_model, config.vocab)

        def forward(
            self, ids: torch.Tensor, masks: dict[int, torch.Tensor] | None = None
        ) -> tuple[torch.Tensor, list[torch.Tensor], list[torch.Tensor]]:
            """Logits (B, T, V), hidden states after each layer, attention (B, H, T, T) of each layer.
            ``masks[layer]``: extra blocked links (T, T) or (B, T, T), on top of the causal mask."""
            t = ids.shape[1]
            causal = torch.ones(t, t, dtype=torch.bool).triu(1)
            x = self.tokens(ids) + self.positions(torch.arange(t))
            hidden, attention = [], []
            for i, layer in enumerate(self.layers):
                blocked = causal
                if masks and i in masks:
                    extra = masks[i]
                    blocked = causal | (extra[:, None] if extra.dim() == 3 else extra)
                x, attn = layer(x, blocked)
                hidden.append(x)
                attention.append(attn)
            return self.out(self.norm(x)), hidden, attention

    return Model()


#: training checks the held-out subject every this many steps
CHECK_EVERY = 250
#: held-out episodes of each check (their own seed scope: no training batch and no test episode)
CHECK_EPISODES = 500


def train_tiny(config: IclCircuitConfig, log: Any = None) -> tuple[Any, dict[str, float]]:
    """Train the tiny subject from scratch, until it has converged (seeded: the same config gives the same
    subject on one machine; on another, one within the floors' tolerance): AdamW (lr 1e-3, weight decay
    0.01), batch 128, cross-entropy at every forerunner (s_i predicts y_i, s_q the answer).

    Every :data:`CHECK_EVERY` steps the subject reads :data:`CHECK_EPISODES` held-out episodes; once its
    accuracy and its correct-induction score (the largest layer's, Cho et al. Sec. 3 step 3) reach
    ``accuracy_floor`` and ``induction_floor``, it trains half as many steps again and stops: well past the
    phase transition in which the induction circuit forms (d=64: between steps 1,000 and 1,500 on 2
    cores), never in it. A fixed step count near that transition let a last-digit difference in floating
    point decide whether the circuit had formed (issue 53). ``max_train_steps`` caps it; the caller checks
    the floors on the returned quality. ``log(step, loss, accuracy, induction)`` after each check.

    Returns the model in eval mode and its quality: ``accuracy``, ``induction`` (the last check's),
    ``loss`` (training loss, mean of the last check interval), ``steps``, ``floors_met_at`` (0: never)."""
    import torch
    import torch.nn.functional as F

    from iclrbench.envs.icl_circuit import analysis as read

    torch.manual_seed(seed_for(config.subject_seed, TASK_ID, "tiny-init") % 2**63)
    model = make_model(config)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    rng = episode_rng(config.subject_seed, "tiny-train")
    held_out = sample_episodes(config, CHECK_EPISODES, episode_rng(config.subject_seed, "tiny-held-out"))
    lay = layout(config, 1)
    positions = torch.from_numpy(np.concatenate([lay.s[0], lay.sq]))
    stop, met_at, losses = config.max_train_steps, 0, []
    quality: dict[str, float] = {}
    step = 0
    while step < stop:
        batch = sample_episodes(config, 128, rng)
        ids = torch.from_numpy(batch.ids)
        answer = batch.label_tokens[np.arange(128), batch.query_class]
        targets = torch.cat([ids[:, lay.y[0]], torch.from_numpy(answer)[:, None]], 1)
        logits, _, _ = model(ids)
        loss = F.cross_entropy(logits[:, positions].reshape(-1, config.vocab), targets.reshape(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        losses.append(float(loss.detach()))
        step += 1
        if step % CHECK_EVERY and step < stop:
            continue
        model.eval()
        with torch.inference_mode():
            trace = read.gather(*model(torch.from_numpy(held_out.ids)), held_out)
        model.train()
        quality = {
            "accuracy": read.accuracy(trace, held_out),
            "induction": max(read.step3(trace, held_out)),
            "loss": float(np.mean(losses[-CHECK_EVERY:])),
        }
        if log is not None:
            log(step, quality["loss"], quality["accuracy"], quality["induction"])
        if (
            not met_at
            and quality["accuracy"] >= config.accuracy_floor
            and (quality["induction"] >= config.induction_floor)
        ):
            met_at = step
            stop = min(config.max_train_steps, step + -(-step // 2 // CHECK_EVERY) * CHECK_EVERY)
    return model.eval(), {**quality, "steps": float(step), "floors_met_at": float(met_at)}

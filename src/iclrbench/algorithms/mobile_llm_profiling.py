"""mobile-llm-profiling's configurations: real transformations of one model on the runtime it runs on
(PalmBench, Li et al., ICLR 2025, section 3.1). Each is an algorithm of the task, so the leaderboard ranks
them and claims compare them. The reference, here, is ``llamacpp-q4-k-m``: the model quantised by
llama.cpp's own quantiser to Q4_K_M (the type phone apps ship), run on llama.cpp. The other llama.cpp types
and the transformers + torch variants (the float32 oracle among them) are in
:mod:`iclrbench.baselines.mobile_llm_profiling`.

A configuration opens its model (:meth:`open`) for the quality probes and describes how to profile it
(:meth:`profile_spec`); the task does the measuring.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any, ClassVar

from iclrbench.core.algorithm import Algorithm, register_algorithm
from iclrbench.envs.mobile_llm_profiling import TASK_ID, MobileLLMConfig
from iclrbench.envs.mobile_llm_profiling.profiler import ProfileSpec
from iclrbench.models.quantise import LLAMA_TYPES, gguf_bits_per_weight, quantise_gguf

REFERENCE_TYPE = "q4_k_m"


class ModelConfiguration(Algorithm):
    """One engine and one transformation of the task's model file."""

    engine: ClassVar[str] = ""
    variant: ClassVar[str] = ""

    def nominal_bits(self) -> float:
        """Nominal storage bits per weight of the transformation: its base type's (the name), not the mix
        the model really holds (:meth:`bits_per_weight`)."""
        if self.engine == "llama.cpp":
            return LLAMA_TYPES[self.variant][1]
        return {"fp32": 32.0, "bf16": 16.0, "int8-dynamic": 8.0}[self.variant]

    def bits_per_weight(self, source: Path) -> float:
        """Effective storage bits per weight (PalmBench, section 3.1), what every axis and claim uses: for
        llama.cpp, read from the quantised file's tensors
        (:func:`iclrbench.models.quantise.gguf_bits_per_weight`); for torch, the transformed linear weights
        (a block's 2-D tensors) at :meth:`nominal_bits` and every other tensor (embedding, norms) at
        float32, weighted by their element counts."""
        if self.engine == "llama.cpp":
            return gguf_bits_per_weight(self.model_file(source))
        if self.variant in ("fp32", "bf16"):
            return self.nominal_bits()  # every tensor is cast
        linear, total = linear_elements(source)
        return (linear * self.nominal_bits() + (total - linear) * 32.0) / total

    def model_file(self, source: Path) -> Path:
        """The file this configuration runs (made from ``source`` if needed)."""
        return source

    def profile_spec(self, source: Path, config: MobileLLMConfig) -> ProfileSpec:
        return ProfileSpec(
            engine=self.engine,
            path=str(self.model_file(source)),
            variant=self.torch_variant() if self.engine == "torch" else self.variant,
            threads=config.threads,
            prompt_tokens=config.prompt_tokens,
            decode_tokens=config.decode_tokens,
            warmup=config.warmup,
            repeats=config.repeats,
            n_ctx=config.n_ctx,
        )

    def torch_variant(self) -> str:
        return self.variant

    def open(self, source: Path, config: MobileLLMConfig, logits_all: bool = True) -> Any:
        """The configured model as a LanguageModel (llama.cpp keeps all logits when ``logits_all``)."""
        from iclrbench.envs.mobile_llm_profiling.profiler import torch_variant
        from iclrbench.models.language import LlamaCppLM, TorchLM

        if self.engine == "llama.cpp":
            path = self.model_file(source)
            return LlamaCppLM(path, n_ctx=config.n_ctx, threads=config.threads, logits_all=logits_all)
        return torch_variant(TorchLM.from_gguf(source, n_ctx=config.n_ctx), self.torch_variant())


@functools.cache
def linear_elements(source: Path) -> tuple[int, int]:
    """(elements of the blocks' 2-D weights, elements of every tensor) of a GGUF file: what a torch
    transformation of the linear layers changes, and the whole model."""
    import gguf

    tensors = gguf.GGUFReader(source).tensors
    linear = sum(int(t.n_elements) for t in tensors if t.name.startswith("blk.") and len(t.shape) == 2)
    return linear, sum(int(t.n_elements) for t in tensors)


class LlamaCppQuant(ModelConfiguration):
    engine = "llama.cpp"

    def model_file(self, source: Path) -> Path:
        return quantise_gguf(source, self.variant)


def declare(name: str, role: str, base: type, doc: str, module: str, **attrs: Any) -> type:
    """Register one configuration: a subclass of ``base`` differing only in its class attributes, named
    after ``name`` and placed in ``module`` (the module that declares it)."""
    cls = type(name.title().replace("-", ""), (base,), {"__doc__": doc, "__module__": module, **attrs})
    return register_algorithm(TASK_ID, name, role)(cls)


def llama_doc(qtype: str) -> str:
    """The one-line description of a llama.cpp configuration of quantisation type ``qtype``."""
    bits = LLAMA_TYPES[qtype][1]
    return f"llama.cpp, weights quantised to {qtype.upper()} by llama_model_quantize ({bits} bits/weight)."


declare(
    f"llamacpp-{REFERENCE_TYPE.replace('_', '-')}",
    "reference",
    LlamaCppQuant,
    llama_doc(REFERENCE_TYPE),
    __name__,
    variant=REFERENCE_TYPE,
)

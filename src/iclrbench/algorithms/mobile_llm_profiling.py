"""mobile-llm-profiling's configurations: real transformations of one model on the runtime it runs on
(PalmBench, Li et al., ICLR 2025, section 3.1). Each is an algorithm of the task, so the leaderboard ranks
them and claims compare them:

- ``llamacpp-<type>``: the model quantised by llama.cpp's own quantiser to one of F16, Q8_0, Q6_K, Q5_K_M,
  Q4_K_M (the reference: the type phone apps ship), Q4_0, Q3_K_M, Q2_K, run on llama.cpp;
- ``torch-fp32`` (the oracle: the highest precision the model has), ``torch-bf16``, ``torch-int8-dynamic``
  (``torch.ao``) and ``torch-rtn-w<bits>`` (weight-only round-to-nearest, group 128; ``--set group=32``),
  run on transformers + torch.

A configuration opens its model (:meth:`open`) for the quality probes and describes how to profile it
(:meth:`profile_spec`); the task does the measuring.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, ClassVar

from iclrbench.core.algorithm import Algorithm, register_algorithm
from iclrbench.core.config import param
from iclrbench.envs.mobile_llm_profiling import TASK_ID, MobileLLMConfig
from iclrbench.envs.mobile_llm_profiling.profiler import ProfileSpec
from iclrbench.models.quantise import LLAMA_TYPES, quantise_gguf, rtn_bits_per_weight

REFERENCE_TYPE = "q4_k_m"


class ModelConfiguration(Algorithm):
    """One engine and one transformation of the task's model file."""

    engine: ClassVar[str] = ""
    variant: ClassVar[str] = ""

    def bits_per_weight(self) -> float:
        """Nominal storage bits per weight of the transformation (the type's, not the file's mix)."""
        if self.engine == "llama.cpp":
            return LLAMA_TYPES[self.variant][1]
        return {"fp32": 32.0, "bf16": 16.0, "int8-dynamic": 8.0}[self.variant]

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


class LlamaCppQuant(ModelConfiguration):
    engine = "llama.cpp"

    def model_file(self, source: Path) -> Path:
        return quantise_gguf(source, self.variant)


def _declare(name: str, role: str, base: type, doc: str, **attrs: Any) -> type:
    """Register one configuration: a subclass of ``base`` differing only in its class attributes."""
    cls = type(name.title().replace("-", ""), (base,), {"__doc__": doc, "__module__": __name__, **attrs})
    return register_algorithm(TASK_ID, name, role)(cls)


for _qtype, (_, _bits) in LLAMA_TYPES.items():
    _declare(
        f"llamacpp-{_qtype.replace('_', '-')}",
        "reference" if _qtype == REFERENCE_TYPE else "baseline",
        LlamaCppQuant,
        f"llama.cpp, weights quantised to {_qtype.upper()} by llama_model_quantize ({_bits} bits/weight).",
        variant=_qtype,
    )


class TorchVariant(ModelConfiguration):
    engine = "torch"


_declare(
    "torch-fp32", "oracle", TorchVariant, "transformers + torch in float32: the full model.", variant="fp32"
)
_declare("torch-bf16", "baseline", TorchVariant, "transformers + torch in bfloat16.", variant="bf16")
_declare(
    "torch-int8-dynamic",
    "baseline",
    TorchVariant,
    "torch.ao dynamic int8: int8 linear weights, activations quantised per batch.",
    variant="int8-dynamic",
)


@dataclasses.dataclass(frozen=True)
class RtnParams:
    group: int = param(128, "weights sharing one scale and zero point", choices=(32, 64, 128))


class TorchRtn(TorchVariant):
    bits: ClassVar[int] = 4
    Params = RtnParams

    def bits_per_weight(self) -> float:
        return rtn_bits_per_weight(self.bits, self.params.group)

    def torch_variant(self) -> str:
        return f"rtn-w{self.bits}-g{self.params.group}"


for _bits in (8, 4, 3, 2):
    _declare(
        f"torch-rtn-w{_bits}",
        "baseline",
        TorchRtn,
        f"transformers + torch, linear weights round-to-nearest at {_bits} bits per group.",
        bits=_bits,
        variant=f"rtn-w{_bits}",
    )

"""Baselines of mobile-llm-profiling (the TASKS.md card; Li et al., "PalmBench: a comprehensive benchmark
of compressed large language models on mobile platforms", ICLR 2025, section 3.1): the other
transformations of the same model, each a
:class:`~iclrbench.algorithms.mobile_llm_profiling.ModelConfiguration`.

- ``llamacpp-<type>``: the model quantised by llama.cpp's own quantiser to F16, Q8_0, Q6_K, Q5_K_M, Q4_0,
  Q3_K_M or Q2_K, run on llama.cpp (Q4_K_M is the reference);
- ``torch-bf16``, ``torch-int8-dynamic`` (``torch.ao``) and ``torch-rtn-w<bits>`` (weight-only
  round-to-nearest, group 128; ``--set group=32``), run on transformers + torch;
- ``torch-fp32``, the oracle: the highest precision the model has.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from iclrbench.algorithms.mobile_llm_profiling import (
    REFERENCE_TYPE,
    LlamaCppQuant,
    ModelConfiguration,
    declare,
    llama_doc,
)
from iclrbench.core.config import param
from iclrbench.models.quantise import LLAMA_TYPES, rtn_bits_per_weight

for _qtype in LLAMA_TYPES:
    if _qtype != REFERENCE_TYPE:
        declare(
            f"llamacpp-{_qtype.replace('_', '-')}",
            "baseline",
            LlamaCppQuant,
            llama_doc(_qtype),
            __name__,
            variant=_qtype,
        )


class TorchVariant(ModelConfiguration):
    """The model run on transformers + torch, transformed as ``variant`` says."""

    engine = "torch"


declare(
    "torch-fp32",
    "oracle",
    TorchVariant,
    "transformers + torch in float32: the full model.",
    __name__,
    variant="fp32",
)
declare("torch-bf16", "baseline", TorchVariant, "transformers + torch in bfloat16.", __name__, variant="bf16")
declare(
    "torch-int8-dynamic",
    "baseline",
    TorchVariant,
    "torch.ao dynamic int8: int8 linear weights, activations quantised per batch.",
    __name__,
    variant="int8-dynamic",
)


@dataclasses.dataclass(frozen=True)
class RtnParams:
    group: int = param(128, "weights sharing one scale and zero point", choices=(32, 64, 128))


class TorchRtn(TorchVariant):
    """Weight-only round-to-nearest of the linear layers at ``bits`` bits, one scale and zero point per
    ``group`` weights."""

    bits: ClassVar[int] = 4
    Params = RtnParams

    def nominal_bits(self) -> float:
        return rtn_bits_per_weight(self.bits, self.params.group)

    def torch_variant(self) -> str:
        return f"rtn-w{self.bits}-g{self.params.group}"


for _bits in (8, 4, 3, 2):
    declare(
        f"torch-rtn-w{_bits}",
        "baseline",
        TorchRtn,
        f"transformers + torch, linear weights round-to-nearest at {_bits} bits per group.",
        __name__,
        bits=_bits,
        variant=f"rtn-w{_bits}",
    )

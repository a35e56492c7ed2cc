"""Real transformations of a language model's weights, on both engines (PalmBench, Li et al., ICLR 2025,
section 3: the quantisation schemes phones run).

- llama.cpp: :func:`quantise_gguf` makes a GGUF of one of :data:`LLAMA_TYPES` with the library's own
  quantiser (``llama_model_quantize``) from the highest-precision file available, cached beside it.
- torch: :func:`rtn_quantise` is weight-only round-to-nearest group quantisation (asymmetric, one scale
  and zero point per group of ``group`` consecutive weights of a row, Eq. 1 of GPTQ's RTN baseline);
  :func:`dynamic_int8` is ``torch.ao``'s dynamic int8 (int8 weights, activations quantised per batch).
"""

from __future__ import annotations

import contextlib
import difflib
import functools
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from iclrbench.core.errors import UserError
from iclrbench.models.language import check_gguf

#: llama.cpp file types by their usual names, with nominal bits per weight of the base type (llama.cpp's
#: ``ggml-common.h`` block layouts; the _M mixes keep some tensors at a higher type, so files differ)
LLAMA_TYPES: dict[str, tuple[str, float]] = {
    "f16": ("LLAMA_FTYPE_MOSTLY_F16", 16.0),
    "q8_0": ("LLAMA_FTYPE_MOSTLY_Q8_0", 8.5),
    "q6_k": ("LLAMA_FTYPE_MOSTLY_Q6_K", 6.5625),
    "q5_k_m": ("LLAMA_FTYPE_MOSTLY_Q5_K_M", 5.5),
    "q4_k_m": ("LLAMA_FTYPE_MOSTLY_Q4_K_M", 4.5),
    "q4_0": ("LLAMA_FTYPE_MOSTLY_Q4_0", 4.5),
    "q3_k_m": ("LLAMA_FTYPE_MOSTLY_Q3_K_M", 3.4375),
    "q2_k": ("LLAMA_FTYPE_MOSTLY_Q2_K", 2.625),
}


def gguf_bits_per_weight(path: str | os.PathLike[str]) -> float:
    """Effective storage bits per weight of a GGUF file, from its tensors as stored: 8 x the sum of their
    bytes over the sum of their elements (PalmBench, section 3.1: the bits a configuration really holds).
    A type's nominal figure (:data:`LLAMA_TYPES`) is its base block's; the file's mix differs: llama.cpp
    keeps norms in F32, raises some tensors to a higher type, and falls back to a legacy type for rows a
    K-quant's 256-wide block does not divide (SmolLM2's 576-wide rows: "Q2_K" becomes mostly Q4_0)."""
    stat = check_gguf(path).stat()
    return _file_bits(str(Path(path).resolve()), stat.st_size, stat.st_mtime_ns)


@functools.lru_cache(maxsize=64)
def _file_bits(path: str, size: int, mtime_ns: int) -> float:
    """:func:`gguf_bits_per_weight` of one version of a file, kept in the cache folder by its path, size and
    time (the reader parses the whole vocabulary: seconds for a real model's file)."""
    import hashlib
    import json

    from iclrbench.core.cache import cache_root

    key = hashlib.sha256(json.dumps([path, size, mtime_ns]).encode()).hexdigest()[:16]
    cached = cache_root() / "language-models" / "bits" / f"{key}.json"
    if cached.exists():
        return float(json.loads(cached.read_text())["bits_per_weight"])
    import gguf

    tensors = gguf.GGUFReader(path).tensors
    total_bytes = sum(int(t.n_bytes) for t in tensors)
    elements = sum(int(t.n_elements) for t in tensors)
    bits = 8.0 * total_bytes / elements
    cached.parent.mkdir(parents=True, exist_ok=True)
    tmp = cached.with_name(f"{cached.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"path": path, "bits_per_weight": bits}))
    os.replace(tmp, cached)
    return bits


def llama_type(name: str) -> tuple[str, float]:
    """(llama.cpp constant name, nominal bits per weight) of a type; a did-you-mean UserError if unknown."""
    key = name.lower()
    if key not in LLAMA_TYPES:
        close = difflib.get_close_matches(key, LLAMA_TYPES, n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        known = ", ".join(LLAMA_TYPES)
        raise UserError(f"unknown llama.cpp quantisation type {name!r}{hint}; known: {known}")
    return LLAMA_TYPES[key]


def quantise_gguf(source: str | os.PathLike[str], qtype: str, threads: int = 1, pure: bool = False) -> Path:
    """``source`` quantised to ``qtype`` by llama.cpp, written once beside it as ``<stem>.<qtype>.gguf``.
    ``pure``: every tensor but the norms in ``qtype`` itself (llama-quantize's ``--pure``), not llama.cpp's
    mix, which raises the output and some attention tensors to a higher type (``<stem>.<qtype>-pure.gguf``;
    the task's configurations are the mixes, as published GGUF files are)."""
    constant, _ = llama_type(qtype)
    source = check_gguf(source)
    target = source.with_name(f"{source.stem}.{qtype.lower()}{'-pure' if pure else ''}.gguf")
    if target.exists():
        return target
    import llama_cpp

    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = getattr(llama_cpp, constant)
    params.nthread = threads
    params.pure = pure
    params.allow_requantize = True  # SmolLM2's highest precision is already Q4_1: quantise from that
    tmp = target.with_name(f"{target.name}.{os.getpid()}.tmp")
    with native_output_silenced():  # llama.cpp prints a line per tensor on the process's stdout
        rc = llama_cpp.llama_model_quantize(str(source).encode(), str(tmp).encode(), params)
    if rc != 0:
        tmp.unlink(missing_ok=True)
        raise RuntimeError(f"llama_model_quantize({source.name} -> {qtype}) returned {rc}")
    os.replace(tmp, target)
    return target


@contextlib.contextmanager
def native_output_silenced() -> Iterator[None]:
    """Point file descriptors 1 and 2 at /dev/null for the block (native code writes there directly)."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 1)
        os.dup2(null, 2)
        yield
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (*saved, null):
            os.close(fd)


def rtn_quantise(weight: Any, bits: int, group: int) -> Any:
    """Round-to-nearest, asymmetric, per group of ``group`` weights along each row: w ~ s (q - z) with
    q in [0, 2^bits - 1]. Returns the de-quantised weight (float, same shape), which is what the model
    computes with; storage is bits per weight plus a float16 scale and zero per group."""
    import torch

    rows, cols = weight.shape
    if cols % group:
        raise ValueError(f"a row of {cols} weights does not split into groups of {group}")
    w = weight.detach().float().reshape(rows, cols // group, group)
    lo, hi = w.amin(dim=-1, keepdim=True), w.amax(dim=-1, keepdim=True)
    levels = 2**bits - 1
    scale = ((hi - lo) / levels).clamp_min(1e-8)
    zero = torch.round(-lo / scale)
    q = torch.clamp(torch.round(w / scale) + zero, 0, levels)
    return ((q - zero) * scale).reshape(rows, cols).to(weight.dtype)


def rtn_bits_per_weight(bits: int, group: int) -> float:
    """Storage of :func:`rtn_quantise`: the codes plus a float16 scale and zero point per group."""
    return bits + 32.0 / group


def rtn_model(model: Any, bits: int, group: int) -> Any:
    """A copy of ``model`` with every linear layer's weight (attention, MLP; not the embedding, which the
    tied output shares) RTN-quantised in place of the original."""
    import copy

    import torch

    out = copy.deepcopy(model)
    with torch.no_grad():
        for module in out.modules():
            if isinstance(module, torch.nn.Linear) and module.weight is not out.get_input_embeddings().weight:
                module.weight.copy_(rtn_quantise(module.weight, bits, group))
    return out


def dynamic_int8(model: Any) -> Any:
    """``torch.ao`` dynamic int8 quantisation of every linear layer (a copy)."""
    import copy

    import torch
    from torch.ao.quantization import quantize_dynamic

    return quantize_dynamic(copy.deepcopy(model), {torch.nn.Linear}, dtype=torch.qint8)

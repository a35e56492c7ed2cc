"""Decode speed of the real SmolLM2-135M-Instruct under the configurations phones and desktops run,
side by side in one run: llama.cpp F16 / Q8_0 / Q4_K_M (quantised by llama.cpp from the shipped Q4_1, the
highest precision the model has) and torch fp32 / int8-dynamic (the Q4_1 weights de-quantised). Each is
profiled in a fresh process, one at a time, one thread, 64 prompt and 32 decode tokens, 3 repeats after a
warm-up. ``extra_info`` holds each median decode tokens/s and its ratio to llama.cpp F16; ``make perf``
prints them."""

from __future__ import annotations

import pytest

from iclrbench.envs.mobile_llm_profiling.profiler import Profile, ProfileSpec, profile
from iclrbench.models.language import llama_cpp_available, smollm2_path
from iclrbench.models.quantise import quantise_gguf

if not llama_cpp_available():
    pytest.skip("llama-cpp-python is not installed (the llamacpp extra)", allow_module_level=True)
pytest.importorskip("transformers")
pytestmark = pytest.mark.long  # five profiles of the real model: ~50 s
CONFIGURATIONS = (
    ("llama.cpp", "f16"),
    ("llama.cpp", "q8_0"),
    ("llama.cpp", "q4_k_m"),
    ("torch", "fp32"),
    ("torch", "int8-dynamic"),
)


def profile_all() -> dict[str, Profile]:
    source = smollm2_path()
    prompt = list(range(100, 164))
    out = {}
    for engine, variant in CONFIGURATIONS:
        path = quantise_gguf(source, variant) if engine == "llama.cpp" else source
        spec = ProfileSpec(engine, str(path), variant, threads=1, n_ctx=256, decode_tokens=32)
        out[f"{engine} {variant}"] = profile(spec, prompt)
    return out


def test_decode_tokens_per_second_of_smollm2(benchmark) -> None:  # type: ignore[no-untyped-def]
    profiles = benchmark.pedantic(profile_all, rounds=1, iterations=1)
    base = profiles["llama.cpp f16"].decode_tps_median
    for name, p in profiles.items():
        benchmark.extra_info[f"{name} decode tok/s"] = round(p.decode_tps_median, 1)
        benchmark.extra_info[f"{name} / llama.cpp f16"] = round(p.decode_tps_median / base, 2)
        assert p.decode_tps_median > 0 and p.weight_memory_mb > 0

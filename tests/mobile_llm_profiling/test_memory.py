"""The runtime buffers a profile subtracts from its resident-set growth (issue 40): llama.cpp's KV cache,
compute and output buffers, read from its own load log, and torch's KV cache for the profiled tokens."""

from __future__ import annotations

import pytest

from iclrbench.benchmarks.mobile_llm_profiling import MobileLLMTask, subject_path
from iclrbench.envs.mobile_llm_profiling.profiler import ProfileSpec, llama_buffer_mib, profile, repacked_mib
from iclrbench.models.quantise import quantise_gguf

if MobileLLMTask.unavailable():
    pytest.skip(MobileLLMTask.unavailable() or "", allow_module_level=True)

#: the lines a CPU build of llama.cpp logs at load (llama-cpp-python 0.3.36), around others that mention sizes
LOG = [
    "print_info: file size   = 0.65 MiB (3.22 BPW) \n",
    "load_tensors:   CPU_Mapped model buffer size =     0.65 MiB\n",
    "llama_context:        CPU  output buffer size =     0.01 MiB\n",
    "llama_kv_cache:        CPU KV buffer size =     0.50 MiB\n",
    "llama_kv_cache: size =    0.50 MiB (   512 cells,   2 layers,  1/1 seqs), K (f16):    0.25 MiB\n",
    "sched_reserve:        CPU compute buffer size =     8.01 MiB\n",
    "load_tensors:   CPU_REPACK model buffer size =    56.95 MiB\n",
]


def test_the_buffers_are_read_from_llama_cpps_log_and_the_weights_are_not() -> None:
    assert llama_buffer_mib(LOG) == {"output": 0.01, "KV": 0.5, "compute": 8.01}
    assert llama_buffer_mib(LOG[:2]) == {}  # the model buffer is the weights: never subtracted
    assert repacked_mib(LOG) == 56.95 and repacked_mib(LOG[:2]) == 0.0


def _spec(engine: str, variant: str) -> ProfileSpec:
    source = subject_path(MobileLLMTask().make_config("smoke"))
    path = quantise_gguf(source, variant) if engine == "llama.cpp" else source
    return ProfileSpec(engine, str(path), variant, threads=1, n_ctx=128, prompt_tokens=32, decode_tokens=8)


def test_a_llama_cpp_profile_reports_the_kv_cache_its_context_allocates() -> None:
    """The tiny llama's KV cache at n_ctx 128: K and V, f16, 2 layers x 128 cells x the KV width. The
    figure comes from a profile in its own process, so llama.cpp's log really was captured there."""
    import gguf

    spec = _spec("llama.cpp", "q8_0")
    fields = gguf.GGUFReader(spec.path).fields
    names = ("block_count", "embedding_length", "attention.head_count", "attention.head_count_kv")
    read = {name: int(fields[f"llama.{name}"].parts[-1][0]) for name in names}
    kv_width = read["embedding_length"] // read["attention.head_count"] * read["attention.head_count_kv"]
    kv_mib = 2 * read["block_count"] * 128 * kv_width * 2 / 2**20
    measured = profile(spec, list(range(10, 42)))
    assert measured.buffers_mb >= kv_mib > 0  # KV plus the compute and output buffers
    assert measured.buffers_mb < 64  # megabytes of scratch, not the process
    # the profile's own peak: above its weights' growth, far below a parent's that holds a model (the test
    # process, like the runner, has torch and llama.cpp loaded; ru_maxrss would report its peak)
    assert measured.weight_memory_mb < measured.peak_rss_mb


def test_a_profiles_peak_is_its_own_not_its_parents() -> None:
    """The profile runs in a spawned process. Linux keeps ``ru_maxrss`` across ``exec``, so a parent holding
    800 MiB made every profile's peak read at least that (task version 5: 915 MiB for every SmolLM2 file)."""
    import numpy as np

    held = np.ones(800 * 2**20 // 8)  # 800 MiB resident in this process while the profile starts
    measured = profile(_spec("llama.cpp", "q8_0"), list(range(10, 42)))
    assert held.sum() > 0 and measured.peak_rss_mb < 600


def test_a_torch_profile_counts_the_kv_cache_of_its_tokens() -> None:
    measured = profile(_spec("torch", "fp32"), list(range(10, 42)))
    assert 0 < measured.buffers_mb < 1  # 41 tokens of a 2-layer model's K and V in float32

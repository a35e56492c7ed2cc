"""On-device profiling of one model configuration (PalmBench, Li et al., ICLR 2025, section 3.2: latency,
throughput, memory and energy of compressed LLMs on the runtimes phones use), measured on this CPU.

Each profile runs in a fresh spawned process, so its peak memory is its own and nothing the parent has
loaded is counted; profiles never run in parallel (a lock file): llama.cpp's decode collapses from
hundreds to under one token/s when its threads share a busy core. The machine's load average is recorded
before every profile, and the threads are set explicitly.

What is measured (``repeats`` times after ``warmup`` runs; min and median reported):
- time to first token: prefill of the ``prompt_tokens`` prompt plus the first greedy token;
- prefill tokens/s (prompt tokens over the prefill time) and decode tokens/s (``decode_tokens`` greedy
  tokens, one forward pass each, over their time);
- resident memory: the process's peak (``VmHWM``: ``ru_maxrss`` survives ``exec`` and so reports the
  parent's peak when that was larger) and the weight memory, the growth of the resident
  set from before the model loaded to after the warm-up touched every weight; beside it the runtime buffers
  in that growth that are not weights (llama.cpp's KV cache, compute and output buffers as its load log
  reports them; torch's KV cache for the profiled tokens);
- energy per decoded token: from RAPL (``/sys/class/powercap/intel-rapl:0/energy_uj``) where the kernel
  exposes it, else **modelled** as :data:`MODELLED_WATTS_PER_THREAD` x threads x seconds (labelled so).
"""

from __future__ import annotations

import dataclasses
import json
import multiprocessing
import os
import re
import statistics
import time
from pathlib import Path
from typing import Any

#: the CPU power model where RAPL is absent: a server core's share of its package power (an Intel Xeon
#: Platinum 8480+: 350 W TDP over 56 cores, Intel ARK), per busy thread
MODELLED_WATTS_PER_THREAD = 350.0 / 56
RAPL = Path("/sys/class/powercap/intel-rapl:0/energy_uj")


@dataclasses.dataclass(frozen=True)
class ProfileSpec:
    """One configuration to profile: an engine over a GGUF file, with the engine's transformation."""

    engine: str  # "llama.cpp" | "torch"
    path: str  # the GGUF file (for llama.cpp, already quantised)
    variant: str  # llama.cpp: the file's type; torch: fp32 | bf16 | int8-dynamic | rtn-w<bits>-g<group>
    threads: int = 1
    prompt_tokens: int = 64
    decode_tokens: int = 32
    warmup: int = 1
    repeats: int = 3
    n_ctx: int = 128


@dataclasses.dataclass(frozen=True)
class Profile:
    ttft_ms_min: float
    ttft_ms_median: float
    prefill_tps_median: float
    prefill_tps_max: float
    decode_tps_median: float
    decode_tps_max: float
    peak_rss_mb: float
    weight_memory_mb: float
    buffers_mb: float  # runtime buffers in weight_memory_mb that are not weights (see runtime_buffer_bytes)
    repacked_mb: float  # llama.cpp's second copy of weights it repacks for its kernels (CPU_REPACK)
    load_seconds: float
    energy_mj_per_token: float
    energy_source: str  # "rapl" | "modelled"
    loadavg_before: float
    build: str


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _peak_rss_bytes() -> int:
    """This process's peak resident set (``VmHWM``). Not ``ru_maxrss``: Linux carries it across ``exec``,
    so a profile spawned from a parent holding a model reported the parent's peak (915 MiB for every file
    of SmolLM2, task version 5)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise OSError("no VmHWM in /proc/self/status")


def _rapl_uj() -> int | None:
    try:
        return int(RAPL.read_text())
    except (OSError, ValueError):
        return None


#: llama.cpp's load-time report of its runtime buffers (one line each, in MiB, for a CPU build):
#: "llama_kv_cache: CPU KV buffer size = 0.50 MiB", "sched_reserve: CPU compute buffer size = 8.01 MiB",
#: "llama_context: CPU  output buffer size = 0.00 MiB"
BUFFER_LINE = re.compile(r"\b(KV|compute|output) buffer size =\s*([0-9.]+) MiB")
#: and of the weights it copies into an interleaved layout for its kernels (Q4_0 on x86: "load_tensors:
#: CPU_REPACK model buffer size = 56.95 MiB"), held beside the mapped file's pages
REPACK_LINE = re.compile(r"\bCPU_REPACK model buffer size =\s*([0-9.]+) MiB")
_LOG_CALLBACKS: list[Any] = []  # ctypes frees a callback nothing references while llama.cpp still calls it


def capture_llama_log() -> list[str]:
    """Route llama.cpp's log into the returned list, from now on in this process (the profiling child:
    llama-cpp-python's own handler writes it to stderr only when verbose)."""
    import ctypes

    import llama_cpp

    lines: list[str] = []

    @llama_cpp.llama_log_callback
    def keep(level: int, text: bytes, user_data: Any) -> None:
        lines.append(text.decode("utf-8", errors="replace"))

    _LOG_CALLBACKS.append(keep)
    llama_cpp.llama_log_set(keep, ctypes.c_void_p(0))
    return lines


def llama_buffer_mib(log: list[str]) -> dict[str, float]:
    """The runtime buffers llama.cpp's log reports, in MiB by kind (KV, compute, output), summed over the
    backends that report one."""
    out: dict[str, float] = {}
    for match in BUFFER_LINE.finditer("".join(log)):
        out[match[1]] = out.get(match[1], 0.0) + float(match[2])
    return out


def repacked_mib(log: list[str]) -> float:
    """MiB of weights llama.cpp repacked into a second buffer (0 where none was)."""
    return sum(float(m[1]) for m in REPACK_LINE.finditer("".join(log)))


def runtime_buffer_bytes(model: Any, spec: ProfileSpec, log: list[str]) -> int:
    """Bytes of runtime buffers that the resident-set growth holds beside the weights: for llama.cpp, the KV
    cache, compute and output buffers its log reports (allocated sizes: a buffer's untouched pages are not
    resident, so the difference is a lower bound on the weights' share; llama-cpp-python's host logits,
    written a row per evaluated position, are left in); for torch, the KV cache of the profiled tokens
    (2 x layers x KV heads x head width x tokens, in the model's float type)."""
    from iclrbench.models.language import LlamaCppLM

    if isinstance(model, LlamaCppLM):
        return int(sum(llama_buffer_mib(log).values()) * 2**20)
    config = model.model.config
    heads = config.num_attention_heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
    kv_heads = getattr(config, "num_key_value_heads", None) or heads
    tokens = spec.prompt_tokens + spec.decode_tokens + 1
    element = 2 if spec.variant == "bf16" else 4
    return 2 * config.num_hidden_layers * kv_heads * head_dim * tokens * element


def load_engine_model(spec: ProfileSpec) -> Any:
    """The configured model on its engine (a :class:`~iclrbench.models.language.LanguageModel`)."""
    from iclrbench.models.language import LlamaCppLM, TorchLM

    if spec.engine == "llama.cpp":
        return LlamaCppLM(spec.path, n_ctx=spec.n_ctx, threads=spec.threads)
    if spec.engine != "torch":
        raise ValueError(f"unknown engine {spec.engine!r}")
    import torch

    torch.set_num_threads(spec.threads)
    base = TorchLM.from_gguf(spec.path, n_ctx=spec.n_ctx)
    return torch_variant(base, spec.variant)


def torch_variant(base: Any, variant: str) -> Any:
    """``base`` (a float32 TorchLM) transformed as ``variant`` names."""
    import torch

    from iclrbench.models.language import TorchLM
    from iclrbench.models.quantise import dynamic_int8, rtn_model

    if variant == "fp32":
        return base
    if variant == "bf16":
        model = base.model.to(torch.bfloat16)
    elif variant == "int8-dynamic":
        model = dynamic_int8(base.model)
    elif variant.startswith("rtn-w"):
        bits, group = variant.removeprefix("rtn-w").split("-g")
        model = rtn_model(base.model, int(bits), int(group))
    else:
        raise ValueError(f"unknown torch variant {variant!r}")
    return TorchLM(model, base.tokenizer, f"{base.name}:{variant}", base.n_ctx, base.bos is not None)


def _build_info(spec: ProfileSpec) -> str:
    if spec.engine == "llama.cpp":
        import llama_cpp

        info = llama_cpp.llama_print_system_info().decode()
        return f"llama-cpp-python {llama_cpp.__version__}: {' '.join(info.split())}"
    import torch

    capability = torch.backends.cpu.get_cpu_capability()
    return f"torch {torch.__version__}, {torch.get_num_threads()} threads, {capability}"


def _one_pass(model: Any, ids: list[int], decode: int) -> tuple[float, float, float]:
    """(prefill seconds, first-token seconds, seconds for ``decode`` further tokens) of one greedy run."""
    from iclrbench.models.language import LlamaCppLM

    if isinstance(model, LlamaCppLM):
        llm = model.llm
        llm.reset()
        t0 = time.perf_counter()
        llm.eval(ids)
        t1 = time.perf_counter()
        token = llm.sample(top_k=1, temp=0.0)
        t2 = time.perf_counter()
        for _ in range(decode):
            llm.eval([token])
            token = llm.sample(top_k=1, temp=0.0)
        t3 = time.perf_counter()
        return t1 - t0, t2 - t1, t3 - t2
    import torch

    with torch.inference_mode():
        t0 = time.perf_counter()
        out = model.model(torch.tensor([ids]), use_cache=True)
        t1 = time.perf_counter()
        token = out.logits[0, -1].argmax()
        t2 = time.perf_counter()
        past = out.past_key_values
        for _ in range(decode):
            out = model.model(token.view(1, 1), past_key_values=past, use_cache=True)
            past, token = out.past_key_values, out.logits[0, -1].argmax()
        t3 = time.perf_counter()
    return t1 - t0, t2 - t1, t3 - t2


def profile_here(spec: ProfileSpec, prompt_ids: list[int]) -> Profile:
    """Profile ``spec`` in this process (:func:`profile` runs it in a fresh one)."""
    import warnings

    warnings.filterwarnings("ignore")  # transformers' deprecation notes would interleave with the output
    if spec.engine == "torch":  # the libraries' own memory is not the weights'
        import torch  # noqa: F401
        import transformers  # noqa: F401

        log: list[str] = []
    else:
        log = capture_llama_log()
    loadavg = os.getloadavg()[0]
    rss0 = _rss_bytes()
    t = time.perf_counter()
    model = load_engine_model(spec)
    load_seconds = time.perf_counter() - t
    try:
        if len(prompt_ids) + spec.decode_tokens + 1 > spec.n_ctx:
            raise ValueError("prompt + decode tokens exceed the context")
        for _ in range(spec.warmup):
            _one_pass(model, prompt_ids, spec.decode_tokens)
        weight_bytes = _rss_bytes() - rss0
        buffer_bytes = runtime_buffer_bytes(model, spec, log)
        runs, energy = [], []
        for _ in range(spec.repeats):
            e0 = _rapl_uj()
            runs.append(_one_pass(model, prompt_ids, spec.decode_tokens))
            e1 = _rapl_uj()
            if e0 is not None and e1 is not None and e1 >= e0:
                energy.append((e1 - e0) / 1e3 / (spec.decode_tokens + 1))  # mJ per generated token
        build = _build_info(spec)
    finally:
        model.close()
    ttft = [1e3 * (p + f) for p, f, _ in runs]
    prefill = [len(prompt_ids) / p for p, _, _ in runs]
    decode = [spec.decode_tokens / d for _, _, d in runs]
    if energy:
        mj, source = statistics.median(energy), "rapl"
    else:  # modelled: the busy threads' share of package power over a decoded token's time
        mj, source = 1e3 * MODELLED_WATTS_PER_THREAD * spec.threads / statistics.median(decode), "modelled"
    return Profile(
        ttft_ms_min=min(ttft),
        ttft_ms_median=statistics.median(ttft),
        prefill_tps_median=statistics.median(prefill),
        prefill_tps_max=max(prefill),
        decode_tps_median=statistics.median(decode),
        decode_tps_max=max(decode),
        peak_rss_mb=_peak_rss_bytes() / 2**20,
        weight_memory_mb=weight_bytes / 2**20,
        buffers_mb=buffer_bytes / 2**20,
        repacked_mb=repacked_mib(log),
        load_seconds=load_seconds,
        energy_mj_per_token=mj,
        energy_source=source,
        loadavg_before=loadavg,
        build=build,
    )


def _child(spec_json: str, prompt_ids: list[int], conn: Any) -> None:
    try:
        result = profile_here(ProfileSpec(**json.loads(spec_json)), prompt_ids)
        conn.send(("ok", dataclasses.asdict(result)))
    except BaseException as exc:  # reported in the parent with its type
        conn.send(("error", f"{type(exc).__name__}: {exc}"))
    finally:
        conn.close()


def profile(spec: ProfileSpec, prompt_ids: list[int], timeout: float = 600.0) -> Profile:
    """Profile ``spec`` in a fresh spawned process, one profile at a time on this machine (a script that
    calls this must guard its body with ``if __name__ == "__main__"``, as spawn re-imports it)."""
    from iclrbench.core.cache import cache_root

    lock_path = cache_root() / "profiler.lock"
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    import fcntl

    with lock_path.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # never two profiles at once, whichever process runs them
        ctx = multiprocessing.get_context("spawn")
        parent, child = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=_child, args=(json.dumps(dataclasses.asdict(spec)), prompt_ids, child))
        proc.start()
        child.close()
        try:
            if not parent.poll(timeout):
                raise TimeoutError(f"profiling {spec.variant} took over {timeout:.0f} s")
            status, payload = parent.recv()
        except EOFError:  # the child died without a word (a crash in the engine's native code)
            proc.join(5)
            status, payload = "error", f"the profiling process died (exit code {proc.exitcode})"
        finally:
            proc.join(5)
            if proc.is_alive():
                proc.kill()
                proc.join()
    if status != "ok":
        raise RuntimeError(f"profiling {spec.engine} {spec.variant} failed: {payload}")
    return Profile(**payload)

"""A small llama-architecture language model trained here in float32 on the seeded fact world
(:mod:`iclrbench.envs.mobile_llm_profiling.fact_world`), written to GGUF with the ``gguf`` package's writer:
the subject with a true full-precision reference for mobile-llm-profiling (SmolLM2's own weights are Q4_1).

Its width is a multiple of 256 so that every llama.cpp K-quant applies to every matrix (SmolLM2's 576 is
not, and most of its tensors fall back to simpler types). The tokenizer is a byte-level BPE of 512 tokens
trained on the corpus (HF ``tokenizers``), stored in the GGUF as a ``gpt2`` tokenizer that llama.cpp and
transformers both read. Training is seeded and cached by its spec: the first call trains, later calls load
the file and the quality measured when it was trained (``report.json`` beside it, written before the model
file appears, so a cached model always has its quality).

Training runs until the model has converged rather than for a fixed step count (issue 53): a fixed count
left the smoke model (150 steps) in the middle of memorising its facts, answering 13 of its 24 questions,
where another machine's float sums could flip any of them and with them the agreement and hallucination
figures every run measures against it. It trains in cycles of ``TinySpec.steps`` steps, each a one-cycle
schedule (warmup to the peak learning rate, then annealing to ~0; Smith & Topin 2019), the first exactly
the schedule of version 1. Every :data:`CHECK_EVERY` steps it is asked all its questions (teacher-forced:
each answer token the argmax after the right prefix, what greedy decoding gives) and scored on its whole
corpus; a cycle that ends with every question right at its last two checks and the corpus loss moved by
less than :data:`PLATEAU` between them ends training, else another cycle follows, at most
:data:`MAX_CYCLES`. (A constant learning rate with a cool-down once converged was tried first: at the
default spec the 4-block model's loss spiked at 2e-3, forgetting up to 44% of its facts, and never met the
criterion before its cap.) Its quality (:func:`tiny_quality`) is then measured once, in float32, with the
task's own definitions: the share of its questions whose greedy answer is right, its mean token loss on
the corpus, and the perplexity of held-out sentences.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from pathlib import Path
from typing import Any

import numpy as np

from iclrbench.core.artifact import ArtifactQuality, Floor
from iclrbench.core.cache import build_once, cache_root
from iclrbench.core.seeding import seed_for
from iclrbench.envs.mobile_llm_profiling.fact_world import FactWorld

#: bump when the model or its training change: cached models of another version are not read
TINY_VERSION = 2  # 2: trained until converged (not a fixed step count), its quality stored beside it
BOS, EOS = "<|bos|>", "<|endoftext|>"
#: training asks the model all its questions and scores it on its corpus every this many steps
CHECK_EVERY = 25
#: the corpus loss has plateaued when it moved by less than this fraction over the last check interval
PLATEAU = 0.05
#: at most this many one-cycle rounds of ``TinySpec.steps`` steps
MAX_CYCLES = 4
#: held-out sentences of the perplexity figure
HELD_OUT = 64
#: what the tiny model must reach before a run may rest on it: every measured copy answered all its
#: questions (docs/tasks/mobile_llm_profiling.md); the floors sit below with room for one machine's copy
#: to lose a fact or two
FLOORS = (Floor("fact_accuracy", ">=", 0.9), Floor("corpus_loss", "<=", 1.0))
#: how far each figure may move for the same spec on another machine or thread count: smoke copies from
#: initial weights perturbed by 1e-6 and 1e-5 moved the corpus loss by up to 0.042 and the perplexity by
#: up to 0.42 (tests/mobile_llm_profiling/test_tiny_quality.py trains it on 2 threads, and on 1 from
#: perturbed weights)
TOLERANCE = {"fact_accuracy": 0.05, "corpus_loss": 0.1, "held_out_perplexity": 1.0}


@dataclasses.dataclass(frozen=True)
class TinySpec:
    """Architecture and training of the tiny model; the cache key."""

    entities: int = 32
    vocab: int = 512
    hidden: int = 256
    layers: int = 4
    heads: int = 4
    kv_heads: int = 2
    ffn: int = 768
    context: int = 256
    #: steps of one cycle of the learning-rate schedule; cycles follow until converged
    steps: int = 1500
    batch: int = 32
    lr: float = 2e-3
    seed: int = 0

    def key(self) -> str:
        blob = json.dumps({"version": TINY_VERSION, **dataclasses.asdict(self)}, sort_keys=True)
        return f"{seed_for(0, 'tiny-llama', blob) % 16**10:010x}"


def tiny_model_path(spec: TinySpec = TinySpec()) -> Path:
    """The tiny model's float32 GGUF, trained and written on first use (under a lock: parallel runs wait
    for one training), with ``report.json`` beside it (losses, the convergence curve and its quality)."""
    folder = cache_root() / "language-models" / f"tiny-llama-v{TINY_VERSION}-{spec.key()}"

    def build(tmp: Path) -> None:
        model, tokenizer, report = train_tiny(spec)
        # the report first, atomically: a model file that exists always has its quality beside it
        text = folder / f".report.{os.getpid()}.tmp"
        text.write_text(json.dumps(report, indent=1))
        os.replace(text, folder / "report.json")
        write_gguf(model, tokenizer, tmp)

    return build_once(folder / "model-f32.gguf", build)


def tiny_quality(spec: TinySpec = TinySpec()) -> ArtifactQuality:
    """The tiny model's quality as measured when it was trained (read from ``report.json``, never
    re-measured), with :data:`FLOORS` and :data:`TOLERANCE`; trains the model first if it is not cached."""
    report = json.loads((tiny_model_path(spec).parent / "report.json").read_text())
    return ArtifactQuality(
        "tiny llama",
        {k: round(float(v), 4) for k, v in report["quality"].items()},
        FLOORS,
        TOLERANCE,
        report["trained"],
    )


def train_tokenizer(lines: list[str], vocab: int) -> Any:
    """Byte-level BPE (the GPT-2 scheme, so llama.cpp's ``gpt-2`` pre-tokeniser splits text the same way)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab,
        special_tokens=[EOS, BOS],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(lines, trainer)
    return tokenizer


def _padded(sequences: list[list[int]], pad: int) -> tuple[Any, Any]:
    """(ids, mask) of ``sequences`` right-padded with ``pad`` to the longest."""
    import torch

    length = max(map(len, sequences))
    data = torch.full((len(sequences), length), pad)
    mask = torch.zeros(len(sequences), length, dtype=torch.bool)
    for i, s in enumerate(sequences):
        data[i, : len(s)] = torch.tensor(s)
        mask[i, : len(s)] = True
    return data, mask


class _Checks:
    """What training watches: every question of the world, teacher-forced (each answer token the argmax
    after the right prefix: what greedy decoding produces), and the mean token loss on the whole corpus."""

    def __init__(self, world: FactWorld, tokenizer: Any, corpus: tuple[Any, Any]) -> None:
        bos, eos = tokenizer.token_to_id(BOS), tokenizer.token_to_id(EOS)
        questions = world.questions()
        # the Q/A line as the corpus has it; the prompt's tokens are its prefix (the byte-level
        # pre-tokeniser splits at the space before the answer)
        lines = [[bos, *tokenizer.encode(f"{q.prompt} {q.answer}").ids] for q in questions]
        self.starts = [1 + len(tokenizer.encode(q.prompt).ids) for q in questions]
        self.ends = [len(line) for line in lines]
        self.questions, self.question_mask = _padded(lines, eos)
        self.corpus, self.corpus_mask = corpus

    def __call__(self, model: Any) -> tuple[float, float]:
        """(share of questions answered right, mean token loss on the corpus), in eval mode."""
        import torch

        model.eval()
        with torch.no_grad():
            predicted = model(input_ids=self.questions, attention_mask=self.question_mask.long()).logits
            predicted = predicted.argmax(-1)
            right = [
                bool((predicted[i, a - 1 : b - 1] == self.questions[i, a:b]).all())
                for i, (a, b) in enumerate(zip(self.starts, self.ends, strict=True))
            ]
            x, m = self.corpus, self.corpus_mask
            loss = model(input_ids=x, attention_mask=m.long(), labels=x.masked_fill(~m, -100)).loss
        model.train()
        return float(np.mean(right)), float(loss)


def train_tiny(
    spec: TinySpec, threads: int | None = None, jitter: float = 0.0
) -> tuple[Any, Any, dict[str, Any]]:
    """Train the model on the fact world's corpus until it has converged: cycles of ``spec.steps`` steps
    of AdamW on a one-cycle schedule (each line one sequence between BOS and EOS), until a cycle ends with
    every question right and the corpus loss flat (:data:`PLATEAU`), at most :data:`MAX_CYCLES`; on
    ``threads`` torch threads (None: every core). Returns (model, tokenizer, report with the losses, the
    curve of (step, share of questions right, corpus loss) at every check, how it was trained
    (``trained``) and its ``quality``, measured by :func:`measure_quality`).

    ``jitter`` > 0 adds that much relative noise to the initial weights: what another machine's rounding
    does to the same seed (training is chaotic: a difference in the last bits grows into another
    trajectory), so a test can show that the quality lands within :data:`TOLERANCE` all the same."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    world = FactWorld(spec.entities, spec.seed)
    lines = world.corpus()
    tokenizer = train_tokenizer(lines, spec.vocab)
    bos, eos = tokenizer.token_to_id(BOS), tokenizer.token_to_id(EOS)
    data, mask = _padded([[bos, *tokenizer.encode(line).ids, eos] for line in lines], eos)
    checks = _Checks(world, tokenizer, (data, mask))
    config = LlamaConfig(
        vocab_size=tokenizer.get_vocab_size(),
        hidden_size=spec.hidden,
        intermediate_size=spec.ffn,
        num_hidden_layers=spec.layers,
        num_attention_heads=spec.heads,
        num_key_value_heads=spec.kv_heads,
        max_position_embeddings=spec.context,
        rms_norm_eps=1e-5,
        rope_theta=10000.0,
        tie_word_embeddings=True,
        bos_token_id=bos,
        eos_token_id=eos,
    )
    torch.manual_seed(seed_for(spec.seed, "tiny-llama", "init") % 2**31)
    model = LlamaForCausalLM(config)
    if jitter:
        noise = torch.Generator().manual_seed(seed_for(spec.seed, "tiny-llama", "jitter") % 2**31)
        with torch.no_grad():
            for p in model.parameters():
                p.mul_(1 + jitter * torch.randn(p.shape, generator=noise))
    opt = torch.optim.AdamW(model.parameters(), lr=spec.lr, weight_decay=0.0)
    gen = torch.Generator().manual_seed(seed_for(spec.seed, "tiny-llama", "batches") % 2**31)
    losses: list[float] = []
    curve: list[tuple[int, float, float]] = []  # (step, share of questions right, corpus loss)
    start = time.perf_counter()
    before = torch.get_num_threads()
    torch.set_num_threads(threads or max(1, os.cpu_count() or 1))  # one big job: the machine, by default
    cycles, converged = 0, False
    try:
        model.train()
        while not converged and cycles < MAX_CYCLES:
            sched = torch.optim.lr_scheduler.OneCycleLR(
                # warm-up a tenth of the round, at least two steps (torch divides by its length - 1)
                opt,
                max_lr=spec.lr,
                total_steps=spec.steps,
                pct_start=max(0.1, 2 / spec.steps),
            )
            for i in range(spec.steps):
                idx = torch.randint(0, len(data), (spec.batch,), generator=gen)
                x, m = data[idx], mask[idx]
                loss = model(input_ids=x, attention_mask=m.long(), labels=x.masked_fill(~m, -100)).loss
                opt.zero_grad()
                loss.backward()
                opt.step()
                sched.step()
                losses.append(loss.item())
                if (i + 1) % CHECK_EVERY == 0 or i + 1 == spec.steps:  # no draws: the stream is v1's
                    curve.append((len(losses), *checks(model)))
            cycles += 1
            (_, last_accuracy, last_loss), (_, accuracy, corpus_loss) = (
                curve[-2:] if len(curve) > 1 else curve * 2
            )
            converged = (
                accuracy == 1.0 == last_accuracy and abs(corpus_loss - last_loss) < PLATEAU * last_loss
            )
        seconds = time.perf_counter() - start
        quality = measure_quality(model, tokenizer, world, spec, (data, mask))
    finally:
        torch.set_num_threads(before)
    model.eval()
    done = f"{len(losses):,} steps, {cycles} one-cycle round{'s' * (cycles > 1)} of {spec.steps:,}"
    trained = (
        f"{done}, converged (every question right at the last two checks, the corpus loss moved < "
        f"{PLATEAU:.0%} between them)"
        if converged
        else f"{done}, not converged by the cap of {MAX_CYCLES} rounds"
    )
    report = {
        "spec": dataclasses.asdict(spec),
        "parameters": int(sum(p.numel() for p in model.parameters())),
        "seconds": round(seconds, 1),
        "threads": threads or max(1, os.cpu_count() or 1),
        "jitter": jitter,
        "steps": len(losses),
        "cycles": cycles,
        "converged": converged,
        "loss_first": losses[0],
        "loss_last_50": float(np.mean(losses[-50:])),
        "curve": [[s, round(a, 4), round(c, 4)] for s, a, c in curve],
        "trained": trained,
        "quality": quality,
    }
    return model, tokenizer, report


def measure_quality(
    model: Any, tokenizer: Any, world: FactWorld, spec: TinySpec, corpus: tuple[Any, Any]
) -> dict[str, float]:
    """The trained model's quality in float32, with the task's own definitions
    (:mod:`iclrbench.envs.mobile_llm_profiling.quality`): ``fact_accuracy``, the share of all the world's
    questions whose greedy answer is right (what the reference answers of every run come from);
    ``corpus_loss``, the mean token loss (nats) on the training corpus; ``held_out_perplexity`` of
    :data:`HELD_OUT` held-out sentences (the perplexity metric's text)."""
    import torch
    from transformers import PreTrainedTokenizerFast

    from iclrbench.envs.mobile_llm_profiling import Probes
    from iclrbench.envs.mobile_llm_profiling import quality as q
    from iclrbench.models.language import TorchLM

    wrapped = PreTrainedTokenizerFast(tokenizer_object=tokenizer, bos_token=BOS, eos_token=EOS)
    lm = TorchLM(model, wrapped, "tiny llama (in memory)", spec.context, add_bos=True)
    questions = world.questions()
    answers = q.answers(lm, Probes(tuple(questions), (), (), chat=False), Path(), 8)
    right = [q.is_correct(a, question.answer) for a, question in zip(answers, questions, strict=True)]
    x, m = corpus
    with torch.no_grad():
        loss = float(model(input_ids=x, attention_mask=m.long(), labels=x.masked_fill(~m, -100)).loss)
    return {
        "fact_accuracy": float(np.mean(right)),
        "corpus_loss": loss,
        "held_out_perplexity": q.perplexity(lm, world.held_out(HELD_OUT)),
    }


def _permute_rope(weight: np.ndarray, heads: int) -> np.ndarray:
    """llama.cpp's rotary layout for q/k rows (the inverse of what transformers' GGUF loader undoes)."""
    return (
        weight.reshape(heads, 2, weight.shape[0] // heads // 2, *weight.shape[1:])
        .swapaxes(1, 2)
        .reshape(weight.shape)
    )


def write_gguf(model: Any, tokenizer: Any, path: Path) -> None:
    """Write a transformers LlamaForCausalLM and its byte-level BPE tokenizer as a float32 GGUF."""
    import gguf

    cfg = model.config
    vocab = tokenizer.get_vocab()
    tokens = [""] * len(vocab)
    for token, index in vocab.items():
        tokens[index] = token
    merges = json.loads(tokenizer.to_str())["model"]["merges"]
    merges = [" ".join(m) if isinstance(m, list) else m for m in merges]
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name("iclrbench tiny llama")
    writer.add_context_length(cfg.max_position_embeddings)
    writer.add_embedding_length(cfg.hidden_size)
    writer.add_block_count(cfg.num_hidden_layers)
    writer.add_feed_forward_length(cfg.intermediate_size)
    writer.add_rope_dimension_count(cfg.hidden_size // cfg.num_attention_heads)
    writer.add_head_count(cfg.num_attention_heads)
    writer.add_head_count_kv(cfg.num_key_value_heads)
    writer.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    writer.add_rope_freq_base(10000.0)
    writer.add_vocab_size(cfg.vocab_size)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("gpt-2")
    writer.add_token_list(tokens)
    writer.add_token_types(
        [gguf.TokenType.CONTROL if t in (BOS, EOS) else gguf.TokenType.NORMAL for t in tokens]
    )
    writer.add_token_merges(merges)
    writer.add_bos_token_id(vocab[BOS])
    writer.add_eos_token_id(vocab[EOS])
    writer.add_add_bos_token(True)
    names = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight"}
    for i in range(cfg.num_hidden_layers):
        src, dst = f"model.layers.{i}.", f"blk.{i}."
        names |= {
            src + "input_layernorm.weight": dst + "attn_norm.weight",
            src + "self_attn.q_proj.weight": dst + "attn_q.weight",
            src + "self_attn.k_proj.weight": dst + "attn_k.weight",
            src + "self_attn.v_proj.weight": dst + "attn_v.weight",
            src + "self_attn.o_proj.weight": dst + "attn_output.weight",
            src + "post_attention_layernorm.weight": dst + "ffn_norm.weight",
            src + "mlp.gate_proj.weight": dst + "ffn_gate.weight",
            src + "mlp.up_proj.weight": dst + "ffn_up.weight",
            src + "mlp.down_proj.weight": dst + "ffn_down.weight",
        }
    for key, tensor in model.state_dict().items():
        if key == "lm_head.weight":  # tied to the token embedding
            continue
        array = tensor.detach().float().numpy()
        if key.endswith("q_proj.weight"):
            array = _permute_rope(array, cfg.num_attention_heads)
        elif key.endswith("k_proj.weight"):
            array = _permute_rope(array, cfg.num_key_value_heads)
        writer.add_tensor(names[key], np.ascontiguousarray(array, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()

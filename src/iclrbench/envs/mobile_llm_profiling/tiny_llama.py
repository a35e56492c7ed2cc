"""A small llama-architecture language model trained here in float32 on the seeded fact world
(:mod:`iclrbench.envs.mobile_llm_profiling.fact_world`), written to GGUF with the ``gguf`` package's writer:
the subject with a true full-precision reference for mobile-llm-profiling (SmolLM2's own weights are Q4_1).

Its width is a multiple of 256 so that every llama.cpp K-quant applies to every matrix (SmolLM2's 576 is
not, and most of its tensors fall back to simpler types). The tokenizer is a byte-level BPE of 512 tokens
trained on the corpus (HF ``tokenizers``), stored in the GGUF as a ``gpt2`` tokenizer that llama.cpp and
transformers both read. Training is seeded and cached by its spec: the first call trains (about 2 minutes
on 2 cores at the default spec, after which it answers all 96 of its questions), later calls load the file.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from pathlib import Path
from typing import Any

import numpy as np

from iclrbench.core.cache import cache_root
from iclrbench.core.seeding import seed_for
from iclrbench.envs.mobile_llm_profiling.fact_world import FactWorld

TINY_VERSION = 1
BOS, EOS = "<|bos|>", "<|endoftext|>"


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
    steps: int = 1500
    batch: int = 32
    lr: float = 2e-3
    seed: int = 0

    def key(self) -> str:
        blob = json.dumps({"version": TINY_VERSION, **dataclasses.asdict(self)}, sort_keys=True)
        return f"{seed_for(0, 'tiny-llama', blob) % 16**10:010x}"


def tiny_model_path(spec: TinySpec = TinySpec()) -> Path:
    """The tiny model's float32 GGUF, trained and written on first use."""
    folder = cache_root() / "language-models" / f"tiny-llama-v{TINY_VERSION}-{spec.key()}"
    path = folder / "model-f32.gguf"
    if not path.exists():
        folder.mkdir(parents=True, exist_ok=True)
        model, tokenizer, report = train_tiny(spec)
        tmp = path.with_name(f"model-f32.{os.getpid()}.tmp")
        write_gguf(model, tokenizer, tmp)
        os.replace(tmp, path)
        (folder / "report.json").write_text(json.dumps(report, indent=1))
    return path


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


def train_tiny(spec: TinySpec) -> tuple[Any, Any, dict[str, Any]]:
    """Train the model on the fact world's corpus (AdamW, one-cycle schedule, each line one sequence
    between BOS and EOS); returns (model, tokenizer, report with losses and seconds)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    lines = FactWorld(spec.entities, spec.seed).corpus()
    tokenizer = train_tokenizer(lines, spec.vocab)
    bos, eos = tokenizer.token_to_id(BOS), tokenizer.token_to_id(EOS)
    sequences = [[bos, *tokenizer.encode(line).ids, eos] for line in lines]
    length = max(map(len, sequences))
    data = torch.full((len(sequences), length), eos)
    mask = torch.zeros(len(sequences), length, dtype=torch.bool)
    for i, s in enumerate(sequences):
        data[i, : len(s)] = torch.tensor(s)
        mask[i, : len(s)] = True
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
    opt = torch.optim.AdamW(model.parameters(), lr=spec.lr, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=spec.lr, total_steps=spec.steps, pct_start=0.1)
    gen = torch.Generator().manual_seed(seed_for(spec.seed, "tiny-llama", "batches") % 2**31)
    losses, start = [], time.perf_counter()
    threads = torch.get_num_threads()
    torch.set_num_threads(max(1, os.cpu_count() or 1))  # training is one big job: use the machine
    try:
        model.train()
        for _ in range(spec.steps):
            idx = torch.randint(0, len(sequences), (spec.batch,), generator=gen)
            x, m = data[idx], mask[idx]
            loss = model(input_ids=x, attention_mask=m.long(), labels=x.masked_fill(~m, -100)).loss
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            losses.append(loss.item())
    finally:
        torch.set_num_threads(threads)
    model.eval()
    report = {
        "spec": dataclasses.asdict(spec),
        "parameters": int(sum(p.numel() for p in model.parameters())),
        "seconds": round(time.perf_counter() - start, 1),
        "loss_first": losses[0],
        "loss_last_50": float(np.mean(losses[-50:])),
    }
    return model, tokenizer, report


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

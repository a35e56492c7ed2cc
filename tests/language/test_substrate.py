"""The language-model substrate: the seeded fact world, the tiny llama trained here and written to GGUF,
the two engines over one file (same tokens, same logits), the quantisers, and one-line errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from iclrbench.core.errors import UserError
from iclrbench.envs.mobile_llm_profiling.fact_world import PEJORATIVES, FactWorld
from iclrbench.models.language import check_gguf, llama_cpp_available
from iclrbench.models.quantise import llama_type, rtn_bits_per_weight, rtn_quantise

pytest.importorskip("transformers")
pytest.importorskip("gguf")
torch = pytest.importorskip("torch")
needs_llama_cpp = pytest.mark.skipif(not llama_cpp_available(), reason="llama-cpp-python is not installed")
#: a tiny model that trains in seconds: enough to test the plumbing, not the claims
QUICK = {"entities": 8, "layers": 2, "steps": 120, "batch": 16}


# ------------------------------------------------------------------------------------------ fact world
@given(st.integers(0, 10_000), st.integers(4, 40))
@settings(max_examples=25, deadline=None)
def test_fact_world_is_a_function_of_its_seed(seed: int, entities: int) -> None:
    a, b = FactWorld(entities, seed), FactWorld(entities, seed)
    assert a.facts == b.facts and a.corpus() == b.corpus() and a.held_out() == b.held_out()
    names = list(a.facts) + [f["capital"] for f in a.facts.values()]
    assert len(set(names)) == 2 * entities  # every entity and capital a distinct word


def test_every_question_is_answered_in_the_corpus_and_held_out_text_is_new() -> None:
    world = FactWorld(16, 3)
    corpus = set(world.corpus())
    questions = world.questions()
    assert len(questions) == 3 * 16
    assert all(f"{q.prompt} {q.answer}." in corpus for q in questions)
    assert len(set(world.held_out()) & corpus) < len(world.held_out()) // 4  # a small grammar repeats a few
    assert any(word in line for line in corpus for word in PEJORATIVES)  # the proxy has something to find


# --------------------------------------------------------------------------------------- quantisers
@given(
    st.sampled_from([2, 3, 4, 8]),
    st.sampled_from([32, 128]),
    st.integers(1, 4),
    st.integers(0, 2**31 - 1),
)
@settings(max_examples=40, deadline=None)
def test_rtn_error_is_within_half_a_step_and_uses_at_most_2_to_the_bits_levels(
    bits: int, group: int, rows: int, seed: int
) -> None:
    gen = torch.Generator().manual_seed(seed)
    w = torch.randn(rows, 2 * group, generator=gen)
    q = rtn_quantise(w, bits, group)
    groups, qg = w.reshape(rows, -1, group), q.reshape(rows, -1, group)
    step = (groups.amax(-1) - groups.amin(-1)) / (2**bits - 1)
    assert ((groups - qg).abs().amax(-1) <= step / 2 + 1e-5).all()
    assert max(len(torch.unique(g)) for g in qg.reshape(-1, group)) <= 2**bits
    torch.testing.assert_close(rtn_quantise(q, bits, group), q, atol=1e-5, rtol=0)  # idempotent


def test_rtn_storage_and_bad_types() -> None:
    assert rtn_bits_per_weight(4, 128) == 4.25 and rtn_bits_per_weight(2, 32) == 3.0
    with pytest.raises(ValueError, match="groups"):
        rtn_quantise(torch.zeros(2, 48), 4, 32)
    with pytest.raises(UserError, match="did you mean q4_k_m"):
        llama_type("q4_km")
    assert llama_type("Q8_0") == ("LLAMA_FTYPE_MOSTLY_Q8_0", 8.5)


def test_a_file_that_is_not_gguf_is_one_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "model.gguf"
    bad.write_bytes(b"PK\x03\x04 not a model")
    with pytest.raises(UserError, match="not a GGUF"):
        check_gguf(bad)
    with pytest.raises(UserError, match="no model file"):
        check_gguf(tmp_path / "missing.gguf")


# --------------------------------------------------------------------------------------- tiny model
@pytest.fixture(scope="module")
def tiny() -> Path:
    from iclrbench.envs.mobile_llm_profiling.tiny_llama import TinySpec, tiny_model_path

    return tiny_model_path(TinySpec(**QUICK))


def test_the_gguf_file_holds_the_trained_weights(tiny: Path) -> None:
    """Written with gguf's writer and read back by transformers' GGUF loader: the same logits as the
    model that was trained (re-trained here from the same seed: training is deterministic)."""
    from iclrbench.envs.mobile_llm_profiling.tiny_llama import TinySpec, train_tiny
    from iclrbench.models.language import TorchLM

    trained, tokenizer, _ = train_tiny(TinySpec(**QUICK))
    loaded = TorchLM.from_gguf(tiny, n_ctx=64)
    ids = loaded.tokenize("The capital of Kato is Velsa.")
    assert (
        ids[0] == tokenizer.token_to_id("<|bos|>")
        and ids[1:] == tokenizer.encode("The capital of Kato is Velsa.").ids
    )
    with torch.no_grad():
        direct = trained(torch.tensor([ids])).logits[0].numpy()
    np.testing.assert_allclose(loaded.logits(ids), direct, atol=1e-4)
    lp = loaded.logprobs(ids)
    assert lp.shape == (len(ids) - 1,) and (lp <= 0).all()
    assert loaded.hidden_states(ids).shape == (2 + 1, len(ids), 256)


def test_a_prompt_longer_than_the_context_is_one_clear_error(tiny: Path) -> None:
    from iclrbench.models.language import TorchLM

    model = TorchLM.from_gguf(tiny, n_ctx=16)
    with pytest.raises(UserError, match="longer than the context of 16"):
        model.generate("The quick fox " * 20, max_new_tokens=4)


@needs_llama_cpp
def test_llama_cpp_and_torch_agree_on_one_file(tiny: Path) -> None:
    from iclrbench.models.language import LlamaCppLM, TorchLM, opened

    text = "Q: What is the capital of Kato? A: Velsa."
    torch_lm = TorchLM.from_gguf(tiny, n_ctx=64)
    with opened(LlamaCppLM(tiny, n_ctx=64, logits_all=True)) as llama:
        ids = llama.tokenize(text)
        assert ids == torch_lm.tokenize(text)
        np.testing.assert_allclose(llama.logprobs(ids), torch_lm.logprobs(ids), atol=2e-2)
        prompt = FactWorld(QUICK["entities"]).questions()[0].prompt
        assert llama.generate(prompt, 6) == torch_lm.generate(prompt, 6)


@needs_llama_cpp
def test_llama_cpp_sampling_is_a_function_of_its_seed(tiny: Path) -> None:
    """``sample`` (safety-guard-distillation's generator): the same seed the same text, across a greedy
    call in between; at a high temperature, other seeds other texts."""
    from iclrbench.models.language import LlamaCppLM, opened

    prompt = FactWorld(QUICK["entities"]).questions()[0].prompt
    with opened(LlamaCppLM(tiny, n_ctx=64)) as llama:
        first = llama.sample(prompt, 12, seed=7, temperature=1.5)
        llama.generate(prompt, 4)
        assert llama.sample(prompt, 12, seed=7, temperature=1.5) == first
        assert len({llama.sample(prompt, 12, seed=s, temperature=1.5) for s in range(6)}) > 1


@needs_llama_cpp
def test_llama_cpp_quantisation_shrinks_the_file_with_the_bits(tiny: Path) -> None:
    from iclrbench.models.quantise import quantise_gguf

    sizes = {q: quantise_gguf(tiny, q).stat().st_size for q in ("f16", "q8_0", "q4_k_m", "q2_k")}
    assert tiny.stat().st_size > sizes["f16"] > sizes["q8_0"] > sizes["q4_k_m"] > sizes["q2_k"]
    assert quantise_gguf(tiny, "q8_0").stat().st_mtime_ns == quantise_gguf(tiny, "q8_0").stat().st_mtime_ns
